//! The HTML report of `boxoffice load onsale`: one self-contained page (inline CSS and SVG, no
//! JavaScript, no external assets) rendered from the JSON report that `onsale::build_report`
//! produces, so a run can be read on a phone or attached to an issue as a single file.
//!
//! Start at [`render_html`]; it walks the report top to bottom (scenario, summary, step
//! latencies, time series, histograms, listed errors). [`histogram_buckets`] turns an HDR
//! histogram into the log-spaced `{"leMs", "count"}` buckets the histogram plots read.
//! The two chart helpers, `line_chart` and `bar_chart`, are plain string builders.
//!
//! Every key of the report may be missing or of an unexpected type: the renderer shows what
//! exists and never panics, because a report of a crashed or partial run is when it is needed.

use std::fmt::Write;

use hdrhistogram::{Counter, Histogram};
use serde_json::{Map, Value, json};

/// Upper bound of the first histogram bucket: 0.1 ms, below which latencies are not told apart.
const HISTOGRAM_FIRST_BOUND_US: f64 = 100.0;
/// Histogram plots stay readable up to about this many bars; wider ranges use wider buckets.
const HISTOGRAM_BUCKETS_MAX: usize = 50;

/// Steps in the order a shopper meets them; steps not named here follow in name order.
const KNOWN_STEPS: [&str; 7] = [
    "join",
    "status",
    "hold",
    "checkout",
    "order_final",
    "queue_wait",
    "e2e_confirmed",
];

/// Colors of series and bars, distinguishable for common color-vision deficiencies.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const CHART_WIDTH: f64 = 760.0;
const CHART_HEIGHT: f64 = 340.0;
const CHART_MARGIN_LEFT: f64 = 64.0;
const CHART_MARGIN_RIGHT: f64 = 20.0;
const CHART_TITLE_HEIGHT: f64 = 28.0;
const CHART_LEGEND_ROW_HEIGHT: f64 = 18.0;
/// Series with at most this many points also get a dot per point, so short runs stay visible.
const CHART_DOTS_POINTS_MAX: usize = 60;
/// Chaos labels longer than this are cut in the plot; the full text is in the hover title.
const CHART_MARK_LABEL_CHARS_MAX: usize = 32;

/// Log-spaced latency buckets of a histogram (microsecond values), for the report's histogram plot.
///
/// Returns a JSON array of `{"leMs": f64, "count": u64}`: bucket upper bounds start at 0.1 ms
/// and grow by half an octave (0.1, 0.14, 0.2, 0.28, 0.4, ... ms, rounded to two significant
/// digits) until they reach the histogram's maximum; when that would take more than
/// `HISTOGRAM_BUCKETS_MAX` buckets the step widens to whole octaves or more. Counts are per
/// bucket, not cumulative; a value lands in the first bucket whose bound is at least the
/// value. An empty histogram gives an empty array.
pub fn histogram_buckets<T: Counter>(h: &Histogram<T>) -> Value {
    if h.is_empty() {
        return json!([]);
    }
    let max_us = h.max() as f64;
    let half_octaves_needed = if max_us <= HISTOGRAM_FIRST_BOUND_US {
        0
    } else {
        (2.0 * (max_us / HISTOGRAM_FIRST_BOUND_US).log2()).ceil() as usize
    };
    let half_octaves_per_bucket = half_octaves_needed
        .div_ceil(HISTOGRAM_BUCKETS_MAX - 1)
        .max(1);
    let mut bounds_ms: Vec<f64> = Vec::new();
    let mut k = 0usize;
    loop {
        let exponent = (k * half_octaves_per_bucket) as f64 / 2.0;
        let bound_ms = round_significant(HISTOGRAM_FIRST_BOUND_US * exponent.exp2() / 1000.0, 2);
        if bounds_ms.last().is_none_or(|&last| bound_ms > last) {
            bounds_ms.push(bound_ms);
        }
        if bound_ms * 1000.0 >= max_us {
            break;
        }
        k += 1;
    }
    let mut counts = vec![0u64; bounds_ms.len()];
    for recorded in h.iter_recorded() {
        let value_ms = recorded.value_iterated_to() as f64 / 1000.0;
        let index = bounds_ms
            .partition_point(|&bound| bound < value_ms)
            .min(bounds_ms.len() - 1);
        counts[index] += recorded.count_since_last_iteration();
    }
    Value::Array(
        bounds_ms
            .iter()
            .zip(counts)
            .map(|(le_ms, count)| json!({"leMs": le_ms, "count": count}))
            .collect(),
    )
}

/// Renders the JSON report of `boxoffice load onsale` as one self-contained HTML page with inline SVG plots (no JavaScript, no external assets).
pub fn render_html(report: &Value) -> String {
    let scenario = &report["scenario"];
    let mut html = String::new();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>On-sale load report{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
        scenario["eventId"]
            .as_str()
            .map(|id| format!(" – {}", escape(id)))
            .unwrap_or_default(),
    );
    let _ = writeln!(html, "<h1>On-sale load report</h1>");
    if let Some(base_url) = scenario["baseUrl"].as_str() {
        let _ = writeln!(
            html,
            "<p class=\"sub\">{} · event {}</p>",
            escape(base_url),
            escape(&display_value(&scenario["eventId"]))
        );
    }
    html.push_str(&check_box(&report["check"]));
    html.push_str(&summary_section(report));
    html.push_str(&scenario_section(scenario));
    html.push_str(&door_section(&report["door"]));
    html.push_str(&steps_section(&report["steps"]));
    html.push_str(&time_series_section(report));
    html.push_str(&histograms_section(&report["steps"]));
    html.push_str(&listed_section(&report["listed"]));
    html.push_str("</main>\n</body>\n</html>\n");
    html
}

