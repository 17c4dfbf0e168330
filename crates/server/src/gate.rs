//! What an inventory request passes on its way to its event's writer, shared by the hold,
//! checkout and exchange routes: the waiting room's admission check, the replay of an answer
//! its key already has when the request is refused before its transaction, and the 429 of a
//! writer that has more queued than it takes soon.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use boxoffice_domain::idempotency::IdempotencyScope;
use boxoffice_store::EventRecord;

use crate::AppState;
use crate::auth::Account;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::answer;
use crate::runtime::writer::SubmitError;

impl From<SubmitError> for ApiError {
    fn from(error: SubmitError) -> Self {
        match error {
            SubmitError::Overloaded => overloaded(),
            SubmitError::Store(error) => error.into(),
        }
    }
}

/// The event's writer has more queued than it takes soon: refused at once.
fn overloaded() -> ApiError {
    metrics::counter!("boxoffice_refused_busy_total", "why" => "queue").increment(1);
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "RATE_LIMITED",
        "too many requests are queued for this event; retry shortly",
    )
}

/// A request refused before its transaction (`refused`) replays the answer its key already
/// has, if any: a retry of a hold or checkout that succeeded before the fan's admission
/// ended (the order confirmed, the server restarted) gets its first answer, not a 403.
pub async fn replay_or(
    state: &AppState,
    scope: &IdempotencyScope,
    digest: &str,
    refused: ApiError,
) -> ApiResult<Response> {
    match state.lookup.stored_answer(scope, digest).await? {
        Some(stored) => Ok(answer(stored)),
        None => Err(refused),
    }
}

/// On an event whose waiting room is enabled, the request must carry a live admission token
/// of this account and event (header `Admission-Token` or body `admissionToken`); a hold
/// (`take_slot`) also needs a shopper slot (`WaitingRoom::check_admission`).
pub async fn check_admission(
    state: &AppState,
    event: &EventRecord,
    account: &Account,
    headers: &HeaderMap,
    body_token: Option<&str>,
    take_slot: bool,
) -> ApiResult<()> {
    admission_lane(state, event, account, headers, body_token, take_slot)
        .await
        .map(|_| ())
}

/// [`check_admission`], answering the sale phase the admission names (the lane the fan
/// queued for), if any.
pub async fn admission_lane(
    state: &AppState,
    event: &EventRecord,
    account: &Account,
    headers: &HeaderMap,
    body_token: Option<&str>,
    take_slot: bool,
) -> ApiResult<Option<String>> {
    if !event.waiting_room.enabled {
        return Ok(None);
    }
    let header_token = headers.get("admission-token").and_then(|v| v.to_str().ok());
    let Some(token) = header_token.or(body_token) else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "ADMISSION_REQUIRED",
            "this event's waiting room is enabled: join the queue and send its Admission-Token",
        ));
    };
    state
        .waitroom
        .check_admission(event, account.account_id.as_str(), token.trim(), take_slot)
        .await
        .map_err(ApiError::from)
}
