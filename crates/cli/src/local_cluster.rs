//! `boxoffice cluster up` / `cluster down` (issue 17, first step): a cluster on one machine
//! for a newcomer and for the tests, every part a real server started as its own process
//! on a free port below 32768:
//!
//! - `--shards` shards, each a PostgreSQL primary streaming to a **synchronous** standby
//!   (`synchronous_standby_names`, `synchronous_commit = on`: no commit is acknowledged
//!   before the standby has it on disk), both initdb'd under `DIR/shard-N`; the first is the
//!   home shard (the shard directory, `main`), the others are added to it as `s1`, `s2`, …
//!   (`boxoffice shard add`), so new events are placed on the shard with the fewest;
//! - a private Redis (nothing kept on disk) for the shared waiting rooms;
//! - `--nodes` `boxoffice serve` processes on the home shard (each connects to every shard
//!   the directory names) and that Redis, each with its node
//!   id and advertised address (the event leases decide which node writes an event; the
//!   others forward);
//! - HAProxy in front, round robin, each node health-checked on `/readyz`, no stickiness,
//!   long tunnels for SSE.
//!
//! `up` writes what it started to `DIR/cluster.json`, prints `balancer http://HOST:PORT` and
//! `admin-token TOKEN`, and returns; `down` stops everything listed there (nodes with
//! SIGTERM, then SIGKILL after 10 s), and checks that no port is left bound. The JWT secret
//! is `BOXOFFICE_JWT_SECRET` when set, otherwise a random one kept in `DIR/jwt-secret`.
//!
//! Not yet: failover, the chaos on-sale on the cluster (issue 17's other items).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::chaos::{as_postgres, find_pg_bin, free_fixed_port, run_command, running_as_root};

