//! Shards on PostgreSQL (issue 17): opening a store over every shard the directory names,
//! and `boxoffice shard add|list|place`. See `boxoffice_store::shard`.

use std::sync::Arc;

use anyhow::Context;
use boxoffice_store::Store;
use boxoffice_store::engine::EngineStore;
use boxoffice_store::front::Front;
use boxoffice_store::shard::{
    DirectoryStore, HOME_SHARD, PlacementRule, Places, ShardRecord, ShardedEngines,
};
use boxoffice_store_postgres::PgStore;
use boxoffice_store_postgres::moving::{self, PrintSteps};

/// The shards a home database's directory names, the home one first (as `main`, at `url`).
/// Creates and migrates the home database when needed.
pub async fn directory(url: &str) -> anyhow::Result<Vec<ShardRecord>> {
    let home = open_home(url).await?;
    let mut shards = vec![ShardRecord {
        name: HOME_SHARD.to_owned(),
        url: url.to_owned(),
    }];
    shards.extend(home.shards().await?);
    home.pool().close().await;
    Ok(shards)
}

async fn open_home(url: &str) -> anyhow::Result<PgStore> {
    PgStore::create_database_if_missing(url)
        .await
        .context("creating the PostgreSQL database")?;
    let home = PgStore::connect_with(url, 2)
        .await
        .context("connecting to PostgreSQL")?;
    home.migrate().await?;
    Ok(home)
}

async fn connect(shard: &ShardRecord, connections: u32) -> anyhow::Result<Arc<PgStore>> {
    PgStore::create_database_if_missing(&shard.url)
        .await
        .with_context(|| format!("creating shard {}'s database", shard.name))?;
    Ok(Arc::new(
        PgStore::connect_with(&shard.url, connections)
            .await
            .with_context(|| format!("connecting to shard {}", shard.name))?,
    ))
}

/// A store over every shard, each with a pool of `connections`, and the places that route
/// it (the directory read through the home shard's pool).
pub async fn open(
    shards: &[ShardRecord],
    connections: u32,
) -> anyhow::Result<(Front, Arc<Places>)> {
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    let mut home: Option<Arc<dyn DirectoryStore>> = None;
    for shard in shards {
        let store = connect(shard, connections).await?;
        if home.is_none() {
            home = Some(store.clone());
        }
        stores.push(store);
    }
    let places = Arc::new(Places::new(
        shards.iter().map(|s| s.name.clone()).collect(),
        home.context("no shards")?,
    ));
    Ok((Front::sharded(stores, places.clone()), places))
}

/// The workers' pools and the event writers' pools over every shard, routed by `places`.
pub async fn open_side(
    shards: &[ShardRecord],
    places: Arc<Places>,
) -> anyhow::Result<(Arc<dyn Store>, Arc<dyn EngineStore>)> {
    anyhow::ensure!(
        places.names().len() == shards.len(),
        "the shard directory changed while the node started: start it again"
    );
    let mut workers: Vec<Arc<dyn Store>> = Vec::new();
    let mut writers: Vec<Arc<dyn EngineStore>> = Vec::new();
    for shard in shards {
        workers.push(
            connect(
                shard,
                boxoffice_store_postgres::WORKERS_POOL_CONNECTIONS_MAX,
            )
            .await?,
        );
        // Lazily: their connections open on the writers' own thread, which drives them.
        writers.push(Arc::new(
            PgStore::connect_lazy_with(
                &shard.url,
                boxoffice_store_postgres::WRITER_POOL_CONNECTIONS_MAX,
            )
            .with_context(|| format!("the event writers' pool of shard {}", shard.name))?,
        ));
    }
    Ok((
        Arc::new(Front::sharded(workers, places.clone())),
        Arc::new(ShardedEngines::new(writers, places)),
    ))
}

/// `boxoffice shard add`: creates and migrates the shard's database, then names it in the
/// directory. Nodes connect to it when they start.
pub async fn add(home_url: &str, name: &str, url: &str) -> anyhow::Result<String> {
    boxoffice_store::shard::check_shard_name(name).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(
        name != HOME_SHARD,
        "{HOME_SHARD:?} is the home shard's name"
    );
    anyhow::ensure!(
        url.starts_with("postgres://") || url.starts_with("postgresql://"),
        "a shard is a PostgreSQL database: postgres://…"
    );
    let shard = ShardRecord {
        name: name.to_owned(),
        url: url.to_owned(),
    };
    let store = connect(&shard, 2).await?;
    store.migrate().await?;
    store.pool().close().await;
    let home = open_home(home_url).await?;
    home.add_shard(&shard).await?;
    home.pool().close().await;
    Ok(format!(
        "shard {name} added; restart the nodes so that each connects to it"
    ))
}

/// `boxoffice shard list`: the shards, how many events each was given, and the rule.
pub async fn list(home_url: &str) -> anyhow::Result<String> {
    let home = open_home(home_url).await?;
    let counts = home.placed_counts().await?;
    let rule = home.placement_rule().await?;
    let mut shards = vec![ShardRecord {
        name: HOME_SHARD.to_owned(),
        url: home_url.to_owned(),
    }];
    shards.extend(home.shards().await?);
    home.pool().close().await;
    let mut out = format!("placement {rule}\n");
    for shard in shards {
        let placed = counts
            .iter()
            .find(|(name, _)| *name == shard.name)
            .map_or(0, |(_, n)| *n);
        out.push_str(&format!(
            "{} {} events placed {placed}\n",
            shard.name,
            redact(&shard.url)
        ));
    }
    Ok(out.trim_end().to_owned())
}

