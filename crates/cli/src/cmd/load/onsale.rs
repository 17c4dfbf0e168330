//! `boxoffice load onsale`: the open-loop on-sale, alone or while things break
//! (`--chaos`, on one store or on a cluster).

use anyhow::{Context, bail};
use boxoffice_server::auth::DEV_JWT_SECRET;

use crate::{chaos, cluster_chaos};

#[derive(Debug, clap::Args)]
pub(crate) struct OnsaleArgs {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    base_url: String,
    /// The server's JWT secret (to mint the admin and fan tokens).
    #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,
    /// Multiplies the full on-sale: 2,000,000 accounts over 300 s.
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    /// Accounts (overrides 2,000,000 x scale).
    #[arg(long)]
    accounts: Option<u64>,
    /// Arrival window in seconds (overrides 300 x scale).
    #[arg(long)]
    arrival_s: Option<f64>,
    /// Share of holds abandoned: half released, half left to expire.
    #[arg(long, default_value_t = 0.2)]
    abandon: f64,
    /// Test-card mix at checkout, name=weight (visa, declined, 3ds, slow, timeout).
    #[arg(long, default_value = "visa=70,declined=10,3ds=10,slow=5,timeout=5")]
    cards: boxoffice_load::CardMix,
    /// Sections of 50 x 100 seats in the generated stadium.
    #[arg(long, default_value_t = 10)]
    sections: u32,
    /// Accounts in progress at once; arrivals beyond wait (counted as delayed_by_cap).
    #[arg(long, default_value_t = 2000)]
    max_in_flight: usize,
    /// The created event's maxActiveShoppers (default clamp(100,000 x scale, 200, 10,000)).
    #[arg(long)]
    max_active: Option<u32>,
    /// Sell this event (waiting room enabled, reserved sections) instead of creating one.
    #[arg(long)]
    event_id: Option<String>,
    /// Hold TTL of the created event, seconds (abandoned holds come back after it).
    #[arg(long, default_value_t = boxoffice_load::onsale::HOLD_TTL_S)]
    hold_ttl_s: u32,
    /// Create the event without a waiting room: fans go straight to the seats.
    #[arg(long)]
    no_waiting_room: bool,
    /// Fans refused seats go home at once instead of waiting on the event's waiting list
    /// (the load tool's fans before issue 35: an A/B of what the waiting fans cost).
    #[arg(long)]
    refused_fans_leave: bool,
    /// Share of fans (0 to below 1) in a presale lane with its own queue: the created event
    /// gets a code phase `fanclub` (the best half of the sections, its own waiting room with
    /// that share of the shopper slots) and the general phase; that share of the fans redeem
    /// a generated code and queue in the lane, the others in the general queue. The report
    /// gives admitted, held and sold per lane.
    #[arg(long, default_value_t = 0.0)]
    presale_share: f64,
    /// The created event's queue is `random`: it goes on sale when the last fan has
    /// arrived, and the fans who joined before are shuffled once (default `fifo`, on
    /// sale at once).
    #[arg(long)]
    random_queue: bool,
    /// The created event's `waitingRoom.startReleasePerSecond` (default the API's).
    #[arg(long)]
    start_release: Option<u32>,
    /// The created event's `waitingRoom.maxReleasePerSecond` (default the API's).
    #[arg(long)]
    max_release: Option<u32>,
    /// The created event's `waitingRoom.targetHoldP99Ms` (default the API's).
    #[arg(long)]
    target_hold_p99_ms: Option<u32>,
    /// Where the JSON report goes.
    #[arg(long, default_value = "onsale-report.json")]
    report: std::path::PathBuf,
    /// Where the HTML report (tables and plots) goes.
    #[arg(long, default_value = "onsale-report.html")]
    html_report: std::path::PathBuf,
    /// Break things during the run: this tool starts its own server (and, unless
    /// --database-url, a private PostgreSQL cluster) and payment simulator, SIGKILLs and
    /// restarts the server, crash-restarts PostgreSQL, makes the provider slow and lossy;
    /// then waits for convergence and runs `boxoffice check`. Exit 1 on any violation.
    #[arg(long)]
    chaos: bool,
    /// With --chaos: seconds between two chaos actions (five actions in all).
    #[arg(long, default_value_t = 4.0, requires = "chaos")]
    chaos_interval_s: f64,
    /// With --chaos: run on the cluster `boxoffice cluster up --dir DIR` started
    /// instead: two events at once through its balancer, a node SIGKILLed, a shard's
    /// primary killed (failover), a node frozen past its lease, the provider slow; then
    /// `boxoffice check` on every shard. The second event's reports get `-2` in their
    /// names.
    #[arg(long, requires = "chaos", conflicts_with_all = ["database_url", "chaos_nodes"])]
    cluster: Option<std::path::PathBuf>,
    /// With --chaos: the store the started server uses (default: a private PostgreSQL).
    #[arg(long, requires = "chaos")]
    database_url: Option<String>,
    /// With --chaos: PostgreSQL's bin directory (default: newest /usr/lib/postgresql/*/bin).
    #[arg(long, requires = "chaos")]
    pg_bin: Option<std::path::PathBuf>,
    /// With --chaos: `serve` processes on the one store (1-3); the fans are spread over
    /// them and the first is the one SIGKILLed.
    #[arg(long, default_value_t = 1, requires = "chaos")]
    chaos_nodes: u32,
    /// With --chaos-nodes 2 or 3: the Redis the nodes share their waiting rooms in.
    #[arg(
        long,
        env = "BOXOFFICE_CHAOS_REDIS_URL",
        default_value = "redis://127.0.0.1:6379"
    )]
    chaos_redis_url: String,
    /// More nodes of the same store (without --chaos): each fan talks to one of
    /// --base-url and these.
    #[arg(long = "also-base-url")]
    also_base_urls: Vec<String>,
}