/// Most nodes `cluster up` starts.
pub const NODES_MAX: u32 = 8;
/// Most shards `cluster up` starts (each is two PostgreSQL servers).
pub const SHARDS_MAX: u32 = 4;
/// How long a part may take to start before `up` gives up.
const START_MAX: Duration = Duration::from_secs(60);
/// How long a node has to stop after SIGTERM before SIGKILL.
const STOP_MAX: Duration = Duration::from_secs(10);
pub(crate) const STANDBY_NAME: &str = "standby1";
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
    for tool in ["haproxy", "redis-server"] {
        if which(tool).is_none() {
            bail!("{tool} is not installed (Debian: apt-get install {tool})");
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

/// Starts shard `index`: a primary and its synchronous standby under `DIR/shard-INDEX`, and
/// its `boxoffice` database; its URL.
async fn start_shard(
    bin: &Path,
    dir: &Path,
    ports: &mut Ports,
    index: u32,
    state: &mut Value,
) -> anyhow::Result<String> {
    let shard = dir.join(format!("shard-{index}"));
    std::fs::create_dir_all(&shard)?;
    if running_as_root() {
        run_command(
            std::process::Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&shard),
        )?;
    }
    let primary_port = ports.take()?;
    let primary = shard.join("primary");
    run_command(
        as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&primary)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"]),
    )?;
    append_conf(
        &primary,
        &format!(
            "listen_addresses = '127.0.0.1'\nport = {primary_port}\nunix_socket_directories = '{}'\n\
             max_connections = 400\nshared_buffers = 128MB\nfsync = on\nsynchronous_commit = on\n\
             wal_level = replica\nmax_wal_senders = 5\nwal_keep_size = '256MB'\nhot_standby = on\n\
             synchronous_standby_names = '{STANDBY_NAME}'\n",
            shard.display()
        ),
    )?;
    let at = index as usize;
    state["shards"]
        .as_array_mut()
        .context("shards")?
        .push(json!({
            "name": shard_name(at),
            "primary": {"data": primary.display().to_string(), "port": primary_port},
        }));
    save(dir, state)?;
    pg_ctl(bin, &primary, "start")?;
    let standby_port = ports.take()?;
    let standby = shard.join("standby");
    run_command(
        as_postgres(&bin.join("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &primary_port.to_string()])
            .args(["-U", "postgres", "-X", "stream", "-R", "-D"])
            .arg(&standby),
    )?;
    append_conf(
        &standby,
        &format!("port = {standby_port}\ncluster_name = '{STANDBY_NAME}'\n"),
    )?;
    state["shards"][at]["standby"] =
        json!({"data": standby.display().to_string(), "port": standby_port});
    save(dir, state)?;
    pg_ctl(bin, &standby, "start")?;
    wait_for(START_MAX, "the standby to stream synchronously", || {
        psql(
            bin,
            primary_port,
            "SELECT sync_state FROM pg_stat_replication",
        )
        .is_ok_and(|out| out.trim() == "sync")
    })
    .await?;
    run_command(
        as_postgres(&bin.join("createdb"))
            .args(["-h", "127.0.0.1", "-p", &primary_port.to_string()])
            .args(["-U", "postgres", "boxoffice"]),
    )?;
    // Both hosts: the nodes follow whichever is the writable primary (a failover).
    let database_url =
        format!("postgres://postgres@127.0.0.1:{primary_port},127.0.0.1:{standby_port}/boxoffice");
    state["shards"][at]["databaseUrl"] = json!(database_url);
    save(dir, state)?;
    Ok(database_url)
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

    // The shards, each a primary and its synchronous standby; the first is the home shard
    // (the directory), the others are added to its directory as s1, s2, ...
    state["shards"] = json!([]);
    let mut shard_urls = Vec::new();
    for index in 0..options.shards {
        shard_urls.push(start_shard(&bin, dir, &mut ports, index, state).await?);
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

    // The failover watcher: checks every shard's primary, promotes its standby when it fails.
    let log = std::fs::File::create(dir.join("watch.log"))?;
    let watcher = std::process::Command::new(&options.boxoffice)
        .args(["cluster", "watch", "--dir"])
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("starting the failover watcher")?;
    state["watcher"] =
        json!({"pid": watcher.id(), "log": dir.join("watch.log").display().to_string()});
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
    // The watcher first, so that it never takes the stopping primaries for dead ones; then
    // the state again (a failover it made moved the roles).
    stop_watcher(&load(dir)?);
    let state = load(dir)?;
    stop_all(&state);
    let ports = ports_of(&state);
    let deadline = Instant::now() + STOP_MAX;
    let mut bound: Vec<u16> = ports.clone();
    while !bound.is_empty() && Instant::now() < deadline {
        bound.retain(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_err());
        if !bound.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    if !bound.is_empty() {
        bail!("stopped the cluster, but ports {bound:?} are still bound");
    }
    std::fs::remove_file(&path)?;
    Ok(format!(
        "stopped {} node(s), HAProxy, the payment simulator, Redis, the watcher and every shard's PostgreSQL; ports {ports:?} free",
        state["nodes"].as_array().map_or(0, Vec::len)
    ))
}

/// Stops the failover watcher `state` names, if it runs.
fn stop_watcher(state: &Value) {
    if let Some(pid) = state["watcher"]["pid"].as_u64().map(|p| p as u32) {
        signal(pid, "TERM");
        let deadline = Instant::now() + STOP_MAX;
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if alive(pid) {
            signal(pid, "KILL");
        }
    }
}

/// Stops whatever `state` lists; never fails (each part is tried).
fn stop_all(state: &Value) {
    stop_watcher(state);
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
    let bin = find_pg_bin().ok();
    for shard in state["shards"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        for role in ["standby", "primary", "former"] {
            if let (Some(bin), Some(data)) = (&bin, shard[role]["data"].as_str())
                && Path::new(data).join("postmaster.pid").exists()
            {
                let _ = pg_ctl(bin, Path::new(data), "stop");
            }
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
        add(&shard["primary"]["port"]);
        add(&shard["standby"]["port"]);
        add(&shard["former"]["port"]);
    }
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

pub(crate) fn pg_ctl(bin: &Path, data: &Path, action: &str) -> anyhow::Result<()> {
    let mut command = as_postgres(&bin.join("pg_ctl"));
    command
        .arg("-D")
        .arg(data)
        .arg("-l")
        .arg(data.join("server.log"))
        .arg("-w");
    if action == "stop" {
        command.args(["-m", "fast"]);
    }
    run_command(command.arg(action))
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

fn signal(pid: u32, name: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn which(tool: &str) -> Option<PathBuf> {
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
            "shards": [{"primary": {"port": 5}, "standby": {"port": 6}}],
        });
        assert_eq!(ports_of(&state), vec![1, 2, 3, 4, 5, 6]);
    }
}
