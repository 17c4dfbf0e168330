//! Venue charts (issue 41): `parse_chart_csv` (`POST /v1/admin/venue-charts` with a
//! `text/csv` body) and a chart read from JSON then `VenueChart::validate` (the same route's
//! JSON body). Checks: no panic; every CSV problem names a line from 1 to the text's last;
//! a chart accepted from either form validates, and its JSON (what the store keeps) reads
//! back to the same chart, which validates again; at most `CHART_PROBLEMS_MAX` problems
//! are listed, and never more than their total.
//!
//! Input: the first byte chooses the form (even: CSV, odd: JSON); the rest is the body.

#![no_main]

use boxoffice_domain::venue::{CHART_PROBLEMS_MAX, ChartErrors, VenueChart, parse_chart_csv};
use libfuzzer_sys::fuzz_target;

fn round_trip(chart: &VenueChart) {
    chart.validate().expect("an accepted chart validates");
    let stored = serde_json::to_string(chart).expect("a chart writes as JSON");
    let read: VenueChart = serde_json::from_str(&stored).expect("a stored chart reads back");
    assert_eq!(&read, chart);
    read.validate().expect("a stored chart validates again");
}

fn bounded(errors: &ChartErrors) {
    assert!(!errors.problems.is_empty());
    assert!(errors.problems.len() <= CHART_PROBLEMS_MAX);
    assert!(errors.problems.len() <= errors.total);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    if mode % 2 == 0 {
        match parse_chart_csv("Fuzzed", text) {
            Ok(chart) => round_trip(&chart),
            Err(errors) => {
                bounded(&errors);
                let lines = text.lines().count().max(1) as u32;
                for problem in &errors.problems {
                    if let Some(line) = problem.line {
                        assert!((1..=lines).contains(&line), "{problem} of {lines} lines");
                    }
                }
            }
        }
    } else if let Ok(chart) = serde_json::from_str::<VenueChart>(text) {
        match chart.validate() {
            Ok(()) => round_trip(&chart),
            Err(errors) => bounded(&errors),
        }
    }
});
