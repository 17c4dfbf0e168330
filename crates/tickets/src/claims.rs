//! What a ticket states: which order, event and seat (or tier unit) it admits.

use serde::{Deserialize, Serialize};

/// The signed content of one ticket. A reserved seat sets `seat_id`, a general admission tier
/// sets `tier_id`; `unit` numbers the tickets of one order line from 1.
///
/// Serialized as camelCase JSON in field order, without whitespace and with absent options
/// left out, so the same claims always give the same bytes (and, Ed25519 being
/// deterministic, the same code).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TicketClaims {
    pub ticket_id: String,
    pub event_id: String,
    pub order_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    pub unit: u32,
    pub issued_at_unix_s: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_camel_case_and_omits_absent_options() {
        let claims = TicketClaims {
            ticket_id: "t1".into(),
            event_id: "e1".into(),
            order_id: "o1".into(),
            seat_id: None,
            tier_id: Some("GA".into()),
            unit: 2,
            issued_at_unix_s: 1_700_000_000,
        };
        let json = serde_json::to_string(&claims).unwrap();
        assert_eq!(
            json,
            r#"{"ticketId":"t1","eventId":"e1","orderId":"o1","tierId":"GA","unit":2,"issuedAtUnixS":1700000000}"#
        );
        assert_eq!(serde_json::from_str::<TicketClaims>(&json).unwrap(), claims);
    }
}
