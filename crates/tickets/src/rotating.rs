//! Rotating ticket codes: what the owner's phone shows at the door, changing every
//! [`PERIOD_S`] seconds, so that a screenshot is worthless a few seconds later (Ticketmaster's
//! SafeTix rotates every 15 s), and what a scanner verifies offline.
//!
//! `BR1.<step>.<tag>.<static code>`: `static code` is the ticket's signed `BO1` code (the
//! scanner checks its Ed25519 signature with the public key), `step` is the Unix time divided
//! by [`PERIOD_S`], and `tag` is the first [`TAG_BYTES`] bytes (base64url) of
//! HMAC-SHA256(ticket secret, `"BR1." + step`). The ticket secret is
//! HMAC-SHA256(event key, ticket id), and the event key is HMAC-SHA256 of the ticket signing
//! key's seed over `"boxoffice/rotating/v1/" + event id`: the server hands a ticket's secret
//! to its owner only (`GET /v1/tickets/{id}/rotating`), and an event's key to its door staff
//! only (the door bundle), so a scanner derives every ticket's secret of its event, a phone
//! knows its own, and nobody else can make a current code. A code is accepted within
//! [`STEPS_ACCEPTED`] steps of the scanner's clock either way (clock skew), so a copy lives at
//! most about 45 s; inside that window a copy is one more scan of the same ticket, which the
//! door's first-scan-wins rule reports as a duplicate.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::{TicketClaims, TicketError, TicketVerifier};

/// Format tag of a rotating code, dot included.
pub const ROTATING_CODE_PREFIX: &str = "BR1.";
/// Seconds between two codes of one ticket.
pub const PERIOD_S: i64 = 15;
/// How many steps off the scanner's clock a code may be, either way.
pub const STEPS_ACCEPTED: i64 = 1;
/// Bytes of the HMAC kept in a code (96 bits).
pub const TAG_BYTES: usize = 12;

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The key of one event's rotating codes, derived from the ticket signing key's seed.
pub fn event_key(signing_seed: &[u8; 32], event_id: &str) -> [u8; 32] {
    hmac(
        signing_seed,
        format!("boxoffice/rotating/v1/{event_id}").as_bytes(),
    )
}

/// One ticket's secret, derived from its event's key.
pub fn ticket_secret(event_key: &[u8; 32], ticket_id: &str) -> [u8; 32] {
    hmac(event_key, ticket_id.as_bytes())
}

/// The step of Unix time `unix_s`.
pub fn step_at(unix_s: i64) -> i64 {
    unix_s.div_euclid(PERIOD_S)
}

fn tag(secret: &[u8; 32], step: i64) -> String {
    let full = hmac(secret, format!("{ROTATING_CODE_PREFIX}{step}").as_bytes());
    URL_SAFE_NO_PAD.encode(&full[..TAG_BYTES])
}

/// The rotating code of a ticket at `unix_s`, from its secret and its static code.
pub fn rotating_code(secret: &[u8; 32], static_code: &str, unix_s: i64) -> String {
    let step = step_at(unix_s);
    format!(
        "{ROTATING_CODE_PREFIX}{step}.{}.{static_code}",
        tag(secret, step)
    )
}

/// Why a rotating code is refused (beyond the static code's own refusals).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RotatingError {
    #[error("not a rotating code")]
    Malformed,
    /// The static code's refusal, as text.
    #[error("the ticket code does not verify: {0}")]
    Static(String),
    #[error("the code is for another event")]
    OtherEvent,
    #[error("the code is {0} s off the scanner's clock: too old or too new")]
    OutOfWindow(i64),
    #[error("the code's rotating part does not match the ticket")]
    BadTag,
}

