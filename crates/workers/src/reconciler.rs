//! The payment reconciler: settles every payment operation whose outcome nobody recorded
//! (the process died mid-call, the response was lost, the shopper never finished 3-D
//! Secure), and voids authorizations left open on cancelled orders. No input, idempotent:
//! each look asks the provider (retry of the authorization with the same operation id, or a
//! retrieve) and applies the answer with the store's conditional transitions.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_domain::order::PaymentStatus;
use boxoffice_payments::PaymentProvider;
use boxoffice_store::{Store, StoreError};
use tokio::sync::Notify;

use crate::payment::{Settler, StoreSettler, authorize, verdict_of, verdict_of_error};

/// Operations looked at per round.
pub const RECONCILE_BATCH_MAX: u32 = 100;
/// Pause between rounds when nothing pokes the reconciler.
pub const RECONCILE_INTERVAL_MS: u64 = 1_000;
/// Operations looked at at once in a round (each look is a provider call).
pub const RECONCILE_CONCURRENCY: usize = 16;
/// Next look at an operation still waiting for the shopper or the provider.
pub const RECONCILE_PENDING_RECHECK_S: f64 = 5.0;

#[derive(Clone)]
pub struct PaymentReconciler {
    store: Arc<dyn Store>,
    provider: Arc<dyn PaymentProvider>,
    /// Where the verdicts it learns are applied.
    settler: Arc<dyn Settler>,
    poke: Arc<Notify>,
}

impl std::fmt::Debug for PaymentReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaymentReconciler").finish_non_exhaustive()
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub looked_at: u64,
    pub settled: u64,
}

impl PaymentReconciler {
    pub fn new(store: Arc<dyn Store>, provider: Arc<dyn PaymentProvider>) -> Self {
        Self {
            settler: Arc::new(StoreSettler(store.clone())),
            store,
            provider,
            poke: Arc::new(Notify::new()),
        }
    }

    /// Applies the verdicts it learns through `settler` instead of the store's own settlement.
    pub fn with_settler(mut self, settler: Arc<dyn Settler>) -> Self {
        self.settler = settler;
        self
    }

    pub fn poke(&self) {
        self.poke.notify_one();
    }

    pub async fn run_once(&self) -> Result<ReconcileReport, StoreError> {
        use futures_util::StreamExt;
        let due = self
            .store
            .due_payment_operations(RECONCILE_BATCH_MAX)
            .await?;
        let looked_at = due.len() as u64;
        // Several at once: each look is a provider call (hundreds of ms when the provider is
        // slow), and one after the other a round of 100 took over a minute while the orders
        // behind it waited (the cluster chaos run). A failed look no longer stops the round.
        let outcomes: Vec<Result<bool, StoreError>> = futures_util::stream::iter(due)
            .map(|operation| async move { self.look_at(&operation).await })
            .buffer_unordered(RECONCILE_CONCURRENCY)
            .collect()
            .await;
        let mut report = ReconcileReport {
            looked_at,
            settled: 0,
        };
        let mut first_error = None;
        for outcome in outcomes {
            match outcome {
                Ok(true) => report.settled += 1,
                Ok(false) => {}
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    /// Asks the provider about one operation and applies the answer; whether it settled.
    async fn look_at(
        &self,
        operation: &boxoffice_store::checkout::PaymentOperation,
    ) -> Result<bool, StoreError> {
        let settled = match (operation.status, operation.provider_ref.as_deref()) {
            // An authorization left open on a cancelled order: void it.
            (PaymentStatus::Authorized, Some(provider_ref)) => {
                let verdict = match self
                    .provider
                    .void(&operation.operation_id, provider_ref)
                    .await
                {
                    Ok(payment) => verdict_of(&payment),
                    Err(error) => verdict_of_error(&error),
                };
                self.settler.settle(operation, &verdict).await?
            }
            // We know the payment: ask where it stands.
            (_, Some(provider_ref)) => {
                let verdict = match self.provider.retrieve(provider_ref).await {
                    Ok(payment) => verdict_of(&payment),
                    Err(error) => verdict_of_error(&error),
                };
                self.settler.settle(operation, &verdict).await?
            }
            // We never heard back: the same authorization again (idempotent by id).
            (_, None) => {
                let verdict = authorize(&self.provider, operation).await;
                self.settler.settle(operation, &verdict).await?
            }
        };
        let still_open = settled.as_ref().is_none_or(|s| !s.changed);
        if still_open {
            let delay_s = match operation.status {
                PaymentStatus::RequiresAction => RECONCILE_PENDING_RECHECK_S,
                _ => f64::from(1u32 << operation.n_attempts.min(6)).min(60.0),
            };
            self.store
                .postpone_payment_operation(&operation.operation_id, delay_s, "not settled yet")
                .await?;
        }
        Ok(!still_open)
    }

    pub async fn run(self) {
        loop {
            match self.run_once().await {
                Ok(report) => metrics::counter!("boxoffice_reconciler_settled_total")
                    .increment(report.settled),
                Err(error) => tracing::warn!(%error, "payment reconciler round failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(RECONCILE_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}
