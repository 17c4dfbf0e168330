//! `boxoffice shard add|list|place|move`: the shard directory (`shards.rs` does the work).

use clap::Subcommand;

use crate::shards;

#[derive(Debug, Subcommand)]
pub(crate) enum ShardAction {
    /// Name a PostgreSQL database as a new shard (created and migrated when needed). Nodes
    /// connect to it when they next start.
    Add {
        /// The home database (the directory).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// 1-32 of a-z, 0-9 and '-' (`main` is the home shard).
        #[arg(long)]
        name: String,
        /// The shard's database, `postgres://…`.
        #[arg(long)]
        url: String,
    },
    /// The shards, the events placed on each, and the placement rule.
    List {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// How new events are placed: `least-events` (the default) or `pinned:NAME`.
    Place {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        #[arg(long)]
        rule: String,
    },
    /// Move an event's rows to another shard: its writes stop (the lease is fenced), the
    /// source shard's writes wait for the copy, then the directory names the new shard and
    /// the nodes follow within seconds. Safe to run again if it stopped.
    Move {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// The event's id.
        #[arg(long)]
        event: String,
        /// The shard to move it to (`main` is the home shard).
        #[arg(long)]
        to: String,
    },
}

impl ShardAction {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let said = match self {
            ShardAction::Add {
                database_url,
                name,
                url,
            } => shards::add(&database_url, &name, &url).await?,
            ShardAction::List { database_url } => shards::list(&database_url).await?,
            ShardAction::Place { database_url, rule } => {
                shards::place(&database_url, &rule).await?
            }
            ShardAction::Move {
                database_url,
                event,
                to,
            } => shards::move_event(&database_url, &event, &to).await?,
        };
        println!("{said}");
        Ok(())
    }
}
