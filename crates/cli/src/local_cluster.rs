//! `boxoffice cluster up` / `cluster down` (issues 17 and 38): a cluster on one machine
//! for a newcomer and for the tests, every part a real server started as its own process
//! on a free port below 32768:
//!
//! - a pg_auto_failover monitor (`DIR/monitor`) and, per shard, a formation of two
//!   PostgreSQL servers under `DIR/shard-N/{a,b}`, each run by its `pg_autoctl run` keeper:
//!   a primary and a **synchronous** secondary (no commit is acknowledged before the
//!   secondary has it). The monitor fails a shard over on its own ([`crate::autofailover`]);
//!   the first shard is the home shard (the shard directory, `main`), the others are added
//!   to it as `s1`, `s2`, … (`boxoffice shard add`), so new events are placed on the shard
//!   with the fewest;
//! - a private Redis (nothing kept on disk) for the shared waiting rooms;
//! - `--nodes` `boxoffice serve` processes on the home shard's multi-host URL (each
//!   connects to every shard the directory names, and follows each shard's writable host)
//!   and that Redis, each with its node id and advertised address (the event leases decide
//!   which node writes an event; the others forward);
//! - HAProxy in front, round robin, each node health-checked on `/readyz`, no stickiness,
//!   long tunnels for SSE.
//!
//! `up` writes what it started to `DIR/cluster.json`, prints `balancer http://HOST:PORT`,
//! `admin-token TOKEN` and `database-url URL`, and returns; `down` stops everything listed
//! there (each process group with SIGTERM, then SIGKILL after 10 s), and checks that no
//! port is left bound and no process of the cluster runs. The JWT secret is
//! `BOXOFFICE_JWT_SECRET` when set, otherwise a random one kept in `DIR/jwt-secret`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::autofailover::{Autoctl, Member};
use crate::chaos::{as_postgres, find_pg_bin, free_fixed_port, run_command, running_as_root};

/// Most nodes `cluster up` starts.
pub const NODES_MAX: u32 = 8;
/// Most shards `cluster up` starts (each is two PostgreSQL servers).
pub const SHARDS_MAX: u32 = 4;
/// How long a part may take to start before `up` gives up.
const START_MAX: Duration = Duration::from_secs(60);
/// How long a node has to stop after SIGTERM before SIGKILL.
const STOP_MAX: Duration = Duration::from_secs(10);
const STATE_FILE: &str = "cluster.json";
/// HAProxy's connection limit: it needs two descriptors a connection, under the
/// container's 20,000.
const HAPROXY_MAXCONN: u32 = 8_000;

/// What `up` needs.
pub struct UpOptions {
    pub dir: PathBuf,
    pub nodes: u32,
    pub shards: u32,
    pub pg_bin: Option<PathBuf>,
    /// The `boxoffice` binary the nodes run.
    pub boxoffice: PathBuf,
    pub jwt_secret: Option<String>,
}

/// Ports handed out in this run, so that two parts never get the same one.
#[derive(Default)]
struct Ports(Vec<u16>);

impl Ports {
    fn take(&mut self) -> anyhow::Result<u16> {
        for _ in 0..50 {
            let port = free_fixed_port()?;
            if !self.0.contains(&port) {
                self.0.push(port);
                return Ok(port);
            }
        }
        bail!("no free port left below 32768")
    }
}

