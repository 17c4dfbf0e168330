//! The group waiting list after sell-out, as stored (see `boxoffice_domain::engine`'s
//! `waitlist` module for the rules). Entries join, leave and get offers only through the
//! event's writer: a group writes its joins, leaves and offers (each offer a `HELD` hold with
//! the event's offer TTL, its seats taken like any hold's) and moves offered entries on when
//! their holds end (`LAPSED`) or sell (`PURCHASED`). Reads compute an entry's place and, for
//! an offer whose hold ended without a writer seeing it, its status from the hold.

use boxoffice_domain::OffsetDateTime;

use crate::StoreResult;

/// Outbox topic of an offer: `{waitlistId, eventId, accountId, holdId, seatIds, expiresAt}`.
pub const WAITLIST_OFFERED: &str = "waitlist.offered";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitlistStatus {
    Waiting,
    Offered,
    Purchased,
    Lapsed,
    Left,
}

impl WaitlistStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "WAITING",
            Self::Offered => "OFFERED",
            Self::Purchased => "PURCHASED",
            Self::Lapsed => "LAPSED",
            Self::Left => "LEFT",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "WAITING" => Self::Waiting,
            "OFFERED" => Self::Offered,
            "PURCHASED" => Self::Purchased,
            "LAPSED" => Self::Lapsed,
            "LEFT" => Self::Left,
            _ => return None,
        })
    }

    /// An offered entry's status by its hold's stored status and deadline at `now`.
    pub fn of_offer(hold_status: &str, expires_at: OffsetDateTime, now: OffsetDateTime) -> Self {
        match hold_status {
            "CONFIRMED" => Self::Purchased,
            "HELD" | "PAYMENT_PENDING" if expires_at > now => Self::Offered,
            _ => Self::Lapsed,
        }
    }
}

/// An entry as its owner reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitlistView {
    pub waitlist_id: String,
    pub event_id: String,
    pub account_id: String,
    pub quantity: u32,
    pub section: Option<String>,
    pub max_price_minor: Option<i64>,
    pub together: bool,
    /// The joining request's key and digest.
    pub idempotency_key: String,
    pub request_digest: String,
    pub status: WaitlistStatus,
    /// Place among the waiting entries (1 = next), while waiting.
    pub position: Option<u32>,
    /// The offer's hold, once offered, and its deadline.
    pub hold_id: Option<String>,
    pub offer_expires_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// The waiting-list side of a store (reads; the writes are the event writer's groups).
#[async_trait::async_trait]
pub trait WaitlistStore: Send + Sync {
    async fn get_waitlist_entry(&self, waitlist_id: &str) -> StoreResult<Option<WaitlistView>>;
}

/// The outbox message of an offer.
pub fn offered_message(
    event_id: &str,
    offer: &boxoffice_domain::engine::WaitlistOffer,
) -> serde_json::Value {
    let hold = &offer.hold;
    serde_json::json!({
        "waitlistId": offer.waitlist_id,
        "eventId": event_id,
        "accountId": hold.account_id,
        "holdId": hold.hold_id,
        "seatIds": hold.seats.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        "expiresAt": hold.expires_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
    })
}
