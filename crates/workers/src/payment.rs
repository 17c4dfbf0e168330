//! Turning what the payment provider answered into a [`ProviderVerdict`] the store applies,
//! the provider's authorization call that checkout and the reconciler share, and where a
//! verdict is applied ([`Settler`]).

use boxoffice_store::OneShot as _;
use std::sync::Arc;

use boxoffice_payments::{
    AuthorizeRequest, PaymentProvider, ProviderError, ProviderPayment, ProviderStatus,
};
use boxoffice_store::checkout::{PaymentOperation, ProviderVerdict, Settled};
use boxoffice_store::{Store, StoreResult};

/// The verdict a provider's view of a payment implies. `Processing` is not an outcome yet:
/// it is recorded as unknown and asked again later.
pub fn verdict_of(payment: &ProviderPayment) -> ProviderVerdict {
    let provider_ref = payment.provider_ref.clone();
    match payment.status {
        ProviderStatus::Authorized => ProviderVerdict::Authorized { provider_ref },
        ProviderStatus::RequiresAction => ProviderVerdict::RequiresAction {
            provider_ref,
            next_action_url: payment.next_action_url.clone(),
        },
        ProviderStatus::Captured => ProviderVerdict::Captured { provider_ref },
        ProviderStatus::Voided => ProviderVerdict::Voided { provider_ref },
        ProviderStatus::Failed => ProviderVerdict::Failed {
            provider_ref: Some(provider_ref),
            reason: payment
                .decline_code
                .clone()
                .unwrap_or_else(|| "declined".into()),
        },
        ProviderStatus::Processing => ProviderVerdict::Unknown {
            reason: "the provider is still processing".into(),
        },
    }
}

/// A call that gave no answer is never a failure: the outcome is unknown until the
/// reconciler learns it.
pub fn verdict_of_error(error: &ProviderError) -> ProviderVerdict {
    ProviderVerdict::Unknown {
        reason: error.to_string(),
    }
}

/// Authorizes `operation` with the provider (outside any transaction; the operation id is
/// the provider's idempotency key) and returns its verdict: a lost answer is `Unknown`, never
/// a failure; a request the provider refused for good ([`ProviderError::Rejected`], the 4xx
/// rule of `boxoffice_payments::stripe`) is a failure; 401/403 (our key refused) is not:
/// nothing was tried, so the operation stays open for the reconciler.
pub async fn authorize(
    provider: &Arc<dyn PaymentProvider>,
    operation: &PaymentOperation,
) -> ProviderVerdict {
    let request = AuthorizeRequest {
        operation_id: operation.operation_id.clone(),
        order_id: operation.order_id.clone(),
        amount_minor: operation.amount_minor,
        currency: operation.currency.clone(),
        payment_method_token: operation.payment_method.clone(),
    };
    crate::crash::point("authorization_sent");
    let verdict = match provider.authorize(&request).await {
        Ok(payment) => verdict_of(&payment),
        // Refused for good (a payment method the provider does not know, a decline that came
        // without its payment, a malformed request): the provider answers the same for this
        // idempotency key every time, so asking again can never succeed. The payment failed:
        // the order is cancelled, its seats go back at once, the code is kept as its error.
        Err(ProviderError::Rejected { code, message }) => {
            tracing::warn!(operation_id = %operation.operation_id, %message, "authorization refused by the provider; the payment failed");
            ProviderVerdict::Failed {
                provider_ref: None,
                reason: code,
            }
        }
        Err(error) => {
            tracing::warn!(operation_id = %operation.operation_id, %error, "authorization outcome unknown");
            verdict_of_error(&error)
        }
    };
    crate::crash::point("authorization_returned");
    verdict
}

/// Where a verdict is applied. [`StoreSettler`], the store's own settlement, by default;
/// `serve` gives the reconciler one that sends a verdict that sells or cancels a pending
/// order to its event's writer, so the event's engine decides it with the event's other
/// commands.
#[async_trait::async_trait]
pub trait Settler: Send + Sync {
    async fn settle(
        &self,
        operation: &PaymentOperation,
        verdict: &ProviderVerdict,
    ) -> StoreResult<Option<Settled>>;

    /// Gives back the sale of a capture refused for good ([`Store::compensate_failed_capture`]);
    /// `serve` sends it to the event's writer. `false`: the order is not confirmed, a ticket
    /// of it was used at the door, or its operation moved meanwhile (the relay tries again).
    async fn compensate(&self, operation_id: &str, reason: &str) -> StoreResult<bool>;
}

/// The store's own settlement (one transaction, the rules of `boxoffice_domain::settlement`).
pub struct StoreSettler(pub Arc<dyn Store>);

impl std::fmt::Debug for StoreSettler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSettler").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Settler for StoreSettler {
    async fn settle(
        &self,
        operation: &PaymentOperation,
        verdict: &ProviderVerdict,
    ) -> StoreResult<Option<Settled>> {
        self.0
            .settle_payment(&operation.operation_id, verdict, None, None)
            .await
    }

    async fn compensate(&self, operation_id: &str, reason: &str) -> StoreResult<bool> {
        self.0.compensate_failed_capture(operation_id, reason).await
    }
}
