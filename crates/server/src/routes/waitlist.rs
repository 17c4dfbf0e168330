//! The group waiting list after sell-out (issue 19, item 2): a party of N asks for N seats,
//! together or anywhere, optionally in one section and under a price cap; when seats come
//! back the event's engine offers them to the earliest entry they satisfy whole, as a hold
//! paid through the ordinary checkout (see `boxoffice_domain::engine`'s `waitlist`).
//!
//! Joining and leaving go through the event's writer, which keeps the list in memory with
//! the holds. A join is idempotent by its key: the entry remembers the key and digest of the
//! request that made it, and a retry is answered with the entry as it stands.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{WaitlistDecision, WaitlistJoin};
use boxoffice_domain::idempotency::request_digest;
use boxoffice_store::waitlist::{WaitlistStatus, WaitlistView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::request_key;

/// `POST /v1/events/{eventId}/waitlist` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JoinWaitlistBody {
    /// Seats wanted, all or none (1 to the event's maxSeatsPerHold).
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: u32,
    /// Only seats of this section (a section's name: 1-32 of `[A-Za-z0-9_]`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub section: Option<String>,
    /// Only seats at most this price: at least the cheapest seat of the section (or of the
    /// event).
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_price_minor: Option<i64>,
    /// Adjacent seats in one row (the default), or any seats.
    #[serde(default = "together_default")]
    pub together: bool,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

fn together_default() -> bool {
    true
}

/// A waiting-list entry.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitlistResponse {
    pub waitlist_id: String,
    pub event_id: String,
    /// `WAITING`, `OFFERED` (a hold waits to be paid: `holdId`, `expiresAt`), `PURCHASED`,
    /// `LAPSED` (the offer ran out; its seats went to the next entry) or `LEFT`.
    #[schema(value_type = crate::api::status_names::WaitlistStatus, example = "WAITING")]
    pub status: String,
    /// Place among the waiting entries (1 = next), while waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    pub quantity: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_price_minor: Option<i64>,
    pub together: bool,
    /// The offer's hold (pay it with `POST /v1/holds/{holdId}/checkout`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_id: Option<String>,
    /// The offer's deadline.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
}

impl WaitlistResponse {
    pub fn new(view: &WaitlistView) -> Self {
        Self {
            waitlist_id: view.waitlist_id.clone(),
            event_id: view.event_id.clone(),
            status: view.status.as_str().to_owned(),
            position: view.position,
            quantity: view.quantity,
            section: view.section.clone(),
            max_price_minor: view.max_price_minor,
            together: view.together,
            hold_id: view.hold_id.clone(),
            expires_at: view.offer_expires_at,
            created_at: view.created_at,
            updated_at: view.updated_at,
        }
    }
}

fn answer(status: StatusCode, view: &WaitlistView) -> Response {
    (status, axum::Json(WaitlistResponse::new(view))).into_response()
}

fn conflict(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "WAITLIST_CONFLICT", detail)
}

/// The entry if it is the account's and of this event; else 404.
async fn entry_of(
    state: &AppState,
    account: &Account,
    event_id: &str,
    waitlist_id: &str,
) -> ApiResult<WaitlistView> {
    if waitlist_id.is_empty() || waitlist_id.len() > 128 {
        return Err(ApiError::not_found("waitlist entry"));
    }
    state
        .store
        .get_waitlist_entry(waitlist_id)
        .await?
        .filter(|e| e.account_id == account.account_id.as_str() && e.event_id == event_id)
        .ok_or_else(|| ApiError::not_found("waitlist entry"))
}

