//! pg_auto_failover for `boxoffice cluster up` (issue 38): every shard is a formation of a
//! primary and a synchronous secondary, each run by its `pg_autoctl run` keeper, under one
//! monitor. The monitor decides failover, never this code: it promotes only a secondary it
//! knows has caught up, makes a primary that lost both the monitor and its secondary demote
//! itself, lets a primary whose secondary died commit alone (`wait_primary`), and rejoins a
//! former primary as the new secondary (`pg_rewind`). Nodes follow the writable host of each
//! shard's multi-host URL on their own (`boxoffice_store_postgres::hosts`), and every event
//! lease taken on the old primary is stale on the new one (`boxoffice_store::lease`), so
//! nothing here touches the shard's data at a failover.
//!
//! The timings are shortened for a cluster on one machine ([`MONITOR_SETTINGS`],
//! [`NETWORK_PARTITION_TIMEOUT_S`]); `docs/DEPLOY.md` gives them for real hosts. The one rule
//! they keep: a primary cut off from everything demotes itself
//! ([`NETWORK_PARTITION_TIMEOUT_S`]) before the monitor gives up waiting for it and promotes
//! its secondary (`pgautofailover.primary_demote_timeout`), so two primaries never take
//! writes at once.
//!
//! pg_autoctl keeps its own state under `DIR/pg_autoctl` (its XDG directories), and runs as
//! the `postgres` user when `boxoffice` runs as root.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::chaos::{as_postgres, run_command};

/// The monitor's health checks and timeouts on one machine (ms): a primary that stops
/// answering is unhealthy after ~4 s, and its secondary is promoted once the primary has had
/// [`NETWORK_PARTITION_TIMEOUT_S`] and a margin to demote itself. pg_auto_failover's own
/// defaults (5 s checks, 20 s unhealthy, 30 s demote) are for real networks.
pub const MONITOR_SETTINGS: &[(&str, &str)] = &[
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_timeout", "1000"),
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    ("pgautofailover.node_considered_unhealthy_timeout", "3000"),
    ("pgautofailover.primary_demote_timeout", "8000"),
];

/// How long a keeper's primary may be cut off from both the monitor and its secondary before
/// it demotes itself (s); less than the monitor's `primary_demote_timeout` (8 s).
pub const NETWORK_PARTITION_TIMEOUT_S: u32 = 5;

/// The settings every shard's PostgreSQL starts with (written before pg_autoctl takes the
/// data directory over; the secondary's base backup copies them): connections for 8 nodes'
/// pools, and logical decoding for `boxoffice shard move`.
pub const POSTGRES_SETTINGS: &str = "max_connections = 400\nshared_buffers = 128MB\n\
     wal_level = logical\nmax_wal_senders = 16\nmax_replication_slots = 16\n\
     max_logical_replication_workers = 8\nmax_worker_processes = 16\nwal_keep_size = '256MB'\n";

/// The states in which a formation's member takes writes.
pub const WRITABLE_STATES: &[&str] = &["single", "primary", "wait_primary"];

/// pg_autoctl, run as `postgres` with its state under one directory.
#[derive(Debug, Clone)]
pub struct Autoctl {
    pg_ctl: PathBuf,
    home: PathBuf,
}

/// One member of a formation as the monitor sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub port: u16,
    /// The state the member reported last (`primary`, `secondary`, `wait_primary`, …).
    pub current: String,
    /// The state the monitor assigned it.
    pub assigned: String,
    /// Whether the monitor's health check reaches it.
    pub healthy: bool,
}

impl Member {
    /// The member takes writes and the monitor agrees.
    pub fn is_primary(&self) -> bool {
        WRITABLE_STATES.contains(&self.current.as_str()) && self.current == self.assigned
    }

    /// The member runs as a primary now, whatever the monitor assigned it next.
    pub fn takes_writes(&self) -> bool {
        WRITABLE_STATES.contains(&self.current.as_str())
    }

    /// A secondary that streams and could be promoted.
    pub fn is_secondary(&self) -> bool {
        self.current == "secondary" && self.assigned == "secondary"
    }
}

impl Autoctl {
    /// `pg_bin` holds `pg_ctl`; pg_autoctl's state goes under `home`.
    pub fn new(pg_bin: &Path, home: &Path) -> anyhow::Result<Self> {
        if crate::local_cluster::which("pg_autoctl").is_none() {
            bail!(
                "pg_autoctl is not installed (Debian: apt-get install pg-auto-failover-cli postgresql-15-auto-failover)"
            );
        }
        std::fs::create_dir_all(home)?;
        Ok(Self {
            pg_ctl: pg_bin.join("pg_ctl"),
            home: home.to_path_buf(),
        })
    }

