//! Identifiers from outside: seat ids (`SeatRef::parse`, in hold and exchange bodies),
//! account ids (`AccountId::parse`, a token's `sub`), section and tier ids
//! (`check_name_id`), idempotency keys (`check_idempotency_key`) and the status names read
//! back from rows (`SeatStatus`, `HoldStatus`, `OrderStatus`, `PaymentStatus`). Checks that
//! each accepts exactly its documented syntax, and that every accepted id has one spelling:
//! `parse(s)` displays as `s`, and `parse(display(x)) == x` for any seat.
//!
//! Input: text, tried as every kind; then the same bytes as a seat built field by field.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::ids::{
    ACCOUNT_ID_LEN_MAX, AccountId, IDEMPOTENCY_KEY_LEN_MAX, NAME_ID_LEN_MAX, SeatRef,
    check_idempotency_key, check_name_id,
};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(raw) = std::str::from_utf8(data) {
        text(raw);
    }
    seat_round_trip(&mut Unstructured::new(data));
});

fn text(raw: &str) {
    let name_like = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');

    match AccountId::parse(raw) {
        Ok(id) => {
            assert_eq!(id.as_str(), raw);
            assert_eq!(id.to_string(), raw);
            assert!((1..=ACCOUNT_ID_LEN_MAX).contains(&raw.len()));
        }
        Err(_) => assert!(
            raw.is_empty()
                || raw.len() > ACCOUNT_ID_LEN_MAX
                || !raw
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        ),
    }

    let name_ok = !raw.is_empty() && raw.len() <= NAME_ID_LEN_MAX && name_like(raw);
    assert_eq!(check_name_id(raw, "tier").is_ok(), name_ok, "{raw:?}");

    let key_ok = !raw.is_empty()
        && raw.len() <= IDEMPOTENCY_KEY_LEN_MAX
        && raw.bytes().all(|b| b.is_ascii_graphic());
    assert_eq!(check_idempotency_key(raw).is_ok(), key_ok, "{raw:?}");

    if let Ok(seat) = SeatRef::parse(raw) {
        // One seat, one id: an accepted id is the seat's canonical spelling.
        assert_eq!(seat.to_string(), raw, "{seat:?} has another spelling");
        assert!(check_name_id(&seat.section, "section").is_ok());
        assert!(seat.row >= 1 && seat.number >= 1);
    }

    if let Some(status) = SeatStatus::parse(raw) {
        assert_eq!(status.as_str(), raw);
    }
    if let Some(status) = HoldStatus::parse(raw) {
        assert_eq!(status.as_str(), raw);
    }
    if let Some(status) = OrderStatus::parse(raw) {
        assert_eq!(status.as_str(), raw);
    }
    if let Some(status) = PaymentStatus::parse(raw) {
        assert_eq!(status.as_str(), raw);
    }
}

/// `parse(display(seat)) == seat` for a seat with a valid section, row and number.
fn seat_round_trip(input: &mut Unstructured<'_>) {
    let Ok((section, row, number)) = <(String, u32, u32)>::arbitrary(input) else {
        return;
    };
    let (row, number) = (row % 999_999 + 1, number % 999_999 + 1);
    if check_name_id(&section, "section").is_err() {
        return;
    }
    let seat = SeatRef {
        section,
        row,
        number,
    };
    assert_eq!(SeatRef::parse(&seat.to_string()), Ok(seat));
}