const STYLE: &str = "
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;color:#222;background:#fafafa;line-height:1.4}
main{max-width:980px;margin:0 auto;padding:12px}
h1{font-size:1.6em;margin:.4em 0 .1em}
h2{font-size:1.25em;margin:1.4em 0 .4em;border-bottom:1px solid #ddd}
h3{font-size:1em;margin:1em 0 .3em}
.sub{color:#666;margin:0 0 1em;word-break:break-all}
.scroll{overflow-x:auto}
table{border-collapse:collapse;margin:.3em 0 .8em;background:#fff}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-all;background:#fff;border:1px solid #ddd;padding:8px;font-size:.85em}
figure{margin:0 0 1em;background:#fff;border:1px solid #ddd;overflow-x:auto}
svg{display:block;width:100%;min-width:560px;height:auto}
.check{border:2px solid;padding:6px 12px;margin:1em 0}
.check.ok{border-color:#2e7d32;background:#e8f5e9}
.check.fail{border-color:#c62828;background:#ffebee}
.check h2{border:0;margin:.2em 0}
.empty{color:#666;font-style:italic}
";

fn check_box(check: &Value) -> String {
    if !check.is_object() {
        return String::new();
    }
    let ok = check["ok"].as_bool().unwrap_or(false);
    format!(
        "<section class=\"check {}\">\n<h2>Check {}</h2>\n<pre>{}</pre>\n</section>\n",
        if ok { "ok" } else { "fail" },
        if ok { "passed" } else { "FAILED" },
        escape(check["output"].as_str().unwrap_or(""))
    )
}

fn summary_section(report: &Value) -> String {
    let mut html = String::from("<h2>Summary</h2>\n");
    let mut rows: Vec<(String, String)> = Vec::new();
    if let Some(elapsed_s) = report["elapsedSeconds"].as_f64() {
        rows.push(("Elapsed".into(), format!("{} s", fmt_number(elapsed_s))));
    }
    if let Some(sold_seats) = report["soldSeats"].as_u64() {
        let sold = match report["scenario"]["venueSeats"].as_u64() {
            Some(venue_seats) => format!(
                "{sold_seats} of {venue_seats} ({:.1}%)",
                100.0 * sold_seats as f64 / venue_seats.max(1) as f64
            ),
            None => sold_seats.to_string(),
        };
        rows.push(("Sold seats".into(), sold));
    }
    for (key, label) in [
        ("queueLengthMax", "Queue length max"),
        ("delayedByCap", "Arrivals delayed by the in-flight cap"),
        ("errors", "Errors (5xx and transport)"),
        ("unexpected", "Unexpected answers"),
    ] {
        if !report[key].is_null() {
            rows.push((label.into(), display_value(&report[key])));
        }
    }
    html.push_str(&key_value_table(&rows));
    if let Some(outcomes) = report["outcomes"].as_object() {
        html.push_str("<h3>Outcomes</h3>\n");
        html.push_str(&count_table("outcome", outcomes));
    }
    if let Some(cards) = report["cards"].as_object() {
        html.push_str("<h3>Cards at checkout</h3>\n");
        html.push_str(&count_table("card", cards));
    }
    if let Some(codes_by_step) = report["statusCodes"].as_object() {
        html.push_str("<h3>Status codes per step (0 = transport error)</h3>\n");
        let rows: Vec<(String, String)> = ordered_keys(codes_by_step)
            .into_iter()
            .map(|step| {
                let codes = match codes_by_step[step].as_object() {
                    Some(codes) => codes
                        .iter()
                        .map(|(code, n)| format!("{code}: {}", display_value(n)))
                        .collect::<Vec<_>>()
                        .join(", "),
                    None => display_value(&codes_by_step[step]),
                };
                (step.to_owned(), codes)
            })
            .collect();
        html.push_str(&key_value_table(&rows));
    }
    let marks = chaos_marks(&report["chaos"]);
    if !marks.is_empty() {
        html.push_str("<h3>Chaos actions</h3>\n");
        let rows: Vec<(String, String)> = marks
            .iter()
            .map(|(at_s, action)| (format!("{} s", fmt_number(*at_s)), action.clone()))
            .collect();
        html.push_str(&key_value_table(&rows));
    }
    html
}

fn scenario_section(scenario: &Value) -> String {
    let Some(settings) = scenario.as_object() else {
        return String::new();
    };
    let rows: Vec<(String, String)> = settings
        .iter()
        .map(|(key, value)| (key.clone(), display_value(value)))
        .collect();
    format!("<h2>Scenario</h2>\n{}", key_value_table(&rows))
}

fn steps_section(steps: &Value) -> String {
    let Some(steps) = steps.as_object() else {
        return String::new();
    };
    let mut html = String::from(
        "<h2>Latency per step (ms)</h2>\n<div class=\"scroll\"><table>\n<tr><th>step</th>\
         <th class=\"num\">count</th><th class=\"num\">p50</th><th class=\"num\">p90</th>\
         <th class=\"num\">p99</th><th class=\"num\">p99.9</th><th class=\"num\">max</th></tr>\n",
    );
    for step in ordered_keys(steps) {
        let stats = &steps[step];
        let _ = write!(html, "<tr><td>{}</td>", escape(step));
        for key in ["count", "p50Ms", "p90Ms", "p99Ms", "p999Ms", "maxMs"] {
            let _ = write!(
                html,
                "<td class=\"num\">{}</td>",
                escape(&display_value(&stats[key]))
            );
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</table></div>\n");
    html
}

fn time_series_section(report: &Value) -> String {
    let seconds: &[Value] = report["perSecond"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let marks = chaos_marks(&report["chaos"]);
    let series_of = |value_of: &dyn Fn(&Value) -> Option<f64>| -> Vec<(f64, f64)> {
        seconds
            .iter()
            .enumerate()
            .filter_map(|(index, second)| {
                let x = second["second"].as_f64().unwrap_or(index as f64);
                value_of(second).map(|y| (x, y))
            })
            .collect()
    };
    let mut html = String::from("<h2>Over time</h2>\n");
    if !marks.is_empty() {
        html.push_str("<p>Dashed vertical lines mark chaos actions.</p>\n");
    }

    let throughput: Vec<(&str, Vec<(f64, f64)>)> = ["hold", "checkout", "status", "join"]
        .into_iter()
        .map(|step| {
            let points = series_of(&|second: &Value| {
                Some(second["steps"][step]["count"].as_f64().unwrap_or(0.0))
            });
            (step, points)
        })
        .collect();
    html.push_str(&line_chart(
        "Throughput: requests per second",
        "second of the run",
        "requests / s",
        YScale::Linear,
        &throughput,
        &marks,
    ));

    let mut latency_names: Vec<String> = Vec::new();
    let mut latency_points: Vec<Vec<(f64, f64)>> = Vec::new();
    for step in ["hold", "checkout"] {
        for (key, quantile) in [("p50Ms", "p50"), ("p99Ms", "p99")] {
            latency_names.push(format!("{step} {quantile}"));
            latency_points.push(series_of(&|second: &Value| {
                let stats = &second["steps"][step];
                let count = stats["count"].as_f64().unwrap_or(0.0);
                stats[key].as_f64().filter(|_| count > 0.0)
            }));
        }
    }
    let latency: Vec<(&str, Vec<(f64, f64)>)> = latency_names
        .iter()
        .map(String::as_str)
        .zip(latency_points)
        .collect();
    html.push_str(&line_chart(
        "Hold and checkout latency per second (p50, p99)",
        "second of the run",
        "ms (log scale)",
        YScale::Log,
        &latency,
        &marks,
    ));

    let queue_length = series_of(&|second: &Value| second["queueLengthMax"].as_f64());
    html.push_str(&line_chart(
        "Waiting-room queue length (max within each second)",
        "second of the run",
        "shoppers in queue",
        YScale::Linear,
        &[("queue length", queue_length)],
        &marks,
    ));

    if report["door"].is_object() {
        let admitted = series_of(&|second: &Value| second["admitted"].as_f64());
        let rate = series_of(&|second: &Value| second["room"]["releaseRatePerSecond"].as_f64());
        html.push_str(&line_chart(
            "The door: fans admitted per second and the controller's release rate",
            "second of the run",
            "fans / s",
            YScale::Linear,
            &[("admitted", admitted), ("release rate", rate)],
            &marks,
        ));
    }

    let arrivals = series_of(&|second: &Value| second["arrivals"].as_f64());
    let errors = series_of(&|second: &Value| second["errors"].as_f64());
    html.push_str(&line_chart(
        "Arrivals and errors per second",
        "second of the run",
        "per second",
        YScale::Linear,
        &[("arrivals", arrivals), ("errors", errors)],
        &marks,
    ));

    let sold_total = series_of(&|second: &Value| second["soldSeatsTotal"].as_f64());
    html.push_str(&line_chart(
        "Sold seats (running total)",
        "second of the run",
        "seats",
        YScale::Linear,
        &[("sold seats", sold_total)],
        &marks,
    ));
    html
}

fn histograms_section(steps: &Value) -> String {
    let Some(steps) = steps.as_object() else {
        return String::new();
    };
    let mut charts = String::new();
    for step in ordered_keys(steps) {
        let Some(buckets) = steps[step]["histogram"].as_array() else {
            continue;
        };
        if buckets.is_empty() {
            continue;
        }
        let bars: Vec<(String, f64)> = buckets
            .iter()
            .map(|bucket| {
                (
                    fmt_number(bucket["leMs"].as_f64().unwrap_or(0.0)),
                    bucket["count"].as_f64().unwrap_or(0.0),
                )
            })
            .collect();
        charts.push_str(&bar_chart(
            &format!("{step} latency histogram"),
            "bucket upper bound (ms, log-spaced buckets)",
            "requests",
            &bars,
        ));
    }
    if charts.is_empty() {
        return String::new();
    }
    format!("<h2>Latency histograms</h2>\n{charts}")
}

fn listed_section(listed: &Value) -> String {
    let lines: Vec<String> = match listed {
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map_or_else(|| item.to_string(), str::to_owned)
            })
            .collect(),
        Value::Null => Vec::new(),
        other => vec![display_value(other)],
    };
    if lines.is_empty() {
        return "<h2>Errors listed</h2>\n<p class=\"empty\">None.</p>\n".into();
    }
    format!(
        "<h2>Errors listed</h2>\n<pre>{}</pre>\n",
        escape(&lines.join("\n"))
    )
}

/// `(atSeconds, action)` of the report's `chaos` array, in report order.
fn chaos_marks(chaos: &Value) -> Vec<(f64, String)> {
    chaos
        .as_array()
        .map(|actions| {
            actions
                .iter()
                .filter_map(|action| {
                    let at_s = action["atSeconds"].as_f64()?;
                    let label = action["action"]
                        .as_str()
                        .map_or_else(|| display_value(&action["action"]), str::to_owned);
                    Some((at_s, label))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Keys of a step-keyed object: known steps in shopper order, then the rest by name.
fn ordered_keys(map: &Map<String, Value>) -> Vec<&str> {
    let mut keys: Vec<&str> = KNOWN_STEPS
        .into_iter()
        .filter(|step| map.contains_key(*step))
        .collect();
    let mut others: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|key| !KNOWN_STEPS.contains(key))
        .collect();
    others.sort_unstable();
    keys.extend(others);
    keys
}

/// The waiting room's figures (`load onsale` with the room on): sell-out, fairness, and the
/// release controller's decisions.
fn door_section(door: &Value) -> String {
    let Some(figures) = door.as_object() else {
        return String::new();
    };
    let mut html = String::from("<h2>The door</h2>\n");
    let rows: Vec<(String, String)> = [
        ("on-sale after the start, s", "onSaleAfterStartSeconds"),
        ("sold out after on-sale, s", "soldOutAfterOnSaleSeconds"),
        ("fans answered SOLD_OUT", "soldOutAnswers"),
        (
            "last SOLD_OUT answer after the sell-out, s",
            "lastSoldOutAnswerAfterSoldOutSeconds",
        ),
        (
            "last fan done after the sell-out, s",
            "lastFanDoneAfterSoldOutSeconds",
        ),
        ("fans admitted", "admitted"),
        (
            "Kendall tau (queue position, admission order)",
            "tauQueuePositionAdmission",
        ),
        (
            "Kendall tau (arrival, admission order)",
            "tauArrivalAdmission",
        ),
        (
            "z of arrival vs admission under independence",
            "arrivalAdmissionIndependenceZ",
        ),
    ]
    .into_iter()
    .map(|(label, key)| {
        let value = figures.get(key).cloned().unwrap_or(Value::Null);
        // A rank correlation near 1 needs its fourth decimal.
        let shown = match value.as_f64() {
            Some(tau) if key.starts_with("tau") => format!("{tau:.4}"),
            _ => display_value(&value),
        };
        (label.to_owned(), shown)
    })
    .collect();
    html.push_str(&key_value_table(&rows));
    let decisions = figures
        .get("controller")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    html.push_str("<h3>The release controller (when its rate or reason changed)</h3>\n");
    let rows: Vec<(String, String)> = decisions
        .iter()
        .map(|decision| {
            (
                format!("t={} s", display_value(&decision["second"])),
                format!(
                    "{}/s: {}",
                    display_value(&decision["releaseRatePerSecond"]),
                    decision["reason"].as_str().unwrap_or("")
                ),
            )
        })
        .collect();
    html.push_str(&key_value_table(&rows));
    html
}

fn key_value_table(rows: &[(String, String)]) -> String {
    if rows.is_empty() {
        return "<p class=\"empty\">None.</p>\n".into();
    }
    let mut html = String::from("<div class=\"scroll\"><table>\n");
    for (key, value) in rows {
        let _ = writeln!(
            html,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(key),
            escape(value)
        );
    }
    html.push_str("</table></div>\n");
    html
}

fn count_table(name_header: &str, counts: &Map<String, Value>) -> String {
    if counts.is_empty() {
        return "<p class=\"empty\">None.</p>\n".into();
    }
    let mut html = format!(
        "<div class=\"scroll\"><table>\n<tr><th>{}</th><th class=\"num\">count</th></tr>\n",
        escape(name_header)
    );
    for (name, count) in counts {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td class=\"num\">{}</td></tr>",
            escape(name),
            escape(&display_value(count))
        );
    }
    html.push_str("</table></div>\n");
    html
}

/// A JSON value as table text: strings bare, floats shortened, missing as a dash.
fn display_value(value: &Value) -> String {
    match value {
        Value::Null => "—".into(),
        Value::String(text) => text.clone(),
        Value::Number(number) if number.is_f64() => fmt_number(number.as_f64().unwrap_or(0.0)),
        other => other.to_string(),
    }
}

/// Escapes text for HTML element content and quoted attribute values.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// A number with about three significant digits and no trailing zeros: 1234, 12.3, 0.153.
fn fmt_number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    if (value - value.round()).abs() < 1e-9 && value.abs() < 1e15 {
        return format!("{}", value.round() as i64);
    }
    let magnitude = value.abs();
    let text = if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else if magnitude >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    if text == "-0" { "0".into() } else { text }
}

/// Axis tick text: like [`fmt_number`], with k and M suffixes for large values.
fn fmt_tick(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e6 {
        format!("{}M", fmt_number(value / 1e6))
    } else if magnitude >= 1e4 {
        format!("{}k", fmt_number(value / 1e3))
    } else {
        fmt_number(value)
    }
}

fn round_significant(value: f64, digits: i32) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return value;
    }
    let scale = 10f64.powi(digits - 1 - value.log10().floor() as i32);
    (value * scale).round() / scale
}

/// A tick step of 1, 2 or 5 times a power of ten, near `raw_step`.
fn nice_step(raw_step: f64) -> f64 {
    if raw_step <= 0.0 || !raw_step.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw_step.log10().floor());
    let fraction = raw_step / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum YScale {
    Linear,
    /// Log base 10; points at or below zero are left out.
    Log,
}

/// Maps data values to SVG coordinates of one plot area.
#[derive(Debug, Clone, Copy)]
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    x_min: f64,
    x_max: f64,
    y_min: f64,
    y_max: f64,
    y_scale: YScale,
}

impl Frame {
    fn x(&self, x: f64) -> f64 {
        self.left + (x - self.x_min) / (self.x_max - self.x_min) * (self.right - self.left)
    }

    fn y(&self, y: f64) -> f64 {
        let share = match self.y_scale {
            YScale::Linear => (y - self.y_min) / (self.y_max - self.y_min),
            YScale::Log => {
                (y.log10() - self.y_min.log10()) / (self.y_max.log10() - self.y_min.log10())
            }
        };
        self.bottom - share.clamp(0.0, 1.0) * (self.bottom - self.top)
    }
}

fn svg_open(title: &str, height: f64) -> String {
    format!(
        "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {CHART_WIDTH} {height}\" \
         role=\"img\" aria-label=\"{title}\" font-family=\"system-ui,sans-serif\" font-size=\"12\">\
         <title>{title}</title>\
         <text x=\"{x:.1}\" y=\"20\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"600\">{title}</text>",
        title = escape(title),
        x = CHART_WIDTH / 2.0,
    )
}

fn svg_no_data(title: &str) -> String {
    let height = 90.0;
    format!(
        "{}<text x=\"{:.1}\" y=\"60\" text-anchor=\"middle\" fill=\"#666\" font-style=\"italic\">no data</text></svg></figure>\n",
        svg_open(title, height),
        CHART_WIDTH / 2.0
    )
}

/// Legend items laid out left to right, wrapping; returns the SVG and the number of rows.
fn legend(names: &[&str], top: f64) -> (String, usize) {
    let mut svg = String::new();
    let mut x = CHART_MARGIN_LEFT;
    let mut row = 0usize;
    for (index, name) in names.iter().enumerate() {
        // System fonts at size 12 average about 7 units per character.
        let item_width = 14.0 + 7.0 * name.chars().count() as f64 + 18.0;
        if x + item_width > CHART_WIDTH - CHART_MARGIN_RIGHT && x > CHART_MARGIN_LEFT {
            row += 1;
            x = CHART_MARGIN_LEFT;
        }
        let y = top + row as f64 * CHART_LEGEND_ROW_HEIGHT;
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            y - 9.0,
            PALETTE[index % PALETTE.len()],
            x + 14.0,
            y,
            escape(name)
        );
        x += item_width;
    }
    (svg, if names.is_empty() { 0 } else { row + 1 })
}

/// Gridlines, tick labels, axis lines and axis labels of a plot area.
fn axes(
    frame: &Frame,
    x_ticks: &[(f64, String)],
    y_ticks: &[f64],
    x_label: &str,
    y_label: &str,
) -> String {
    let mut svg = String::new();
    for &y in y_ticks {
        let py = frame.y(y);
        let _ = write!(
            svg,
            "<line x1=\"{:.1}\" y1=\"{py:.1}\" x2=\"{:.1}\" y2=\"{py:.1}\" stroke=\"#e5e5e5\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" font-size=\"11\">{}</text>",
            frame.left,
            frame.right,
            frame.left - 6.0,
            py + 4.0,
            escape(&fmt_tick(y))
        );
    }
    for (px, label) in x_ticks {
        let _ = write!(
            svg,
            "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\">{}</text>",
            frame.bottom,
            frame.bottom + 5.0,
            frame.bottom + 18.0,
            escape(label)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{l:.1}\" y1=\"{t:.1}\" x2=\"{l:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>\
         <line x1=\"{l:.1}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>\
         <text x=\"{cx:.1}\" y=\"{xy:.1}\" text-anchor=\"middle\">{x_label}</text>\
         <text transform=\"translate(16 {cy:.1}) rotate(-90)\" text-anchor=\"middle\">{y_label}</text>",
        l = frame.left,
        r = frame.right,
        t = frame.top,
        b = frame.bottom,
        cx = (frame.left + frame.right) / 2.0,
        xy = frame.bottom + 36.0,
        cy = (frame.top + frame.bottom) / 2.0,
        x_label = escape(x_label),
        y_label = escape(y_label),
    );
    svg
}

/// An SVG line chart of `series` (name, points) with a legend, axes and vertical dashed
/// lines at `marks` (x, label). Points that are not finite, or not positive on a log scale,
/// are left out.
fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    y_scale: YScale,
    series: &[(&str, Vec<(f64, f64)>)],
    marks: &[(f64, String)],
) -> String {
    let plotted: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(_, points)| {
            points
                .iter()
                .copied()
                .filter(|(x, y)| {
                    x.is_finite() && y.is_finite() && (y_scale == YScale::Linear || *y > 0.0)
                })
                .collect()
        })
        .collect();
    let all_points = || plotted.iter().flatten();
    if all_points().next().is_none() {
        return svg_no_data(title);
    }
    let marks: Vec<&(f64, String)> = marks.iter().filter(|(x, _)| x.is_finite()).collect();
    let xs = all_points()
        .map(|(x, _)| *x)
        .chain(marks.iter().map(|(x, _)| *x));
    let (mut x_min, mut x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if x_max - x_min < 1e-9 {
        x_min -= 0.5;
        x_max += 0.5;
    }
    let ys = all_points().map(|(_, y)| *y);
    let (y_data_min, y_data_max) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let (y_min, y_max, y_ticks) = match y_scale {
        YScale::Linear => {
            let y_min = y_data_min.min(0.0);
            let step = nice_step((y_data_max - y_min).max(1e-9) / 5.0);
            let y_max = ((y_data_max / step).ceil() * step).max(step);
            let y_min = (y_min / step).floor() * step;
            let n_ticks = ((y_max - y_min) / step).round() as usize;
            let ticks = (0..=n_ticks)
                .map(|i| y_min + i as f64 * step)
                .collect::<Vec<_>>();
            (y_min, y_max, ticks)
        }
        YScale::Log => {
            let low_decade = y_data_min.log10().floor() as i32;
            let mut high_decade = y_data_max.log10().ceil() as i32;
            if high_decade <= low_decade {
                high_decade = low_decade + 1;
            }
            let few_decades = high_decade - low_decade <= 2;
            let mut ticks = Vec::new();
            for decade in low_decade..=high_decade {
                let base = 10f64.powi(decade);
                ticks.push(base);
                if few_decades && decade < high_decade {
                    ticks.push(2.0 * base);
                    ticks.push(5.0 * base);
                }
            }
            (10f64.powi(low_decade), 10f64.powi(high_decade), ticks)
        }
    };

    let names: Vec<&str> = series.iter().map(|(name, _)| *name).collect();
    let (legend_svg, legend_rows) = legend(&names, CHART_TITLE_HEIGHT + 16.0);
    let top = CHART_TITLE_HEIGHT + 12.0 + legend_rows as f64 * CHART_LEGEND_ROW_HEIGHT + 8.0;
    let frame = Frame {
        left: CHART_MARGIN_LEFT,
        right: CHART_WIDTH - CHART_MARGIN_RIGHT,
        top,
        bottom: CHART_HEIGHT - 48.0,
        x_min,
        x_max,
        y_min,
        y_max,
        y_scale,
    };
    // Whole seconds get whole-number ticks: a tick at 0.5 s would label no data point.
    let integer_xs = all_points().all(|(x, _)| x.fract() == 0.0);
    let x_step = nice_step((x_max - x_min) / 8.0);
    let x_step = if integer_xs { x_step.max(1.0) } else { x_step };
    let mut x_ticks = Vec::new();
    let mut tick = (x_min / x_step).ceil() * x_step;
    while tick <= x_max + 1e-9 {
        x_ticks.push((frame.x(tick), fmt_tick(tick)));
        tick += x_step;
    }

    let mut svg = svg_open(title, CHART_HEIGHT);
    svg.push_str(&legend_svg);
    svg.push_str(&axes(&frame, &x_ticks, &y_ticks, x_label, y_label));
    for (index, points) in plotted.iter().enumerate() {
        let color = PALETTE[index % PALETTE.len()];
        let coordinates: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", frame.x(*x), frame.y(*y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-linejoin=\"round\" points=\"{}\"/>",
            coordinates.join(" ")
        );
        if points.len() <= CHART_DOTS_POINTS_MAX {
            for (x, y) in points {
                let _ = write!(
                    svg,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"/>",
                    frame.x(*x),
                    frame.y(*y)
                );
            }
        }
    }
    for (index, (x, label)) in marks.iter().enumerate() {
        let px = frame.x(*x);
        let short: String = if label.chars().count() > CHART_MARK_LABEL_CHARS_MAX {
            let cut: String = label.chars().take(CHART_MARK_LABEL_CHARS_MAX - 1).collect();
            format!("{cut}…")
        } else {
            label.clone()
        };
        // Labels near the right edge grow leftwards; staggering keeps close marks legible.
        let (label_x, anchor) = if px > frame.right - 150.0 {
            (px - 4.0, "end")
        } else {
            (px + 4.0, "start")
        };
        let label_y = frame.top + 12.0 + (index % 3) as f64 * 13.0;
        let _ = write!(
            svg,
            "<g><title>{full} at {at} s</title>\
             <line x1=\"{px:.1}\" y1=\"{t:.1}\" x2=\"{px:.1}\" y2=\"{b:.1}\" stroke=\"#444\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\"/>\
             <text x=\"{label_x:.1}\" y=\"{label_y:.1}\" text-anchor=\"{anchor}\" font-size=\"11\" fill=\"#333\" \
             stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\">{short}</text></g>",
            full = escape(label),
            at = fmt_number(*x),
            t = frame.top,
            b = frame.bottom,
            short = escape(&short),
        );
    }
    svg.push_str("</svg></figure>\n");
    svg
}

/// An SVG bar chart of `bars` (category label, value) on a categorical x axis, linear y from 0.
fn bar_chart(title: &str, x_label: &str, y_label: &str, bars: &[(String, f64)]) -> String {
    let values: Vec<f64> = bars
        .iter()
        .map(|(_, value)| {
            if value.is_finite() {
                value.max(0.0)
            } else {
                0.0
            }
        })
        .collect();
    if values.is_empty() {
        return svg_no_data(title);
    }
    let y_data_max = values.iter().copied().fold(0.0, f64::max);
    let step = nice_step(y_data_max.max(1.0) / 5.0);
    let y_max = ((y_data_max / step).ceil() * step).max(step);
    let n_ticks = (y_max / step).round() as usize;
    let y_ticks: Vec<f64> = (0..=n_ticks).map(|i| i as f64 * step).collect();
    let frame = Frame {
        left: CHART_MARGIN_LEFT,
        right: CHART_WIDTH - CHART_MARGIN_RIGHT,
        top: CHART_TITLE_HEIGHT + 16.0,
        bottom: CHART_HEIGHT - 64.0,
        x_min: 0.0,
        x_max: bars.len() as f64,
        y_min: 0.0,
        y_max,
        y_scale: YScale::Linear,
    };
    let slot = (frame.right - frame.left) / bars.len() as f64;
    // About 25 category labels fit under the plot; beyond that every n-th one is shown.
    let label_every = bars.len().div_ceil(25).max(1);
    let mut svg = svg_open(title, CHART_HEIGHT);
    svg.push_str(&axes(&frame, &[], &y_ticks, "", y_label));
    let color = PALETTE[0];
    for (index, ((label, _), value)) in bars.iter().zip(&values).enumerate() {
        let x = frame.left + index as f64 * slot;
        let top = frame.y(*value);
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{color}\">\
             <title>≤ {} ms: {}</title></rect>",
            x + slot * 0.1,
            slot * 0.8,
            frame.bottom - top,
            escape(label),
            fmt_number(*value)
        );
        if *value > 0.0 && bars.len() <= 30 {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"9\" fill=\"#333\">{}</text>",
                x + slot / 2.0,
                top - 3.0,
                escape(&fmt_tick(*value))
            );
        }
        if index % label_every == 0 {
            let cx = x + slot / 2.0;
            let cy = frame.bottom + 12.0;
            let _ = write!(
                svg,
                "<text transform=\"translate({cx:.1} {cy:.1}) rotate(-45)\" text-anchor=\"end\" font-size=\"10\">{}</text>",
                escape(label)
            );
        }
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></svg></figure>",
        (frame.left + frame.right) / 2.0,
        CHART_HEIGHT - 8.0,
        escape(x_label)
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three seconds of a small run with two step histograms, a chaos action and a check.
    fn sample_report() -> Value {
        let mut hold = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        let mut checkout = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for i in 0..400u64 {
            hold.record(800 + (i * i) % 40_000).unwrap();
            checkout.record(5_000 + (i * 37) % 250_000).unwrap();
        }
        json!({
            "scenario": {"baseUrl": "http://127.0.0.1:8080", "eventId": "ev-1", "scale": 1.0,
                         "accounts": 1000, "arrivalSeconds": 3.0, "abandon": 0.1,
                         "cards": "visa=0.9,declined=0.1", "sections": 4, "venueSeats": 10500,
                         "maxInFlight": 256, "maxActiveShoppers": 200,
                         "queueWaitMaxSeconds": 600, "orderWaitMaxSeconds": 60,
                         "chaos": {"kill": "postgres", "atSeconds": 1.5}},
            "elapsedSeconds": 3.2, "delayedByCap": 0,
            "steps": {
                "join": {"count": 1000, "p50Ms": 1.2, "p90Ms": 2.5, "p99Ms": 8.0, "p999Ms": 12.0, "maxMs": 15.3},
                "hold": {"count": 400, "p50Ms": 3.1, "p90Ms": 20.0, "p99Ms": 38.0, "p999Ms": 40.0, "maxMs": 40.8,
                         "histogram": histogram_buckets(&hold)},
                "checkout": {"count": 400, "p50Ms": 120.0, "p90Ms": 230.0, "p99Ms": 250.0, "p999Ms": 255.0, "maxMs": 255.0,
                             "histogram": histogram_buckets(&checkout)}
            },
            "outcomes": {"sold": 350, "declined": 30, "abandoned_walked_away": 20},
            "soldSeats": 1050, "queueLengthMax": 420, "cards": {"visa": 370, "declined": 30},
            "statusCodes": {"hold": {"201": 380, "409": 20}, "checkout": {"200": 400}},
            "errors": 2, "unexpected": 1,
            "listed": ["hold answered 500: <script>alert(1)</script>", "checkout timed out"],
            "perSecond": [
                {"second": 0, "arrivals": 400, "errors": 0, "queueLengthMax": 300, "soldSeats": 100, "soldSeatsTotal": 100,
                 "steps": {"join": {"count": 400, "p50Ms": 1.0, "p99Ms": 6.0},
                           "status": {"count": 900, "p50Ms": 0.5, "p99Ms": 2.0},
                           "hold": {"count": 100, "p50Ms": 2.0, "p99Ms": 30.0},
                           "checkout": {"count": 80, "p50Ms": 100.0, "p99Ms": 220.0}},
                 "gauges": null},
                {"second": 1, "arrivals": 350, "errors": 2, "queueLengthMax": 420, "soldSeats": 500, "soldSeatsTotal": 600,
                 "steps": {"join": {"count": 350, "p50Ms": 1.3, "p99Ms": 9.0},
                           "status": {"count": 1200, "p50Ms": 0.6, "p99Ms": 3.0},
                           "hold": {"count": 180, "p50Ms": 3.5, "p99Ms": 39.0},
                           "checkout": {"count": 170, "p50Ms": 130.0, "p99Ms": 250.0}},
                 "gauges": {"inFlight": 12}},
                {"second": 2, "arrivals": 250, "errors": 0, "queueLengthMax": 120, "soldSeats": 450, "soldSeatsTotal": 1050,
                 "steps": {"join": {"count": 250, "p50Ms": 1.1, "p99Ms": 7.0},
                           "hold": {"count": 120, "p50Ms": 2.8, "p99Ms": 25.0},
                           "checkout": {"count": 150, "p50Ms": 110.0, "p99Ms": 240.0}},
                 "gauges": {"inFlight": 3}}
            ],
            "chaos": [{"atSeconds": 1.5, "action": "restart postgres"}],
            "check": {"ok": true, "output": "invariants hold: 1050 seats sold, 0 oversold"}
        })
    }

    #[test]
    fn report_renders_charts_steps_chaos_and_check() {
        let html = render_html(&sample_report());
        assert!(html.starts_with("<!doctype html>"));
        assert!(html.contains("<html"));
        assert!(html.contains("<svg"));
        assert!(html.contains("</html>"));
        for step in ["join", "hold", "checkout"] {
            assert!(html.contains(&format!("<td>{step}</td>")), "step {step}");
        }
        assert!(html.contains("hold latency histogram"));
        assert!(html.contains("checkout latency histogram"));
        assert!(!html.contains("join latency histogram"));
        assert!(html.contains("restart postgres"));
        assert!(html.contains("stroke-dasharray"));
        assert!(html.contains("class=\"check ok\""));
        assert!(html.contains("Check passed"));
        assert!(html.contains("Throughput: requests per second"));
        assert!(html.contains("Sold seats (running total)"));
        assert!(html.contains("1050 of 10500 (10.0%)"));
    }

    #[test]
    fn report_shows_the_door_and_the_controller() {
        let mut report = sample_report();
        report["door"] = json!({
            "soldOutAfterOnSaleSeconds": 41.5, "admitted": 1200,
            "tauQueuePositionAdmission": 0.9987,
            "controller": [{"second": 3, "releaseRatePerSecond": 80, "reason": "slow start <x>"}],
        });
        report["perSecond"][0]["admitted"] = json!(17);
        report["perSecond"][0]["room"] = json!({"releaseRatePerSecond": 80});
        let html = render_html(&report);
        assert!(html.contains("<h2>The door</h2>"));
        assert!(html.contains("<td>41.5</td>"));
        assert!(html.contains("<td>0.9987</td>"));
        assert!(html.contains("80/s: slow start &lt;x&gt;"));
        assert!(html.contains("fans admitted per second and the controller"));
        let without = render_html(&sample_report());
        assert!(!without.contains("The door"));
    }

    #[test]
    fn report_escapes_listed_errors() {
        let html = render_html(&sample_report());
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<script"));
    }

    #[test]
    fn report_marks_a_failed_check() {
        let html = render_html(&json!({"check": {"ok": false, "output": "oversold <S1-1-1>"}}));
        assert!(html.contains("class=\"check fail\""));
        assert!(html.contains("Check FAILED"));
        assert!(html.contains("oversold &lt;S1-1-1&gt;"));
    }

    #[test]
    fn report_of_an_empty_object_still_renders() {
        let html = render_html(&json!({}));
        assert!(html.contains("<html"));
        assert!(html.contains("no data"));
        assert!(html.ends_with("</html>\n"));
    }

    #[test]
    fn report_survives_odd_types() {
        let html = render_html(&json!({
            "scenario": [1, 2], "elapsedSeconds": "soon", "steps": {"hold": 3, "x": {"histogram": "no"}},
            "outcomes": null, "statusCodes": {"hold": 5}, "perSecond": [null, 7, {"second": "a"}],
            "chaos": [{"atSeconds": "x"}, {"atSeconds": 1.0}], "check": 1, "listed": "one line"
        }));
        assert!(html.contains("<html"));
        assert!(html.contains("one line"));
        assert!(render_html(&json!(null)).contains("<html"));
        assert!(render_html(&json!([1, 2, 3])).contains("<html"));
    }

    #[test]
    fn histogram_buckets_count_every_value_once_in_ascending_buckets() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for value_us in [150, 150, 3000, 90_000] {
            h.record(value_us).unwrap();
        }
        let buckets = histogram_buckets(&h);
        let buckets = buckets.as_array().unwrap();
        let total: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(total, 4);
        let bounds: Vec<f64> = buckets
            .iter()
            .map(|b| b["leMs"].as_f64().unwrap())
            .collect();
        assert!(
            bounds.windows(2).all(|pair| pair[0] < pair[1]),
            "{bounds:?}"
        );
        assert_eq!(bounds[0], 0.1);
        assert_eq!(&bounds[1..4], &[0.14, 0.2, 0.28]);
        assert!(*bounds.last().unwrap() >= 90.0);
        assert!(bounds.len() <= HISTOGRAM_BUCKETS_MAX + 1);
        let count_at = |le_ms: f64| {
            buckets
                .iter()
                .find(|b| b["leMs"].as_f64() == Some(le_ms))
                .and_then(|b| b["count"].as_u64())
        };
        assert_eq!(count_at(0.2), Some(2));
        assert_eq!(count_at(3.2), Some(1));
    }

    #[test]
    fn histogram_buckets_widen_for_long_ranges() {
        let mut h = Histogram::<u32>::new_with_bounds(1, 3_600_000_000, 2).unwrap();
        h.record(50).unwrap();
        h.record(3_000_000_000).unwrap();
        let buckets = histogram_buckets(&h);
        let buckets = buckets.as_array().unwrap();
        assert!(
            buckets.len() <= HISTOGRAM_BUCKETS_MAX + 1,
            "{}",
            buckets.len()
        );
        assert_eq!(buckets[0]["count"].as_u64(), Some(1));
        assert_eq!(buckets.last().unwrap()["count"].as_u64(), Some(1));
    }

    #[test]
    fn histogram_buckets_of_an_empty_histogram_is_empty() {
        let h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        assert_eq!(histogram_buckets(&h), json!([]));
    }

    #[test]
    fn escape_covers_markup_characters() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn fmt_number_is_short() {
        assert_eq!(fmt_number(1234.0), "1234");
        assert_eq!(fmt_number(12.34), "12.3");
        assert_eq!(fmt_number(0.1534), "0.153");
        assert_eq!(fmt_number(0.14), "0.14");
        assert_eq!(fmt_tick(25_000.0), "25k");
    }
}