/// Joins the event's waiting list.
#[utoipa::path(
    post, path = "/v1/events/{eventId}/waitlist", tag = "waitlist",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = JoinWaitlistBody,
    responses(
        (status = 201, description = "WAITING with its position, or OFFERED at once when freed seats satisfy it (also the answer to a retry)", body = WaitlistResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 409, description = "WAITLIST_CONFLICT: the account has another live entry on this event (its waitlistId), or the list is full; EVENT_CANCELLED", body = Problem),
        (status = 422, description = "VALIDATION (also a maxPriceMinor below the cheapest seat of the section, or of the event) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The event's writer or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn join_waitlist(
    State(state): State<AppState>,
    account: Account,
    Path(event_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<JoinWaitlistBody>()?;
    let event = state.event(&event_id).await?;
    if event.sections.is_empty() {
        return Err(ApiError::validation(
            "quantity",
            "the waiting list is for reserved seating: this event has no sections",
        ));
    }
    if request.quantity == 0 || request.quantity > event.max_seats_per_hold {
        return Err(ApiError::validation(
            "quantity",
            format!("must be 1-{} on this event", event.max_seats_per_hold),
        ));
    }
    if let Some(section) = &request.section
        && !event.sections.iter().any(|s| &s.name == section)
    {
        return Err(ApiError::validation(
            "section",
            format!("event {event_id} has no section {section}"),
        ));
    }
    if let Some(cap) = request.max_price_minor {
        // A cap under every seat it could have would wait for ever: refused, so the list
        // holds only entries some returned seat can satisfy.
        let cheapest = event
            .sections
            .iter()
            .filter(|s| request.section.as_ref().is_none_or(|name| *name == s.name))
            .map(|s| s.price_minor)
            .min()
            .unwrap_or(0);
        if cap < cheapest {
            let within = match &request.section {
                Some(section) => format!("section {section}'s"),
                None => "the event's".to_owned(),
            };
            return Err(ApiError::validation(
                "maxPriceMinor",
                format!("must be at least {within} cheapest seat ({cheapest})"),
            ));
        }
    }
    let path = format!("/v1/events/{event_id}/waitlist");
    let digest = request_digest("POST", &path, &body.0);
    let waitlist_id = uuid::Uuid::now_v7().to_string();
    let join = WaitlistJoin {
        offer_hold_id: boxoffice_domain::engine::offer_hold_id(&waitlist_id),
        waitlist_id,
        account_id: account.account_id.to_string(),
        quantity: request.quantity,
        section: request.section,
        max_price_minor: request.max_price_minor,
        together: request.together,
        idempotency_key: key.clone(),
        request_digest: digest.clone(),
    };
    let waitlist_id = join.waitlist_id.clone();
    let answered = state.writers.waitlist_join(event, join).await?;
    match answered.decision {
        WaitlistDecision::Joined { .. } => {
            metrics::counter!("boxoffice_waitlist_total", "status" => "JOINED").increment(1);
            if answered.offered.is_some() {
                metrics::counter!("boxoffice_waitlist_total", "status" => "OFFERED").increment(1);
            }
            let view = entry_of(&state, &account, &event_id, &waitlist_id).await?;
            Ok(answer(StatusCode::CREATED, &view))
        }
        WaitlistDecision::AlreadyListed { waitlist_id } => {
            let view = entry_of(&state, &account, &event_id, &waitlist_id).await?;
            if view.idempotency_key == key {
                if view.request_digest != digest {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "IDEMPOTENCY_KEY_REUSED",
                        "this Idempotency-Key was used with a different request",
                    ));
                }
                return Ok(answer(StatusCode::CREATED, &view));
            }
            Err(
                conflict("the account already has a live entry on this event's waiting list")
                    .with("waitlistId", view.waitlist_id),
            )
        }
        WaitlistDecision::Full => Err(conflict("the event's waiting list is full")),
        WaitlistDecision::EventCancelled => Err(crate::routes::cancellation::event_cancelled()),
        WaitlistDecision::Left | WaitlistDecision::NotWaiting => Err(ApiError::internal()),
    }
}

/// One of the caller's waiting-list entries.
#[utoipa::path(
    get, path = "/v1/events/{eventId}/waitlist/{waitlistId}", tag = "waitlist",
    params(("eventId" = String, Path), ("waitlistId" = String, Path)),
    responses(
        (status = 200, description = "The entry: status, position, offer", body = WaitlistResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such entry of this account on this event", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_waitlist_entry(
    State(state): State<AppState>,
    account: Account,
    Path((event_id, waitlist_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let view = entry_of(&state, &account, &event_id, &waitlist_id).await?;
    Ok(answer(StatusCode::OK, &view))
}

/// Leaves the waiting list (a waiting entry; an offered one ends by releasing its hold).
#[utoipa::path(
    delete, path = "/v1/events/{eventId}/waitlist/{waitlistId}", tag = "waitlist",
    params(("eventId" = String, Path), ("waitlistId" = String, Path)),
    responses(
        (status = 200, description = "LEFT (also the answer to a retry)", body = WaitlistResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such entry of this account on this event", body = Problem),
        (status = 409, description = "WAITLIST_CONFLICT: offered (release the offer's hold instead), purchased or lapsed", body = Problem),
        (status = 429, description = "The event's writer or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn leave_waitlist(
    State(state): State<AppState>,
    account: Account,
    Path((event_id, waitlist_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let view = entry_of(&state, &account, &event_id, &waitlist_id).await?;
    if view.status == WaitlistStatus::Waiting {
        let event = state.event(&event_id).await?;
        state
            .writers
            .waitlist_leave(event, account.account_id.to_string(), waitlist_id.clone())
            .await?;
    }
    let view = entry_of(&state, &account, &event_id, &waitlist_id).await?;
    match view.status {
        WaitlistStatus::Left => Ok(answer(StatusCode::OK, &view)),
        other => Err(conflict(format!(
            "the entry is {}",
            other.as_str().to_ascii_lowercase()
        ))),
    }
}
