#!/usr/bin/env python3
"""p50 and p99 (ms) of Prometheus histograms in a /metrics scrape.

Usage: quantiles.py METRICS_FILE NAME_OR_PREFIX...  where a prefix selects the series whose
`_bucket{` line starts with it (all label sets of a bare name are summed). Quantiles are
linear within a bucket, as Prometheus's histogram_quantile does."""
import sys


def buckets(lines, prefix):
    name, _, labels = prefix.partition("{")
    want = name + "_bucket{" + labels
    acc = {}
    for line in lines:
        if not line.startswith(want):
            continue
        series, value = line.rsplit(" ", 1)
        le = series.split('le="', 1)[1].split('"', 1)[0]
        bound = float("inf") if le == "+Inf" else float(le)
        acc[bound] = acc.get(bound, 0.0) + float(value)
    return sorted(acc.items())


def quantile(bs, q):
    total = bs[-1][1] if bs else 0
    if total == 0:
        return None
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in bs:
        if count >= rank:
            if bound == float("inf"):
                return lower
            span = count - below
            return lower + (bound - lower) * ((rank - below) / span if span else 1)
        lower, below = bound, count
    return lower


def main():
    lines = open(sys.argv[1]).read().splitlines()
    out = []
    for prefix in sys.argv[2:]:
        bs = buckets(lines, prefix)
        p50, p99 = quantile(bs, 0.5), quantile(bs, 0.99)
        n = int(bs[-1][1]) if bs else 0
        fmt = lambda v: "-" if v is None else f"{v * 1000:.1f}"
        out.append(f"{prefix.split('{')[0]}{'{' + prefix.split('{', 1)[1][:60] + '}' if '{' in prefix else ''} n={n} p50_ms={fmt(p50)} p99_ms={fmt(p99)}")
    print("; ".join(out))


main()
