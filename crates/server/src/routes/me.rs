//! The caller's own account (issue 39): where mail goes and in which language.
//!
//! An account's address comes from the identity token's `email` claim (recorded off the
//! request path when a token is first verified, see `auth`) or from the fan here; the fan's
//! choice wins, and a token never overwrites it. The language picks the mails' catalogue.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use boxoffice_store::mail::{AccountRecord, AccountUpdate, EMAIL_LEN_MAX, email_is_valid};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};

/// The caller's account.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeView {
    pub account_id: String,
    /// Where mail goes; absent: no mail is sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The mails' language (`en`, `de`, `fr`, `es`, `zh`); absent: English.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
}

impl MeView {
    fn new(account_id: &str, record: Option<&AccountRecord>) -> Self {
        Self {
            account_id: account_id.to_owned(),
            email: record.and_then(|r| r.email.clone()),
            locale: record.and_then(|r| r.locale.clone()),
        }
    }
}

/// What `PUT /v1/me` changes; an absent field stays as it is.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateMeBody {
    /// An address (at most 254 characters, one `@`, no spaces or control characters).
    #[schema(
        max_length = 254,
        pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$"
    )]
    pub email: Option<String>,
    /// One of `en`, `de`, `fr`, `es`, `zh`.
    #[schema(pattern = "^(en|de|fr|es|zh)$")]
    pub locale: Option<String>,
}

/// The caller's account: its address and language.
#[utoipa::path(get, path = "/v1/me", tag = "account", responses(
    (status = 200, description = "The caller's account", body = MeView),
    (status = 401, description = "No valid token", body = Problem),
), security(("bearer" = [])))]
pub async fn get_me(State(state): State<AppState>, account: Account) -> ApiResult<Response> {
    let account_id = account.account_id.to_string();
    let record = state.store.get_account(&account_id).await?;
    Ok(axum::Json(MeView::new(&account_id, record.as_ref())).into_response())
}

/// Sets the caller's address (the fan's: a token's claim no longer changes it) and language.
#[utoipa::path(put, path = "/v1/me", tag = "account", request_body = UpdateMeBody, responses(
    (status = 200, description = "The account as it is now", body = MeView),
    (status = 401, description = "No valid token", body = Problem),
    (status = 422, description = "VALIDATION: a bad address or an unknown language", body = Problem),
), security(("bearer" = [])))]
pub async fn update_me(
    State(state): State<AppState>,
    account: Account,
    body: JsonBody,
) -> ApiResult<Response> {
    let request: UpdateMeBody = body.parse()?;
    if let Some(email) = &request.email
        && !email_is_valid(email)
    {
        return Err(ApiError::validation(
            "email",
            format!("is not an address (at most {EMAIL_LEN_MAX} characters, one @, no spaces)"),
        ));
    }
    if let Some(locale) = &request.locale
        && !boxoffice_i18n::LOCALES.contains(&locale.as_str())
    {
        return Err(ApiError::validation(
            "locale",
            format!("must be one of {}", boxoffice_i18n::LOCALES.join(", ")),
        ));
    }
    let account_id = account.account_id.to_string();
    let update = AccountUpdate {
        email: request.email,
        locale: request.locale,
    };
    let record = state.store.update_account(&account_id, &update).await?;
    Ok(axum::Json(MeView::new(&account_id, Some(&record))).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_states_the_address_rule_the_store_applies() {
        let document = serde_json::to_value(crate::openapi()).unwrap();
        let schemas = &document["components"]["schemas"];
        for schema in ["UpdateMeBody", "DevTokenBody"] {
            let email = &schemas[schema]["properties"]["email"];
            assert_eq!(
                email["pattern"],
                boxoffice_store::mail::EMAIL_PATTERN,
                "{schema}"
            );
            assert_eq!(
                email["maxLength"],
                boxoffice_store::mail::EMAIL_LEN_MAX,
                "{schema}"
            );
        }
    }
}