    fn command(&self) -> std::process::Command {
        let mut command = as_postgres(Path::new("pg_autoctl"));
        command
            .env("XDG_CONFIG_HOME", self.home.join("config"))
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("PG_CONFIG", self.pg_ctl.with_file_name("pg_config"))
            .stdin(Stdio::null());
        command
    }

    /// Creates the monitor's PostgreSQL at `data` on `port` and tunes its checks
    /// ([`MONITOR_SETTINGS`]) once it runs (see [`Autoctl::tune_monitor`]).
    pub fn create_monitor(&self, data: &Path, port: u16) -> anyhow::Result<()> {
        run_command(
            self.command()
                .args(["create", "monitor", "--pgctl"])
                .arg(&self.pg_ctl)
                .arg("--pgdata")
                .arg(data)
                .args(["--pgport", &port.to_string()])
                .args(["--hostname", "127.0.0.1", "--listen", "127.0.0.1"])
                .args(["--auth", "trust", "--no-ssl"]),
        )
        .context("pg_autoctl create monitor")
    }

    /// The monitor's connection string for the keepers.
    pub fn monitor_uri(port: u16) -> String {
        format!("postgres://autoctl_node@127.0.0.1:{port}/pg_auto_failover?sslmode=prefer")
    }

    /// Sets [`MONITOR_SETTINGS`] on the running monitor.
    pub fn tune_monitor(&self, pg_bin: &Path, port: u16) -> anyhow::Result<()> {
        for (name, value) in MONITOR_SETTINGS {
            crate::local_cluster::psql(
                pg_bin,
                port,
                &format!("ALTER SYSTEM SET {name} = {value}"),
            )?;
        }
        crate::local_cluster::psql(pg_bin, port, "SELECT pg_reload_conf()")?;
        Ok(())
    }

    /// A formation for one shard, its database `boxoffice`.
    pub fn create_formation(&self, monitor: &Path, formation: &str) -> anyhow::Result<()> {
        run_command(
            self.command()
                .args(["create", "formation", "--pgdata"])
                .arg(monitor)
                .args(["--formation", formation, "--kind", "pgsql"])
                .args(["--dbname", "boxoffice"]),
        )
        .with_context(|| format!("pg_autoctl create formation {formation}"))
    }

    /// Registers the PostgreSQL at `data` in `formation`: the first member is initdb'd here
    /// with [`POSTGRES_SETTINGS`] and becomes the primary; the next one is a base backup of
    /// it (pg_autoctl takes it) and becomes its synchronous secondary.
    pub fn create_member(
        &self,
        data: &Path,
        port: u16,
        formation: &str,
        name: &str,
        monitor_port: u16,
        first: bool,
    ) -> anyhow::Result<()> {
        if first {
            run_command(
                as_postgres(&self.pg_ctl.with_file_name("initdb"))
                    .arg("-D")
                    .arg(data)
                    .args(["-A", "trust", "-U", "postgres", "--no-sync"]),
            )?;
            crate::local_cluster::append_conf(data, POSTGRES_SETTINGS)?;
        }
        run_command(
            self.command()
                .args(["create", "postgres", "--pgctl"])
                .arg(&self.pg_ctl)
                .arg("--pgdata")
                .arg(data)
                .args(["--pgport", &port.to_string()])
                .args(["--hostname", "127.0.0.1", "--listen", "127.0.0.1"])
                .args(["--auth", "trust", "--no-ssl", "--username", "postgres"])
                .args(["--dbname", "boxoffice", "--formation", formation])
                .args([
                    "--name",
                    name,
                    "--monitor",
                    &Self::monitor_uri(monitor_port),
                ]),
        )
        .with_context(|| format!("pg_autoctl create postgres {name}"))?;
        // Demote itself when cut off from the monitor and the secondary, before the monitor
        // promotes the secondary.
        run_command(
            self.command()
                .args(["config", "set", "--pgdata"])
                .arg(data)
                .args([
                    "timeout.network_partition_timeout",
                    &NETWORK_PARTITION_TIMEOUT_S.to_string(),
                ]),
        )
        .context("pg_autoctl config set timeout.network_partition_timeout")
    }

