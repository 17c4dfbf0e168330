//! The bearer tokens of the API (API.md, "Identity"): HS256 JWTs whose `sub` is the account
//! id, whose `exp` is required, and whose `role: "admin"` marks an operator.
//!
//! This crate is what a client needs to sign one — the demo, `boxoffice token` and the load
//! tool — without the server: `boxoffice-server` verifies them with the same [`Claims`].

use boxoffice_domain::ids::AccountId;
use serde::{Deserialize, Serialize};

pub mod keys;

pub use keys::{HsKeys, KeysError, VerifyError, kid_of};

/// The secret the demo and `boxoffice token` use when none is configured. Never for
/// production: `serve` refuses to start without `BOXOFFICE_JWT_SECRET` unless told
/// `--dev-auth`.
pub const DEV_JWT_SECRET: &str = "boxoffice-dev-secret-do-not-use-in-production";

/// A token's claims.
#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    /// The account id.
    pub sub: String,
    /// Expiry, Unix seconds.
    pub exp: u64,
    /// `"admin"` for an operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The account's address, when the identity provider knows it: the server records it
    /// for the account's mail unless the fan set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
}

/// Signs a token for `account_id`, valid for `ttl_s` seconds from now, naming the secret's
/// key id ([`kid_of`]) in its header.
pub fn mint_token(
    secret: &str,
    account_id: &AccountId,
    admin: bool,
    ttl_s: u64,
) -> Result<String, String> {
    mint_token_with_email(secret, account_id, admin, ttl_s, None)
}

/// [`mint_token`] with an `email` claim.
pub fn mint_token_with_email(
    secret: &str,
    account_id: &AccountId,
    admin: bool,
    ttl_s: u64,
    email: Option<&str>,
) -> Result<String, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let claims = Claims {
        sub: account_id.to_string(),
        exp: now.saturating_add(ttl_s),
        role: admin.then(|| "admin".to_owned()),
        email: email.map(str::to_owned),
    };
    HsKeys::new(secret.as_bytes(), &[] as &[&[u8]], 0)
        .map_err(|e| e.to_string())?
        .sign(&claims)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{Algorithm, DecodingKey, Validation};

    #[test]
    fn a_minted_token_verifies_with_its_claims() {
        let token = mint_token(
            "0123456789abcdef0123",
            &AccountId::parse("acct_ann").unwrap(),
            true,
            60,
        )
        .unwrap();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(
            &token,
            &DecodingKey::from_secret(b"0123456789abcdef0123").unwrap(),
            &validation,
        )
        .unwrap();
        assert_eq!(data.claims.sub, "acct_ann");
        assert_eq!(data.claims.role.as_deref(), Some("admin"));
        let wrong = jsonwebtoken::decode::<Claims>(
            &token,
            &DecodingKey::from_secret(b"another-secret-of-20b").unwrap(),
            &validation,
        );
        assert!(wrong.is_err(), "a token verifies only with its own secret");
    }
}