/// `boxoffice shard place --rule RULE`.
pub async fn place(home_url: &str, rule: &str) -> anyhow::Result<String> {
    let rule = PlacementRule::parse(rule).map_err(anyhow::Error::msg)?;
    let home = open_home(home_url).await?;
    home.set_placement_rule(&rule).await?;
    home.pool().close().await;
    Ok(format!("new events are placed by {rule}"))
}

/// `boxoffice shard move --event ID --to NAME [--locked-copy]`: moves an event's rows to
/// another shard (see `boxoffice_store_postgres::moving` for the two ways, their steps and
/// what stopping between them leaves). Safe to run again after it stopped; prints each step
/// as it goes. Run to the shard the directory already names, it removes what a stopped move
/// left on the other shards.
pub async fn move_event(
    home_url: &str,
    event_id: &str,
    to: &str,
    locked_copy: bool,
) -> anyhow::Result<String> {
    let shards = directory(home_url).await?;
    let home = open_home(home_url).await?;
    let from = home
        .event_shard(event_id)
        .await?
        .unwrap_or_else(|| HOME_SHARD.to_owned());
    let shard = |name: &str| -> anyhow::Result<&ShardRecord> {
        shards
            .iter()
            .find(|s| s.name == name)
            .with_context(|| format!("no shard {name:?} in the directory (boxoffice shard list)"))
    };
    let (source, target) = (shard(&from)?, shard(to)?);
    let source_store = connect(source, 2).await?;
    let target_store = connect(target, 2).await?;
    let said = if from == to {
        let mut cleaned = Vec::new();
        for other in shards.iter().filter(|s| s.name != to) {
            let other_store = connect(other, 2).await?;
            let deleted =
                moving::clean_after_move(&other_store, &target_store, event_id, &mut PrintSteps)
                    .await?;
            let n: u64 = deleted.iter().map(|(_, n)| n).sum();
            if n > 0 {
                cleaned.push(format!("{n} rows left on {} deleted", other.name));
            }
            other_store.pool().close().await;
        }
        if cleaned.is_empty() {
            format!("event {event_id} is on shard {to} already")
        } else {
            format!(
                "event {event_id} is on shard {to} already; {}",
                cleaned.join(", ")
            )
        }
    } else if !source_store.has_event(event_id).await? {
        anyhow::ensure!(
            target_store.has_event(event_id).await?,
            "no event {event_id} on shard {from}, where the directory places it, nor on {to}"
        );
        // An earlier run moved the rows and stopped before the directory.
        home.move_event(event_id, to).await?;
        moving::clean_after_move(&source_store, &target_store, event_id, &mut PrintSteps).await?;
        format!("event {event_id} was on shard {to} already; the directory now says so")
    } else if locked_copy {
        let started = std::time::Instant::now();
        let epoch = source_store.fence_for_move(event_id).await?;
        println!("fenced: the event's lease on {from} is the mover's (epoch {epoch})");
        let moved = source_store.move_out(event_id, &target_store).await?;
        println!(
            "copied to {to} and deleted from {from} ({} ms with {from}'s tables locked against writes)",
            moved.locked_ms
        );
        home.move_event(event_id, to).await?;
        format!(
            "event {event_id} moved from {from} to {to} in {} ms ({}); nodes follow within {} s",
            started.elapsed().as_millis(),
            rows_said(moved.rows.iter().map(|(t, n)| (*t, *n as u64))),
            boxoffice_store::shard::PLACE_TTL.as_secs()
        )
    } else {
        let started = std::time::Instant::now();
        let moved = moving::move_by_replication(
            &home,
            event_id,
            moving::ShardRef {
                name: &from,
                url: &source.url,
                store: &source_store,
            },
            moving::ShardRef {
                name: to,
                url: &target.url,
                store: &target_store,
            },
            &mut PrintSteps,
        )
        .await?;
        format!(
            "event {event_id} moved from {from} to {to} in {} ms ({}); its writes stopped for {} ms \
             (cut-over {} ms), {from}'s other events' never; nodes follow within {} s",
            started.elapsed().as_millis(),
            rows_said(moved.rows.iter().copied()),
            moved.fenced_ms,
            moved.cut_over_ms,
            boxoffice_store::shard::PLACE_TTL.as_secs()
        )
    };
    for store in [&home, source_store.as_ref(), target_store.as_ref()] {
        store.pool().close().await;
    }
    Ok(said)
}

/// `table n, …` for the tables with rows.
fn rows_said(rows: impl Iterator<Item = (&'static str, u64)>) -> String {
    let rows: Vec<String> = rows
        .filter(|(_, n)| *n > 0)
        .map(|(table, n)| format!("{table} {n}"))
        .collect();
    rows.join(", ")
}

/// A URL without its password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_never_printed() {
        assert_eq!(
            redact("postgres://app:s3cret@db1:5432/boxoffice"),
            "postgres://app:***@db1:5432/boxoffice"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1:5432/b"),
            "postgres://postgres@127.0.0.1:5432/b"
        );
        assert_eq!(redact("postgres://h/b"), "postgres://h/b");
    }
}
