//! Signed tokens of the waiting room: the queue ticket (proves a place in an event's queue)
//! and the admission token (grants one account, in one session, entry to one event's sale
//! for a short time; never a seat).
//!
//! Both are HS256 JWTs told apart by `typ`, their key named by `kid`; during a key rollover
//! the previous secrets still verify ([`TokenKeys::with_previous`]). Verification accepts only HS256, so `alg: none`
//! and any other algorithm are refused, then checks `typ`, the event, the account and, for
//! admissions, `exp` against the caller's clock (`now_s`), so tests control time. The HTTP
//! layer reads `Queue-Ticket` / `Admission-Token` and answers 403 `ADMISSION_REQUIRED` or
//! `ADMISSION_INVALID` (`server/src/runtime/waitroom.rs`).

use boxoffice_token::HsKeys;
use jsonwebtoken::{Algorithm, Validation};
use serde::{Deserialize, Serialize};

/// Shortest secret accepted, in bytes (the same floor as the account-token secret).
pub const SECRET_LEN_MIN_BYTES: usize = 16;
/// Longest token verified, in bytes; longer input is refused before any parsing.
pub const TOKEN_LEN_MAX_BYTES: usize = 4096;
/// Clock skew tolerated when checking `exp`, in seconds.
pub const EXP_LEEWAY_S: u64 = 5;
/// `typ` of an admission token.
pub const TYP_ADMISSION: &str = "admission";
/// `typ` of a queue ticket.
pub const TYP_QUEUE: &str = "queue";

/// Claims of an admission token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdmissionClaims {
    /// The account.
    pub sub: String,
    /// The event.
    pub evt: String,
    /// The one session the admission is bound to.
    pub sid: String,
    /// Expiry, unix seconds.
    pub exp: u64,
    /// Always [`TYP_ADMISSION`].
    pub typ: String,
    /// The sale phase (presale lane) the fan queued for: its holds are decided in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// Claims of a queue ticket. It carries no `exp`: the queue's state, not the ticket, says
/// whether the place is still waiting, admitted or expired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueTicketClaims {
    pub sub: String,
    pub evt: String,
    /// The account's 0-based join index; its position follows from the queue's view
    /// (see `queue::QueueView::position`), so the ticket stays valid across the shuffle.
    pub idx: u64,
    /// Always [`TYP_QUEUE`].
    pub typ: String,
    /// The sale phase the fan queued for, carried onto the admission.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// Why the keys could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the waiting-room secret must be at least {SECRET_LEN_MIN_BYTES} bytes")]
    SecretTooShort,
    #[error("invalid waiting-room secret: {0}")]
    Invalid(String),
}

/// Why an admission token was refused. The HTTP layer answers 403 `ADMISSION_INVALID` for
/// all of them; the distinction is for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmissionError {
    /// Not a well-formed HS256 token signed with our key and typed `admission`: forged,
    /// tampered, `alg: none`, another algorithm, wrong key, a queue ticket, garbage.
    #[error("invalid admission token: {0}")]
    Invalid(String),
    #[error("admission token expired")]
    Expired,
    #[error("admission token is for another event")]
    OtherEvent,
    #[error("admission token is for another account")]
    OtherAccount,
}

/// Why a queue ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueueTicketError {
    /// See [`AdmissionError::Invalid`]; an admission token offered as a ticket lands here.
    #[error("invalid queue ticket: {0}")]
    Invalid(String),
    #[error("queue ticket is for another event")]
    OtherEvent,
    #[error("queue ticket is for another account")]
    OtherAccount,
}

/// Signing and verifying keys for one deployment's waiting-room tokens.
#[derive(Clone)]
pub struct TokenKeys {
    keys: HsKeys,
    admission_validation: Validation,
    queue_validation: Validation,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.write_str("TokenKeys(HS256)")
    }
}

impl TokenKeys {
    /// Keys for HS256 with `secret` (at least [`SECRET_LEN_MIN_BYTES`]).
    pub fn new(secret: &[u8]) -> Result<Self, KeyError> {
        Self::with_previous(secret, &[] as &[&[u8]])
    }

    /// Keys that sign with `secret` and also verify tokens signed with one of `previous`
    /// (a key rollover), each at least [`SECRET_LEN_MIN_BYTES`].
    pub fn with_previous<S: AsRef<[u8]>>(secret: &[u8], previous: &[S]) -> Result<Self, KeyError> {
        let keys =
            HsKeys::new(secret, previous, SECRET_LEN_MIN_BYTES).map_err(|error| match error {
                boxoffice_token::KeysError::TooShort { .. } => KeyError::SecretTooShort,
                other => KeyError::Invalid(other.to_string()),
            })?;
        Ok(Self {
            keys,
            admission_validation: validation(&["exp", "sub"]),
            queue_validation: validation(&["sub"]),
        })
    }

