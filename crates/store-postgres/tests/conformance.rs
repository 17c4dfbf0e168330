//! The store conformance suite (`boxoffice_store_sql::conformance`) on PostgreSQL, in a
//! database of its own at `BOXOFFICE_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432`),
//! dropped afterwards.

use boxoffice_store::Store;
use boxoffice_store_postgres::PgStore;
use boxoffice_store_sql::conformance;

fn base_url() -> String {
    std::env::var("BOXOFFICE_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

async fn with_store<F, Fut>(test: F)
where
    F: FnOnce(PgStore) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let name = format!("boxoffice_conformance_{}", uuid::Uuid::now_v7().simple());
    let url = format!("{}/{name}", base_url());
    PgStore::create_database_if_missing(&url)
        .await
        .expect("create the test database");
    let store = PgStore::connect(&url).await.expect("connect");
    store.migrate().await.expect("migrate");
    test(store.clone()).await;
    store.pool().close().await;
    let admin = PgStore::connect(&format!("{}/postgres", base_url()))
        .await
        .expect("connect to the postgres database");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(admin.pool())
    .await
    .expect("drop the test database");
}

#[tokio::test]
async fn postgres_matches_the_model() {
    with_store(|store| async move {
        for seed in [1, 7, 42] {
            conformance::matches_the_model(&store, seed, 120, |by| store.advance_clock(by)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn postgres_keeps_access_code_batches() {
    with_store(|store| async move {
        conformance::access_code_batches(&store).await;
    })
    .await;
}
