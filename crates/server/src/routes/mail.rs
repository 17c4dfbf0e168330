//! Fans' mail, the admin side (issue 39): the recent mails and their outcomes, a mail's file
//! in folder mode, and a resend of a mail that may be missing.
//!
//! The mails are made by the outbox relay's fan-out and sent by the mail sender
//! (`boxoffice_workers::mail`); see `boxoffice_store::mail` for the rules. A resend is
//! idempotent by state: it queues a `FAILED`, `UNCERTAIN` or `NO_ADDRESS` mail again; a mail
//! that was sent, or is pending or being sent, is refused (409).

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_store::mail::{MailMessage, MailStatus, Resent};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::error::{ApiError, ApiResult};

/// Default page size of the mail list.
pub const MAIL_PAGE_DEFAULT: u32 = 50;
/// Largest page size of the mail list.
pub const MAIL_PAGE_MAX: u32 = 200;
/// The media types a mail file is served as: the mail's own, or plain text when `Accept`
/// asks for that.
pub const EML_MEDIA_TYPES: [&str; 2] = ["message/rfc822", "text/plain"];
/// Largest mail file served, in bytes (a mail with its PDF is far smaller).
pub const EML_LEN_MAX: u64 = 20 * 1024 * 1024;

/// A mail as the admin sees it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailView {
    pub mail_id: i64,
    pub account_id: String,
    /// ORDER_TICKETS, EXCHANGE_TICKETS, TRANSFER_RECEIVED, TRANSFER_SENT, TRANSFER_OFFERED,
    /// WAITLIST_OFFER, REFUND_SUCCEEDED, REFUND_FAILED, EVENT_CANCELLED.
    pub kind: String,
    /// The address it went (or goes) to.
    pub to: Option<String>,
    pub subject: Option<String>,
    /// PENDING, SENDING, SENT, FAILED, UNCERTAIN or NO_ADDRESS.
    #[schema(pattern = "^(PENDING|SENDING|SENT|FAILED|UNCERTAIN|NO_ADDRESS)$")]
    pub status: String,
    pub attempts: u32,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub sent_at: Option<OffsetDateTime>,
}

impl MailView {
    fn new(mail: &MailMessage) -> Self {
        Self {
            mail_id: mail.mail_id,
            account_id: mail.account_id.clone(),
            kind: mail.kind.clone(),
            to: mail.to_address.clone(),
            subject: mail.subject.clone(),
            status: mail.status.as_str().to_owned(),
            attempts: mail.n_attempts,
            last_error: mail.last_error.clone(),
            created_at: mail.created_at,
            sent_at: mail.sent_at,
        }
    }
}

/// A page of mails, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MailPage {
    pub mails: Vec<MailView>,
    /// Pass as `before` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MailQuery {
    /// Only mails of this status (PENDING, SENDING, SENT, FAILED, UNCERTAIN, NO_ADDRESS).
    #[param(pattern = "^(PENDING|SENDING|SENT|FAILED|UNCERTAIN|NO_ADDRESS)$")]
    pub status: Option<String>,
    /// Only mails with a smaller `mailId` (the previous page's `nextBefore`).
    #[param(minimum = 1)]
    pub before: Option<i64>,
    /// 1-200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
}

/// The recent mails to fans, newest first.
#[utoipa::path(
    get, path = "/v1/admin/mail", tag = "mail", params(MailQuery),
    responses(
        (status = 200, description = "A page of mails", body = MailPage),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 422, description = "Bad status, before or limit", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_mail(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    query: Result<Query<MailQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(query) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let limit = query.limit.unwrap_or(MAIL_PAGE_DEFAULT);
    if !(1..=MAIL_PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            format!("must be between 1 and {MAIL_PAGE_MAX}"),
        ));
    }
    if query.before.is_some_and(|before| before < 1) {
        return Err(ApiError::validation("before", "must be at least 1"));
    }
    let status = match query.status.as_deref() {
        None => None,
        Some(raw) => Some(MailStatus::parse(raw).ok_or_else(|| {
            let all: Vec<&str> = MailStatus::ALL.iter().map(|s| s.as_str()).collect();
            ApiError::validation("status", format!("must be one of {}", all.join(", ")))
        })?),
    };
    let mails = state.store.list_mail(status, query.before, limit).await?;
    let next_before = (mails.len() == limit as usize)
        .then(|| mails.last().map(|m| m.mail_id))
        .flatten();
    Ok(axum::Json(MailPage {
        mails: mails.iter().map(MailView::new).collect(),
        next_before,
    })
    .into_response())
}

