//! The waiting room's admission tokens (`Admission-Token`, body `admissionToken`) and queue
//! tickets (`Queue-Ticket`): `TokenKeys::verify_admission` and `verify_queue_ticket`, HS256
//! told apart by `typ`. The first byte picks the mode:
//!
//! - 0: the rest, as text, is a token, verified as both kinds: no panic, and what is
//!   accepted says what it must (below).
//! - 1: the rest is a JSON claims object signed with the room's key (reaching the claims
//!   checks): an accepted admission is typed `admission`, for the event and account asked,
//!   not expired; an accepted queue ticket is typed `queue`, for the event and account
//!   asked. One token is never both.
//! - 2: both kinds issued for an event, account, session, expiry and index from the rest
//!   verify to exactly those claims, and never as the other kind.

#![no_main]

use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_fuzz::WAITROOM_SECRET;
use boxoffice_waitroom::token::{
    AdmissionClaims, AdmissionError, EXP_LEEWAY_S, QueueTicketClaims, TYP_ADMISSION, TYP_QUEUE,
    TokenKeys,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use libfuzzer_sys::fuzz_target;

static KEYS: LazyLock<TokenKeys> =
    LazyLock::new(|| TokenKeys::new(WAITROOM_SECRET).expect("the secret is long enough"));

const EVENT_ID: &str = "evt-fuzz";
const ACCOUNT_ID: &str = "fan_1";
const NOW_S: u64 = 1_900_000_000;

/// What a verified token must say: an admission is typed `admission`, for the event and
/// account asked, not expired; a queue ticket is typed `queue`, for the event and account
/// asked; no token is both.
fn check(token: &str) {
    let admission = KEYS.verify_admission(token, EVENT_ID, ACCOUNT_ID, NOW_S);
    if let Ok(admission) = &admission {
        assert_eq!(admission.typ, TYP_ADMISSION);
        assert_eq!(admission.evt, EVENT_ID);
        assert_eq!(admission.sub, ACCOUNT_ID);
        assert!(admission.exp.saturating_add(EXP_LEEWAY_S) > NOW_S);
    }
    let ticket = KEYS.verify_queue_ticket(token, EVENT_ID, ACCOUNT_ID);
    if let Ok(ticket) = &ticket {
        assert_eq!(ticket.typ, TYP_QUEUE);
        assert_eq!(ticket.evt, EVENT_ID);
        assert_eq!(ticket.sub, ACCOUNT_ID);
    }
    assert!(
        admission.is_err() || ticket.is_err(),
        "one token taken as both kinds: {token}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let Ok(token) = std::str::from_utf8(rest) else {
                return;
            };
            check(token);
        }
        1 => {
            let Ok(claims) = serde_json::from_slice::<serde_json::Value>(rest) else {
                return;
            };
            let key = EncodingKey::from_secret(WAITROOM_SECRET).expect("an HS256 key");
            let Ok(token) = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
            else {
                return;
            };
            check(&token);
        }
        _ => {
            let mut input = Unstructured::new(rest);
            let Ok((event_id, account_id, session_id, exp_s, index)) =
                <(String, String, String, u64, u64)>::arbitrary(&mut input)
            else {
                return;
            };
            let admission = KEYS
                .issue_admission(&event_id, &account_id, &session_id, exp_s)
                .expect("signs");
            let now_s = exp_s.saturating_sub(1);
            assert_eq!(
                KEYS.verify_admission(&admission, &event_id, &account_id, now_s),
                if admission.len() > boxoffice_waitroom::token::TOKEN_LEN_MAX_BYTES {
                    Err(AdmissionError::Invalid("token too long".into()))
                } else {
                    Ok(AdmissionClaims {
                        sub: account_id.clone(),
                        evt: event_id.clone(),
                        sid: session_id,
                        exp: exp_s,
                        typ: TYP_ADMISSION.into(),
                    })
                }
            );
            assert!(
                KEYS.verify_queue_ticket(&admission, &event_id, &account_id)
                    .is_err()
            );
            let ticket = KEYS
                .issue_queue_ticket(&event_id, &account_id, index)
                .expect("signs");
            if ticket.len() <= boxoffice_waitroom::token::TOKEN_LEN_MAX_BYTES {
                assert_eq!(
                    KEYS.verify_queue_ticket(&ticket, &event_id, &account_id),
                    Ok(QueueTicketClaims {
                        sub: account_id.clone(),
                        evt: event_id.clone(),
                        idx: index,
                        typ: TYP_QUEUE.into(),
                    })
                );
            }
            assert!(
                KEYS.verify_admission(&ticket, &event_id, &account_id, 0)
                    .is_err()
            );
        }
    }
});
