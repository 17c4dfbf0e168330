//! Identity: HS256 JWTs per API.md. `sub` is the account id, `exp` is required, and
//! `role: "admin"` marks an operator. [`Account`] and [`Admin`] are the extractors handlers
//! use; [`mint_token`] is what `boxoffice token` and the demo print.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use boxoffice_domain::ids::AccountId;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::error::ApiError;
use crate::token_cache::TokenCache;

/// The secret the demo and `boxoffice token` use when none is configured. Never for
/// production: `serve` refuses to start without `BOXOFFICE_JWT_SECRET` unless told
/// `--dev-auth`.
pub const DEV_JWT_SECRET: &str = "boxoffice-dev-secret-do-not-use-in-production";
/// Clock skew tolerated when checking `exp`.
pub const JWT_LEEWAY_S: u64 = 5;
/// Shortest HS256 secret accepted, in bytes.
pub const JWT_SECRET_LEN_MIN: usize = 16;
/// Longest bearer token accepted, in bytes.
pub const TOKEN_LEN_MAX: usize = 4096;

#[derive(Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

/// Verifies tokens with the configured secret.
#[derive(Clone)]
pub struct TokenVerifier {
    key: DecodingKey,
    validation: Validation,
    /// Tokens that verified, with their account and `exp` (re-checked on every hit).
    verified: std::sync::Arc<TokenCache<(Account, u64)>>,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenVerifier(HS256)")
    }
}

impl TokenVerifier {
    /// A verifier for HS256 tokens signed with `secret` (at least [`JWT_SECRET_LEN_MIN`] bytes).
    pub fn hs256(secret: &str) -> Result<Self, String> {
        if secret.len() < JWT_SECRET_LEN_MIN {
            return Err(format!(
                "the JWT secret must be at least {JWT_SECRET_LEN_MIN} bytes"
            ));
        }
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = JWT_LEEWAY_S;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Ok(Self {
            key: DecodingKey::from_secret(secret.as_bytes()).map_err(|e| e.to_string())?,
            validation,
            verified: std::sync::Arc::default(),
        })
    }

    pub fn verify(&self, token: &str) -> Result<Account, ApiError> {
        if token.len() > TOKEN_LEN_MAX {
            return Err(ApiError::unauthenticated("token too long"));
        }
        if let Some((account, exp)) = self.verified.get(token) {
            if exp.saturating_add(JWT_LEEWAY_S) > unix_s() {
                return Ok(account);
            }
            return Err(ApiError::unauthenticated("invalid token: ExpiredSignature"));
        }
        let data = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| ApiError::unauthenticated(format!("invalid token: {e}")))?;
        let account_id = AccountId::parse(&data.claims.sub)
            .map_err(|e| ApiError::unauthenticated(format!("invalid token subject: {e}")))?;
        let account = Account {
            account_id,
            admin: data.claims.role.as_deref() == Some("admin"),
        };
        self.verified
            .insert(token, (account.clone(), data.claims.exp));
        Ok(account)
    }
}

fn unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Signs a token for `account_id`, valid for `ttl_s` seconds from now.
pub fn mint_token(
    secret: &str,
    account_id: &AccountId,
    admin: bool,
    ttl_s: u64,
) -> Result<String, String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs();
    let claims = Claims {
        sub: account_id.to_string(),
        exp: now + ttl_s,
        role: admin.then(|| "admin".to_owned()),
    };
    let key = EncodingKey::from_secret(secret.as_bytes()).map_err(|e| e.to_string())?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key).map_err(|e| e.to_string())
}

/// The authenticated caller.
#[derive(Debug, Clone)]
pub struct Account {
    pub account_id: AccountId,
    pub admin: bool,
}

impl FromRequestParts<AppState> for Account {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthenticated("missing Authorization: Bearer <token>"))?;
        let value = header
            .to_str()
            .map_err(|_| ApiError::unauthenticated("Authorization header is not ASCII"))?;
        let token = value
            .strip_prefix("Bearer ")
            .or_else(|| value.strip_prefix("bearer "))
            .ok_or_else(|| ApiError::unauthenticated("Authorization must be Bearer <token>"))?;
        state.verifier.verify(token.trim())
    }
}

/// An authenticated operator (`role: "admin"`).
#[derive(Debug, Clone)]
pub struct Admin(pub Account);

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let account = Account::from_request_parts(parts, state).await?;
        if !account.admin {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "FORBIDDEN",
                "this operation needs an admin token",
            ));
        }
        Ok(Self(account))
    }
}
