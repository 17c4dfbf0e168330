//! The store conformance suite (`boxoffice_store_sql::conformance`) on SQLite, in a
//! temporary database file removed afterwards.

use boxoffice_store::Store;
use boxoffice_store_sql::conformance;
use boxoffice_store_sqlite::SqliteStore;

#[tokio::test]
async fn sqlite_matches_the_model() {
    let path =
        std::env::temp_dir().join(format!("boxoffice-conformance-{}.db", uuid::Uuid::now_v7()));
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open");
    store.migrate().await.expect("migrate");
    for seed in [1, 7, 42] {
        conformance::matches_the_model(&store, seed, 120, |by| store.advance_clock(by)).await;
    }
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

#[tokio::test]
async fn sqlite_keeps_access_code_batches() {
    let path = std::env::temp_dir().join(format!("boxoffice-codes-{}.db", uuid::Uuid::now_v7()));
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open");
    store.migrate().await.expect("migrate");
    conformance::access_code_batches(&store).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}
