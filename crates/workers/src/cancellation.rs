//! The cancellations' refunds job: for every cancelled event whose cancellation is not
//! finished, records the refunds of its paid orders a bounded number a second, and marks the
//! cancellation finished when every refund settled (`boxoffice_store::cancellation`).
//!
//! Correctness does not depend on it: it only records refunds, each under a key unique to
//! its order (an order is never refunded twice by a cancellation, whichever node or restart
//! runs the step), in steps that commit with their cursor (a crash between two steps loses
//! nothing and skips nothing; a step that did not commit is taken again). The money moves in
//! the relay, with the refund's id as the provider's idempotency key. Several nodes may run
//! the job at once: a step locks the cancellation's row, so they take turns.
//!
//! The rate is what the provider is asked: one refund recorded is one provider call (a
//! refund, or a void of an authorization), plus the relay's retries of lost answers. At the
//! default [`REFUNDS_PER_SECOND_DEFAULT`] a 50,000-order cancellation records its refunds in
//! about 8 minutes, and the on-sale of another event on the node keeps the relay's other
//! slots.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_store::cancellation::{CANCELLATION_STEP_MAX, CancellationStep};
use boxoffice_store::{Store, StoreResult};
use tokio::sync::Notify;

/// Refunds recorded per second per node, by default (`serve --cancellation-refunds-per-second`).
pub const REFUNDS_PER_SECOND_DEFAULT: u32 = 100;
/// The most a node may be configured to record a second.
pub const REFUNDS_PER_SECOND_MAX: u32 = 10_000;
/// Pause between two rounds (a round is one step per open cancellation).
pub const CANCELLATION_INTERVAL_MS: u64 = 1_000;

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CancellationReport {
    /// Open cancellations stepped.
    pub events: u32,
    /// Refunds recorded.
    pub recorded: u32,
    /// Cancellations finished (by this round or before it, seen by it).
    pub finished: u32,
}

/// The job and its poke handle.
#[derive(Debug, Clone)]
pub struct CancellationJob {
    store: Arc<dyn Store>,
    poke: Arc<Notify>,
    refunds_per_second: u32,
}

impl CancellationJob {
    /// A job recording at most `refunds_per_second` refunds a second (clamped to
    /// 1..=[`REFUNDS_PER_SECOND_MAX`]).
    pub fn new(store: Arc<dyn Store>, refunds_per_second: u32) -> Self {
        Self {
            store,
            poke: Arc::new(Notify::new()),
            refunds_per_second: refunds_per_second.clamp(1, REFUNDS_PER_SECOND_MAX),
        }
    }

    /// Wakes the job before its next round (a cancellation was just recorded).
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// One round: a step of every open cancellation, the round's budget
    /// (`refunds_per_second` × the interval) shared between them.
    pub async fn run_once(&self) -> StoreResult<CancellationReport> {
        let open = self.store.cancellations_open().await?;
        let mut report = CancellationReport::default();
        if open.is_empty() {
            return Ok(report);
        }
        let budget = u64::from(self.refunds_per_second) * CANCELLATION_INTERVAL_MS / 1_000;
        let share = budget / open.len() as u64;
        let limit = u32::try_from(share.clamp(1, u64::from(CANCELLATION_STEP_MAX)))
            .unwrap_or(CANCELLATION_STEP_MAX);
        for event_id in open {
            let CancellationStep { recorded, finished } =
                self.store.cancellation_step(&event_id, limit).await?;
            crate::crash::point("cancellation_step");
            report.events += 1;
            report.recorded += recorded;
            if finished {
                tracing::info!(%event_id, "cancellation finished: every refund settled");
                report.finished += 1;
            }
        }
        Ok(report)
    }

    /// Runs until the task is dropped.
    pub async fn run(self) {
        loop {
            match self.run_once().await {
                Ok(report) => {
                    metrics::counter!("boxoffice_cancellation_refunds_recorded_total")
                        .increment(u64::from(report.recorded));
                    if report.recorded > 0 {
                        tracing::debug!(?report, "cancellation refunds recorded");
                    }
                }
                Err(error) => {
                    metrics::counter!("boxoffice_cancellation_errors_total").increment(1);
                    tracing::warn!(%error, "cancellation step failed; retrying on the next round");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(CANCELLATION_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}
