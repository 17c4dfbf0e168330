//! `boxoffice check`: loads every event's inventory from a live store and runs the domain's
//! invariants on it, and the seat map's (its change rows agree with the seats). Prints one
//! line per violation and a summary.

use boxoffice_store::Store;

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
    let shards = crate::shards::directory(home_url).await?;
    let (sharded, places) = crate::shards::open(&shards, 4).await?;
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
    Ok(clean)
}
