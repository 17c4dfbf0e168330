//! `boxoffice load onsale --chaos`: the on-sale simulator with the server, the database and
//! the payment provider breaking under it.
//!
//! The tool owns everything the sale runs on, so that it can break it:
//!
//! - a private PostgreSQL cluster (`initdb` into a temporary directory, durable commits, a
//!   port below the client port range), unless `--database-url` names a store to use
//!   (`sqlite://…` runs the same chaos without the database restart);
//! - the payment simulator, in this process, answering the server as its Stripe API and
//!   sending it webhooks;
//! - `boxoffice serve` as a child process (this very binary) on a fixed port, so that a
//!   restarted server is found where the fans left it.
//!
//! While the fans of [`boxoffice_load::run_onsale`] arrive, one action every
//! `--chaos-interval-s` seconds: the payment provider turns slow and lossy (0.3–1.5 s per
//! authorization, 15 % of requests answered 503, 10 % of authorizations done but their
//! answer lost), the server is SIGKILLed and started again, PostgreSQL is restarted with an
//! immediate (crash) shutdown, the server is SIGKILLed again, the provider recovers. Fans
//! retry a failed request with the same idempotency key, as clients do.
//!
//! When the fans are done: wait for convergence — no hold still `HELD` or
//! `PAYMENT_PENDING`, no order still `PENDING_PAYMENT` (abandoned holds expire, lost
//! payment answers are settled by the reconciler) — then stop the server and run
//! `boxoffice check` on the store. The run fails on any violation, on no convergence, on an
//! order the fans could not follow to a final status, or on an answer the contract does not
//! allow.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use boxoffice_domain::hold::HoldStatus;
use boxoffice_domain::order::OrderStatus;
use boxoffice_payments::simulator::{
    DEFAULT_SECRET_KEY, DEFAULT_WEBHOOK_SECRET, SimulatorConfig, SimulatorHandle,
};
use boxoffice_store::Store;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Authorization latency of a well-behaved provider, ms (uniform).
const PROVIDER_LATENCY_MS: (u64, u64) = (20, 80);
/// Authorization latency while the provider is degraded, ms (uniform).
const DEGRADED_LATENCY_MS: (u64, u64) = (300, 1_500);
/// Share of provider API requests answered 503 while degraded.
const DEGRADED_FAIL_SHARE: f64 = 0.15;
/// Share of authorizations whose answer is lost while degraded.
const DEGRADED_LOSE_SHARE: f64 = 0.10;
/// Longest wait for a (re)started server to print its address.
const SERVER_START_MAX: Duration = Duration::from_secs(60);
/// Longest wait for the store to converge after the fans are done.
const CONVERGE_MAX: Duration = Duration::from_secs(240);
/// Fixed ports are drawn from here: below the client (ephemeral) port range.
const FIXED_PORTS: std::ops::Range<u16> = 20_000..32_000;

/// Settings of a chaos run beyond the scenario's.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// A store to use instead of a private PostgreSQL cluster.
    pub database_url: Option<String>,
    /// Seconds between two chaos actions.
    pub interval_s: f64,
    /// PostgreSQL's `bin` directory (`initdb`, `pg_ctl`); found under /usr/lib/postgresql.
    pub pg_bin: Option<PathBuf>,
    /// This binary (`boxoffice serve` is started from it).
    pub boxoffice: PathBuf,
    /// `boxoffice serve` processes on the one store (1-3): the first is the one SIGKILLed
    /// and restarted; the fans are spread over all of them, so the others forward to the
    /// event's owner and take the event over while the first is down.
    pub nodes: u32,
    /// Where the nodes keep their waiting rooms when there are several (they must share
    /// them: a fan admitted by one node shops through the owner): a `redis://` URL.
    pub redis_url: String,
}

/// One thing done to the system, when.
#[derive(Debug, Clone)]
struct Mark {
    at_s: f64,
    action: String,
}

