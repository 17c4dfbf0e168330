//! The exchange settler: finishes exchanges across shards (DESIGN §7) on their old event's
//! shard. The request that started one does its steps itself; the settler does what is left
//! when a difference is paid later (the target's shard completes the exchange, the old
//! tickets are swapped out here), when the new hold runs out (the marks are taken back), and
//! when the request died between the steps (the target's side is aborted, the marks taken
//! back). Every step is conditional, so two nodes' settlers, or a settler and the request,
//! never do one twice (see [`boxoffice_store::exchange::settle_out`]).

use std::sync::Arc;
use std::time::Duration;

use boxoffice_store::Store;
use boxoffice_store::exchange::settle_open_exchanges_out;

/// An open exchange across shards is looked at once it has been untouched this long.
pub const EXCHANGE_LOOK_AFTER_S: f64 = 2.0;
/// An exchange whose target side never came is aborted this long after its mark: longer than
/// a request waits for the target event's writer.
pub const EXCHANGE_ABORT_AFTER_S: f64 = 30.0;
/// Exchanges looked at per round.
pub const EXCHANGE_SETTLE_MAX: u32 = 100;
/// Pause between rounds.
pub const EXCHANGE_SETTLE_INTERVAL_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub struct ExchangeSettler {
    store: Arc<dyn Store>,
}

impl ExchangeSettler {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self { store }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        loop {
            match settle_open_exchanges_out(
                self.store.as_ref(),
                EXCHANGE_LOOK_AFTER_S,
                EXCHANGE_ABORT_AFTER_S,
                EXCHANGE_SETTLE_MAX,
            )
            .await
            {
                Ok(round) => {
                    metrics::counter!("boxoffice_exchanges_settled_total", "as" => "completed")
                        .increment(u64::from(round.completed));
                    metrics::counter!("boxoffice_exchanges_settled_total", "as" => "ended")
                        .increment(u64::from(round.ended));
                    if round.looked > 0 {
                        tracing::debug!(?round, "exchanges across shards looked at");
                    }
                }
                Err(error) => {
                    metrics::counter!("boxoffice_exchange_settler_errors_total").increment(1);
                    tracing::warn!(%error, "exchange settler round failed; retrying");
                }
            }
            tokio::time::sleep(Duration::from_millis(EXCHANGE_SETTLE_INTERVAL_MS)).await;
        }
    }
}
