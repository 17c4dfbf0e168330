//! What a fan keeps of a purchase, rendered from what the store already holds: one PDF per
//! order (`pdf`), an Apple Wallet pass per ticket (`apple`), a "Save to Google Wallet" link
//! per ticket (`google`). Nothing here reads the store or the network: the caller gathers an
//! [`OrderSheet`] and gets bytes back.
//!
//! (Issue 39. The renderers are being built; this file fixes the shapes they share.)

use time::OffsetDateTime;

/// One ticket as printed on its page and on its pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketSheet {
    pub ticket_id: String,
    /// The seat (`A-12-7`) or `None` for a general-admission ticket.
    pub seat_id: Option<String>,
    /// The tier of a general-admission ticket.
    pub tier_id: Option<String>,
    /// The name of the person who will use the ticket, when one was given.
    pub holder_name: Option<String>,
    /// The static signed code (`BO1…`) the QR code carries.
    pub code: String,
    /// `VALID`, `VOIDED`, `CHECKED_IN`, `EXCHANGING`: a voided ticket is printed as void.
    pub status: String,
}

/// One order as printed: the event, and its tickets in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderSheet {
    pub order_id: String,
    pub event_id: String,
    pub event_name: String,
    pub starts_at: OffsetDateTime,
    pub currency: String,
    pub total_minor: i64,
    /// The language it is printed in (`en`, `de`, `fr`, `es`, `zh`).
    pub locale: String,
    pub tickets: Vec<TicketSheet>,
}

/// Why a document could not be made.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("rendering failed: {0}")]
    Render(String),
    #[error("signing failed: {0}")]
    Signing(String),
    #[error("bad configuration: {0}")]
    Config(String),
}
