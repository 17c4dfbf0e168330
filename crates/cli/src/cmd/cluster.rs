//! `boxoffice cluster up|down|status|failover`: a cluster on this machine
//! (`local_cluster.rs` and `autofailover.rs` do the work).

use anyhow::Context;
use clap::Subcommand;

use crate::local_cluster;

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
    /// Each shard's PostgreSQL servers as the pg_auto_failover monitor sees them (JSON):
    /// which one is the primary, their states, their health.
    Status {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// Start a shard member's keeper again (after its machine died, or a chaos run killed
    /// it): it rejoins its formation, as the secondary when another member was promoted
    /// meanwhile (pg_rewind).
    Rejoin {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The member's name (`main-a`, `s1-b`, …; `cluster status` lists them).
        #[arg(long)]
        member: String,
    },
    /// Fail a shard over now (`pg_autoctl perform failover`): the monitor promotes its
    /// secondary once it has caught up, and the former primary rejoins as the secondary.
    /// Prints the shard's members afterwards.
    Failover {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The shard's name (`main`, `s1`, …).
        #[arg(long, default_value = "main")]
        shard: String,
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
            ClusterAction::Status { dir } => {
                let state = local_cluster::load(&dir)?;
                println!(
                    "{}",
                    serde_json::to_string_pretty(&local_cluster::shard_states(&state)?)?
                );
                Ok(())
            }
            ClusterAction::Rejoin { dir, member } => {
                let state = local_cluster::load(&dir)?;
                let index = state["shards"]
                    .as_array()
                    .and_then(|shards| {
                        shards.iter().position(|shard| {
                            shard["members"].as_array().is_some_and(|members| {
                                members.iter().any(|m| m["name"] == member.as_str())
                            })
                        })
                    })
                    .with_context(|| format!("no member {member:?} in this cluster"))?;
                let pid = local_cluster::restart_member(&dir, index, &member)?;
                println!("{member}: keeper started again (process group {pid})");
                Ok(())
            }
            ClusterAction::Failover { dir, shard } => {
                let state = local_cluster::load(&dir)?;
                let known = state["shards"]
                    .as_array()
                    .is_some_and(|shards| shards.iter().any(|s| s["name"] == shard.as_str()));
                if !known {
                    anyhow::bail!("no shard {shard:?} in this cluster");
                }
                local_cluster::autoctl(&state)?.perform_failover(
                    &local_cluster::monitor_data(&state)?,
                    &shard,
                    std::time::Duration::from_secs(60),
                )?;
                println!(
                    "{}",
                    serde_json::to_string_pretty(&local_cluster::shard_states(&state)?)?
                );
                Ok(())
            }
        }
    }
}
