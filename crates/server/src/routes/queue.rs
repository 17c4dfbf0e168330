//! The waiting room over HTTP: join, status poll (the hottest endpoint, answered from
//! memory), and the operator's view and controls.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_store::EventRecord;
use boxoffice_waitroom::controller::RELEASE_PER_S_MAX;
use boxoffice_waitroom::room::Controls;
use boxoffice_waitroom::token::{AdmissionError, QueueTicketError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::api::rfc3339_ms;
use crate::auth::{Account, Admin};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::runtime::waitroom::{
    AdminView, PollAnswer, RoomError, RoomHandle, SOLD_OUT_RETRY_AFTER_S,
};

/// `POST /v1/events/{eventId}/queue` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JoinQueueResponse {
    /// Send it as `Queue-Ticket` when polling the status. It stays valid for the whole
    /// wait, across the shuffle at on-sale.
    pub queue_ticket: String,
    /// `WAITING`, or `SOLD_OUT` when nothing is left to sell (the place is kept: if seats
    /// come back, the status poll answers `WAITING` again).
    #[schema(value_type = crate::api::status_names::QueueStatus)]
    pub status: &'static str,
    /// 1-based. Before on-sale under the `random` policy it is the join order and changes
    /// once, when the queue opens (`provisional: true`).
    pub position: u64,
    pub provisional: bool,
    pub estimated_wait_seconds: u64,
    /// With `SOLD_OUT`: where a party joins the event's waiting list
    /// (`POST /v1/events/{eventId}/waitlist`), to be offered seats that come back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waitlist: Option<String>,
}

/// `GET /v1/events/{eventId}/queue/status` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatusResponse {
    /// `WAITING`, `ADMITTED`, `EXPIRED`, or `SOLD_OUT` once nothing is left to sell (no free
    /// seat or tier unit, no live hold that could lapse back): admission stops, the place is
    /// kept, and if seats come back the status is `WAITING` again.
    #[schema(value_type = crate::api::status_names::QueueStatus)]
    pub status: &'static str,
    pub position: u64,
    pub ahead_of_you: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_wait_seconds: Option<u64>,
    /// Send it as `Admission-Token` on holds and checkout of this event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_expires_at: Option<String>,
    /// With `SOLD_OUT`, and with `WAITING` for `ALL_HELD`: where a party joins the event's
    /// waiting list (`POST /v1/events/{eventId}/waitlist`), to be offered seats that come
    /// back, first come first served (its offer is paid without an admission).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waitlist: Option<String>,
    /// With `WAITING`: `ALL_HELD` while nothing is free but held seats may come back
    /// (release follows them as they do).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "ALL_HELD")]
    pub reason: Option<&'static str>,
    /// With `WAITING`, on reserved seating: the most seats side by side still free in one
    /// row of any section, so that a party knows before it is admitted whether it can sit
    /// together (best available `"together": "prefer"` seats a larger party split).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_block: Option<u32>,
}

/// `GET /v1/admin/events/{eventId}/queue` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdminQueueResponse {
    pub event_id: String,
    /// The sale phase whose own queue this is (absent: the event's general queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_id: Option<String>,
    /// `fifo` or `random`.
    pub policy: &'static str,
    pub on_sale_at: String,
    /// When the order was fixed, with the shuffle's seed and the pre-queue length (so the
    /// order can be replayed); absent before on-sale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permutation_seed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_queue_length: Option<u64>,
    pub joined: u64,
    pub waiting: u64,
    /// Highest released position.
    pub serving: u64,
    /// Admissions ever started.
    pub admitted: u64,
    /// Shopper slots taken (what `maxActiveShoppers` caps): `slots` by what their fans do.
    pub active_shoppers: u64,
    pub slots: SlotsView,
    pub max_active_shoppers: u64,
    pub release_rate_per_second: u64,
    /// Why the rate is what it is (the controller's last decision).
    pub reason: String,
    pub paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_release_per_second: Option<u64>,
    /// Status polls this node answered.
    pub polls: u64,
    /// Release ticks this node has run for the room (one every 100 ms, a decision every ten):
    /// a client that must see what the release did next waits for this to grow, not for time.
    pub ticks: u64,
    /// Nothing is left to sell (as this node's seat map shows): release is stopped and
    /// queued fans are answered `SOLD_OUT`.
    pub sold_out: bool,
    /// The settings the release runs with (the event's `waitingRoom`; a phase's queue: the
    /// phase's own `waitingRoom` when it has one).
    pub settings: QueueSettings,
    /// The controller's last decisions (one a second, the last minute), oldest first;
    /// only the releasing node decides.
    pub decisions: Vec<QueueDecision>,
    /// `memory` or `redis`.
    pub state_backend: &'static str,
    /// Whether this node runs the release (with Redis, one node per event does).
    pub releasing_node: bool,
}

