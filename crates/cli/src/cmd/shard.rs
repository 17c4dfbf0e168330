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
    /// Move an event's rows to another shard by logical replication: the target copies the
    /// event's rows and streams their changes while it keeps selling; then only its writes
    /// stop (its lease fenced) until the target caught up and the directory names it; the
    /// nodes follow within seconds. The source shard's other events sell throughout. Needs
    /// `wal_level = logical` on the source (refused otherwise) and lets the target's server
    /// connect to the source's URL. Safe to run again if it stopped; run to the shard the
    /// event is on, it cleans what a stopped move left elsewhere.
    Move {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// The event's id.
        #[arg(long)]
        event: String,
        /// The shard to move it to (`main` is the home shard).
        #[arg(long)]
        to: String,
        /// Copy in one transaction instead (issue 17's way, no `wal_level = logical`
        /// needed): every write of the source shard waits for the copy (~3 s per 100,000
        /// rows).
        #[arg(long)]
        locked_copy: bool,
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
                locked_copy,
            } => shards::move_event(&database_url, &event, &to, locked_copy).await?,
        };
        println!("{said}");
        Ok(())
    }
}
