//! `boxoffice migrate`: the store's migrations, then exit.

use crate::stores::open_store;

#[derive(Debug, clap::Args)]
pub(crate) struct MigrateArgs {
    #[arg(long, env = "DATABASE_URL")]
    database_url: String,
}

impl MigrateArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self { database_url } = self;
        let store = open_store(&database_url).await?;
        store.migrate().await?;
        println!("migrations applied ({})", store.backend());
        Ok(())
    }
}
