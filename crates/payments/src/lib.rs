//! The payment provider seam. Checkout, the outbox relay and the payment reconciler talk to a
//! card processor only through [`PaymentProvider`]; this crate owns that trait, the plain
//! records that cross it ([`AuthorizeRequest`], [`ProviderPayment`], [`WebhookEvent`]) and
//! the two ways a call can go wrong ([`ProviderError`], [`WebhookError`]).
//!
//! Start reading here, then:
//! - [`stripe`]: [`StripeProvider`], the adapter for the Stripe PaymentIntents subset
//!   (manual capture, idempotency keys, signed webhooks).
//! - [`simulator`]: a Stripe-like HTTP server with test cards and fault injection
//!   (lost responses, slowness, 503s, duplicated and late webhooks), used by tests, the demo
//!   and `boxoffice paysim`.
//! - [`localstripe`]: starts localstripe (a fake Stripe others wrote) for tests, and
//!   [`counting`]: a proxy that counts what the adapter sent, in front of either.
//!
//! Architecture invariant: a card decline is an answer, not an error. [`ProviderError`] is
//! only returned when the provider did not give a usable answer, and
//! [`ProviderError::Unknown`] means the payment may or may not exist: the caller must settle
//! it by retrying with the same `operation_id` (the provider's idempotency key), by asking
//! ([`PaymentProvider::retrieve`]) or by webhook, never by assuming a failure.

use async_trait::async_trait;

pub mod counting;
pub mod localstripe;
pub mod simulator;
pub mod stripe;

pub use simulator::{Simulator, SimulatorConfig, SimulatorHandle};
pub use stripe::StripeProvider;

/// Largest gap, in seconds, between a webhook's signed timestamp and our clock before the
/// webhook is refused as a possible replay (Stripe's default tolerance).
pub const WEBHOOK_TOLERANCE_S: i64 = 300;

/// What a card processor must do for boxoffice.
#[async_trait]
pub trait PaymentProvider: Send + Sync + std::fmt::Debug + 'static {
    /// The provider's name as it appears in `/v1/payments/webhooks/{provider}` and in logs.
    fn name(&self) -> &'static str;

    /// Creates and confirms a manual-capture authorization. `operation_id` is the stable
    /// idempotency key: calling again with the same id returns the same payment.
    ///
    /// A declined card is `Ok` with [`ProviderStatus::Failed`] and a `decline_code`.
    async fn authorize(&self, request: &AuthorizeRequest)
    -> Result<ProviderPayment, ProviderError>;

    /// Captures an authorized payment. Capturing a captured payment answers it again.
    async fn capture(
        &self,
        operation_id: &str,
        provider_ref: &str,
    ) -> Result<ProviderPayment, ProviderError>;

    /// Releases an authorization that will never be captured.
    async fn void(
        &self,
        operation_id: &str,
        provider_ref: &str,
    ) -> Result<ProviderPayment, ProviderError>;

    /// Reads the payment's current state; the reconciler's way to settle an unknown outcome.
    async fn retrieve(&self, provider_ref: &str) -> Result<ProviderPayment, ProviderError>;

    /// Verifies a webhook (signature, timestamp tolerance) and parses it.
    fn verify_webhook(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        now_unix_s: i64,
    ) -> Result<WebhookEvent, WebhookError>;
}

/// One authorization to create. All fields are sent to the provider; `operation_id` and
/// `order_id` come back in the payment's metadata so a webhook can be tied to our records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// Our payment operation id, used as the provider's idempotency key.
    pub operation_id: String,
    pub order_id: String,
    /// Amount in minor units of `currency` (cents for USD).
    pub amount_minor: i64,
    /// ISO 4217 code, any case (sent lowercase).
    pub currency: String,
    /// The shopper's payment method, e.g. `pm_card_visa`.
    pub payment_method_token: String,
}

/// A payment as the provider sees it after a call or in a webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderPayment {
    /// The provider's id of the payment (a Stripe PaymentIntent id, `pi_...`).
    pub provider_ref: String,
    pub status: ProviderStatus,
    pub amount_minor: i64,
    /// ISO 4217 code, uppercase.
    pub currency: String,
    /// Our operation id, read back from the payment's metadata when present.
    pub operation_id: Option<String>,
    /// Why the card was declined, when it was (`generic_decline`, `insufficient_funds`, ...).
    pub decline_code: Option<String>,
    /// Where to send the shopper when `status` is [`ProviderStatus::RequiresAction`].
    pub next_action_url: Option<String>,
}

/// Where a payment stands at the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderStatus {
    /// The shopper must act (3-D Secure); the outcome arrives later by webhook.
    RequiresAction,
    /// Funds are held and can be captured (Stripe `requires_capture`).
    Authorized,
    /// Funds are taken (Stripe `succeeded`).
    Captured,
    /// The authorization was released (Stripe `canceled`).
    Voided,
    /// Declined, or the shopper failed the action (Stripe `requires_payment_method` after an
    /// error).
    Failed,
    /// The provider is still working on it; ask again later.
    Processing,
}

impl ProviderStatus {
    /// Whether the payment can still move without our asking (ask again or wait a webhook).
    pub fn is_pending(self) -> bool {
        matches!(self, Self::RequiresAction | Self::Processing)
    }
}

/// Why a provider call gave no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Timeout, connection lost after sending, response unreadable: the outcome is NOT known.
    /// Settle it by retrying with the same operation id or by retrieving the payment.
    #[error("payment outcome unknown: {0}")]
    Unknown(String),
    /// Nothing was done and asking again later may work: 5xx, 429, the connection refused
    /// before anything was sent, our API key or its permissions refused (401, 403: our
    /// misconfiguration, never the shopper's), or an answer that is not the provider's (a
    /// 4xx page from something in between).
    #[error("payment provider unavailable: {0}")]
    Unavailable(String),
    /// The provider refused this request for good: it answered a 4xx other than 401, 403,
    /// 409 and 429 with its own error object, and answers the same for the same idempotency
    /// key forever (a payment method it does not know, a malformed request, a decline that
    /// came without its payment, capturing a voided payment). For an authorization this is
    /// a failed payment, never an unknown one: the order is cancelled and its seats go back.
    #[error("payment provider rejected the request: {message}")]
    Rejected {
        /// The provider's reason: its error `code` (`resource_missing`, `card_declined`,
        /// ...), else its error `type`; what a failed order keeps as the payment's error.
        code: String,
        /// The status, code and message as the provider answered, for logs.
        message: String,
    },
}

/// A verified webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvent {
    /// The provider's event id (`evt_...`): the same id on every redelivery, so it is the
    /// deduplication key.
    pub event_id: String,
    /// The event type, e.g. `payment_intent.succeeded`.
    pub kind: String,
    /// The payment as it was when the event was created (webhooks arrive late and out of
    /// order: compare with what is stored, never apply blindly).
    pub payment: ProviderPayment,
    pub created_unix_s: i64,
}

/// Why a webhook was refused (answered 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook signature header missing")]
    MissingSignature,
    #[error("webhook signature does not match")]
    BadSignature,
    #[error("webhook timestamp outside the {WEBHOOK_TOLERANCE_S} s tolerance")]
    StaleTimestamp,
    #[error("webhook malformed: {0}")]
    Malformed(String),
}