    /// Signs an admission token for `account_id` in `session_id` on `event_id`, valid until
    /// `exp_s` (unix seconds).
    pub fn issue_admission(
        &self,
        event_id: &str,
        account_id: &str,
        session_id: &str,
        exp_s: u64,
    ) -> Result<String, KeyError> {
        self.issue_admission_in_lane(event_id, account_id, session_id, exp_s, None)
    }

    /// [`Self::issue_admission`] naming the sale phase the fan queued for.
    pub fn issue_admission_in_lane(
        &self,
        event_id: &str,
        account_id: &str,
        session_id: &str,
        exp_s: u64,
        lane: Option<&str>,
    ) -> Result<String, KeyError> {
        let claims = AdmissionClaims {
            sub: account_id.to_owned(),
            evt: event_id.to_owned(),
            sid: session_id.to_owned(),
            exp: exp_s,
            typ: TYP_ADMISSION.to_owned(),
            lane: lane.map(str::to_owned),
        };
        self.sign(&claims)
    }

    /// Signs a queue ticket for `account_id` with join index `index` in `event_id`'s queue.
    pub fn issue_queue_ticket(
        &self,
        event_id: &str,
        account_id: &str,
        index: u64,
    ) -> Result<String, KeyError> {
        self.issue_queue_ticket_in_lane(event_id, account_id, index, None)
    }

    /// [`Self::issue_queue_ticket`] naming the sale phase the fan queues for.
    pub fn issue_queue_ticket_in_lane(
        &self,
        event_id: &str,
        account_id: &str,
        index: u64,
        lane: Option<&str>,
    ) -> Result<String, KeyError> {
        let claims = QueueTicketClaims {
            sub: account_id.to_owned(),
            evt: event_id.to_owned(),
            idx: index,
            typ: TYP_QUEUE.to_owned(),
            lane: lane.map(str::to_owned),
        };
        self.sign(&claims)
    }

    fn sign<T: Serialize>(&self, claims: &T) -> Result<String, KeyError> {
        self.keys
            .sign(claims)
            .map_err(|e| KeyError::Invalid(e.to_string()))
    }

    /// Checks, in order: signature, algorithm and `typ` ([`AdmissionError::Invalid`]), event,
    /// account, then `exp` against `now_s` with [`EXP_LEEWAY_S`].
    pub fn verify_admission(
        &self,
        token: &str,
        event_id: &str,
        account_id: &str,
        now_s: u64,
    ) -> Result<AdmissionClaims, AdmissionError> {
        if token.len() > TOKEN_LEN_MAX_BYTES {
            return Err(AdmissionError::Invalid("token too long".to_owned()));
        }
        let claims = self
            .keys
            .verify::<AdmissionClaims>(token, &self.admission_validation)
            .map_err(|e| AdmissionError::Invalid(e.to_string()))?
            .claims;
        if claims.typ != TYP_ADMISSION {
            return Err(AdmissionError::Invalid(format!("typ is {:?}", claims.typ)));
        }
        if claims.evt != event_id {
            return Err(AdmissionError::OtherEvent);
        }
        if claims.sub != account_id {
            return Err(AdmissionError::OtherAccount);
        }
        if claims.exp.saturating_add(EXP_LEEWAY_S) <= now_s {
            return Err(AdmissionError::Expired);
        }
        Ok(claims)
    }

    /// Checks signature, algorithm and `typ`, then event and account.
    pub fn verify_queue_ticket(
        &self,
        token: &str,
        event_id: &str,
        account_id: &str,
    ) -> Result<QueueTicketClaims, QueueTicketError> {
        if token.len() > TOKEN_LEN_MAX_BYTES {
            return Err(QueueTicketError::Invalid("token too long".to_owned()));
        }
        let claims = self
            .keys
            .verify::<QueueTicketClaims>(token, &self.queue_validation)
            .map_err(|e| QueueTicketError::Invalid(e.to_string()))?
            .claims;
        if claims.typ != TYP_QUEUE {
            return Err(QueueTicketError::Invalid(format!(
                "typ is {:?}",
                claims.typ
            )));
        }
        if claims.evt != event_id {
            return Err(QueueTicketError::OtherEvent);
        }
        if claims.sub != account_id {
            return Err(QueueTicketError::OtherAccount);
        }
        Ok(claims)
    }
}