    /// Starts `pg_autoctl run` for `data` (a monitor or a member) in a process group of its
    /// own, logging to `log`: the keeper and the PostgreSQL it runs stop together when the
    /// group is signalled. Its pid is the group's id.
    pub fn spawn_run(&self, data: &Path, log: &Path) -> anyhow::Result<u32> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let child = self
            .command()
            .args(["run", "--pgdata"])
            .arg(data)
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0)
            .spawn()
            .context("starting pg_autoctl run")?;
        Ok(child.id())
    }

    /// The formation's members as the monitor sees them.
    pub fn members(&self, monitor: &Path, formation: &str) -> anyhow::Result<Vec<Member>> {
        let output = self
            .command()
            .args(["show", "state", "--json", "--pgdata"])
            .arg(monitor)
            .args(["--formation", formation])
            .output()
            .context("pg_autoctl show state")?;
        if !output.status.success() {
            bail!(
                "pg_autoctl show state: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let members: Value = serde_json::from_slice(&output.stdout)
            .context("reading pg_autoctl show state --json")?;
        members
            .as_array()
            .context("pg_autoctl show state: not a list")?
            .iter()
            .map(|member| {
                Ok(Member {
                    name: member["nodename"].as_str().unwrap_or_default().to_owned(),
                    port: member["nodeport"]
                        .as_u64()
                        .and_then(|port| u16::try_from(port).ok())
                        .context("a member's port")?,
                    current: member["current_group_state"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    assigned: member["assigned_group_state"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    healthy: member["health"].as_i64() == Some(1),
                })
            })
            .collect()
    }

    /// The formation's multi-host URL for the nodes ([`node_url`]): they follow whichever
    /// host is the writable primary.
    pub fn uri(&self, monitor: &Path, formation: &str) -> anyhow::Result<String> {
        let output = self
            .command()
            .args(["show", "uri", "--pgdata"])
            .arg(monitor)
            .args(["--formation", formation])
            .output()
            .context("pg_autoctl show uri")?;
        if !output.status.success() {
            bail!(
                "pg_autoctl show uri: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let uri = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        node_url(&uri).with_context(|| format!("pg_autoctl show uri answered {uri:?}"))
    }

    /// `pg_autoctl perform failover`: the monitor promotes the formation's secondary once it
    /// has caught up and demotes the primary (waits up to `wait`).
    pub fn perform_failover(
        &self,
        monitor: &Path,
        formation: &str,
        wait: Duration,
    ) -> anyhow::Result<()> {
        run_command(
            self.command()
                .args(["perform", "failover", "--pgdata"])
                .arg(monitor)
                .args(["--formation", formation])
                .args(["--wait", &wait.as_secs().to_string()]),
        )
        .with_context(|| format!("pg_autoctl perform failover --formation {formation}"))
    }
}

/// The URL the nodes get for a formation: `pg_autoctl show uri`'s hosts and database, as
/// the user `postgres`, without its parameters (`target_session_attrs=read-write` is what
/// the nodes' pools do on their own, host by host; there is no TLS on one machine).
pub fn node_url(uri: &str) -> Option<String> {
    let (scheme, rest) = uri.split_once("://")?;
    let rest = rest.split('?').next()?;
    let (authority, database) = rest.split_once('/')?;
    let hosts = authority.rsplit('@').next()?;
    if hosts.is_empty() || database.is_empty() {
        return None;
    }
    Some(format!("{scheme}://postgres@{hosts}/{database}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_get_the_formations_hosts_as_postgres() {
        assert_eq!(
            node_url(
                "postgres://127.0.0.1:2001,127.0.0.1:2002/boxoffice?target_session_attrs=read-write&sslmode=prefer"
            )
            .as_deref(),
            Some("postgres://postgres@127.0.0.1:2001,127.0.0.1:2002/boxoffice")
        );
        assert_eq!(
            node_url("postgres://u@h:1/db").as_deref(),
            Some("postgres://postgres@h:1/db")
        );
        assert_eq!(node_url("nonsense"), None);
        assert_eq!(node_url("postgres://h:1/"), None);
    }

    #[test]
    fn a_primary_is_writable_and_agreed() {
        let member = |current: &str, assigned: &str| Member {
            name: "a".into(),
            port: 1,
            current: current.into(),
            assigned: assigned.into(),
            healthy: true,
        };
        assert!(member("primary", "primary").is_primary());
        assert!(member("wait_primary", "wait_primary").is_primary());
        assert!(!member("primary", "draining").is_primary());
        assert!(!member("secondary", "secondary").is_primary());
        assert!(member("secondary", "secondary").is_secondary());
        assert!(!member("catchingup", "secondary").is_secondary());
    }

    #[test]
    fn a_partitioned_primary_demotes_itself_before_its_secondary_is_promoted() {
        let demote_ms: u32 = MONITOR_SETTINGS
            .iter()
            .find(|(name, _)| *name == "pgautofailover.primary_demote_timeout")
            .and_then(|(_, ms)| ms.parse().ok())
            .unwrap();
        assert!(NETWORK_PARTITION_TIMEOUT_S * 1000 < demote_ms);
    }
}