/// The shopper slots by what their fans are doing: `idle` (admitted, no hold yet: given back
/// after the event's `holdWindowSeconds` or a refused hold), `holding` (a live hold),
/// `paying` (a checkout started).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SlotsView {
    pub idle: u64,
    pub holding: u64,
    pub paying: u64,
}

/// The release settings of a queue.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueSettings {
    pub start_release_per_second: u64,
    /// The event's ceiling (`maxReleasePerSecond` at the top level is the operator's cap,
    /// when set).
    pub max_release_per_second: u64,
    pub target_hold_p99_ms: u64,
    pub claim_window_seconds: i64,
    pub hold_window_seconds: i64,
    pub admission_ttl_seconds: i64,
}

/// One decision of the release controller.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueDecision {
    pub at: String,
    /// `slow_start`, `increase`, `decrease`, `hold`, `paused`, `store_down` or `sold_out`.
    pub kind: &'static str,
    pub release_rate_per_second: u64,
    /// Positions released in the second that followed (before the per-tick slot limit).
    pub release_count: u64,
    pub reason: String,
}

/// `PUT /v1/admin/events/{eventId}/queue` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateQueueBody {
    /// Pause (true) or resume (false) release; absent keeps it.
    #[serde(default)]
    pub paused: Option<bool>,
    /// Cap on releases per second, 1-100000; absent keeps it.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100000)]
    pub max_release_per_second: Option<u64>,
}

impl From<RoomError> for ApiError {
    fn from(error: RoomError) -> Self {
        match error {
            RoomError::Ticket(QueueTicketError::OtherAccount | QueueTicketError::OtherEvent) => {
                ApiError::not_found("queue place")
            }
            RoomError::Ticket(QueueTicketError::Invalid(why)) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "QUEUE_TICKET_INVALID",
                format!("the Queue-Ticket is not valid: {why}"),
            ),
            RoomError::Admission(why) => admission_invalid(&why),
            RoomError::SessionEnded | RoomError::SlotGone => ApiError::new(
                StatusCode::FORBIDDEN,
                "ADMISSION_INVALID",
                error.to_string(),
            ),
            RoomError::Join(boxoffice_waitroom::queue::JoinError::QueueFull) => {
                ApiError::new(StatusCode::CONFLICT, "QUEUE_FULL", error.to_string())
            }
            RoomError::Join(why) => ApiError::validation("sub", why),
            RoomError::State(error) => {
                tracing::warn!(%error, "waiting-room state");
                ApiError::unavailable("the waiting room is unavailable; retry shortly")
            }
            RoomError::Signing(why) => {
                tracing::error!(%why, "waiting-room signing");
                ApiError::internal()
            }
        }
    }
}

fn admission_invalid(why: &AdmissionError) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "ADMISSION_INVALID",
        format!("the admission token is not valid: {why}"),
    )
}

fn state_error(error: boxoffice_waitroom_state::StateError) -> ApiError {
    RoomError::State(error).into()
}

/// The room of a lane (`lane`: a phase id of the event, else 404) or, without one, the
/// event's general room; the event's waiting room must be enabled.
async fn lane_room_of(
    state: &AppState,
    event: &EventRecord,
    lane: Option<&str>,
) -> ApiResult<std::sync::Arc<RoomHandle>> {
    if let Some(lane) = lane
        && !event.sale.phases.iter().any(|p| p.phase_id == lane)
    {
        return Err(ApiError::not_found("phase"));
    }
    if !event.waiting_room.enabled {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "WAITING_ROOM_DISABLED",
            "this event has no waiting room: hold seats directly",
        ));
    }
    state
        .waitroom
        .room_in(event, lane)
        .await
        .map_err(state_error)
}

