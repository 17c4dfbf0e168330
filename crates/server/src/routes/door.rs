//! Rotating ticket codes and what an offline door needs (issue 19, item 3; see
//! `boxoffice_tickets::rotating` for the code format).
//!
//! - The owner's device gets its ticket's secret (`GET /v1/tickets/{id}/rotating`) and shows
//!   a code that changes every 15 s; nobody else is given that secret.
//! - Door staff download an event's bundle (`GET /v1/admin/events/{id}/door`): the event's
//!   rotating key (every ticket's secret derives from it), the public keys of the static
//!   codes, and the tickets to refuse (voided by an exchange, a transfer or a cancellation)
//!   and already checked in. With it a scanner verifies offline.
//! - Scans made offline are synced (`POST /v1/admin/events/{id}/door/checkins`): the store's
//!   conditional check-in decides, first scan wins, and a later scan of the same ticket (on
//!   this device or another) is reported as a duplicate.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use boxoffice_tickets::rotating::{
    PERIOD_S, ROTATING_CODE_PREFIX, STEPS_ACCEPTED, event_key, rotating_code, ticket_secret,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::{Account, Admin};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};

/// Most scans one sync may carry.
pub const DOOR_SYNC_SCANS_MAX: usize = 500;

/// What the owner's device needs to show a ticket's rotating code.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotatingTicketResponse {
    pub ticket_id: String,
    pub event_id: String,
    /// The ticket's signed static code (the last part of every rotating code).
    pub static_code: String,
    /// The ticket's secret (base64url, 32 bytes): the tag of step `s` is the first 12 bytes
    /// of HMAC-SHA256(secret, `"BR1." + s`), base64url.
    pub secret: String,
    pub period_seconds: i64,
    /// `BR1.<step>.<tag>.<static code>`, step = Unix time / periodSeconds.
    #[schema(example = "BR1")]
    pub format: &'static str,
    /// The code of the current step, by the server's clock (for a device that cannot
    /// compute it).
    pub current_code: String,
}

/// The current rotating code of one of the caller's tickets, and the secret to make the next.
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}/rotating", tag = "tickets",
    params(("ticketId" = String, Path)),
    responses(
        (status = 200, description = "The ticket's secret and its current rotating code", body = RotatingTicketResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
        (status = 409, description = "TICKET_NOT_VALID: voided, used or being exchanged", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn rotating_ticket(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
) -> ApiResult<Response> {
    let ticket = state
        .store
        .get_ticket(&ticket_id)
        .await?
        .filter(|t| t.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("ticket"))?;
    if ticket.status != "VALID" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "TICKET_NOT_VALID",
            format!("the ticket is {}", ticket.status.to_ascii_lowercase()),
        ));
    }
    let key = event_key(&state.ticket_signer.seed(), &ticket.event_id);
    let secret = ticket_secret(&key, &ticket.ticket_id);
    let now = state.store.now().await?.unix_timestamp();
    Ok(axum::Json(RotatingTicketResponse {
        current_code: rotating_code(&secret, &ticket.code, now),
        ticket_id: ticket.ticket_id,
        event_id: ticket.event_id,
        static_code: ticket.code,
        secret: URL_SAFE_NO_PAD.encode(secret),
        period_seconds: PERIOD_S,
        format: "BR1",
    })
    .into_response())
}

/// A public key of the static codes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoorKey {
    pub kid: String,
    pub pem: String,
}

/// Whom a ticket is for.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoorHolder {
    pub ticket_id: String,
    pub name: String,
}

/// Everything a scanner needs to check an event's tickets offline.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoorBundle {
    pub event_id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub starts_at: time::OffsetDateTime,
    /// The event's rotating key (base64url, 32 bytes): a ticket's secret is
    /// HMAC-SHA256(key, ticketId). Keep it on door devices only.
    pub rotating_key: String,
    pub period_seconds: i64,
    /// Steps a code may be off the scanner's clock, either way.
    pub steps_accepted: i64,
    /// The keys that sign static codes, the signing one first.
    pub public_keys: Vec<DoorKey>,
    /// Tickets whose codes verify but must be refused (voided by an exchange, a transfer or
    /// a cancellation).
    pub revoked_ticket_ids: Vec<String>,
    /// Tickets already checked in (by any device that synced).
    pub checked_in_ticket_ids: Vec<String>,
    /// The holders' names of the valid tickets that name one (issue 39), in ticket id order.
    pub holders: Vec<DoorHolder>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub generated_at: time::OffsetDateTime,
}

