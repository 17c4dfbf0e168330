//! Identity: HS256 JWTs per API.md. `sub` is the account id, `exp` is required, and
//! `role: "admin"` marks an operator. Keys roll over ([`boxoffice_token::HsKeys`]): one
//! secret signs, previous ones still verify, and a token's `kid` names its key. [`Account`] and [`Admin`] are the extractors handlers
//! use; [`mint_token`] is what `boxoffice token` and the demo print.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use boxoffice_domain::ids::AccountId;
use boxoffice_token::HsKeys;
use jsonwebtoken::{Algorithm, Validation};

use crate::AppState;
use crate::error::ApiError;
use crate::token_cache::TokenCache;

pub use boxoffice_token::{Claims, DEV_JWT_SECRET, mint_token, mint_token_with_email};

/// Clock skew tolerated when checking `exp`.
pub const JWT_LEEWAY_S: u64 = 5;
/// Shortest HS256 secret accepted, in bytes.
pub const JWT_SECRET_LEN_MIN: usize = 16;
/// Longest bearer token accepted, in bytes.
pub const TOKEN_LEN_MAX: usize = 4096;

/// Token addresses waiting to be recorded; more are dropped (the next verification of a
/// token with the claim, after the cache forgot it, offers it again).
pub const TOKEN_EMAILS_QUEUED_MAX: usize = 1_024;

/// An identity token's `email` claim: (account id, address).
pub type TokenEmail = (String, String);

/// Verifies tokens with the configured secrets.
#[derive(Clone)]
pub struct TokenVerifier {
    keys: HsKeys,
    validation: Validation,
    /// Tokens that verified, with their account and `exp` (re-checked on every hit).
    verified: std::sync::Arc<TokenCache<(Account, u64)>>,
    /// Where a verified token's `email` claim goes (once per token while it is cached):
    /// [`record_token_emails`] writes it to the account, never on the request's path.
    emails: Option<tokio::sync::mpsc::Sender<TokenEmail>>,
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenVerifier(HS256, {:?})", self.keys)
    }
}

impl TokenVerifier {
    /// A verifier for HS256 tokens signed with `secret` (at least [`JWT_SECRET_LEN_MIN`] bytes).
    pub fn hs256(secret: &str) -> Result<Self, String> {
        Self::with_previous(secret, &[] as &[&str])
    }

    /// A verifier for tokens signed with `secret` or, during a key rollover, with one of
    /// `previous`.
    pub fn with_previous<S: AsRef<str>>(secret: &str, previous: &[S]) -> Result<Self, String> {
        let previous: Vec<&[u8]> = previous.iter().map(|p| p.as_ref().as_bytes()).collect();
        let keys = HsKeys::new(secret.as_bytes(), &previous, JWT_SECRET_LEN_MIN)
            .map_err(|e| format!("JWT secrets: {e}"))?;
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = JWT_LEEWAY_S;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Ok(Self {
            keys,
            validation,
            verified: std::sync::Arc::default(),
            emails: None,
        })
    }

    /// Sends verified tokens' `email` claims to `sink` (never waiting: a full queue drops).
    pub fn with_email_sink(mut self, sink: tokio::sync::mpsc::Sender<TokenEmail>) -> Self {
        self.emails = Some(sink);
        self
    }

    /// `read` of the account of a bearer token that verified before and has not expired;
    /// `None` when it must be verified (or refused) in full by [`Self::verify`].
    pub fn with_cached<R>(&self, token: &str, read: impl FnOnce(&Account) -> R) -> Option<R> {
        let now = unix_s();
        self.verified
            .with(token, |(account, exp)| {
                (exp.saturating_add(JWT_LEEWAY_S) > now).then(|| read(account))
            })
            .flatten()
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
        let data = self
            .keys
            .verify::<Claims>(token, &self.validation)
            .map_err(|e| ApiError::unauthenticated(format!("invalid token: {e}")))?;
        let account_id = AccountId::parse(&data.claims.sub)
            .map_err(|e| ApiError::unauthenticated(format!("invalid token subject: {e}")))?;
        let account = Account {
            account_id,
            admin: data.claims.role.as_deref() == Some("admin"),
        };
        if let (Some(sink), Some(email)) = (&self.emails, data.claims.email)
            && boxoffice_store::mail::email_is_valid(&email)
        {
            // A hold never waits for this: a full queue drops the address.
            let _ = sink.try_send((account.account_id.to_string(), email));
        }
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

/// Records the addresses of tokens' `email` claims until the verifiers are gone (an address
/// the fan set is kept: `MailStore::record_token_email`).
pub async fn record_token_emails(
    store: std::sync::Arc<dyn boxoffice_store::Store>,
    mut emails: tokio::sync::mpsc::Receiver<TokenEmail>,
) {
    while let Some((account_id, email)) = emails.recv().await {
        if let Err(error) = store.record_token_email(&account_id, &email).await {
            tracing::warn!(%account_id, %error, "recording a token's email failed");
        }
    }
}
