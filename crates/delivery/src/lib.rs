//! What a fan keeps of a purchase, rendered from what the store already holds: one PDF per
//! order (`pdf`), an Apple Wallet pass per ticket (`apple`), a "Save to Google Wallet" link
//! per ticket (`google`). Nothing here reads the store or the network: the caller gathers an
//! [`OrderSheet`] and gets bytes back.
//!
//! Every label is a message of the `tickets` catalogue (`crates/i18n/locales/<l>/tickets.ftl`,
//! ids `tickets-…`), formatted in the order's language ([`labels`]).

use time::OffsetDateTime;

pub mod apple;
pub mod google;
pub mod labels;
pub mod pdf;
#[cfg(feature = "readback")]
pub mod readback;

pub use pdf::order_pdf;

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A two-ticket order: a seat with a holder, and a general-admission ticket without one.
    pub(crate) fn sample_order() -> OrderSheet {
        OrderSheet {
            order_id: "019a0000-0000-7000-8000-00000000a001".into(),
            event_id: "019a0000-0000-7000-8000-00000000e001".into(),
            event_name: "Rust Symphony: Live at the Tonhalle".into(),
            starts_at: time::macros::datetime!(2027-03-14 20:00 +01:00),
            currency: "EUR".into(),
            total_minor: 12_000,
            locale: "en".into(),
            tickets: vec![
                TicketSheet {
                    ticket_id: "019a0000-0000-7000-8000-0000000000t1".into(),
                    seat_id: Some("A-12-7".into()),
                    tier_id: None,
                    holder_name: Some("Zoë Müller".into()),
                    code: "BO1.eyJ0aWNrZXRJZCI6InQxIiwiZXZlbnRJZCI6ImUxIn0.c2lnbmF0dXJlLW9uZQ"
                        .into(),
                    status: "VALID".into(),
                },
                TicketSheet {
                    ticket_id: "019a0000-0000-7000-8000-0000000000t2".into(),
                    seat_id: None,
                    tier_id: Some("standing".into()),
                    holder_name: None,
                    code: "BO1.eyJ0aWNrZXRJZCI6InQyIiwiZXZlbnRJZCI6ImUxIn0.c2lnbmF0dXJlLXR3bw"
                        .into(),
                    status: "VALID".into(),
                },
            ],
        }
    }
}
