//! `boxoffice hello`: a plain axum hello-world, the baseline of bench/waitroom.sh.

use std::net::SocketAddr;

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub(crate) struct HelloArgs {
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
}

impl HelloArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self { listen } = self;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        println!("listening on http://{}", listener.local_addr()?);
        boxoffice_load::hello::serve_hello(listener).await?;
        Ok(())
    }
}
