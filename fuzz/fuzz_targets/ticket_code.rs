//! Ticket codes and their offline verification (`TicketVerifier::verify`, what the gate and
//! `POST /v1/admin/checkin` run on a scanned code). The first byte picks the mode:
//!
//! - 0: the rest, as text, is a scanned code: verify must not panic; a code that verifies
//!   without being signed by the key would be a forgery (it cannot happen by chance).
//! - 1: the rest is a payload, signed with the fixed key (what only the server can make),
//!   so the claims JSON parser is reached: if it verifies, signing its claims again gives a
//!   code that verifies to the same claims, and the same code when the payload was the
//!   canonical JSON.
//! - 2: claims built from the rest: sign then verify round-trips (or is refused as too long),
//!   and changing one character of the code makes it fail.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_fuzz::{TICKET_SIGNER, sign_ticket_payload};
use boxoffice_tickets::{TICKET_CODE_LEN_MAX, TicketClaims, TicketError};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    let verifier = TICKET_SIGNER.verifier();
    match mode % 3 {
        0 => {
            let Ok(code) = std::str::from_utf8(rest) else {
                return;
            };
            if let Ok(claims) = verifier.verify(code) {
                // Only the key's own signature verifies: the code must be what the key
                // signs for that payload.
                let payload = code.split('.').nth(1).unwrap_or_default();
                let resigned = sign_ticket_payload(&decode(payload));
                assert_eq!(
                    resigned, code,
                    "verified a code the key did not sign: {claims:?}"
                );
            }
        }
        1 => {
            let code = sign_ticket_payload(rest);
            match verifier.verify(&code) {
                Ok(claims) => {
                    let again = TICKET_SIGNER.sign(&claims);
                    assert_eq!(verifier.verify(&again).ok(), Some(claims.clone()));
                    if serde_json::to_vec(&claims).ok().as_deref() == Some(rest) {
                        assert_eq!(again, code, "signing is deterministic");
                    }
                }
                Err(TicketError::TooLong { .. } | TicketError::BadClaims(_)) => {}
                Err(TicketError::Malformed) if rest.is_empty() => {}
                Err(other) => panic!("a signed code was refused for {other:?}: {code}"),
            }
        }
        _ => {
            let mut input = Unstructured::new(rest);
            let Ok(claims) = claims(&mut input) else {
                return;
            };
            let code = TICKET_SIGNER.sign(&claims);
            match verifier.verify(&code) {
                Ok(verified) => assert_eq!(verified, claims),
                Err(TicketError::TooLong { len, .. }) => assert!(len > TICKET_CODE_LEN_MAX),
                Err(other) => panic!("a signed code was refused for {other:?}: {code}"),
            }
            let Ok(at) = input.choose_index(code.len()) else {
                return;
            };
            let mut tampered = code.clone().into_bytes();
            tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(tampered).expect("codes are ASCII");
            assert!(
                verifier.verify(&tampered).is_err(),
                "a changed code verified: {tampered}"
            );
        }
    }
});

fn claims(input: &mut Unstructured<'_>) -> arbitrary::Result<TicketClaims> {
    Ok(TicketClaims {
        ticket_id: String::arbitrary(input)?,
        event_id: String::arbitrary(input)?,
        order_id: String::arbitrary(input)?,
        seat_id: Option::arbitrary(input)?,
        tier_id: Option::arbitrary(input)?,
        unit: u32::arbitrary(input)?,
        issued_at_unix_s: i64::arbitrary(input)?,
    })
}

fn decode(part: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .unwrap_or_default()
}