/// Starts the cluster; on any failure stops what was started.
pub async fn up(options: &UpOptions) -> anyhow::Result<Value> {
    if options.nodes == 0 || options.nodes > NODES_MAX {
        bail!("--nodes must be between 1 and {NODES_MAX}");
    }
    if options.shards == 0 || options.shards > SHARDS_MAX {
        bail!("--shards must be between 1 and {SHARDS_MAX}");
    }
    if options.dir.join(STATE_FILE).exists() {
        bail!(
            "{} already holds a cluster: `boxoffice cluster down --dir {}` first",
            options.dir.display(),
            options.dir.display()
        );
    }
    if std::fs::read_dir(&options.dir).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!(
            "{} is not empty: give a new or empty directory (a failed `up` leaves its logs there)",
            options.dir.display()
        );
    }
    for tool in ["haproxy", "redis-server", "pg_autoctl"] {
        if which(tool).is_none() {
            let package = match tool {
                "pg_autoctl" => "pg-auto-failover-cli postgresql-15-auto-failover",
                "redis-server" => "redis-server",
                other => other,
            };
            bail!("{tool} is not installed (Debian: apt-get install {package})");
        }
    }
    std::fs::create_dir_all(&options.dir)
        .with_context(|| format!("creating {}", options.dir.display()))?;
    let dir = options
        .dir
        .canonicalize()
        .with_context(|| format!("resolving {}", options.dir.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    if running_as_root() {
        // PostgreSQL runs as `postgres`, which must be able to walk down to DIR.
        for ancestor in dir.ancestors().skip(1) {
            let mode = std::fs::metadata(ancestor)?.permissions().mode();
            if mode & 0o001 == 0 {
                bail!(
                    "PostgreSQL runs as the postgres user, which cannot enter {} (mode {:o}): pick a directory whose parents others may traverse (chmod o+x), e.g. under /tmp",
                    ancestor.display(),
                    mode & 0o777
                );
            }
        }
    }
    let mut state = json!({"dir": dir.display().to_string(), "nodes": [], "shards": []});
    match start_all(options, &dir, &mut state).await {
        Ok(()) => Ok(state),
        Err(error) => {
            stop_all(&state);
            let _ = std::fs::remove_file(dir.join(STATE_FILE));
            Err(error)
        }
    }
}

/// Starts the node `node` of `cluster.json` describes (its `argv`, its log), detached in a
/// process group of its own. Used by `up`, and by a chaos run that starts a killed node again.
pub fn spawn_node(
    boxoffice: &Path,
    node: &Value,
    secret: &str,
) -> anyhow::Result<std::process::Child> {
    let argv: Vec<&str> = node["argv"]
        .as_array()
        .context("the node's argv")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(node["log"].as_str().context("the node's log")?)?;
    std::process::Command::new(boxoffice)
        .args(argv)
        .env("BOXOFFICE_JWT_SECRET", secret)
        .env(
            "STRIPE_SECRET_KEY",
            boxoffice_payments::simulator::DEFAULT_SECRET_KEY,
        )
        .env(
            "STRIPE_WEBHOOK_SECRET",
            boxoffice_payments::simulator::DEFAULT_WEBHOOK_SECRET,
        )
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("starting boxoffice serve")
}

/// The name of the shard at `index` in the directory (`main` for the home one).
pub fn shard_name(index: usize) -> String {
    if index == 0 {
        boxoffice_store::shard::HOME_SHARD.to_owned()
    } else {
        format!("s{index}")
    }
}

/// Starts shard `index`: a pg_auto_failover formation named after the shard, its primary
/// and then its synchronous secondary under `DIR/shard-INDEX/{a,b}`, each run by its keeper;
/// the formation's URL for the nodes.
async fn start_shard(
    autoctl: &Autoctl,
    dir: &Path,
    ports: &mut Ports,
    index: u32,
    state: &mut Value,
) -> anyhow::Result<String> {
    let name = shard_name(index as usize);
    let shard = dir.join(format!("shard-{index}"));
    std::fs::create_dir_all(&shard)?;
    if running_as_root() {
        run_command(
            std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&shard),
        )?;
    }
    let monitor = monitor_data(state)?;
    let monitor_port = state["monitor"]["port"]
        .as_u64()
        .and_then(|port| u16::try_from(port).ok())
        .context("the monitor's port")?;
    autoctl.create_formation(&monitor, &name)?;
    let at = index as usize;
    state["shards"]
        .as_array_mut()
        .context("shards")?
        .push(json!({"name": name, "formation": name, "members": []}));
    save(dir, state)?;
    for (n, suffix) in ["a", "b"].into_iter().enumerate() {
        let port = ports.take()?;
        let data = shard.join(suffix);
        let member = format!("{name}-{suffix}");
        autoctl.create_member(&data, port, &name, &member, monitor_port, n == 0)?;
        let log = shard.join(format!("{suffix}.log"));
        let pid = autoctl.spawn_run(&data, &log)?;
        state["shards"][at]["members"]
            .as_array_mut()
            .context("members")?
            .push(
                json!({"name": member, "data": data.display().to_string(), "port": port,
                         "pid": pid, "log": log.display().to_string()}),
            );
        save(dir, state)?;
        let (what, wanted) = if n == 0 {
            ("the primary to run", 1)
        } else {
            ("the secondary to stream synchronously", 2)
        };
        wait_for(START_MAX, &format!("shard {name}: {what}"), || {
            autoctl.members(&monitor, &name).is_ok_and(|members| {
                members
                    .iter()
                    .filter(|m| m.is_primary() || m.is_secondary())
                    .count()
                    == wanted
                    && members.iter().any(Member::is_primary)
            })
        })
        .await
        .with_context(|| tail(&log))?;
    }
    let database_url = autoctl.uri(&monitor, &name)?;
    state["shards"][at]["databaseUrl"] = json!(database_url);
    save(dir, state)?;
    Ok(database_url)
}