/// The `phaseId` query of the queue routes: a sale phase (presale lane) has its own room.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct LaneQuery {
    /// The sale phase whose own queue is meant (absent: the event's general queue).
    #[param(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub phase_id: Option<String>,
}

/// `POST /v1/events/{eventId}/queue` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct JoinQueueQuery {
    /// The sale phase (presale lane) to queue for: the fan joins the phase's own queue (its
    /// own release and shopper slots), the admission names it, and the fan's holds are
    /// decided in it (absent: the event's general queue; holds go to the phase open when
    /// the fan holds).
    #[param(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub phase_id: Option<String>,
}

/// Joins the event's queue; joining again returns the same place (with `phaseId`, a place in
/// that phase's own queue).
#[utoipa::path(
    post, path = "/v1/events/{eventId}/queue", tag = "waiting room",
    params(("eventId" = String, Path), JoinQueueQuery),
    responses(
        (status = 201, description = "The account's place (the same one on every join)", body = JoinQueueResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event, or no such phase", body = Problem),
        (status = 409, description = "WAITING_ROOM_DISABLED or QUEUE_FULL", body = Problem),
        (status = 503, description = "Waiting-room state unavailable", body = Problem),
        (status = 429, description = "RATE_LIMITED: joins-per-account or joins-per-address; retry after Retry-After", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn join_queue(
    State(state): State<AppState>,
    account: Account,
    Path(event_id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<JoinQueueQuery>,
    address: Option<axum::Extension<crate::ClientAddr>>,
) -> ApiResult<Response> {
    let lane = query.phase_id;
    state.limits.take_both(
        crate::limits::Limit::JoinsPerAccount,
        account.account_id.as_str(),
        crate::limits::Limit::JoinsPerAddress,
        address.as_ref(),
    )?;
    let event = state.event(&event_id).await?;
    let room = lane_room_of(&state, &event, lane.as_deref()).await?;
    let (ticket, place, answer) = state
        .waitroom
        .join(&room, account.account_id.as_str())
        .await?;
    let (status, estimated_wait_s, retry_after_s) = match answer {
        PollAnswer::Waiting {
            estimated_wait_s,
            retry_after_s,
            ..
        } => ("WAITING", estimated_wait_s, retry_after_s),
        PollAnswer::SoldOut { .. } => ("SOLD_OUT", 0, SOLD_OUT_RETRY_AFTER_S),
        PollAnswer::Cancelled { .. } => ("CANCELLED", 0, CANCELLED_RETRY_AFTER_S),
        PollAnswer::Admitted { .. } | PollAnswer::Expired { .. } => {
            return Err(ApiError::internal());
        }
    };
    let body = JoinQueueResponse {
        queue_ticket: ticket,
        status,
        position: place.position,
        provisional: place.provisional,
        estimated_wait_seconds: estimated_wait_s,
        waitlist: (status == "SOLD_OUT").then(|| waitlist_path(&event_id)),
    };
    let mut response = (StatusCode::CREATED, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    Ok(response)
}

/// `DELETE /v1/events/{eventId}/queue` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaveQueueResponse {
    /// Whether a live admission was ended (false if there was none: leaving twice is
    /// harmless).
    pub admission_ended: bool,
}

/// Ends the account's shopping session now (the page was closed, the fan gave up): its
/// active-shopper slot goes to the next in line at once and its admission token stops
/// working. The place is kept; polling again within the claim window admits anew if a slot
/// is free. With `phaseId`, the session of that phase's own queue.
#[utoipa::path(
    delete, path = "/v1/events/{eventId}/queue", tag = "waiting room",
    params(("eventId" = String, Path), LaneQuery),
    responses(
        (status = 200, description = "The session ended (or there was none)", body = LeaveQueueResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event, or no such phase", body = Problem),
        (status = 409, description = "WAITING_ROOM_DISABLED", body = Problem),
        (status = 503, description = "Waiting-room state unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn leave_queue(
    State(state): State<AppState>,
    account: Account,
    Path(event_id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<LaneQuery>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let room = lane_room_of(&state, &event, query.phase_id.as_deref()).await?;
    let now_ms = state.waitroom.now_ms();
    let admission_ended = state
        .waitroom
        .end_in(&room, account.account_id.as_str(), now_ms)
        .await
        .map_err(state_error)?;
    Ok(axum::Json(LeaveQueueResponse { admission_ended }).into_response())
}

/// Where the account stands; answered from memory. `Retry-After` says when to poll again. A
/// ticket from a phase's queue (`phaseId` on joining) is a place in that queue.
#[utoipa::path(
    get, path = "/v1/events/{eventId}/queue/status", tag = "waiting room",
    params(
        ("eventId" = String, Path),
        ("Queue-Ticket" = String, Header, description = "the queueTicket from joining"),
    ),
    responses(
        (status = 200, description = "WAITING, ADMITTED (with the admission token), EXPIRED, SOLD_OUT (nothing left to sell; the place is kept), or CANCELLED (the event was cancelled)", body = QueueStatusResponse),
        (status = 400, description = "QUEUE_TICKET_INVALID: the Queue-Ticket is forged", body = Problem),
        (status = 422, description = "VALIDATION: the Queue-Ticket header is missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such event, or the ticket is another account's or another event's", body = Problem),
        (status = 409, description = "WAITING_ROOM_DISABLED", body = Problem),
        (status = 503, description = "Waiting-room state unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn queue_status(
    State(state): State<AppState>,
    account: Account,
    Path(event_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let ticket = headers
        .get("queue-ticket")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| ApiError::validation("Queue-Ticket", "header is required"))?;
    let claims = match state
        .waitroom
        .verify_ticket(&event_id, ticket, account.account_id.as_str())
    {
        Ok(claims) => claims,
        Err(refused) => {
            // The event's own answers come first, as before lanes: an unknown event is 404
            // and one without a waiting room 409, whatever the ticket says (a refusal, off
            // the hot path, may read the store).
            let event = state.event(&event_id).await?;
            if !event.waiting_room.enabled {
                lane_room_of(&state, &event, None).await?;
            }
            return Err(refused.into());
        }
    };
    let key = crate::runtime::waitroom::room_key(&event_id, claims.lane.as_deref());
    let room = match state.waitroom.cached(&key) {
        Some(room) => room,
        None => {
            let event = state.event(&event_id).await?;
            lane_room_of(&state, &event, claims.lane.as_deref()).await?
        }
    };
    let answer = state.waitroom.poll(&room, &claims).await?;
    let (body, retry_after_s) = match answer {
        PollAnswer::Waiting {
            position,
            ahead_of_you,
            retry_after_s,
            estimated_wait_s,
            reason,
            largest_block,
        } => (
            QueueStatusResponse {
                status: "WAITING",
                position,
                ahead_of_you,
                estimated_wait_seconds: Some(estimated_wait_s),
                admission_token: None,
                admission_expires_at: None,
                waitlist: reason.is_some().then(|| waitlist_path(&event_id)),
                reason,
                largest_block,
            },
            Some(retry_after_s),
        ),
        PollAnswer::Admitted {
            position,
            token,
            admission,
        } => (
            QueueStatusResponse {
                status: "ADMITTED",
                position,
                ahead_of_you: 0,
                estimated_wait_seconds: None,
                admission_token: Some(token),
                admission_expires_at: Some(rfc3339_ms(admission.expires_at_ms)),
                waitlist: None,
                reason: None,
                largest_block: None,
            },
            None,
        ),
        PollAnswer::Expired { position } => (
            QueueStatusResponse {
                status: "EXPIRED",
                position,
                ahead_of_you: 0,
                estimated_wait_seconds: None,
                admission_token: None,
                admission_expires_at: None,
                waitlist: None,
                reason: None,
                largest_block: None,
            },
            None,
        ),
        PollAnswer::SoldOut {
            position,
            ahead_of_you,
        } => (
            QueueStatusResponse {
                status: "SOLD_OUT",
                position,
                ahead_of_you,
                estimated_wait_seconds: None,
                admission_token: None,
                admission_expires_at: None,
                waitlist: Some(waitlist_path(&event_id)),
                reason: None,
                largest_block: None,
            },
            Some(SOLD_OUT_RETRY_AFTER_S),
        ),
        PollAnswer::Cancelled { position } => {
            (cancelled_status(position), Some(CANCELLED_RETRY_AFTER_S))
        }
    };
    let mut response = axum::Json(body).into_response();
    if let Some(seconds) = retry_after_s {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    Ok(response)
}

/// Seconds a fan of a cancelled event is told to wait before asking again.
const CANCELLED_RETRY_AFTER_S: u64 = 3600;

/// What every fan still in the queue of a cancelled event is told.
fn cancelled_status(position: u64) -> QueueStatusResponse {
    QueueStatusResponse {
        status: "CANCELLED",
        position,
        ahead_of_you: 0,
        estimated_wait_seconds: None,
        admission_token: None,
        admission_expires_at: None,
        waitlist: None,
        reason: None,
        largest_block: None,
    }
}

/// The status poll's hot path, before the router and its middleware: a GET of
/// `/v1/events/{eventId}/queue/status` whose bearer token and queue ticket verified before
/// and whose place is waiting is answered here, from memory, with the same answer
/// [`queue_status`] gives. Anything else (`None`) goes through the router.
pub fn status_from_memory(state: &AppState, path: &str, headers: &HeaderMap) -> Option<Response> {
    let event_id = path
        .strip_prefix("/v1/events/")?
        .strip_suffix("/queue/status")?;
    // A plain id only: anything percent-encoded or nested is the router's.
    if event_id.is_empty()
        || !event_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return None;
    }
    let bearer = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let token = bearer
        .strip_prefix("Bearer ")
        .or_else(|| bearer.strip_prefix("bearer "))?
        .trim();
    let ticket = headers.get("queue-ticket")?.to_str().ok()?;
    let answer = state
        .verifier
        .with_cached(token, |account| {
            state
                .waitroom
                .poll_cached(event_id, account.account_id.as_str(), ticket)
        })
        .flatten()?;
    let (body, retry_after_s) = match answer {
        PollAnswer::Waiting {
            position,
            ahead_of_you,
            retry_after_s,
            estimated_wait_s,
            reason,
            largest_block,
        } => (
            QueueStatusResponse {
                status: "WAITING",
                position,
                ahead_of_you,
                estimated_wait_seconds: Some(estimated_wait_s),
                admission_token: None,
                admission_expires_at: None,
                waitlist: reason.is_some().then(|| waitlist_path(event_id)),
                reason,
                largest_block,
            },
            retry_after_s,
        ),
        PollAnswer::SoldOut {
            position,
            ahead_of_you,
        } => (
            QueueStatusResponse {
                status: "SOLD_OUT",
                position,
                ahead_of_you,
                estimated_wait_seconds: None,
                admission_token: None,
                admission_expires_at: None,
                waitlist: Some(waitlist_path(event_id)),
                reason: None,
                largest_block: None,
            },
            SOLD_OUT_RETRY_AFTER_S,
        ),
        PollAnswer::Cancelled { position } => (cancelled_status(position), CANCELLED_RETRY_AFTER_S),
        PollAnswer::Admitted { .. } | PollAnswer::Expired { .. } => return None,
    };
    let json = serde_json::to_vec(&body).ok()?;
    let mut response = Response::new(axum::body::Body::from(json));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after_s));
    Some(response)
}

fn admin_response(state: &AppState, room: &RoomHandle, view: AdminView) -> AdminQueueResponse {
    let opened = view.opened;
    AdminQueueResponse {
        event_id: room.event_id.clone(),
        phase_id: room.lane.clone(),
        policy: match view.config.queue.policy {
            boxoffice_waitroom::queue::QueuePolicy::Fifo => "fifo",
            boxoffice_waitroom::queue::QueuePolicy::Random => "random",
        },
        on_sale_at: rfc3339_ms(view.config.queue.on_sale_at_ms),
        opened_at: opened.map(|o| rfc3339_ms(o.opened_at_ms)),
        permutation_seed: opened.and_then(|o| o.permutation_seed.map(|s| s.to_string())),
        pre_queue_length: opened.map(|o| o.pre_queue_len),
        joined: view.stats.joined,
        waiting: view.stats.waiting,
        serving: view.stats.serving,
        admitted: view.stats.admitted_total,
        active_shoppers: view.stats.active,
        slots: SlotsView {
            idle: view.stats.slots.idle,
            holding: view.stats.slots.holding,
            paying: view.stats.slots.paying,
        },
        max_active_shoppers: view.stats.max_active_shoppers,
        release_rate_per_second: view.rate_per_s,
        reason: view.decision.map_or_else(
            || "not decided yet (the controller decides once a second)".to_owned(),
            |d| d.reason,
        ),
        paused: view.stats.controls.paused,
        max_release_per_second: view.stats.controls.max_release_per_s,
        polls: view.polls,
        ticks: view.ticks,
        state_backend: state.waitroom.backend(),
        releasing_node: view.leader,
        sold_out: view.sold_out,
        settings: QueueSettings {
            start_release_per_second: view.controller.start_release_per_s,
            max_release_per_second: view.controller.max_release_per_s,
            target_hold_p99_ms: view.controller.target_hold_p99_ms,
            claim_window_seconds: view.config.queue.claim_window_ms / 1_000,
            hold_window_seconds: view.config.hold_window_ms / 1_000,
            admission_ttl_seconds: view.config.admission_ttl_ms / 1_000,
        },
        decisions: view
            .decisions
            .into_iter()
            .map(|(at_ms, decision)| QueueDecision {
                at: rfc3339_ms(at_ms),
                kind: decision.kind.as_str(),
                release_rate_per_second: decision.rate_per_s,
                release_count: decision.release_count,
                reason: decision.reason,
            })
            .collect(),
    }
}

/// Waiting, admitted, active shoppers, the release rate and why (with `phaseId`, of that
/// phase's own queue).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/queue", tag = "waiting room",
    params(("eventId" = String, Path), LaneQuery),
    responses(
        (status = 200, description = "The queue", body = AdminQueueResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event, or no such phase", body = Problem),
        (status = 409, description = "WAITING_ROOM_DISABLED", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_queue(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<LaneQuery>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let room = lane_room_of(&state, &event, query.phase_id.as_deref()).await?;
    let view = state
        .waitroom
        .admin_view(&room)
        .await
        .map_err(state_error)?;
    Ok(axum::Json(admin_response(&state, &room, view)).into_response())
}

/// The operator's change to a queue in `body`, its cap checked.
pub(crate) fn queue_update(body: &JsonBody) -> ApiResult<UpdateQueueBody> {
    let update = body.parse::<UpdateQueueBody>()?;
    if let Some(cap) = update.max_release_per_second
        && !(1..=RELEASE_PER_S_MAX).contains(&cap)
    {
        return Err(ApiError::validation(
            "maxReleasePerSecond",
            format!("must be 1-{RELEASE_PER_S_MAX}"),
        ));
    }
    Ok(update)
}

/// Pauses, resumes or caps release (with `phaseId`, of that phase's own queue only).
#[utoipa::path(
    put, path = "/v1/admin/events/{eventId}/queue", tag = "waiting room",
    params(("eventId" = String, Path), LaneQuery),
    request_body = UpdateQueueBody,
    responses(
        (status = 200, description = "The queue after the change", body = AdminQueueResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event, or no such phase", body = Problem),
        (status = 409, description = "WAITING_ROOM_DISABLED", body = Problem),
        (status = 422, description = "VALIDATION", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn update_queue(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
    axum::extract::Query(query): axum::extract::Query<LaneQuery>,
    body: JsonBody,
) -> ApiResult<Response> {
    let update = queue_update(&body)?;
    let event = state.event(&event_id).await?;
    let room = lane_room_of(&state, &event, query.phase_id.as_deref()).await?;
    let current = state
        .waitroom
        .admin_view(&room)
        .await
        .map_err(state_error)?;
    let controls = Controls {
        paused: update.paused.unwrap_or(current.stats.controls.paused),
        max_release_per_s: update
            .max_release_per_second
            .or(current.stats.controls.max_release_per_s),
    };
    state
        .waitroom
        .set_controls(&room, controls)
        .await
        .map_err(state_error)?;
    let view = state
        .waitroom
        .admin_view(&room)
        .await
        .map_err(state_error)?;
    Ok(axum::Json(admin_response(&state, &room, view)).into_response())
}

/// The waiting list a `SOLD_OUT` answer points to.
fn waitlist_path(event_id: &str) -> String {
    format!("/v1/events/{event_id}/waitlist")
}