/// The door bundle of an event, for scanners that work offline.
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/door", tag = "tickets",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The event's door bundle", body = DoorBundle),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn door_bundle(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let lists = state.store.door_lists(&event.event_id).await?;
    let generated_at = state.store.now().await?;
    let key = event_key(&state.ticket_signer.seed(), &event.event_id);
    Ok(axum::Json(DoorBundle {
        event_id: event.event_id.clone(),
        name: event.name.clone(),
        starts_at: event.starts_at,
        rotating_key: URL_SAFE_NO_PAD.encode(key),
        period_seconds: PERIOD_S,
        steps_accepted: STEPS_ACCEPTED,
        public_keys: state
            .ticket_signer
            .verifier()
            .public_keys()
            .into_iter()
            .map(|(kid, pem)| DoorKey { kid, pem })
            .collect(),
        revoked_ticket_ids: lists.revoked,
        checked_in_ticket_ids: lists.checked_in,
        holders: lists
            .holders
            .into_iter()
            .map(|(ticket_id, name)| DoorHolder { ticket_id, name })
            .collect(),
        generated_at,
    })
    .into_response())
}

/// One scan made at the door.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DoorScan {
    #[schema(min_length = 1, max_length = 128)]
    pub ticket_id: String,
    /// When the device scanned it (its own clock), for the log.
    #[serde(default)]
    #[schema(max_length = 64)]
    pub scanned_at: Option<String>,
    #[serde(default)]
    #[schema(max_length = 128)]
    pub device_id: Option<String>,
}

/// `POST /v1/admin/events/{eventId}/door/checkins` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DoorSyncBody {
    /// Scans in the order they were made (1-500).
    #[schema(min_items = 1, max_items = 500)]
    pub scans: Vec<DoorScan>,
}

/// What became of one synced scan.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoorScanResult {
    pub ticket_id: String,
    /// `CHECKED_IN` (this scan was the first), `DUPLICATE` (the ticket was checked in before),
    /// `REVOKED` (void), `EXCHANGING`, `UNKNOWN` (no such ticket of this event).
    #[schema(example = "CHECKED_IN")]
    pub result: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DoorSyncResponse {
    pub results: Vec<DoorScanResult>,
}

/// Syncs scans made offline: first scan wins, later ones are reported as duplicates.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/door/checkins", tag = "tickets",
    params(("eventId" = String, Path)),
    request_body = DoorSyncBody,
    responses(
        (status = 200, description = "One result per scan, in order", body = DoorSyncResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "VALIDATION", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn door_sync(
    State(state): State<AppState>,
    _admin: Admin,
    Path(event_id): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<DoorSyncBody>()?;
    if request.scans.is_empty() || request.scans.len() > DOOR_SYNC_SCANS_MAX {
        return Err(ApiError::validation(
            "scans",
            format!("must hold 1-{DOOR_SYNC_SCANS_MAX} scans"),
        ));
    }
    for scan in &request.scans {
        if scan.ticket_id.is_empty() || scan.ticket_id.len() > 128 {
            return Err(ApiError::validation(
                "scans.ticketId",
                "must be 1-128 characters",
            ));
        }
        if scan.scanned_at.as_ref().is_some_and(|s| s.len() > 64)
            || scan.device_id.as_ref().is_some_and(|s| s.len() > 128)
        {
            return Err(ApiError::validation(
                "scans",
                "scannedAt is at most 64 characters and deviceId at most 128",
            ));
        }
    }
    let event = state.event(&event_id).await?;
    let mut results = Vec::with_capacity(request.scans.len());
    for scan in request.scans {
        let ticket = state
            .store
            .get_ticket(&scan.ticket_id)
            .await?
            .filter(|t| t.event_id == event.event_id);
        let result = match ticket {
            None => "UNKNOWN",
            Some(_) => match state.store.check_in(&scan.ticket_id).await? {
                None => "UNKNOWN",
                Some((true, _)) => "CHECKED_IN",
                Some((false, status)) => match status.as_str() {
                    "CHECKED_IN" => "DUPLICATE",
                    "EXCHANGING" => "EXCHANGING",
                    _ => "REVOKED",
                },
            },
        };
        metrics::counter!("boxoffice_door_synced_scans_total", "result" => result).increment(1);
        results.push(DoorScanResult {
            ticket_id: scan.ticket_id,
            result,
        });
    }
    Ok(axum::Json(DoorSyncResponse { results }).into_response())
}

/// The static code inside a rotating code, and the step and tag in front of it; `None` for
/// any other code.
pub fn rotating_parts(code: &str) -> Option<&str> {
    let rest = code.strip_prefix(ROTATING_CODE_PREFIX)?;
    let (_, rest) = rest.split_once('.')?;
    let (_, static_code) = rest.split_once('.')?;
    Some(static_code)
}
