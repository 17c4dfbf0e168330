//! Account bearer tokens (`Authorization: Bearer`): the server's `TokenVerifier::verify`,
//! HS256 with the required `exp` and `sub`. The first byte picks the mode:
//!
//! - 0: the rest, as text, is a token: verify must not panic, a refusal is a 401, and an
//!   accepted token names a valid account id.
//! - 1: the rest is a JSON claims object, signed with the server's secret (what a client
//!   holding the secret could send): an accepted token's account is its `sub`, a valid
//!   account id, and it is an admin exactly when `role` is `"admin"`.
//! - 2: `mint_token` (what `boxoffice token` and the demo sign) for an account id and TTL
//!   from the rest: a valid account id round-trips with its role.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use boxoffice_domain::ids::AccountId;
use boxoffice_fuzz::JWT_SECRET;
use boxoffice_server::auth::{TokenVerifier, mint_token};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static VERIFIER: LazyLock<TokenVerifier> =
    LazyLock::new(|| TokenVerifier::hs256(JWT_SECRET).expect("the dev secret is long enough"));

fuzz_target!(|data: &[u8]| {
    let Some((mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let Ok(token) = std::str::from_utf8(rest) else {
                return;
            };
            match VERIFIER.verify(token) {
                Ok(account) => assert!(AccountId::parse(account.account_id.as_str()).is_ok()),
                Err(error) => assert_eq!(error.status.as_u16(), 401, "{error:?}"),
            }
        }
        1 => {
            let Ok(claims) = serde_json::from_slice::<serde_json::Value>(rest) else {
                return;
            };
            let key = EncodingKey::from_secret(JWT_SECRET.as_bytes()).expect("an HS256 key");
            let Ok(token) = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
            else {
                return;
            };
            match VERIFIER.verify(&token) {
                Ok(account) => {
                    assert_eq!(Some(account.account_id.as_str()), claims["sub"].as_str());
                    assert!(AccountId::parse(account.account_id.as_str()).is_ok());
                    assert_eq!(account.admin, claims["role"] == "admin");
                }
                Err(error) => assert_eq!(error.status.as_u16(), 401, "{error:?}"),
            }
        }
        _ => {
            let mut input = Unstructured::new(rest);
            let (Ok(raw_id), Ok(admin), Ok(ttl_s)) = (
                String::arbitrary(&mut input),
                bool::arbitrary(&mut input),
                u64::arbitrary(&mut input),
            ) else {
                return;
            };
            let Ok(account_id) = AccountId::parse(&raw_id) else {
                return;
            };
            let token = mint_token(JWT_SECRET, &account_id, admin, ttl_s).expect("mints");
            let account = VERIFIER
                .verify(&token)
                .unwrap_or_else(|error| panic!("a minted token was refused: {error:?}"));
            assert_eq!(account.account_id, account_id);
            assert_eq!(account.admin, admin);
        }
    }
});