/// The monitor's data directory, as `cluster.json` names it.
pub fn monitor_data(state: &Value) -> anyhow::Result<PathBuf> {
    state["monitor"]["data"]
        .as_str()
        .map(PathBuf::from)
        .context("the cluster has no pg_auto_failover monitor")
}

/// pg_autoctl as this cluster runs it.
pub fn autoctl(state: &Value) -> anyhow::Result<Autoctl> {
    let bin = match state["pgBin"].as_str() {
        Some(bin) => PathBuf::from(bin),
        None => find_pg_bin()?,
    };
    let dir = state["dir"].as_str().context("the cluster's directory")?;
    Autoctl::new(&bin, &Path::new(dir).join("pg_autoctl"))
}

/// Each shard's members as the monitor sees them now: `[{"name", "members": [...]}]`.
pub fn shard_states(state: &Value) -> anyhow::Result<Value> {
    let autoctl = autoctl(state)?;
    let monitor = monitor_data(state)?;
    let mut shards = Vec::new();
    for shard in state["shards"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let formation = shard["formation"].as_str().context("a shard's formation")?;
        let members = autoctl.members(&monitor, formation)?;
        shards.push(json!({
            "name": shard["name"],
            "members": members.iter().map(|m| json!({
                "name": m.name, "port": m.port, "currentState": m.current,
                "assignedState": m.assigned, "healthy": m.healthy,
                "primary": m.is_primary(),
            })).collect::<Vec<_>>(),
        }));
    }
    Ok(json!(shards))
}

/// The member of shard `index` that runs as its primary now, as `cluster.json` lists it (its
/// `name`, `data`, `port`, `pid`), or `None` while none does.
pub fn primary_of(state: &Value, index: usize) -> anyhow::Result<Option<Value>> {
    role_of(state, index, Member::takes_writes)
}

/// Whether shard `index` commits synchronously again: one member agreed `primary` (not
/// `wait_primary`, which commits alone) and one agreed `secondary`.
pub fn synchronous(state: &Value, index: usize) -> anyhow::Result<bool> {
    let formation = state["shards"][index]["formation"]
        .as_str()
        .context("a shard's formation")?;
    let members = autoctl(state)?.members(&monitor_data(state)?, formation)?;
    Ok(members
        .iter()
        .any(|m| m.current == "primary" && m.assigned == "primary")
        && members.iter().any(Member::is_secondary))
}

/// The member of shard `index` that is its streaming secondary now, or `None`.
pub fn secondary_of(state: &Value, index: usize) -> anyhow::Result<Option<Value>> {
    role_of(state, index, Member::is_secondary)
}

fn role_of(
    state: &Value,
    index: usize,
    role: impl Fn(&Member) -> bool,
) -> anyhow::Result<Option<Value>> {
    let shard = &state["shards"][index];
    let formation = shard["formation"].as_str().context("a shard's formation")?;
    let members = autoctl(state)?.members(&monitor_data(state)?, formation)?;
    Ok(members.iter().find(|m| role(m)).and_then(|found| {
        shard["members"]
            .as_array()?
            .iter()
            .find(|member| member["name"] == json!(found.name))
            .cloned()
    }))
}

