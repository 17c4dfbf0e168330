//! The payment provider seam. Checkout, the outbox relay and the payment reconciler talk to a
//! card processor only through [`PaymentProvider`]; this crate owns that trait, the plain
//! records that cross it ([`AuthorizeRequest`], [`ProviderPayment`], [`WebhookEvent`]) and
//! the two ways a call can go wrong ([`ProviderError`], [`WebhookError`]), and the refund
//! records ([`RefundRequest`], [`ProviderRefund`]).
//!
//! Start reading here, then:
//! - [`stripe`]: [`StripeProvider`], the adapter for the Stripe PaymentIntents subset
//!   (manual capture, idempotency keys, signed webhooks) and Refunds.
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
//!
//! ## Refunds
//!
//! [`PaymentProvider::refund`] gives back money of a **captured** payment, in full or in
//! part, several times up to what was captured ([`RefundRequest`] → [`ProviderRefund`]). The
//! caller's rule: an authorization not yet captured is voided ([`PaymentProvider::void`]),
//! never refunded; a provider refuses to refund it.
//!
//! A refund's outcome is one of three, with the same error semantics as a capture:
//! - **known**: `Ok` with a [`RefundStatus`]. `Succeeded` and `Pending` mean the provider
//!   took it (a pending one settles later: ask [`PaymentProvider::retrieve_refund`]).
//!   `Failed` and `Canceled` mean the money did NOT go back and is still owed: the caller
//!   records the refund `FAILED` and shows it to the operator, never drops it. Stripe may
//!   turn a `Succeeded` card refund into `Failed` days later (its `pm_card_refundFail`), so
//!   `Succeeded` is the provider's word at the time, not a promise.
//! - **unknown** ([`ProviderError::Unknown`]): the refund may or may not exist. It is settled
//!   as a capture is: retry [`PaymentProvider::refund`] with the same request (the
//!   `refund_id` is the idempotency key, so a retry answers the same refund and never makes a
//!   second one), or look it up by our id with [`PaymentProvider::find_refund`] (the way to
//!   settle it once the provider may have forgotten the key: Stripe keeps keys at least 24
//!   hours). Never assume it failed.
//! - **refused** ([`ProviderError::Rejected`]): refused for good (more than what is left of
//!   the captured amount, a payment not captured, a payment the provider does not know). No
//!   money moved and asking again gives the same answer: the refund is `FAILED`, shown to the
//!   operator. [`ProviderError::Unavailable`] means nothing was done: ask again later.

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

    /// Gives back `request.amount_minor` of a captured payment. `request.refund_id` is the
    /// idempotency key: calling again with the same request answers the same refund, never a
    /// second one. See the crate docs ("Refunds") for what each outcome means; an
    /// authorization not yet captured must be voided instead.
    async fn refund(&self, request: &RefundRequest) -> Result<ProviderRefund, ProviderError>;

    /// Reads a refund's current state by the provider's id (`re_...`).
    async fn retrieve_refund(
        &self,
        provider_refund_ref: &str,
    ) -> Result<ProviderRefund, ProviderError>;

    /// Finds the refund of payment `provider_ref` made for our `refund_id` (read back from
    /// the refund's metadata), `None` when the provider has none: the way to settle an
    /// unknown refund whose provider id was never received. Only `Ok(None)` proves there is
    /// no refund to wait for.
    async fn find_refund(
        &self,
        provider_ref: &str,
        refund_id: &str,
    ) -> Result<Option<ProviderRefund>, ProviderError>;

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
    /// Settle it by retrying with the same operation id (refund id) or by retrieving the
    /// payment (finding the refund).
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
    /// For a refund (more than is left captured: `amount_too_large`,
    /// `charge_already_refunded`; a payment not captured) no money moved and the refund is
    /// `FAILED`, shown to the operator.
    #[error("payment provider rejected the request: {message}")]
    Rejected {
        /// The provider's reason: its error `code` (`resource_missing`, `card_declined`,
        /// ...), else its error `type`; what a failed order keeps as the payment's error.
        code: String,
        /// The status, code and message as the provider answered, for logs.
        message: String,
    },
}

/// One refund to make. `refund_id` and `order_id` are stored in the refund's metadata so it
/// can be found again by our id ([`PaymentProvider::find_refund`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRequest {
    /// Our refund id, used as the provider's idempotency key (it must never equal another
    /// request's key, e.g. a payment's operation id).
    pub refund_id: String,
    pub order_id: String,
    /// The payment to refund: [`ProviderPayment::provider_ref`] (`pi_...`).
    pub provider_ref: String,
    /// Amount in minor units, at least 1 and at most what is left of the captured amount
    /// (the provider refuses more).
    pub amount_minor: i64,
    /// ISO 4217 code of the payment, any case. Not sent (a refund is always in the payment's
    /// currency); the answer's [`ProviderRefund::currency`] is the provider's word.
    pub currency: String,
    /// Sent as Stripe's `reason` when present.
    pub reason: Option<RefundReason>,
}

/// Why the money goes back, as the provider records it. Stripe's third reason,
/// `fraudulent`, is left out on purpose: it also blocks the card at Stripe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefundReason {
    /// The fan asked (Stripe `requested_by_customer`).
    RequestedByCustomer,
    /// The fan paid twice (Stripe `duplicate`).
    Duplicate,
}

impl RefundReason {
    /// Stripe's name of the reason.
    pub fn as_stripe(self) -> &'static str {
        match self {
            Self::RequestedByCustomer => "requested_by_customer",
            Self::Duplicate => "duplicate",
        }
    }
}

/// A refund as the provider sees it after a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderRefund {
    /// The provider's id of the refund (a Stripe Refund id, `re_...`).
    pub provider_refund_ref: String,
    /// The payment refunded (`pi_...`), when the provider names it.
    pub provider_ref: Option<String>,
    /// Our refund id, read back from the refund's metadata when present.
    pub refund_id: Option<String>,
    pub amount_minor: i64,
    /// ISO 4217 code, uppercase.
    pub currency: String,
    pub status: RefundStatus,
}

/// Where a refund stands at the provider.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RefundStatus {
    /// Taken, the money not back yet (Stripe `pending`, and `requires_action`, which card
    /// refunds never reach); ask again later.
    Pending,
    /// The money went back (Stripe `succeeded`).
    Succeeded,
    /// The money did not go back and is still owed (Stripe `failed`).
    Failed {
        /// The provider's `failure_reason` (`declined`, `expired_or_canceled_card`,
        /// `lost_or_stolen_card`, ...), `unknown` when it gave none.
        reason: String,
    },
    /// Cancelled before it went through: the money is still owed (Stripe `canceled`).
    Canceled,
}

impl RefundStatus {
    /// Whether the refund can still move without our asking (ask again later).
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::Pending)
    }

    /// Whether the money is still owed for good: the refund failed or was cancelled.
    pub fn is_failed(&self) -> bool {
        matches!(self, Self::Failed { .. } | Self::Canceled)
    }
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
