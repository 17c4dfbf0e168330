//! The on-sale simulator under chaos, end to end (issue 6): `boxoffice load --scenario onsale
//! --chaos` starts its own private PostgreSQL cluster, payment simulator and server, SIGKILLs
//! and restarts the server twice, crash-restarts PostgreSQL, makes the provider slow and
//! lossy, then waits for convergence and runs `boxoffice check` — with one node, and with two
//! (the fans spread over both). It must exit 0, and its
//! report must show that every fault really happened and that seats were sold through it.

use serde_json::Value;

#[test]
fn onsale_under_chaos_converges_and_passes_check() {
    chaos_run(1);
}

/// The same with two nodes on the store: the fans are spread over both, the one SIGKILLed
/// owns the event at first, the other forwards to it and takes the event over while it is
/// down.
#[test]
fn onsale_under_chaos_on_two_nodes_converges_and_passes_check() {
    chaos_run(2);
}

fn chaos_run(nodes: u32) {
    let work = std::env::temp_dir().join(format!(
        "boxoffice_test_chaos_{}_{nodes}",
        std::process::id()
    ));
    std::fs::create_dir_all(&work).expect("work dir");
    let _cleanup = RemoveOnDrop(work.clone());
    let json = work.join("report.json");
    let html = work.join("report.html");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_boxoffice"))
        .args(["load", "--scenario", "onsale", "--scale", "0.01", "--chaos"])
        .args(["--accounts", "300", "--hold-ttl-s", "10"])
        .args(["--chaos-nodes", &nodes.to_string()])
        .arg("--report")
        .arg(&json)
        .arg("--html-report")
        .arg(&html)
        .env("RUST_LOG", "warn")
        .output()
        .expect("running boxoffice load");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "chaos run failed\n--- stdout\n{stdout}\n--- stderr (tail)\n{}",
        tail(&stderr, 60)
    );
    assert!(stdout.contains("all invariants hold"), "{stdout}");

    let report: Value =
        serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("report JSON");
    let actions: Vec<&str> = report["chaos"]
        .as_array()
        .expect("chaos marks")
        .iter()
        .filter_map(|m| m["action"].as_str())
        .collect();
    assert_eq!(actions.len(), 5, "{actions:?}");
    assert_eq!(
        actions
            .iter()
            .filter(|a| a.starts_with("server SIGKILLed"))
            .count(),
        2,
        "{actions:?}"
    );
    assert!(
        actions
            .iter()
            .any(|a| a.starts_with("PostgreSQL crash-restarted")),
        "{actions:?}"
    );
    assert!(
        actions.iter().any(|a| a.contains("slow and lossy")),
        "{actions:?}"
    );
    let chaos = &report["scenario"]["chaos"];
    assert_eq!(chaos["serverStarts"], 3, "{chaos}");
    assert_eq!(chaos["nodes"], nodes, "{chaos}");
    assert_eq!(chaos["converged"], true, "{chaos}");
    assert_eq!(report["check"]["ok"], true, "{}", report["check"]);
    assert_eq!(report["unexpected"], 0, "{}", report["listed"]);
    assert!(
        report["soldSeats"].as_u64().unwrap_or(0) > 0,
        "nothing sold"
    );
    assert!(report["outcomes"]["sold"].as_u64().unwrap_or(0) > 0);
    let page = std::fs::read_to_string(&html).expect("HTML report");
    assert!(page.contains("<svg") && page.contains("Check passed"));
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