/// Starts the keeper of `member` of shard `index` again (after a chaos run killed it) and
/// records its new process group.
pub fn restart_member(dir: &Path, index: usize, member: &str) -> anyhow::Result<u32> {
    let mut state = load(dir)?;
    let autoctl = autoctl(&state)?;
    let entry = state["shards"][index]["members"]
        .as_array_mut()
        .and_then(|members| members.iter_mut().find(|m| m["name"] == json!(member)))
        .with_context(|| format!("no member {member} in shard {index}"))?;
    let data = PathBuf::from(entry["data"].as_str().context("the member's data")?);
    let log = PathBuf::from(entry["log"].as_str().context("the member's log")?);
    let pid = autoctl.spawn_run(&data, &log)?;
    entry["pid"] = json!(pid);
    save(dir, &state)?;
    Ok(pid)
}

async fn start_all(options: &UpOptions, dir: &Path, state: &mut Value) -> anyhow::Result<()> {
    let bin = match &options.pg_bin {
        Some(bin) => bin.clone(),
        None => find_pg_bin()?,
    };
    let mut ports = Ports::default();
    let secret = match &options.jwt_secret {
        Some(secret) if !secret.is_empty() => secret.clone(),
        _ => {
            let secret = format!("{:032x}", rand::random::<u128>());
            let path = dir.join("jwt-secret");
            std::fs::write(&path, &secret)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            secret
        }
    };

    // The pg_auto_failover monitor, then the shards, each a formation of a primary and its
    // synchronous secondary; the first is the home shard (the directory), the others are
    // added to its directory as s1, s2, ...
    state["pgBin"] = json!(bin.display().to_string());
    let autoctl = Autoctl::new(&bin, &dir.join("pg_autoctl"))?;
    if running_as_root() {
        run_command(
            std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.join("pg_autoctl")),
        )?;
    }
    let monitor_port = ports.take()?;
    let monitor = dir.join("monitor");
    std::fs::create_dir_all(&monitor)?;
    if running_as_root() {
        // pg_autoctl runs initdb in it as postgres.
        run_command(
            std::process::Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&monitor),
        )?;
    }
    autoctl.create_monitor(&monitor, monitor_port)?;
    let monitor_log = dir.join("monitor.log");
    let pid = autoctl.spawn_run(&monitor, &monitor_log)?;
    state["monitor"] = json!({
        "data": monitor.display().to_string(), "port": monitor_port, "pid": pid,
        "log": monitor_log.display().to_string(),
        "uri": Autoctl::monitor_uri(monitor_port),
    });
    save(dir, state)?;
    wait_for(START_MAX, "the monitor to answer", || {
        psql(&bin, monitor_port, "SELECT 1").is_ok()
    })
    .await
    .with_context(|| tail(&monitor_log))?;
    autoctl.tune_monitor(&bin, monitor_port)?;
    state["shards"] = json!([]);
    let mut shard_urls = Vec::new();
    for index in 0..options.shards {
        shard_urls.push(start_shard(&autoctl, dir, &mut ports, index, state).await?);
    }
    let database_url = shard_urls[0].clone();
    for (index, url) in shard_urls.iter().enumerate().skip(1) {
        crate::shards::add(&database_url, &shard_name(index), url).await?;
    }

    // The waiting rooms' Redis.
    let redis_dir = dir.join("redis");
    std::fs::create_dir_all(&redis_dir)?;
    let redis_port = ports.take()?;
    let redis_pid_file = redis_dir.join("redis.pid");
    run_command(
        std::process::Command::new("redis-server")
            .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "yes"])
            .arg("--pidfile")
            .arg(&redis_pid_file)
            .arg("--dir")
            .arg(&redis_dir)
            .arg("--logfile")
            .arg(redis_dir.join("redis.log")),
    )?;
    state["redis"] = json!({"port": redis_port, "pidFile": redis_pid_file.display().to_string()});
    save(dir, state)?;
    wait_for(START_MAX, "Redis to answer", || {
        std::net::TcpStream::connect(("127.0.0.1", redis_port)).is_ok()
    })
    .await?;

    // The payment provider: the simulator in its own process, sending its webhooks through
    // the balancer (a chaos run makes it slow through its /sim/conditions).
    let balancer_port = ports.take()?;
    let paysim_port = ports.take()?;
    let paysim_log = std::fs::File::create(dir.join("paysim.log"))?;
    let paysim = std::process::Command::new(&options.boxoffice)
        .arg("paysim")
        .args(["--listen", &format!("127.0.0.1:{paysim_port}")])
        .args([
            "--webhook-url",
            &format!("http://127.0.0.1:{balancer_port}/v1/payments/webhooks/stripe"),
        ])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(paysim_log.try_clone()?)
        .stderr(paysim_log)
        .process_group(0)
        .spawn()
        .context("starting the payment simulator")?;
    state["paysim"] = json!({"pid": paysim.id(), "port": paysim_port,
                             "url": format!("http://127.0.0.1:{paysim_port}")});
    save(dir, state)?;
    wait_for(START_MAX, "the payment simulator", || {
        http_status(paysim_port, "/healthz") == Some(200)
    })
    .await?;

    // The nodes: the first alone (it runs the migrations and creates the ticket key), then
    // the others.
    let mut node_ports = Vec::new();
    for i in 1..=options.nodes {
        let port = ports.take()?;
        let node_dir = dir.join(format!("node-{i}"));
        std::fs::create_dir_all(&node_dir)?;
        let argv: Vec<String> = vec![
            "serve".into(),
            "--database-url".into(),
            database_url.clone(),
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--node-id".into(),
            format!("node-{i}"),
            "--advertise-url".into(),
            format!("http://127.0.0.1:{port}"),
            "--ticket-key".into(),
            dir.join("ticket-key.pem").display().to_string(),
            "--waitroom-state".into(),
            format!("redis://127.0.0.1:{redis_port}"),
            "--payments".into(),
            "stripe".into(),
            "--stripe-api-base".into(),
            format!("http://127.0.0.1:{paysim_port}"),
        ];
        let mut node = json!({"id": format!("node-{i}"), "port": port, "argv": argv,
                              "log": node_dir.join("serve.log").display().to_string()});
        let child = spawn_node(&options.boxoffice, &node, &secret)?;
        node["pid"] = json!(child.id());
        state["nodes"].as_array_mut().context("nodes")?.push(node);
        save(dir, state)?;
        wait_for(START_MAX, &format!("node-{i} to be ready"), || {
            http_status(port, "/readyz") == Some(200)
        })
        .await
        .with_context(|| tail(&node_dir.join("serve.log")))?;
        node_ports.push(port);
    }

    // The balancer.
    let haproxy_dir = dir.join("haproxy");
    std::fs::create_dir_all(&haproxy_dir)?;
    let config = haproxy_config(balancer_port, &node_ports, &haproxy_dir.join("haproxy.pid"));
    std::fs::write(haproxy_dir.join("haproxy.cfg"), config)?;
    run_command(
        std::process::Command::new("haproxy")
            .arg("-c")
            .arg("-q")
            .arg("-f")
            .arg(haproxy_dir.join("haproxy.cfg")),
    )?;
    run_command(
        std::process::Command::new("haproxy")
            .arg("-D")
            .arg("-f")
            .arg(haproxy_dir.join("haproxy.cfg")),
    )?;
    state["balancer"] = json!({
        "port": balancer_port,
        "url": format!("http://127.0.0.1:{balancer_port}"),
        "pidFile": haproxy_dir.join("haproxy.pid").display().to_string(),
    });
    save(dir, state)?;
    wait_for(START_MAX, "HAProxy to reach a node", || {
        http_status(balancer_port, "/readyz") == Some(200)
    })
    .await?;
    let admin = boxoffice_server::auth::mint_token(
        &secret,
        &boxoffice_domain::ids::AccountId::parse("cluster-admin").map_err(anyhow::Error::msg)?,
        true,
        12 * 3600,
    )
    .map_err(anyhow::Error::msg)?;
    state["adminToken"] = json!(admin);
    save(dir, state)?;

    Ok(())
}

