//! Outgoing webhooks for integrators: the endpoints organisers register, and one delivery row
//! per (endpoint, outbox message).
//!
//! Start with [`WebhookStore`]. The outbox relay hands every delivered message whose topic
//! maps to a webhook event type ([`event_type_of`]) to [`WebhookStore::fan_out_webhooks`],
//! which inserts one `PENDING` delivery per enabled endpoint that chose the type. The unique
//! key (endpoint, event id) makes the fan-out exactly once however often the relay delivers
//! the message again (a crash before it marked the message, a lease that ran out). The
//! delivery worker (`boxoffice_workers::webhooks`) claims due deliveries with a lease, POSTs
//! them outside any transaction and records each attempt ([`Attempt`]); the backoff and the
//! give-up rule are [`retry_in_s`].
//!
//! The event id integrators dedupe on is the outbox message's id: the same for every
//! endpoint, for every retry and for a replay.

use boxoffice_domain::OffsetDateTime;

use crate::StoreResult;
use crate::checkout::OutboxMessage;

/// Webhook event types an endpoint may choose, and the outbox topic each comes from.
pub mod event_type {
    /// An order was paid and confirmed (`order.confirmed`).
    pub const ORDER_CONFIRMED: &str = "order.confirmed";
    /// An order was cancelled; any ticket it had is void (`order.cancelled`).
    pub const ORDER_CANCELLED: &str = "order.cancelled";
    /// A confirmed order's tickets were issued (`tickets.issue`, once the relay issued them).
    pub const TICKETS_ISSUED: &str = "tickets.issued";
    /// Tickets moved to another account: the old ones are void, the receiver's new order
    /// has new ones (`transfer.accepted`).
    pub const TICKETS_TRANSFERRED: &str = "tickets.transferred";
    /// An exchange completed: the old tickets are void, the new order is confirmed
    /// (`exchange.completed`).
    pub const EXCHANGE_COMPLETED: &str = "exchange.completed";
    /// Money is owed back to an account (`refund.due`).
    pub const REFUND_DUE: &str = "refund.due";
    /// A refund's money went back (`refund.succeeded`).
    pub const REFUND_SUCCEEDED: &str = "refund.succeeded";
    /// A refund was refused by the provider: the money is still owed (`refund.failed`).
    pub const REFUND_FAILED: &str = "refund.failed";
    /// An event was cancelled (and again when its refunds are done): the cancellation
    /// (`event.cancelled`).
    pub const EVENT_CANCELLED: &str = "event.cancelled";

    /// Every type, in the order the documentation lists them.
    pub const ALL: [&str; 9] = [
        ORDER_CONFIRMED,
        ORDER_CANCELLED,
        TICKETS_ISSUED,
        TICKETS_TRANSFERRED,
        EXCHANGE_COMPLETED,
        REFUND_DUE,
        REFUND_SUCCEEDED,
        REFUND_FAILED,
        EVENT_CANCELLED,
    ];
}

/// The webhook event type an outbox topic is delivered as; `None` for topics integrators
/// are not told about (holds, captures, voids, offers).
pub fn event_type_of(topic: &str) -> Option<&'static str> {
    Some(match topic {
        crate::checkout::topic::ORDER_CONFIRMED => event_type::ORDER_CONFIRMED,
        crate::checkout::topic::ORDER_CANCELLED => event_type::ORDER_CANCELLED,
        crate::checkout::topic::TICKETS_ISSUE => event_type::TICKETS_ISSUED,
        crate::transfer::topic::TRANSFER_ACCEPTED => event_type::TICKETS_TRANSFERRED,
        crate::exchange::topic::EXCHANGE_COMPLETED => event_type::EXCHANGE_COMPLETED,
        crate::checkout::topic::REFUND_DUE => event_type::REFUND_DUE,
        crate::refund::topic::REFUND_SUCCEEDED => event_type::REFUND_SUCCEEDED,
        crate::refund::topic::REFUND_FAILED => event_type::REFUND_FAILED,
        crate::cancellation::topic::EVENT_CANCELLED => event_type::EVENT_CANCELLED,
        _ => return None,
    })
}

/// Longest endpoint URL accepted, in characters.
pub const ENDPOINT_URL_LEN_MAX: usize = 2048;
/// Most endpoints one store keeps (enabled or not): fan-out joins every message with them.
pub const ENDPOINTS_MAX: u32 = 100;
/// Attempts of one delivery before it is `FAILED` (a replay starts it again).
pub const DELIVERY_ATTEMPTS_MAX: u32 = 8;
/// Pause after the first failed attempt; each further failure doubles it.
pub const DELIVERY_BACKOFF_BASE_S: f64 = 5.0;
/// Longest pause between two attempts.
pub const DELIVERY_BACKOFF_MAX_S: f64 = 3600.0;

