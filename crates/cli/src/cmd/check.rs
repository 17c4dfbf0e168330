//! `boxoffice check`: loads every event's inventory from a live store and runs the domain's
//! invariants on it, and the seat map's (its change rows agree with the seats). Prints one
//! line per violation and a summary.

use boxoffice_store::Store;

use crate::shards;
use crate::stores::{is_postgres, open_store};

/// Returns whether every event is clean.
pub async fn run(store: &dyn Store) -> anyhow::Result<bool> {
    let event_ids = store.list_event_ids().await?;
    let mut n_violations = 0usize;
    let mut n_seats = 0usize;
    let mut n_holds = 0usize;
    for event_id in &event_ids {
        let Some(inventory) = store.load_inventory(event_id).await? else {
            continue;
        };
        n_seats += inventory.seats.len();
        n_holds += inventory.holds.len();
        for violation in inventory.invariants() {
            n_violations += 1;
            println!("VIOLATION event {event_id}: {violation}");
        }
        for violation in boxoffice_store::seatmap::violations(store, event_id).await? {
            n_violations += 1;
            println!("VIOLATION event {event_id}: {violation}");
        }
        // Comps come only from allocations (issue 40).
        for violation in boxoffice_store::allocation::violations(store, event_id).await? {
            n_violations += 1;
            println!("VIOLATION event {event_id}: {violation}");
        }
    }
    println!(
        "checked {} events, {n_seats} seats, {n_holds} holds ({}): {}",
        event_ids.len(),
        store.backend(),
        if n_violations == 0 {
            "all invariants hold".to_owned()
        } else {
            format!("{n_violations} violations")
        }
    );
    Ok(n_violations == 0)
}

/// [`run`] on every shard the directory of `home_url` names, and the directory's own check:
/// each event is on the shard the directory places it on, and on no other.
pub async fn run_shards(home_url: &str) -> anyhow::Result<bool> {
    let shards = shards::directory(home_url).await?;
    let (sharded, places) = shards::open(&shards, 4).await?;
    let mut clean = true;
    for (index, (shard, store)) in shards.iter().zip(sharded.shards()).enumerate() {
        println!("shard {}:", shard.name);
        clean &= run(store.as_ref()).await?;
        for event_id in store.list_event_ids().await? {
            let placed = places.event(&event_id).await?;
            if placed != index {
                clean = false;
                println!(
                    "VIOLATION event {event_id}: on shard {} but the directory places it on {}",
                    shard.name,
                    places.names()[placed]
                );
            }
        }
    }
    clean &= check_exchange_legs(&shards).await?;
    Ok(clean)
}

/// An exchange across shards is open on its old event's shard this long at most before check
/// calls it stuck (the settler looks at it every second or two).
const EXCHANGE_SETTLED_WITHIN_S: i64 = 120;

/// The two sides of every exchange across shards agree
/// ([`boxoffice_store::exchange::leg_violations`]).
async fn check_exchange_legs(
    shards: &[boxoffice_store::shard::ShardRecord],
) -> anyhow::Result<bool> {
    use boxoffice_store::Store as _;
    let mut outs = Vec::new();
    let mut targets = std::collections::BTreeMap::new();
    let mut now = None;
    for shard in shards {
        let store = boxoffice_store_postgres::PgStore::connect_with(&shard.url, 2).await?;
        now.get_or_insert(store.now().await?);
        for row in store.exchange_legs().await? {
            if row.leg == "OUT" {
                outs.push(row);
            } else {
                targets.insert(row.exchange_id.clone(), row);
            }
        }
        store.pool().close().await;
    }
    let settled_by = now.unwrap_or(time::OffsetDateTime::now_utc())
        - time::Duration::seconds(EXCHANGE_SETTLED_WITHIN_S);
    let (violations, open) = boxoffice_store::exchange::leg_violations(&outs, &targets, settled_by);
    for violation in &violations {
        println!("VIOLATION {violation}");
    }
    println!(
        "checked {} exchanges across shards ({open} open): {}",
        outs.len(),
        if violations.is_empty() {
            "both sides agree".to_owned()
        } else {
            format!("{} violations", violations.len())
        }
    );
    Ok(violations.is_empty())
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

impl CheckArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self { database_url } = self;
        let clean =
            if is_postgres(&database_url) && shards::directory(&database_url).await?.len() > 1 {
                run_shards(&database_url).await?
            } else {
                let store = open_store(&database_url).await?;
                run(store.as_ref()).await?
            };
        if !clean {
            std::process::exit(1);
        }
        Ok(())
    }
}