/// HAProxy in front of the nodes: round robin, `/readyz` checks every second, no
/// stickiness (a node forwards what it does not own), long tunnels for SSE; its admin socket
/// beside the pid file (`echo "show stat" | socat stdio unix-connect:DIR/haproxy/admin.sock`).
fn haproxy_config(port: u16, nodes: &[u16], pid_file: &Path) -> String {
    let socket = pid_file.with_file_name("admin.sock");
    let mut config = format!(
        "global\n  maxconn {HAPROXY_MAXCONN}\n  pidfile {}\n  stats socket {} mode 600 level admin\n\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  \
         timeout server 60s\n  timeout tunnel 1h\n  timeout http-keep-alive 10s\n\n\
         frontend boxoffice\n  bind 127.0.0.1:{port}\n  default_backend nodes\n\n\
         backend nodes\n  balance roundrobin\n  option httpchk GET /readyz\n  \
         http-check expect status 200\n",
        pid_file.display(),
        socket.display()
    );
    for (i, node) in nodes.iter().enumerate() {
        config.push_str(&format!(
            "  server node-{} 127.0.0.1:{node} check inter 1s fall 2 rise 1\n",
            i + 1
        ));
    }
    config
}

/// Stops the cluster in `dir`.
/// The cluster's state as `up` (and a failover since) left it.
pub fn load(dir: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(dir.join(STATE_FILE))
        .with_context(|| format!("no cluster in {} ({STATE_FILE} missing)", dir.display()))?;
    serde_json::from_str(&text).context("reading the cluster state")
}

