//! Route handlers, one module per resource.

pub mod allocations;
pub mod box_office;
pub mod cancellation;
pub mod checkout;
pub mod cluster;
pub mod delivery;
pub mod dev;
pub mod door;
pub mod events;
pub mod exchanges;
pub mod health;
pub mod holders;
pub mod holds;
pub mod mail;
pub mod me;
pub mod phases;
pub mod promo;
pub mod queue;
pub mod refunds;
pub mod reports;
pub mod seatmap;
pub mod tickets;
pub mod transfers;
pub mod venues;
pub mod waitlist;
pub mod webhooks;

use crate::error::ApiError;

/// The syntax of a page cursor (`GET /v1/events`, `GET /v1/orders`): the id of the last item
/// of the page before, a UUID in its canonical form (lower-case, hyphenated), as the server
/// gives them out. The document states it as this pattern.
pub const CURSOR_PATTERN: &str = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";

/// A page cursor, when given, has the syntax of one the server gave out
/// ([`CURSOR_PATTERN`]); anything else is a 422 `VALIDATION` on `cursor`, never a page. A
/// well-formed cursor needs no item of that id: it is a place in the order, and the page
/// starts after it.
pub fn check_cursor(cursor: Option<&str>) -> Result<(), ApiError> {
    let Some(cursor) = cursor else {
        return Ok(());
    };
    let canonical =
        uuid::Uuid::try_parse(cursor).is_ok_and(|id| id.hyphenated().to_string() == cursor);
    if canonical {
        Ok(())
    } else {
        Err(ApiError::validation(
            "cursor",
            "is not a cursor this server gave out (the nextCursor of a page)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_a_canonical_uuid() {
        assert!(check_cursor(None).is_ok());
        assert!(check_cursor(Some("01939b6e-7c1a-7d2e-8f00-0123456789ab")).is_ok());
        for garbage in [
            "",
            "x",
            "~\u{d5}\u{10e7}",
            "01939B6E-7C1A-7D2E-8F00-0123456789AB",
            "01939b6e7c1a7d2e8f000123456789ab",
            "{01939b6e-7c1a-7d2e-8f00-0123456789ab}",
            "urn:uuid:01939b6e-7c1a-7d2e-8f00-0123456789ab",
            " 01939b6e-7c1a-7d2e-8f00-0123456789ab",
        ] {
            let refused = check_cursor(Some(garbage)).expect_err(garbage);
            assert_eq!(refused.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
            assert_eq!(refused.extra["field"], "cursor");
        }
    }
}