/// Runs the scenario under chaos; the report carries the chaos marks and the check.
pub async fn run(
    mut scenario: boxoffice_load::OnsaleScenario,
    options: &ChaosOptions,
) -> anyhow::Result<ChaosOutcome> {
    if !(options.interval_s >= 0.5 && options.interval_s <= 600.0) {
        bail!("chaos-interval-s must be between 0.5 and 600");
    }
    if !(1..=3).contains(&options.nodes) {
        bail!("chaos-nodes must be between 1 and 3");
    }
    let work = tempdir()?;
    let result = run_in(&mut scenario, options, &work).await;
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// What a chaos run found.
#[derive(Debug)]
pub struct ChaosOutcome {
    pub report: boxoffice_load::OnsaleReport,
    pub check_ok: bool,
    pub converged: bool,
}

async fn run_in(
    scenario: &mut boxoffice_load::OnsaleScenario,
    options: &ChaosOptions,
    work: &Path,
) -> anyhow::Result<ChaosOutcome> {
    let mut postgres = None;
    let database_url = match &options.database_url {
        Some(url) => url.clone(),
        None => {
            let pg = PrivatePostgres::start(work, options.pg_bin.as_deref())?;
            let url = pg.url("boxoffice_chaos");
            eprintln!(
                "chaos: private PostgreSQL on port {} in {}",
                pg.port,
                pg.dir.display()
            );
            postgres = Some(pg);
            url
        }
    };

    let sim = boxoffice_payments::simulator::spawn(SimulatorConfig {
        seed: 6,
        auth_latency_ms: PROVIDER_LATENCY_MS,
        webhook_duplicates_max: 2,
        webhook_delay_ms: (0, 200),
        ..SimulatorConfig::default()
    })
    .await
    .context("starting the payment simulator")?;
    let port = free_fixed_port()?;
    let mut server = ServerProcess {
        waitroom_state: (options.nodes > 1).then(|| options.redis_url.clone()),
        boxoffice: options.boxoffice.clone(),
        database_url: database_url.clone(),
        port,
        jwt_secret: scenario.jwt_secret.clone(),
        provider_url: sim.base_url.clone(),
        work: work.to_owned(),
        child: None,
        starts: 0,
    };
    sim.sim.set_webhook_url(format!(
        "http://127.0.0.1:{port}/v1/payments/webhooks/stripe"
    ));
    server.start().await?;
    scenario.base_url = server.url();
    // The other nodes: never killed; they forward to the owner, and take the event over
    // while the first node is down.
    let mut others = Vec::new();
    for _ in 1..options.nodes {
        let mut other = ServerProcess {
            port: free_fixed_port()?,
            child: None,
            starts: 0,
            ..server.clone_settings()
        };
        other.start().await?;
        scenario.other_base_urls.push(other.url());
        others.push(other);
    }

    let started = Instant::now();
    let load = {
        let scenario = scenario.clone();
        tokio::spawn(async move { boxoffice_load::run_onsale(&scenario).await })
    };
    let mut marks = Vec::new();
    let interval = Duration::from_secs_f64(options.interval_s);
    for step in 1..=5u32 {
        tokio::time::sleep_until((started + interval * step).into()).await;
        let action = match step {
            1 => {
                degrade(&sim, true);
                "payment provider slow and lossy".to_owned()
            }
            2 | 4 => {
                server.kill().await;
                let down = Instant::now();
                server.start().await?;
                format!(
                    "server SIGKILLed, back after {:.1} s",
                    down.elapsed().as_secs_f64()
                )
            }
            3 => match &postgres {
                Some(pg) => {
                    let down = Instant::now();
                    pg.restart_immediate()?;
                    format!(
                        "PostgreSQL crash-restarted (immediate), back after {:.1} s",
                        down.elapsed().as_secs_f64()
                    )
                }
                None => "database restart skipped (not a private PostgreSQL)".to_owned(),
            },
            _ => {
                degrade(&sim, false);
                "payment provider recovered".to_owned()
            }
        };
        let at_s = started.elapsed().as_secs_f64();
        eprintln!("chaos: t={at_s:.1}s {action}");
        marks.push(Mark { at_s, action });
    }
    let mut report = load.await.context("the load task")??;
    degrade(&sim, false);

    eprintln!("chaos: fans done; waiting for the store to converge");
    let store = crate::stores::open_store(&database_url).await?;
    let converge_started = Instant::now();
    let pending = converge(store.as_ref(), &report.event_id).await?;
    let converged = pending.is_empty();
    let converge_s = converge_started.elapsed().as_secs_f64();
    if converged {
        eprintln!("chaos: converged after {converge_s:.1} s");
    } else {
        eprintln!("chaos: NOT converged after {converge_s:.1} s: {pending}");
    }
    server.kill().await;
    for other in &mut others {
        other.kill().await;
    }
    let (check_ok, check_output) = check(&options.boxoffice, &database_url).await?;
    print!("{check_output}");
    drop(store);
    if let Some(pg) = postgres {
        pg.stop();
    }

    report.json["scenario"]["chaos"] = json!({
        "intervalSeconds": options.interval_s,
        "database": if options.database_url.is_some() { "given" } else { "private PostgreSQL" },
        "serverStarts": server.starts,
        "nodes": options.nodes,
        "convergeSeconds": converge_s,
        "converged": converged,
        "pendingAtEnd": pending,
    });
    report.json["chaos"] = Value::Array(
        marks
            .iter()
            .map(|m| json!({"atSeconds": m.at_s, "action": m.action}))
            .collect(),
    );
    report.json["check"] = json!({"ok": check_ok, "output": check_output});
    let mut table = std::mem::take(&mut report.table);
    for m in &marks {
        table.push_str(&format!("chaos t={:.1}s {}\n", m.at_s, m.action));
    }
    table.push_str(&format!(
        "converged={converged} after {converge_s:.1} s; check {}\n",
        if check_ok { "passed" } else { "FAILED" }
    ));
    report.table = table;
    Ok(ChaosOutcome {
        report,
        check_ok,
        converged,
    })
}

fn degrade(sim: &SimulatorHandle, degraded: bool) {
    let (latency, fail, lose) = if degraded {
        (
            DEGRADED_LATENCY_MS,
            DEGRADED_FAIL_SHARE,
            DEGRADED_LOSE_SHARE,
        )
    } else {
        (PROVIDER_LATENCY_MS, 0.0, 0.0)
    };
    sim.sim.set_auth_latency_ms(latency.0, latency.1);
    sim.sim.set_fail_5xx_share(fail);
    sim.sim.set_lose_share(lose);
}

/// Waits until nothing of the event is in flight; what still is, if the wait ran out.
pub(crate) async fn converge(store: &dyn Store, event_id: &str) -> anyhow::Result<String> {
    let deadline = Instant::now() + CONVERGE_MAX;
    loop {
        let pending = match store.load_inventory(event_id).await {
            Ok(Some(inventory)) => {
                let holds = inventory
                    .holds
                    .iter()
                    .filter(|h| matches!(h.status, HoldStatus::Held | HoldStatus::PaymentPending))
                    .count();
                let orders = inventory
                    .orders
                    .iter()
                    .filter(|o| o.status == OrderStatus::PendingPayment)
                    .count();
                if holds == 0 && orders == 0 {
                    return Ok(String::new());
                }
                format!("{holds} holds HELD or PAYMENT_PENDING, {orders} orders PENDING_PAYMENT")
            }
            Ok(None) => bail!("event {event_id} is not in the store"),
            Err(error) => format!("store unavailable: {error}"),
        };
        if Instant::now() >= deadline {
            return Ok(pending);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs `boxoffice check` on the store; whether it passed, and what it printed.
pub(crate) async fn check(boxoffice: &Path, database_url: &str) -> anyhow::Result<(bool, String)> {
    let output = tokio::process::Command::new(boxoffice)
        .args(["check", "--database-url", database_url])
        .env("RUST_LOG", "warn")
        .output()
        .await
        .context("running boxoffice check")?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Ok((output.status.success(), text))
}

/// `boxoffice serve` as a child process on a fixed port.
struct ServerProcess {
    /// The waiting rooms' store (`None`: a journal of the node's own in `work`).
    waitroom_state: Option<String>,
    boxoffice: PathBuf,
    database_url: String,
    port: u16,
    jwt_secret: String,
    provider_url: String,
    work: PathBuf,
    child: Option<tokio::process::Child>,
    starts: u32,
}

impl ServerProcess {
    /// The same settings, for another node (its port and process are set by the caller).
    fn clone_settings(&self) -> Self {
        Self {
            waitroom_state: self.waitroom_state.clone(),
            boxoffice: self.boxoffice.clone(),
            database_url: self.database_url.clone(),
            port: self.port,
            jwt_secret: self.jwt_secret.clone(),
            provider_url: self.provider_url.clone(),
            work: self.work.clone(),
            child: None,
            starts: 0,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.work.join("serve.log"))?;
        let mut child = tokio::process::Command::new(&self.boxoffice)
            .arg("serve")
            .args(["--database-url", &self.database_url])
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args([
                "--payments",
                "stripe",
                "--stripe-api-base",
                &self.provider_url,
            ])
            .arg("--ticket-key")
            .arg(self.work.join("ticket-key.pem"))
            .arg("--waitroom-state")
            .arg(self.waitroom_state.clone().unwrap_or_else(|| {
                self.work
                    .join(format!("waitroom-{}", self.port))
                    .display()
                    .to_string()
            }))
            .env("BOXOFFICE_JWT_SECRET", &self.jwt_secret)
            .env("STRIPE_SECRET_KEY", DEFAULT_SECRET_KEY)
            .env("STRIPE_WEBHOOK_SECRET", DEFAULT_WEBHOOK_SECRET)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .context("starting boxoffice serve")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let listening = tokio::time::timeout(SERVER_START_MAX, async {
            while let Some(line) = lines.next_line().await? {
                if line.starts_with("listening on") {
                    return Ok::<bool, std::io::Error>(true);
                }
            }
            Ok(false)
        })
        .await;
        if !matches!(listening, Ok(Ok(true))) {
            let _ = child.start_kill();
            let log = std::fs::read_to_string(self.work.join("serve.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            bail!(
                "boxoffice serve did not start: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        // Keep draining stdout so that the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.child = Some(child);
        self.starts += 1;
        Ok(())
    }

    /// SIGKILL (no shutdown hook runs, as in a power cut), then reaps the process so that
    /// its port is free for the next start.
    async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}

/// A throwaway PostgreSQL cluster: initdb'd into a temporary directory, durable commits.
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    fn start(work: &Path, bin: Option<&Path>) -> anyhow::Result<Self> {
        let bin = match bin {
            Some(bin) => bin.to_owned(),
            None => find_pg_bin()?,
        };
        let dir = work.join("pg");
        std::fs::create_dir_all(&dir)?;
        if running_as_root() {
            // PostgreSQL refuses to run as root: the cluster belongs to `postgres`.
            run_command(
                std::process::Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(work),
            )?;
        }
        let port = free_fixed_port()?;
        let data = dir.join("data");
        run_command(as_postgres(&bin.join("initdb")).arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ]))?;
        let conf = format!(
            "\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
             max_connections = 200\nshared_buffers = 256MB\nfsync = on\nsynchronous_commit = on\n\
             full_page_writes = on\n",
            dir.display()
        );
        let conf_path = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text)?;
        let pg = Self { bin, dir, port };
        run_command(pg.pg_ctl().arg("start"))?;
        Ok(pg)
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn pg_ctl(&self) -> std::process::Command {
        let mut command = as_postgres(&self.bin.join("pg_ctl"));
        command
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .arg("-w");
        command
    }

    /// An immediate shutdown (no checkpoint: crash recovery at start), then a start.
    fn restart_immediate(&self) -> anyhow::Result<()> {
        run_command(self.pg_ctl().args(["-m", "immediate", "restart"]))
    }

    fn stop(&self) {
        let _ = self
            .pg_ctl()
            .args(["-m", "fast", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if self.dir.join("data/postmaster.pid").exists() {
            self.stop();
        }
    }
}

pub(crate) fn run_command(command: &mut std::process::Command) -> anyhow::Result<()> {
    let output = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    if !output.status.success() {
        bail!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

pub(crate) fn as_postgres(program: &Path) -> std::process::Command {
    if running_as_root() {
        let mut command = std::process::Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        std::process::Command::new(program)
    }
}

pub(crate) fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb`.
pub(crate) fn find_pg_bin() -> anyhow::Result<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .context("looking for PostgreSQL under /usr/lib/postgresql (or pass --pg-bin)")?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .context("no initdb under /usr/lib/postgresql/*/bin (pass --pg-bin)")
}

/// A port below the client port range that is free right now.
pub(crate) fn free_fixed_port() -> anyhow::Result<u16> {
    use rand::Rng;
    let mut rng = rand::rng();
    for _ in 0..200 {
        let port = rng.random_range(FIXED_PORTS);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port in {FIXED_PORTS:?}")
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "boxoffice-chaos-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir)?;
    // The private cluster's owner must be able to reach its directory.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_ports_are_below_the_client_range() {
        let port = free_fixed_port().expect("a free port");
        assert!(FIXED_PORTS.contains(&port));
        assert!(port < 32_768);
    }
}
