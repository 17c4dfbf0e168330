//! Opening the store a `--database-url` names: shared by the commands that touch a
//! store (`serve`, `migrate`, `check`, `demo`, the chaos runs).

use std::sync::Arc;

use anyhow::{Context, bail};
use boxoffice_store::Store;

use crate::shards;

/// Opens the store a URL names (on PostgreSQL a pool of `SERVE_POOL_CONNECTIONS_MAX`, opened
/// as they are needed), with its calls in flight bounded by the pool's size
/// ([`boxoffice_store::front::Front::bounded_for_pool`]: past the bound a call is refused as
/// busy at once).
/// PostgreSQL databases are created when missing. On PostgreSQL with shards in the directory
/// (`boxoffice shard add`), a pool per shard behind the one [`Front`].
///
/// [`Front`]: boxoffice_store::front::Front
pub(crate) async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_stores(url).await?.0)
}

/// [`open_store`], and the directory's places when the store has shards (the side stores of
/// `serve` route by the same ones).
pub(crate) async fn open_stores(
    url: &str,
) -> anyhow::Result<(Arc<dyn Store>, Option<Arc<boxoffice_store::shard::Places>>)> {
    use boxoffice_store::front::Front;
    if is_postgres(url) {
        let shards = shards::directory(url).await?;
        if shards.len() > 1 {
            let (sharded, places) = shards::open(
                &shards,
                boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
            )
            .await?;
            let connections =
                boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX * shards.len() as u32;
            return Ok((
                Arc::new(sharded.bounded_for_pool(connections)),
                Some(places),
            ));
        }
    }
    let (store, connections) = open_pool(url).await?;
    Ok((
        Arc::new(Front::new(store).bounded_for_pool(connections)),
        None,
    ))
}

pub(crate) fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// [`open_store`] without the bound, and the size of its pool.
pub(crate) async fn open_pool(url: &str) -> anyhow::Result<(Arc<dyn Store>, u32)> {
    if is_postgres(url) {
        boxoffice_store_postgres::PgStore::create_database_if_missing(url)
            .await
            .context("creating the PostgreSQL database")?;
        let store = boxoffice_store_postgres::PgStore::connect_with(
            url,
            boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
        )
        .await
        .context("connecting to PostgreSQL")?;
        Ok((
            Arc::new(store),
            boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
        ))
    } else if url.starts_with("sqlite:") {
        let store = boxoffice_store_sqlite::SqliteStore::connect(url)
            .await
            .context("opening SQLite")?;
        Ok((
            Arc::new(store),
            boxoffice_store_sqlite::READER_CONNECTIONS_MAX + 1,
        ))
    } else {
        bail!("unsupported database url {url:?}: use postgres://… or sqlite://…")
    }
}
