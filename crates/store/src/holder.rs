//! Ticket holders (issue 39): the holder given per ticket of a hold before its checkout,
//! copied onto the tickets when they are issued, and a ticket's holder changed by its owner
//! until the event's cutoff. What is valid is `boxoffice_domain::holder`'s to say; the store
//! keeps what the routes validated, each write conditional on the authoritative row (the
//! hold still open and the caller's, the ticket still valid and the caller's, the cutoff not
//! passed by the store's clock).

use boxoffice_domain::holder::HolderDetails;

use crate::StoreResult;
use crate::checkout::TicketView;

/// Which ticket of a hold a holder is for: a seat, or a tier unit (1, 2, ... in the order's
/// unit order, as its tickets are numbered).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum HolderSlot {
    Seat(String),
    Unit(u32),
}

impl HolderSlot {
    /// As stored (`hold_holder.slot`): the seat id, or `unit:<n>`.
    pub fn key(&self) -> String {
        match self {
            Self::Seat(seat_id) => seat_id.clone(),
            Self::Unit(unit) => format!("unit:{unit}"),
        }
    }

    pub fn parse(key: &str) -> Self {
        match key.strip_prefix("unit:").and_then(|n| n.parse().ok()) {
            Some(unit) => Self::Unit(unit),
            None => Self::Seat(key.to_owned()),
        }
    }

    /// The slot a ticket fills: its seat, else its unit.
    pub fn of_ticket(seat_id: Option<&str>, unit: u32) -> Self {
        match seat_id {
            Some(seat_id) => Self::Seat(seat_id.to_owned()),
            None => Self::Unit(unit),
        }
    }
}

/// The holder given for one ticket of a hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldHolder {
    pub slot: HolderSlot,
    pub details: HolderDetails,
}

/// What setting a hold's holders did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldHoldersSet {
    /// Stored: the hold's holders now, in slot order.
    Set(Vec<HoldHolder>),
    /// No such hold of this account.
    NotFound,
    /// The hold is no longer open for them: checked out, released or expired (its status).
    NotOpen(String),
}

/// What changing a ticket's holder did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TicketHolderSet {
    /// Changed: the ticket as it is now.
    Set(Box<TicketView>),
    /// No such ticket of this account.
    NotFound,
    /// Voided or checked in: its holder no longer changes.
    NotValid,
    /// Past the event's start minus its change cutoff, by the store's clock.
    Closed,
}

/// The answers as stored: a JSON object of strings.
pub fn answers_json(details: &HolderDetails) -> String {
    serde_json::to_string(&details.answers).unwrap_or_else(|_| "{}".into())
}

/// Details from their stored columns (`None` when neither a name nor an answer is stored).
pub fn details_of(name: Option<String>, answers: Option<&str>) -> Option<HolderDetails> {
    let answers: std::collections::BTreeMap<String, String> = answers
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default();
    (name.is_some() || !answers.is_empty()).then_some(HolderDetails { name, answers })
}

#[async_trait::async_trait]
pub trait HolderStore: Send + Sync {
    /// The holders given for the hold (of `event_id`), in slot order.
    async fn hold_holders(&self, event_id: &str, hold_id: &str) -> StoreResult<Vec<HoldHolder>>;

    /// Replaces the hold's holders with `holders`, if the hold is `account_id`'s and still
    /// held (live by the store's clock, not checked out).
    async fn set_hold_holders(
        &self,
        event_id: &str,
        hold_id: &str,
        account_id: &str,
        holders: &[HoldHolder],
    ) -> StoreResult<HoldHoldersSet>;

    /// Sets the ticket's holder, if the ticket is `account_id`'s, valid, and the store's clock
    /// is before the event's start minus `change_cutoff_s`.
    async fn set_ticket_holder(
        &self,
        event_id: &str,
        ticket_id: &str,
        account_id: &str,
        details: &HolderDetails,
        change_cutoff_s: u32,
    ) -> StoreResult<TicketHolderSet>;
}
