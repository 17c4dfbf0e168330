//! Cancelling an event (API.md, "Refunds and cancellation"): `POST /v1/admin/events/{eventId}/
//! cancel` stops the sale at once and `GET /v1/admin/events/{eventId}/cancellation` shows how
//! far the refunds got.
//!
//! The cancellation is a command of the event's writer (`boxoffice_domain::engine::cancel`):
//! when the answer comes, the group that recorded it has committed, every live hold has
//! ended, every ticket is void and the engine sells nothing. The refunds follow, a bounded
//! number a second, by the workers' job (`boxoffice_workers::cancellation`), which survives
//! restarts; the relay pays each refund.
//!
//! Idempotency: the cancellation is stored with its key and digest; a retry answers it as it
//! stands, and so does any later cancel of the same event (cancelling twice changes nothing),
//! but the same key with another body is refused.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::engine::{CancelDecision, CancelRequest};
use boxoffice_domain::idempotency::request_digest;
use boxoffice_store::cancellation::{CANCEL_REASON_LEN_MAX, CancellationView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::request_key;

/// 409 `EVENT_CANCELLED`: what anything that would sell answers once the event is cancelled.
pub fn event_cancelled() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "EVENT_CANCELLED",
        "the event was cancelled: nothing is sold any more",
    )
}

/// `POST /v1/admin/events/{eventId}/cancel` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelEventBody {
    /// Why, for the buyers and the books (1-500 characters, not only white space, no control
    /// character).
    #[schema(
        min_length = 1,
        max_length = 500,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\u0000-\\u0020\\u007F-\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    pub reason: String,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// A cancellation and how far its refunds got.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancellationResponse {
    pub event_id: String,
    /// `CANCELLING` while refunds are recorded or paid; `CANCELLED` once every paid order's
    /// money went back (or its refund failed: `failed`, the operator's case).
    #[schema(value_type = crate::api::status_names::CancellationStatus, example = "CANCELLING")]
    pub status: String,
    pub reason: String,
    /// Paid orders of the event (confirmed; authorized or captured).
    pub orders: u64,
    /// Of those, how many have all their money back (or their authorization voided).
    pub refunded: u64,
    /// Of those, how many have a refund the provider refused: money still owed.
    pub failed: u64,
    /// What the cancellation's refunds gave back so far.
    pub amount_refunded_minor: i64,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: boxoffice_domain::OffsetDateTime,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<boxoffice_domain::OffsetDateTime>,
}

impl CancellationResponse {
    pub fn new(view: &CancellationView) -> Self {
        Self {
            event_id: view.event_id.clone(),
            status: view.status().as_str().to_owned(),
            reason: view.reason.clone(),
            orders: view.orders,
            refunded: view.refunded,
            failed: view.failed,
            amount_refunded_minor: view.amount_refunded_minor,
            created_at: view.created_at,
            finished_at: view.finished_at,
        }
    }
}

fn answer(view: &CancellationView, replayed: bool) -> Response {
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(CancellationResponse::new(view)),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", HeaderValue::from_static("true"));
    }
    response
}

/// Cancels an event: the sale stops at once, every ticket is voided, and every paid order is
/// refunded (an authorization not yet captured is voided), exactly once, by a job.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/cancel", tag = "refunds",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CancelEventBody,
    responses(
        (status = 202, description = "Cancelled: nothing sells, every ticket is void; the refunds follow (a retry, or a later cancel of the same event, answers the cancellation as it stands, a retry with Idempotent-Replayed)", body = CancellationResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "VALIDATION (the reason) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn cancel_event(
    State(state): State<AppState>,
    crate::auth::Admin(account): crate::auth::Admin,
    Path(event_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<CancelEventBody>()?;
    let reason = request.reason.trim();
    if reason.is_empty() || request.reason.chars().count() > CANCEL_REASON_LEN_MAX {
        return Err(ApiError::validation(
            "reason",
            format!("must be 1-{CANCEL_REASON_LEN_MAX} characters, not only white space"),
        ));
    }
    if request.reason.chars().any(char::is_control) {
        return Err(ApiError::validation(
            "reason",
            "must not contain control characters",
        ));
    }
    let event = state.event(&event_id).await?;
    let path = format!("/v1/admin/events/{event_id}/cancel");
    let digest = request_digest("POST", &path, &body.0);
    if let Some(answered) = replay(&state, &event_id, &key, &digest).await? {
        return Ok(answered);
    }
    let request = CancelRequest {
        account_id: account.account_id.to_string(),
        idempotency_key: key.clone(),
        request_digest: digest.clone(),
        reason: request.reason.clone(),
    };
    let decision = state.writers.cancel(event, request).await?;
    if let CancelDecision::Cancelled { holds_ended } = decision {
        boxoffice_workers::crash::point("cancel_committed");
        tracing::info!(%event_id, holds_ended, "event cancelled");
        metrics::counter!("boxoffice_events_cancelled_total").increment(1);
        state.cancellations.poke();
    }
    state.waitroom.mark_cancelled(&event_id);
    match replay(&state, &event_id, &key, &digest).await? {
        Some(answered) => Ok(answered),
        None => Err(ApiError::internal()),
    }
}

/// The event's cancellation as it stands (a key of the first request answered as a replay,
/// any other as the cancellation); `None` when the event is not cancelled.
async fn replay(
    state: &AppState,
    event_id: &str,
    key: &str,
    digest: &str,
) -> ApiResult<Option<Response>> {
    let Some((view, stored_key, stored_digest)) = state.store.get_cancellation(event_id).await?
    else {
        return Ok(None);
    };
    if stored_key != key {
        return Ok(Some(answer(&view, false)));
    }
    if stored_digest != digest {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
            "this Idempotency-Key was used with a different request",
        ));
    }
    Ok(Some(answer(&view, true)))
}

/// How far the event's cancellation got.
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/cancellation", tag = "refunds",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The cancellation as it progresses", body = CancellationResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event, or it is not cancelled", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_cancellation(
    State(state): State<AppState>,
    crate::auth::Admin(_account): crate::auth::Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let (view, _, _) = state
        .store
        .get_cancellation(&event.event_id)
        .await?
        .ok_or_else(|| ApiError::not_found("cancellation"))?;
    Ok(axum::Json(CancellationResponse::new(&view)).into_response())
}
