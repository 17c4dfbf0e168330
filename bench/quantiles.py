#!/usr/bin/env python3
"""Latency figures of Prometheus summaries in /metrics scrapes of boxoffice serve.

Usage: quantiles.py NAME[{LABELS] SCRAPE...
  NAME[{LABELS]  a summary and, optionally, the start of its label set (e.g.
                 'boxoffice_http_request_seconds{route="/v1/events/{eventId}/holds",method="POST"')
  SCRAPE         files, each one scrape, oldest first

The server's summaries give p50/p99 over a rolling window of about the last minute, and a
lifetime sum and count. Per scrape: the window's p50 and p99 and the mean since the previous
scrape (from the sums and counts), in milliseconds; then the medians over the scrapes that
saw requests."""
import statistics
import sys


def figures(path, prefix):
    name, _, labels = prefix.partition("{")
    quantiles, total, count = {}, None, None
    for line in open(path):
        if line.startswith("#") or not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        metric, _, rest = series.partition("{")
        if not rest.startswith(labels):
            continue
        if metric == name and 'quantile="' in rest:
            q = rest.split('quantile="', 1)[1].split('"', 1)[0]
            quantiles[q] = float(value)
        elif metric == name + "_sum":
            total = (total or 0.0) + float(value)
        elif metric == name + "_count":
            count = (count or 0.0) + float(value)
    return quantiles, total or 0.0, count or 0.0


def main():
    prefix, scrapes = sys.argv[1], sys.argv[2:]
    previous = (0.0, 0.0)
    p50s, p99s, means = [], [], []
    for path in scrapes:
        quantiles, total, count = figures(path, prefix)
        n = count - previous[1]
        mean = (total - previous[0]) / n if n > 0 else None
        previous = (total, count)
        if n <= 0 or "0.5" not in quantiles:
            continue
        p50s.append(quantiles["0.5"] * 1000)
        p99s.append(quantiles.get("0.99", float("nan")) * 1000)
        means.append(mean * 1000)
        print(f"{path}: n={int(n)} window p50={p50s[-1]:.1f} ms p99={p99s[-1]:.1f} ms, mean since the last scrape {means[-1]:.1f} ms")
    if p50s:
        print(f"{prefix}: {len(p50s)} scrapes, median window p50 {statistics.median(p50s):.1f} ms, "
              f"median window p99 {statistics.median(p99s):.1f} ms, median mean {statistics.median(means):.1f} ms")


main()