impl OnsaleArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            scale,
            accounts,
            arrival_s,
            abandon,
            cards,
            sections,
            max_in_flight,
            max_active,
            event_id,
            hold_ttl_s,
            no_waiting_room,
            refused_fans_leave,
            presale_share,
            random_queue,
            start_release,
            max_release,
            target_hold_p99_ms,
            report,
            html_report,
            chaos,
            chaos_interval_s,
            cluster,
            database_url,
            pg_bin,
            chaos_nodes,
            chaos_redis_url,
            also_base_urls,
        } = self;
        let scenario = boxoffice_load::OnsaleScenario {
            base_url,
            other_base_urls: also_base_urls,
            jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
            scale,
            accounts,
            arrival_s,
            abandon,
            cards,
            sections,
            max_in_flight,
            max_active,
            event_id,
            hold_ttl_s,
            waiting_room: !no_waiting_room,
            refused_fans_wait: !refused_fans_leave,
            presale_share,
            report,
            door: boxoffice_load::DoorSettings {
                random: random_queue,
                start_release_per_s: start_release,
                max_release_per_s: max_release,
                target_hold_p99_ms,
            },
        };
        if let Some(dir) = cluster {
            let options = cluster_chaos::ClusterChaosOptions {
                dir,
                interval_s: chaos_interval_s,
                boxoffice: std::env::current_exe().context("finding this binary")?,
            };
            let outcome = cluster_chaos::run(scenario.clone(), &options).await?;
            let mut failed = Vec::new();
            for (n, event) in outcome.events.iter().enumerate() {
                let report = &event.report;
                let (json_path, html_path) = if n == 0 {
                    (scenario.report.clone(), html_report.clone())
                } else {
                    (
                        with_suffix(&scenario.report, "-2"),
                        with_suffix(&html_report, "-2"),
                    )
                };
                report.write_files(&json_path, Some(&html_path))?;
                print!("{report}");
                println!(
                    "reports written to {} and {}",
                    json_path.display(),
                    html_path.display()
                );
                if !event.converged {
                    failed.push(format!("event {} did not converge", report.event_id));
                }
                if report.unexpected > 0 || report.unsettled > 0 {
                    failed.push(format!(
                        "event {}: {} answers the contract does not allow and {} orders not final",
                        report.event_id, report.unexpected, report.unsettled
                    ));
                }
            }
            if outcome.events.iter().any(|e| !e.check_ok) {
                failed.push("boxoffice check found violations".to_owned());
            }
            if !failed.is_empty() {
                bail!("the cluster chaos run failed: {}", failed.join("; "));
            }
            println!(
                "cluster chaos run passed: both events converged, all invariants hold on every shard"
            );
            let _ = &outcome.check_output;
            return Ok(());
        }
        if chaos {
            let options = chaos::ChaosOptions {
                database_url,
                interval_s: chaos_interval_s,
                pg_bin,
                boxoffice: std::env::current_exe().context("finding this binary")?,
                nodes: chaos_nodes,
                redis_url: chaos_redis_url,
            };
            let outcome = chaos::run(scenario.clone(), &options).await?;
            let report = &outcome.report;
            report.write_files(&scenario.report, Some(&html_report))?;
            print!("{report}");
            println!(
                "reports written to {} and {}",
                scenario.report.display(),
                html_report.display()
            );
            if !outcome.check_ok {
                bail!("boxoffice check found violations after the chaos run");
            }
            if !outcome.converged {
                bail!("the store did not converge after the chaos run");
            }
            if report.unexpected > 0 || report.unsettled > 0 {
                bail!(
                    "{} answers the contract does not allow and {} orders not final (listed above)",
                    report.unexpected,
                    report.unsettled
                );
            }
            println!(
                "chaos run passed: {} failed attempts retried, store converged, all invariants hold",
                report.errors
            );
            return Ok(());
        }
        let report = boxoffice_load::run_onsale(&scenario).await?;
        report.write_files(&scenario.report, Some(&html_report))?;
        print!("{report}");
        println!(
            "reports written to {} and {}",
            scenario.report.display(),
            html_report.display()
        );
        if report.unexpected > 0 || report.unsettled > 0 {
            eprintln!(
                "note: {} unexpected answers and {} orders not final after {} s (listed above)",
                report.unexpected,
                report.unsettled,
                boxoffice_load::onsale::ORDER_WAIT_MAX.as_secs()
            );
        }
        if report.errors > 0 {
            bail!(
                "{} requests failed with a 5xx answer or a transport error (listed above)",
                report.errors
            );
        }
        Ok(())
    }
}

/// `path` with `suffix` before its extension (`report.json` → `report-2.json`).
fn with_suffix(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}{suffix}"),
    };
    path.with_file_name(name)
}