/// Verifies a rotating code offline at `now_unix_s` for the event whose key is `event_key`:
/// the static code's signature, the event, the step within [`STEPS_ACCEPTED`], the tag
/// (compared in constant time). Returns the ticket's claims.
pub fn verify_rotating(
    verifier: &TicketVerifier,
    event_id: &str,
    event_key: &[u8; 32],
    code: &str,
    now_unix_s: i64,
) -> Result<TicketClaims, RotatingError> {
    let rest = code
        .strip_prefix(ROTATING_CODE_PREFIX)
        .ok_or(RotatingError::Malformed)?;
    let (step, rest) = rest.split_once('.').ok_or(RotatingError::Malformed)?;
    let (tag_b64, static_code) = rest.split_once('.').ok_or(RotatingError::Malformed)?;
    if step.is_empty() || step.len() > 12 || !step.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RotatingError::Malformed);
    }
    let step: i64 = step.parse().map_err(|_| RotatingError::Malformed)?;
    let claims = verifier
        .verify(static_code)
        .map_err(|e: TicketError| RotatingError::Static(e.to_string()))?;
    if claims.event_id != event_id {
        return Err(RotatingError::OtherEvent);
    }
    let off = step - step_at(now_unix_s);
    if off.abs() > STEPS_ACCEPTED {
        return Err(RotatingError::OutOfWindow(off * PERIOD_S));
    }
    let given = URL_SAFE_NO_PAD
        .decode(tag_b64)
        .map_err(|_| RotatingError::Malformed)?;
    let secret = ticket_secret(event_key, &claims.ticket_id);
    let mut mac = HmacSha256::new_from_slice(&secret).expect("HMAC takes any key length");
    mac.update(format!("{ROTATING_CODE_PREFIX}{step}").as_bytes());
    mac.verify_truncated_left(&given)
        .map_err(|_| RotatingError::BadTag)?;
    if given.len() != TAG_BYTES {
        return Err(RotatingError::BadTag);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TicketSigner;

    fn claims(event: &str) -> TicketClaims {
        TicketClaims {
            ticket_id: "t-1".into(),
            event_id: event.into(),
            order_id: "o-1".into(),
            seat_id: Some("A-1-1".into()),
            tier_id: None,
            unit: 1,
            issued_at_unix_s: 1_700_000_000,
        }
    }

    #[test]
    fn a_code_is_accepted_inside_its_window_and_refused_outside_it() {
        let signer = TicketSigner::generate().unwrap();
        let key = event_key(&signer.seed(), "e-1");
        let static_code = signer.sign(&claims("e-1"));
        let secret = ticket_secret(&key, "t-1");
        let now = 1_800_000_000;
        let code = rotating_code(&secret, &static_code, now);
        let verifier = signer.verifier();
        assert_eq!(
            verify_rotating(&verifier, "e-1", &key, &code, now).unwrap(),
            claims("e-1")
        );
        // One step of skew either way is accepted; two are not (a screenshot, a replay).
        assert!(verify_rotating(&verifier, "e-1", &key, &code, now + PERIOD_S).is_ok());
        assert!(verify_rotating(&verifier, "e-1", &key, &code, now - PERIOD_S).is_ok());
        assert!(matches!(
            verify_rotating(&verifier, "e-1", &key, &code, now + 2 * PERIOD_S),
            Err(RotatingError::OutOfWindow(_))
        ));
        // The code changes every step.
        assert_ne!(code, rotating_code(&secret, &static_code, now + PERIOD_S));
    }

    #[test]
    fn forgeries_are_refused() {
        let signer = TicketSigner::generate().unwrap();
        let key = event_key(&signer.seed(), "e-1");
        let verifier = signer.verifier();
        let now = 1_800_000_000;
        let static_code = signer.sign(&claims("e-1"));
        // Someone with the static code but not the ticket's secret (another ticket's secret,
        // or another event's key) cannot make a current code.
        let wrong = rotating_code(&ticket_secret(&key, "t-2"), &static_code, now);
        assert_eq!(
            verify_rotating(&verifier, "e-1", &key, &wrong, now),
            Err(RotatingError::BadTag)
        );
        let other_key = event_key(&signer.seed(), "e-2");
        let wrong = rotating_code(&ticket_secret(&other_key, "t-1"), &static_code, now);
        assert_eq!(
            verify_rotating(&verifier, "e-1", &key, &wrong, now),
            Err(RotatingError::BadTag)
        );
        // A tag cut short, a static code of another key, another event, garbage.
        let good = rotating_code(&ticket_secret(&key, "t-1"), &static_code, now);
        let parts: Vec<&str> = good.splitn(4, '.').collect();
        let short = format!("BR1.{}.{}.{}", parts[1], &parts[2][..8], parts[3]);
        assert_eq!(
            verify_rotating(&verifier, "e-1", &key, &short, now),
            Err(RotatingError::BadTag)
        );
        let stranger = TicketSigner::generate().unwrap();
        let forged = rotating_code(
            &ticket_secret(&key, "t-1"),
            &stranger.sign(&claims("e-1")),
            now,
        );
        assert!(matches!(
            verify_rotating(&verifier, "e-1", &key, &forged, now),
            Err(RotatingError::Static(_))
        ));
        let elsewhere = rotating_code(
            &ticket_secret(&key, "t-1"),
            &signer.sign(&claims("e-2")),
            now,
        );
        assert_eq!(
            verify_rotating(&verifier, "e-1", &key, &elsewhere, now),
            Err(RotatingError::OtherEvent)
        );
        for garbage in ["", "BR1.", "BR1.x.y.z", "BR1.-1.AAAA.BO1.a.b", &static_code] {
            assert!(verify_rotating(&verifier, "e-1", &key, garbage, now).is_err());
        }
    }
}