/// How long to wait before the next attempt after `n_attempts` attempts failed (counting the
/// one that just failed); `None` once [`DELIVERY_ATTEMPTS_MAX`] attempts failed: the delivery
/// is given up (`FAILED`).
pub fn retry_in_s(n_attempts: u32) -> Option<f64> {
    if n_attempts >= DELIVERY_ATTEMPTS_MAX {
        return None;
    }
    let doublings = n_attempts.saturating_sub(1).min(30);
    Some((DELIVERY_BACKOFF_BASE_S * f64::from(1u32 << doublings)).min(DELIVERY_BACKOFF_MAX_S))
}

/// A delivery's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Waiting for its next attempt (`next_attempt_at`), or being attempted.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Every attempt failed; only a replay sends it again.
    Failed,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Delivered => "DELIVERED",
            Self::Failed => "FAILED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "PENDING" => Self::Pending,
            "DELIVERED" => Self::Delivered,
            "FAILED" => Self::Failed,
            _ => return None,
        })
    }
}

/// An endpoint as stored. The secret signs every delivery; the routes show it only in the
/// answer that created the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    pub endpoint_id: String,
    pub url: String,
    /// The event types it receives (a subset of [`event_type::ALL`]).
    pub event_types: Vec<String>,
    pub secret: String,
    /// A disabled endpoint gets no new deliveries and none of its pending ones is sent.
    pub enabled: bool,
    pub created_at: OffsetDateTime,
}

/// An endpoint to create, under the creating admin's idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEndpoint {
    pub endpoint_id: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub secret: String,
    pub created_by: String,
    pub idempotency_key: String,
    pub request_digest: String,
}

/// What [`WebhookStore::create_webhook_endpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndpointCreated {
    Created(WebhookEndpoint),
    /// The key was used before with the same request: the endpoint it created.
    Replayed(WebhookEndpoint),
    /// The key was used before with another request.
    KeyReused,
    /// [`ENDPOINTS_MAX`] endpoints exist already.
    TooMany,
}

/// One delivery of one event to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookDelivery {
    pub delivery_id: i64,
    pub endpoint_id: String,
    /// The outbox message's id: the event id integrators dedupe on.
    pub event_id: i64,
    pub event_type: String,
    /// The event's data (the outbox message's JSON payload).
    pub payload: String,
    /// When the event happened (the outbox message was written).
    pub event_created_at: OffsetDateTime,
    pub status: DeliveryStatus,
    pub n_attempts: u32,
    pub next_attempt_at: OffsetDateTime,
    pub last_status_code: Option<u16>,
    pub last_error: Option<String>,
    pub delivered_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// A claimed delivery and where to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueDelivery {
    pub delivery: WebhookDelivery,
    pub url: String,
    pub secret: String,
}

/// An event to fan out: an outbox message whose topic maps to a webhook event type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEvent {
    pub event_id: i64,
    pub event_type: String,
    pub payload: String,
    pub created_at: OffsetDateTime,
}

impl WebhookEvent {
    /// The webhook event of an outbox message, if its topic is one integrators hear about.
    pub fn of(message: &OutboxMessage) -> Option<Self> {
        Some(Self {
            event_id: message.id,
            event_type: event_type_of(&message.topic)?.to_owned(),
            payload: message.payload.clone(),
            created_at: message.created_at,
        })
    }
}

/// The outcome of one attempt, as the worker decided it.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The endpoint answered 2xx.
    Delivered { status_code: u16 },
    /// It answered something else, or nothing (`status_code` `None`: a connection error or
    /// a timeout). `retry_in_s` from [`retry_in_s`]; `None`: give up (`FAILED`).
    Failed {
        status_code: Option<u16>,
        error: String,
        retry_in_s: Option<f64>,
    },
}

/// Longest error text kept per delivery, in characters.
pub const DELIVERY_ERROR_LEN_MAX: usize = 500;

/// `error` cut to [`DELIVERY_ERROR_LEN_MAX`] characters.
pub fn bounded_error(error: &str) -> String {
    error.chars().take(DELIVERY_ERROR_LEN_MAX).collect()
}

