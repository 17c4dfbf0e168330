//! Runs one simulation and prints its summary; optionally writes the HTML report.
//!
//! `cargo run --release -p boxoffice-sim --example simulate -- [--seed N] [--scale X]
//! [--faults] [--plant-double-grant] [--report PATH]`

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut seed = 1u64;
    let mut scale = 0.002f64;
    let mut faults = false;
    let mut plant = false;
    let mut report_path = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seed" => seed = args.next().and_then(|v| v.parse().ok()).unwrap_or(seed),
            "--scale" => scale = args.next().and_then(|v| v.parse().ok()).unwrap_or(scale),
            "--faults" => faults = true,
            "--plant-double-grant" => plant = true,
            "--report" => report_path = args.next(),
            other => {
                eprintln!("unknown argument {other}");
                return ExitCode::from(2);
            }
        }
    }
    let config = boxoffice_sim::SimConfig::scale(scale)
        .with_seed(seed)
        .with_faults(faults)
        .with_planted_double_grant(plant);
    let report = boxoffice_sim::run(&config);
    print!("{}", boxoffice_sim::summary(&report));
    if let Some(path) = report_path
        && let Err(error) = boxoffice_sim::write_report(&report, std::path::Path::new(&path))
    {
        eprintln!("could not write {path}: {error}");
        return ExitCode::FAILURE;
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
