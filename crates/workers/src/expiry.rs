//! The expiry sweeper: turns holds past their deadline into `EXPIRED` and their seats and
//! tier units back into stock.
//!
//! Correctness never depends on it running on time: a new hold may take a seat whose hold has
//! expired even if nobody released it. The sweeper only keeps counts and the seat map tidy.
//! Every update it makes is conditioned on hold id, status and deadline (see
//! [`boxoffice_store::Store::expire_holds`]), so a late or repeated sweep finds nothing to do.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_store::{Store, StoreResult, SweepReport};
use tokio::sync::Notify;

/// Holds expired per store transaction.
pub const SWEEP_HOLDS_MAX: u32 = 500;
/// A `HELD` hold is swept this long after its deadline: its event's writer, when one has the
/// event loaded, ends it at the deadline itself; the sweeper tidies the rest (events no
/// writer has loaded, a writer that died).
pub const HELD_SWEEP_GRACE_MS: u32 = 2_000;
/// Pause between sweeps when nothing pokes the sweeper.
pub const SWEEP_INTERVAL_MS: u64 = 1_000;
/// Idempotency records are kept this long (the contract promises at least 24 hours).
pub const IDEMPOTENCY_RETENTION_S: u32 = 48 * 3600;
/// Sweeps between two purges of old idempotency records.
const SWEEPS_PER_PURGE: u64 = 600;

/// The sweeper and its poke handle.
#[derive(Debug, Clone)]
pub struct ExpirySweeper {
    store: Arc<dyn Store>,
    poke: Arc<Notify>,
}

impl ExpirySweeper {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
            poke: Arc::new(Notify::new()),
        }
    }

    /// Wakes the sweeper before its next tick.
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Expires every due hold, in transactions of [`SWEEP_HOLDS_MAX`].
    pub async fn run_once(&self) -> StoreResult<SweepReport> {
        let mut total = SweepReport::default();
        loop {
            let report = self
                .store
                .expire_due_holds(SWEEP_HOLDS_MAX, HELD_SWEEP_GRACE_MS)
                .await?;
            total.holds_expired += report.holds_expired;
            total.seats_freed += report.seats_freed;
            total.tier_units_returned += report.tier_units_returned;
            if report.holds_expired < u64::from(SWEEP_HOLDS_MAX) {
                return Ok(total);
            }
        }
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        let mut n_sweeps: u64 = 0;
        loop {
            match self.run_once().await {
                Ok(report) => {
                    metrics::counter!("boxoffice_sweeper_holds_expired_total")
                        .increment(report.holds_expired);
                    metrics::counter!("boxoffice_sweeper_seats_freed_total")
                        .increment(report.seats_freed);
                    if report.holds_expired > 0 {
                        tracing::debug!(?report, "expired holds");
                    }
                }
                Err(error) => {
                    metrics::counter!("boxoffice_sweeper_errors_total").increment(1);
                    tracing::warn!(%error, "expiry sweep failed; retrying on the next tick");
                }
            }
            n_sweeps += 1;
            if n_sweeps.is_multiple_of(SWEEPS_PER_PURGE) {
                match self.store.purge_idempotency(IDEMPOTENCY_RETENTION_S).await {
                    Ok(n) => tracing::debug!(n, "purged old idempotency records"),
                    Err(error) => tracing::warn!(%error, "idempotency purge failed"),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(SWEEP_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}