/// A mail id from a path segment; `None` for anything that is not one.
fn mail_id_of(raw: &str) -> Option<i64> {
    raw.parse().ok().filter(|id| *id >= 1)
}

/// A mail as the file it was written to (`<mailId>.eml`, `message/rfc822`, or `text/plain`
/// when `Accept` asks for that), when the server writes mail to a folder (`--mail-dir`, the
/// demo); 404 otherwise.
#[utoipa::path(
    get, path = "/v1/admin/mail/{mailFile}", tag = "mail",
    params(("mailFile" = String, Path, description = "`<mailId>.eml`")),
    responses(
        (status = 200, description = "The mail as sent", content(
            (String = "message/rfc822"),
            (String = "text/plain"),
        )),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such mail file (or mail goes through SMTP)", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn mail_file(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(mail_file): Path<String>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    let mail_id = mail_file
        .strip_suffix(".eml")
        .and_then(mail_id_of)
        .ok_or_else(|| ApiError::not_found("mail file"))?;
    let dir = state
        .mail
        .as_ref()
        .and_then(|sender| sender.config().folder_path())
        .ok_or_else(|| ApiError::not_found("mail file"))?;
    let path = dir.join(boxoffice_workers::mail::eml_name(mail_id));
    let too_big = tokio::fs::metadata(&path)
        .await
        .map_err(|_| ApiError::not_found("mail file"))?
        .len()
        > EML_LEN_MAX;
    if too_big {
        return Err(ApiError::not_found("mail file"));
    }
    let bytes = tokio::fs::read(&path)
        .await
        .map_err(|_| ApiError::not_found("mail file"))?;
    let media = crate::routes::tickets::negotiated(&headers, EML_MEDIA_TYPES);
    Ok(([(header::CONTENT_TYPE, media)], bytes).into_response())
}

/// Queues a mail again that may be missing (`FAILED`, `UNCERTAIN`, `NO_ADDRESS`): `PENDING`,
/// due now, its address read again from the account.
#[utoipa::path(
    post, path = "/v1/admin/mail/{mailId}/resend", tag = "mail",
    params(("mailId" = i64, Path, minimum = 1)),
    responses(
        (status = 200, description = "Queued again", body = MailView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such mail", body = Problem),
        (status = 409, description = "NOT_RESENDABLE: sent, pending or being sent", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn resend_mail(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(mail_id): Path<String>,
) -> ApiResult<Response> {
    let mail_id = mail_id_of(&mail_id).ok_or_else(|| ApiError::not_found("mail"))?;
    match state.store.resend_mail(mail_id).await? {
        None => Err(ApiError::not_found("mail")),
        Some(Resent::NotResendable(mail)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "NOT_RESENDABLE",
            format!(
                "the mail is {}: only a FAILED, UNCERTAIN or NO_ADDRESS mail is sent again",
                mail.status.as_str()
            ),
        )),
        Some(Resent::Queued(mail)) => {
            metrics::counter!("boxoffice_mail_resends_total").increment(1);
            if let Some(sender) = &state.mail {
                sender.poke();
            }
            Ok(axum::Json(MailView::new(&mail)).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_names_every_status_the_store_has() {
        let statuses: Vec<&str> = MailStatus::ALL.iter().map(|s| s.as_str()).collect();
        let pattern = format!("^({})$", statuses.join("|"));
        let document = serde_json::to_value(crate::openapi()).unwrap();
        let list = &document["paths"]["/v1/admin/mail"]["get"]["parameters"];
        let status = list
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "status")
            .unwrap();
        assert_eq!(status["schema"]["pattern"], pattern.as_str());
        let view = &document["components"]["schemas"]["MailView"]["properties"]["status"];
        assert_eq!(view["pattern"], pattern.as_str());
    }
}