/// Webhook endpoints and their deliveries. Every method is one short transaction (or none);
/// none is ever called inside another's transaction, and none sends anything.
#[async_trait::async_trait]
pub trait WebhookStore: Send + Sync {
    /// Creates an endpoint, or answers the one the same key created.
    async fn create_webhook_endpoint(&self, new: &NewEndpoint) -> StoreResult<EndpointCreated>;

    async fn get_webhook_endpoint(&self, endpoint_id: &str)
    -> StoreResult<Option<WebhookEndpoint>>;

    /// Every endpoint, oldest first (at most [`ENDPOINTS_MAX`]).
    async fn list_webhook_endpoints(&self) -> StoreResult<Vec<WebhookEndpoint>>;

    /// Enables or disables an endpoint (its delivery log stays); `None` if there is no such
    /// endpoint.
    async fn set_webhook_endpoint_enabled(
        &self,
        endpoint_id: &str,
        enabled: bool,
    ) -> StoreResult<Option<WebhookEndpoint>>;

    /// Deletes an endpoint and its delivery log; `false` if there was no such endpoint.
    async fn delete_webhook_endpoint(&self, endpoint_id: &str) -> StoreResult<bool>;

    /// One `PENDING` delivery per (enabled endpoint that chose the event's type, event),
    /// unless that pair has one already. Returns how many were new.
    async fn fan_out_webhooks(&self, events: &[WebhookEvent]) -> StoreResult<u64>;

    /// Claims up to `limit` due deliveries of enabled endpoints for `lease_s` seconds: their
    /// next attempt moves that far out, so another worker takes one only after a claim that
    /// was never recorded (its process died).
    async fn claim_webhook_deliveries(
        &self,
        limit: u32,
        lease_s: f64,
    ) -> StoreResult<Vec<DueDelivery>>;

    /// Records an attempt of a `PENDING` delivery (one counted attempt more).
    async fn record_webhook_attempt(&self, delivery_id: i64, attempt: &Attempt) -> StoreResult<()>;

    /// An endpoint's deliveries, newest first, below `before` (a delivery id) when given.
    async fn list_webhook_deliveries(
        &self,
        endpoint_id: &str,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<WebhookDelivery>>;

    /// Queues a delivery of this endpoint again: `PENDING`, due now, attempts from zero.
    /// `None` if the endpoint has no such delivery.
    async fn replay_webhook_delivery(
        &self,
        endpoint_id: &str,
        delivery_id: i64,
    ) -> StoreResult<Option<WebhookDelivery>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_the_base_and_gives_up_after_the_last_attempt() {
        assert_eq!(retry_in_s(1), Some(5.0));
        assert_eq!(retry_in_s(2), Some(10.0));
        assert_eq!(retry_in_s(3), Some(20.0));
        assert_eq!(retry_in_s(7), Some(320.0));
        assert_eq!(retry_in_s(DELIVERY_ATTEMPTS_MAX), None);
        assert_eq!(retry_in_s(u32::MAX), None);
    }

    #[test]
    fn the_backoff_never_exceeds_its_cap() {
        for n_attempts in 0..DELIVERY_ATTEMPTS_MAX {
            let delay_s = retry_in_s(n_attempts).expect("retried");
            assert!(delay_s <= DELIVERY_BACKOFF_MAX_S, "{n_attempts}: {delay_s}");
            assert!(
                delay_s >= DELIVERY_BACKOFF_BASE_S,
                "{n_attempts}: {delay_s}"
            );
        }
    }

    #[test]
    fn only_the_integrators_topics_map_to_event_types() {
        assert_eq!(event_type_of("order.confirmed"), Some("order.confirmed"));
        assert_eq!(event_type_of("tickets.issue"), Some("tickets.issued"));
        assert_eq!(
            event_type_of("transfer.accepted"),
            Some("tickets.transferred")
        );
        assert_eq!(event_type_of("hold.created"), None);
        assert_eq!(event_type_of("payment.capture"), None);
        let mapped: Vec<&str> = [
            "order.confirmed",
            "order.cancelled",
            "tickets.issue",
            "transfer.accepted",
            "exchange.completed",
            "refund.due",
            "refund.succeeded",
            "refund.failed",
            "event.cancelled",
        ]
        .iter()
        .filter_map(|topic| event_type_of(topic))
        .collect();
        assert_eq!(mapped, event_type::ALL);
    }

    #[test]
    fn errors_are_cut_to_their_bound() {
        let long = "é".repeat(DELIVERY_ERROR_LEN_MAX + 10);
        assert_eq!(bounded_error(&long).chars().count(), DELIVERY_ERROR_LEN_MAX);
        assert_eq!(bounded_error("short"), "short");
    }
}
