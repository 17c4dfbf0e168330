//! Development sign-in for the storefront: only when the server runs with the public
//! development secret (`--dev-auth`, the demo), where anyone can mint a token anyway.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use boxoffice_domain::ids::AccountId;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::mint_token_with_email;
use crate::body::JsonBody;
use crate::error::ApiError;

/// How long a development token lasts.
pub const DEV_TOKEN_TTL_S: u64 = 12 * 3600;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DevTokenBody {
    /// The account to sign in as (1-64 chars of `[A-Za-z0-9_.-]`).
    pub account_id: String,
    /// An operator token.
    #[serde(default)]
    pub admin: bool,
    /// The account's address, carried as the token's `email` claim.
    #[schema(
        max_length = 254,
        pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$"
    )]
    pub email: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DevToken {
    pub token: String,
    pub account_id: String,
}

/// A signed account token, for development servers only (404 unless `--dev-auth`).
#[utoipa::path(post, path = "/v1/dev/token", tag = "dev", request_body = DevTokenBody, responses(
    (status = 201, description = "A token for the account", body = DevToken),
    (status = 404, description = "Not a development server", body = crate::api::Problem),
    (status = 422, description = "Bad account id", body = crate::api::Problem),
    (status = 429, description = "RATE_LIMITED: signins-per-address; retry after Retry-After", body = crate::api::Problem),
))]
pub async fn dev_token(
    State(state): State<AppState>,
    address: Option<axum::Extension<crate::ClientAddr>>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    if !state.dev_auth {
        return Err(ApiError::not_found("route"));
    }
    if let Some(axum::Extension(crate::ClientAddr(ip))) = address {
        state
            .limits
            .take(crate::limits::Limit::SigninsPerAddress, &ip.to_string())?;
    }
    let request: DevTokenBody = body.parse()?;
    let account =
        AccountId::parse(&request.account_id).map_err(|e| ApiError::validation("accountId", e))?;
    if let Some(email) = &request.email
        && !boxoffice_store::mail::email_is_valid(email)
    {
        return Err(ApiError::validation("email", "is not an address"));
    }
    let token = mint_token_with_email(
        crate::auth::DEV_JWT_SECRET,
        &account,
        request.admin,
        DEV_TOKEN_TTL_S,
        request.email.as_deref(),
    )
    .map_err(|error| {
        tracing::error!(%error, "minting a development token");
        ApiError::internal()
    })?;
    let answer = DevToken {
        token,
        account_id: account.to_string(),
    };
    Ok((StatusCode::CREATED, axum::Json(answer)).into_response())
}
