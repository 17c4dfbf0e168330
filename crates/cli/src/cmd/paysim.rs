//! `boxoffice paysim`: the payment provider simulator on its own.

use std::net::SocketAddr;

#[derive(Debug, clap::Args)]
pub(crate) struct PaysimArgs {
    #[arg(long, default_value = "127.0.0.1:12111")]
    listen: SocketAddr,
    /// Where to POST signed webhooks, e.g. http://127.0.0.1:8080/v1/payments/webhooks/stripe
    #[arg(long)]
    webhook_url: Option<String>,
    /// Seed of every random choice (latency, webhook duplicates and delays).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl PaysimArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            listen,
            webhook_url,
            seed,
        } = self;
        let config = boxoffice_payments::simulator::SimulatorConfig {
            seed,
            webhook_url,
            ..Default::default()
        };
        let listener = tokio::net::TcpListener::bind(listen).await?;
        println!("payment simulator on http://{}", listener.local_addr()?);
        boxoffice_payments::simulator::serve(config, listener).await?;
        Ok(())
    }
}
