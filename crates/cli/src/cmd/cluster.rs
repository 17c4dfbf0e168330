//! `boxoffice cluster up|down|failover`: a cluster on this machine (`local_cluster.rs`,
//! `failover.rs` do the work).

use anyhow::Context;
use clap::Subcommand;

use crate::{failover, local_cluster};

#[derive(Debug, Subcommand)]
pub(crate) enum ClusterAction {
    /// Start it: prints `balancer http://HOST:PORT` and `admin-token TOKEN`, then returns
    /// (everything keeps running until `cluster down`).
    Up {
        /// Where the cluster's data, logs and state (`cluster.json`) go.
        #[arg(long)]
        dir: std::path::PathBuf,
        /// `boxoffice serve` nodes behind the balancer (1-8).
        #[arg(long, default_value_t = 2)]
        nodes: u32,
        /// PostgreSQL shards (1-4), each a primary and a synchronous standby; the first holds
        /// the shard directory.
        #[arg(long, default_value_t = 1)]
        shards: u32,
        /// PostgreSQL's `bin` directory (`initdb`, `pg_ctl`, `pg_basebackup`); found under
        /// /usr/lib/postgresql when unset.
        #[arg(long)]
        pg_bin: Option<std::path::PathBuf>,
        /// The nodes' JWT secret (a random one, kept in DIR/jwt-secret, when unset).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
    },
    /// Stop everything `cluster up` started in DIR and check that its ports are free.
    Down {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// Fail a shard over to its standby now: kill the old primary, promote the standby, fence
    /// the shard's event leases (prints the timeline as JSON), then build a new synchronous
    /// standby where the old primary was.
    Failover {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The shard's name (`main`, `s1`, …).
        #[arg(long, default_value = "main")]
        shard: String,
    },
    /// The failover watcher `up` starts: checks every shard's primary twice a second and
    /// fails a shard over after three failed checks in a row.
    #[command(hide = true)]
    Watch {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
}

impl ClusterAction {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            ClusterAction::Up {
                dir,
                nodes,
                shards,
                pg_bin,
                jwt_secret,
            } => {
                let state = local_cluster::up(&local_cluster::UpOptions {
                    dir,
                    nodes,
                    shards,
                    pg_bin,
                    boxoffice: std::env::current_exe().context("finding this binary")?,
                    jwt_secret,
                })
                .await?;
                println!(
                    "balancer {}",
                    state["balancer"]["url"].as_str().unwrap_or("?")
                );
                println!(
                    "admin-token {}",
                    state["adminToken"].as_str().unwrap_or("?")
                );
                println!(
                    "database-url {}",
                    state["shards"][0]["databaseUrl"].as_str().unwrap_or("?")
                );
                Ok(())
            }
            ClusterAction::Down { dir } => {
                println!("{}", local_cluster::down(&dir).await?);
                Ok(())
            }
            ClusterAction::Failover { dir, shard } => {
                println!("{}", failover::failover(&dir, &shard, None).await?);
                let ms = failover::rebuild_standby(&dir, &shard).await?;
                println!("a new synchronous standby streams ({ms} ms)");
                Ok(())
            }
            ClusterAction::Watch { dir } => failover::watch(&dir).await,
        }
    }
}
