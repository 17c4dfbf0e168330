//! Payment webhooks (`POST /v1/webhooks/stripe`): `verify_signature` on the
//! `Stripe-Signature` header and `parse_event` on the body, as `StripeProvider` runs them,
//! then `verdict_of` (what the server settles from an event). Checks: a webhook verifies
//! only with the HMAC of its timestamp and body among its signatures; a body signed with the secret verifies exactly when its timestamp is within
//! the tolerance; a parsed event's currency is upper case and its status one of Stripe's.
//!
//! Input: `<Stripe-Signature header> NUL <body>`; the first byte of the header (when it
//! is not text) asks for the body to be signed properly instead, at a timestamp from the
//! header's other bytes.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_fuzz::{WEBHOOK_SECRET, split_nul};
use boxoffice_payments::stripe::{map_status, parse_event, sign_webhook, verify_signature};
use boxoffice_payments::{WEBHOOK_TOLERANCE_S, WebhookError};
use libfuzzer_sys::fuzz_target;

const NOW_UNIX_S: i64 = 1_900_000_000;

/// The PaymentIntent statuses `map_status` knows.
const STRIPE_STATUSES: [&str; 7] = [
    "requires_action",
    "requires_capture",
    "succeeded",
    "canceled",
    "requires_payment_method",
    "requires_confirmation",
    "processing",
];

fuzz_target!(|data: &[u8]| {
    let (header, body) = split_nul(data);
    match header {
        Some([0xff, timestamp @ ..]) => {
            let timestamp_unix_s = match i64::arbitrary(&mut Unstructured::new(timestamp)) {
                Ok(offset) if timestamp.len() >= 8 => offset,
                _ => NOW_UNIX_S,
            };
            let signature = sign_webhook(WEBHOOK_SECRET, timestamp_unix_s, body);
            let verified = verify_signature(WEBHOOK_SECRET, Some(&signature), body, NOW_UNIX_S);
            if NOW_UNIX_S.abs_diff(timestamp_unix_s) <= WEBHOOK_TOLERANCE_S.unsigned_abs() {
                assert_eq!(verified, Ok(()), "{signature}");
            } else {
                assert_eq!(verified, Err(WebhookError::StaleTimestamp), "{signature}");
            }
            let other = verify_signature("whsec_other", Some(&signature), body, NOW_UNIX_S);
            assert_eq!(other, Err(WebhookError::BadSignature));
        }
        _ => {
            let header = header.and_then(|raw| std::str::from_utf8(raw).ok());
            let verified = verify_signature(WEBHOOK_SECRET, header, body, NOW_UNIX_S);
            if verified.is_ok() {
                // Only with the HMAC of "<t>.<body>" under the secret among its v1 entries,
                // `t` read as the verifier reads it (the last one).
                let header = header.expect("verified, so present");
                let mut timestamp_unix_s = None;
                let mut signatures = Vec::new();
                for part in header.split(',') {
                    match part.trim().split_once('=') {
                        Some(("t", value)) => timestamp_unix_s = value.parse::<i64>().ok(),
                        Some(("v1", value)) => signatures.push(value.to_ascii_lowercase()),
                        _ => {}
                    }
                }
                let timestamp_unix_s = timestamp_unix_s.expect("verified, so timestamped");
                let expected = sign_webhook(WEBHOOK_SECRET, timestamp_unix_s, body);
                let (_, mac) = expected.split_once(",v1=").expect("t=..,v1=..");
                assert!(
                    signatures.iter().any(|signature| signature == mac),
                    "verified without the body's HMAC: {header}"
                );
            }
        }
    }
    if let Ok(event) = parse_event(body) {
        let payment = &event.payment;
        assert_eq!(payment.currency, payment.currency.to_ascii_uppercase());
        assert!(
            STRIPE_STATUSES
                .iter()
                .any(|name| map_status(name) == Some(payment.status))
        );
        let _ = boxoffice_workers::payment::verdict_of(payment);
    }
});