/// HS256 only. `exp` is checked by the caller against its own clock (`now_s`), not the
/// library's system clock, so the library's own check is off.
fn validation(required_claims: &[&str]) -> Validation {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.algorithms = vec![Algorithm::HS256];
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    validation.set_required_spec_claims(required_claims);
    validation
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{EncodingKey, Header};

    use super::*;

    const SECRET: &[u8] = b"waitroom-test-secret-0123456789";
    const NOW_S: u64 = 1_900_000_000;
    const EXP_S: u64 = NOW_S + 300;

    fn keys() -> TokenKeys {
        TokenKeys::new(SECRET).unwrap()
    }

    fn b64(raw: &str) -> String {
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Replaces the payload of a signed token, keeping its header and signature.
    fn with_payload(token: &str, payload_json: &str) -> String {
        let parts: Vec<&str> = token.split('.').collect();
        format!("{}.{}.{}", parts[0], b64(payload_json), parts[2])
    }

    #[test]
    fn tokens_of_the_previous_key_verify_during_a_rollover_and_not_after() {
        const NEW: &[u8] = b"waitroom-next-secret-0123456789";
        let old = keys();
        let admission = old
            .issue_admission("evt-a", "acct-x", "sess-1", EXP_S)
            .unwrap();
        let ticket = old.issue_queue_ticket("evt-a", "acct-x", 7).unwrap();
        let during = TokenKeys::with_previous(NEW, &[SECRET]).unwrap();
        assert!(
            during
                .verify_admission(&admission, "evt-a", "acct-x", NOW_S)
                .is_ok()
        );
        assert_eq!(
            during
                .verify_queue_ticket(&ticket, "evt-a", "acct-x")
                .unwrap()
                .idx,
            7
        );
        let fresh = during.issue_queue_ticket("evt-a", "acct-x", 8).unwrap();
        assert!(
            old.verify_queue_ticket(&fresh, "evt-a", "acct-x").is_err(),
            "signed with the new key"
        );
        let after = TokenKeys::new(NEW).unwrap();
        assert!(matches!(
            after.verify_admission(&admission, "evt-a", "acct-x", NOW_S),
            Err(AdmissionError::Invalid(_))
        ));
        assert!(matches!(
            after.verify_queue_ticket(&ticket, "evt-a", "acct-x"),
            Err(QueueTicketError::Invalid(_))
        ));
        assert!(after.verify_queue_ticket(&fresh, "evt-a", "acct-x").is_ok());
    }

    #[test]
    fn a_lane_rides_from_the_queue_ticket_to_the_admission() {
        let keys = keys();
        let ticket = keys
            .issue_queue_ticket_in_lane("evt-a", "acct-x", 3, Some("fanclub"))
            .unwrap();
        let queued = keys
            .verify_queue_ticket(&ticket, "evt-a", "acct-x")
            .unwrap();
        assert_eq!(queued.lane.as_deref(), Some("fanclub"));
        let admission = keys
            .issue_admission_in_lane("evt-a", "acct-x", "sess-1", EXP_S, queued.lane.as_deref())
            .unwrap();
        let claims = keys
            .verify_admission(&admission, "evt-a", "acct-x", NOW_S)
            .unwrap();
        assert_eq!(claims.lane.as_deref(), Some("fanclub"));
        // A token without a lane (every token issued before lanes) has none.
        let plain = keys
            .issue_admission("evt-a", "acct-x", "sess-1", EXP_S)
            .unwrap();
        let claims = keys
            .verify_admission(&plain, "evt-a", "acct-x", NOW_S)
            .unwrap();
        assert_eq!(claims.lane, None);
    }

    #[test]
    fn refuses_short_secrets() {
        assert_eq!(
            TokenKeys::new(b"short").err(),
            Some(KeyError::SecretTooShort)
        );
    }

    #[test]
    fn a_fresh_admission_token_verifies_with_its_claims() {
        let keys = keys();
        let token = keys
            .issue_admission("evt-a", "acct-x", "sess-1", EXP_S)
            .unwrap();
        let claims = keys
            .verify_admission(&token, "evt-a", "acct-x", NOW_S)
            .unwrap();
        assert_eq!(
            claims,
            AdmissionClaims {
                sub: "acct-x".into(),
                evt: "evt-a".into(),
                sid: "sess-1".into(),
                exp: EXP_S,
                typ: TYP_ADMISSION.into(),
                lane: None,
            }
        );
    }

    #[test]
    fn admission_refusals() {
        let keys = keys();
        let good = keys
            .issue_admission("evt-a", "acct-x", "sess-1", EXP_S)
            .unwrap();
        let other_key = TokenKeys::new(b"another-secret-0123456789")
            .unwrap()
            .issue_admission("evt-a", "acct-x", "sess-1", EXP_S)
            .unwrap();
        let tampered = with_payload(
            &good,
            r#"{"sub":"acct-x","evt":"evt-a","sid":"sess-1","exp":9999999999,"typ":"admission"}"#,
        );
        let alg_none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT"}"#),
            b64(
                r#"{"sub":"acct-x","evt":"evt-a","sid":"sess-1","exp":9999999999,"typ":"admission"}"#
            )
        );
        let alg_hs512 = {
            let header = Header::new(Algorithm::HS512);
            let claims = AdmissionClaims {
                sub: "acct-x".into(),
                evt: "evt-a".into(),
                sid: "sess-1".into(),
                exp: EXP_S,
                typ: TYP_ADMISSION.into(),
                lane: None,
            };
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_secret(SECRET).unwrap())
                .unwrap()
        };
        let wrong_typ = keys
            .sign(&AdmissionClaims {
                sub: "acct-x".into(),
                evt: "evt-a".into(),
                sid: "sess-1".into(),
                exp: EXP_S,
                typ: TYP_QUEUE.into(),
                lane: None,
            })
            .unwrap();
        let queue_ticket = keys.issue_queue_ticket("evt-a", "acct-x", 7).unwrap();
        let expired = keys
            .issue_admission("evt-a", "acct-x", "sess-1", NOW_S - EXP_LEEWAY_S)
            .unwrap();
        let within_leeway = keys
            .issue_admission("evt-a", "acct-x", "sess-1", NOW_S - EXP_LEEWAY_S + 1)
            .unwrap();
        let too_long = "a".repeat(TOKEN_LEN_MAX_BYTES + 1);

        enum Want {
            Ok,
            Invalid,
            Err(AdmissionError),
        }
        let cases: [(&str, &str, &str, &str, Want); 12] = [
            ("good", &good, "evt-a", "acct-x", Want::Ok),
            ("within leeway", &within_leeway, "evt-a", "acct-x", Want::Ok),
            (
                "other event",
                &good,
                "evt-b",
                "acct-x",
                Want::Err(AdmissionError::OtherEvent),
            ),
            (
                "other account",
                &good,
                "evt-a",
                "acct-y",
                Want::Err(AdmissionError::OtherAccount),
            ),
            (
                "expired",
                &expired,
                "evt-a",
                "acct-x",
                Want::Err(AdmissionError::Expired),
            ),
            (
                "tampered payload",
                &tampered,
                "evt-a",
                "acct-x",
                Want::Invalid,
            ),
            ("wrong key", &other_key, "evt-a", "acct-x", Want::Invalid),
            ("alg none", &alg_none, "evt-a", "acct-x", Want::Invalid),
            ("alg HS512", &alg_hs512, "evt-a", "acct-x", Want::Invalid),
            ("typ queue", &wrong_typ, "evt-a", "acct-x", Want::Invalid),
            (
                "queue ticket",
                &queue_ticket,
                "evt-a",
                "acct-x",
                Want::Invalid,
            ),
            ("too long", &too_long, "evt-a", "acct-x", Want::Invalid),
        ];
        for (name, token, event_id, account_id, want) in cases {
            let got = keys.verify_admission(token, event_id, account_id, NOW_S);
            match want {
                Want::Ok => assert!(got.is_ok(), "{name}: {got:?}"),
                Want::Invalid => {
                    assert!(
                        matches!(got, Err(AdmissionError::Invalid(_))),
                        "{name}: {got:?}"
                    )
                }
                Want::Err(expected) => assert_eq!(got, Err(expected), "{name}"),
            }
        }
    }

    #[test]
    fn queue_ticket_round_trip_and_refusals() {
        let keys = keys();
        let ticket = keys.issue_queue_ticket("evt-a", "acct-x", 7).unwrap();
        assert_eq!(
            keys.verify_queue_ticket(&ticket, "evt-a", "acct-x"),
            Ok(QueueTicketClaims {
                sub: "acct-x".into(),
                evt: "evt-a".into(),
                idx: 7,
                typ: TYP_QUEUE.into(),
                lane: None,
            })
        );
        assert_eq!(
            keys.verify_queue_ticket(&ticket, "evt-b", "acct-x"),
            Err(QueueTicketError::OtherEvent)
        );
        assert_eq!(
            keys.verify_queue_ticket(&ticket, "evt-a", "acct-y"),
            Err(QueueTicketError::OtherAccount)
        );
        let moved_up = with_payload(
            &ticket,
            r#"{"sub":"acct-x","evt":"evt-a","idx":1,"typ":"queue"}"#,
        );
        let alg_none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT"}"#),
            b64(r#"{"sub":"acct-x","evt":"evt-a","idx":1,"typ":"queue"}"#)
        );
        let admission = keys.issue_admission("evt-a", "acct-x", "s", EXP_S).unwrap();
        let wrong_key = TokenKeys::new(b"another-secret-0123456789")
            .unwrap()
            .issue_queue_ticket("evt-a", "acct-x", 1)
            .unwrap();
        for (name, token) in [
            ("tampered", &moved_up),
            ("alg none", &alg_none),
            ("admission token", &admission),
            ("wrong key", &wrong_key),
        ] {
            let got = keys.verify_queue_ticket(token, "evt-a", "acct-x");
            assert!(
                matches!(got, Err(QueueTicketError::Invalid(_))),
                "{name}: {got:?}"
            );
        }
    }
}