pub async fn down(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join(STATE_FILE);
    let state = load(dir)?;
    stop_all(&state);
    let ports = ports_of(&state);
    let groups = groups_of(&state);
    let deadline = Instant::now() + STOP_MAX;
    let mut bound: Vec<u16> = ports.clone();
    let mut running: Vec<u32> = groups.clone();
    while (!bound.is_empty() || !running.is_empty()) && Instant::now() < deadline {
        bound.retain(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_err());
        running.retain(|group| group_alive(*group));
        if !bound.is_empty() || !running.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if !bound.is_empty() {
        bail!("stopped the cluster, but ports {bound:?} are still bound");
    }
    if !running.is_empty() {
        bail!("stopped the cluster, but process groups {running:?} still run");
    }
    std::fs::remove_file(&path)?;
    Ok(format!(
        "stopped {} node(s), HAProxy, the payment simulator, Redis, every shard's keepers and PostgreSQL, and the monitor; ports {ports:?} free",
        state["nodes"].as_array().map_or(0, Vec::len)
    ))
}

/// The process groups of the pg_autoctl keepers (each with its PostgreSQL), the monitor's
/// last.
fn groups_of(state: &Value) -> Vec<u32> {
    let mut groups = Vec::new();
    for shard in state["shards"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        for member in shard["members"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            if let Some(pid) = member["pid"].as_u64() {
                groups.push(pid as u32);
            }
        }
    }
    if let Some(pid) = state["monitor"]["pid"].as_u64() {
        groups.push(pid as u32);
    }
    groups
}

/// Stops whatever `state` lists; never fails (each part is tried).
fn stop_all(state: &Value) {
    let mut pids: Vec<u32> = Vec::new();
    if let Some(file) = state["balancer"]["pidFile"].as_str()
        && let Some(pid) = read_pid(Path::new(file))
    {
        pids.push(pid);
    }
    for node in state["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        if let Some(pid) = node["pid"].as_u64() {
            pids.push(pid as u32);
        }
    }
    if let Some(file) = state["redis"]["pidFile"].as_str()
        && let Some(pid) = read_pid(Path::new(file))
    {
        pids.push(pid);
    }
    if let Some(pid) = state["paysim"]["pid"].as_u64() {
        pids.push(pid as u32);
    }
    for pid in &pids {
        signal(*pid, "TERM");
    }
    let deadline = Instant::now() + STOP_MAX;
    while pids.iter().any(|pid| alive(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    for pid in pids.iter().filter(|pid| alive(**pid)) {
        signal(*pid, "KILL");
    }
    // The keepers (each stops its PostgreSQL, fast), then the monitor; a group still there
    // after STOP_MAX (a frozen one among them) is killed whole.
    let groups = groups_of(state);
    let (members, monitor) = groups.split_at(
        groups
            .len()
            .saturating_sub(usize::from(state["monitor"]["pid"].is_u64())),
    );
    for part in [members, monitor] {
        for group in part {
            signal_group(*group, "CONT");
            signal_group(*group, "TERM");
        }
        let deadline = Instant::now() + STOP_MAX;
        while part.iter().any(|group| group_alive(*group)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        for group in part.iter().filter(|group| group_alive(**group)) {
            signal_group(*group, "KILL");
        }
    }
    // A PostgreSQL whose keeper was killed (a chaos run) is not in a group any more that
    // was signalled: stopped by its data directory.
    let bin = find_pg_bin().ok();
    let mut datas: Vec<&str> = Vec::new();
    for shard in state["shards"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        for member in shard["members"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            datas.extend(member["data"].as_str());
        }
    }
    datas.extend(state["monitor"]["data"].as_str());
    for data in datas {
        if let Some(bin) = &bin
            && let Some(postmaster) = read_pid(&Path::new(data).join("postmaster.pid"))
            && alive(postmaster)
        {
            let _ = as_postgres(&bin.join("pg_ctl"))
                .arg("-D")
                .arg(data)
                .args(["-w", "-t", "10", "stop", "-m", "immediate"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn ports_of(state: &Value) -> Vec<u16> {
    let mut ports = Vec::new();
    let mut add = |value: &Value| {
        if let Some(port) = value.as_u64() {
            ports.push(port as u16);
        }
    };
    add(&state["balancer"]["port"]);
    add(&state["redis"]["port"]);
    add(&state["paysim"]["port"]);
    for node in state["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        add(&node["port"]);
    }
    for shard in state["shards"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        for member in shard["members"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            add(&member["port"]);
        }
    }
    add(&state["monitor"]["port"]);
    ports
}

/// Writes the cluster's state (atomically: a rename).
pub fn save(dir: &Path, state: &Value) -> anyhow::Result<()> {
    let tmp = dir.join(format!("{STATE_FILE}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(state)?)?;
    std::fs::rename(&tmp, dir.join(STATE_FILE))?;
    Ok(())
}

pub(crate) fn append_conf(data: &Path, lines: &str) -> anyhow::Result<()> {
    let path = data.join("postgresql.conf");
    let mut text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.push('\n');
    text.push_str(lines);
    std::fs::write(&path, text)?;
    Ok(())
}

pub(crate) fn psql(bin: &Path, port: u16, sql: &str) -> anyhow::Result<String> {
    let output = as_postgres(&bin.join("psql"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(["-XAtq", "-d", "postgres", "-c", sql])
        .output()?;
    if !output.status.success() {
        bail!("psql: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub(crate) async fn wait_for(
    max: Duration,
    what: &str,
    mut ready: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + max;
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("gave up waiting {}s for {what}", max.as_secs())
}

/// The status of `GET path` on 127.0.0.1:`port` (one request, HTTP/1.1), or `None`.
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 32];
    let n = stream.read(&mut head).ok()?;
    std::str::from_utf8(&head[..n])
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn read_pid(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Alive and not a zombie (a container's first process may never reap it).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// Whether any process of process group `group` is alive (not a zombie).
pub(crate) fn group_alive(group: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')').is_some_and(|(_, rest)| {
                    let fields: Vec<&str> = rest.split_whitespace().collect();
                    // state, ppid, pgrp
                    fields.first().is_some_and(|state| *state != "Z")
                        && fields.get(2).and_then(|pgrp| pgrp.parse::<u32>().ok()) == Some(group)
                })
            })
        })
}

/// Sends signal `name` to every process of process group `group`.
pub(crate) fn signal_group(group: u32, name: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg("--")
        .arg(format!("-{group}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn signal(pid: u32, name: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

pub(crate) fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(tool))
        .find(|path| path.exists())
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(20).collect();
    format!(
        "{}:\n{}",
        log.display(),
        lines.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haproxy_checks_every_node_on_readyz() {
        let config = haproxy_config(20_001, &[20_002, 20_003], Path::new("/x/haproxy.pid"));
        assert!(config.contains("bind 127.0.0.1:20001"));
        assert!(config.contains("server node-1 127.0.0.1:20002 check"));
        assert!(config.contains("server node-2 127.0.0.1:20003 check"));
        assert!(config.contains("option httpchk GET /readyz"));
        assert!(config.contains("timeout tunnel 1h"));
        assert!(!config.contains("cookie"), "no stickiness");
        assert!(config.contains("stats socket /x/admin.sock mode 600 level admin"));
    }

    #[test]
    fn ports_of_lists_every_part() {
        let state = json!({
            "balancer": {"port": 1}, "redis": {"port": 2},
            "nodes": [{"port": 3}, {"port": 4}],
            "shards": [{"members": [{"port": 5, "pid": 50}, {"port": 6, "pid": 60}]}],
            "monitor": {"port": 7, "pid": 70},
        });
        assert_eq!(ports_of(&state), vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(groups_of(&state), vec![50, 60, 70], "the monitor last");
    }
}
