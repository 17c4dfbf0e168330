//! Tickets: read, QR code, check-in. A ticket's `code` is signed with the server's Ed25519
//! key and can be verified offline with the public key (`GET /v1/tickets/public-key`; during
//! a key rollover, every key that verifies: `GET /v1/tickets/public-keys`).

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::{Account, Admin};
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketResponse {
    pub ticket_id: String,
    pub event_id: String,
    pub order_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    pub code: String,
    #[schema(example = "VALID")]
    pub status: String,
}

async fn owned_ticket(
    state: &AppState,
    account: &Account,
    ticket_id: &str,
) -> ApiResult<boxoffice_store::checkout::TicketView> {
    state
        .store
        .get_ticket(ticket_id)
        .await?
        .filter(|t| t.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("ticket"))
}

/// One of the caller's tickets.
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}", tag = "tickets",
    params(("ticketId" = String, Path)),
    responses(
        (status = 200, description = "The ticket", body = TicketResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_ticket(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
) -> ApiResult<Response> {
    let ticket = owned_ticket(&state, &account, &ticket_id).await?;
    Ok(axum::Json(TicketResponse {
        ticket_id: ticket.ticket_id,
        event_id: ticket.event_id,
        order_id: ticket.order_id,
        seat_id: ticket.seat_id,
        tier_id: ticket.tier_id,
        code: ticket.code,
        status: ticket.status,
    })
    .into_response())
}

/// The ticket's code as a QR image.
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}/qr.svg", tag = "tickets",
    params(("ticketId" = String, Path)),
    responses(
        (status = 200, description = "SVG image", content_type = "image/svg+xml"),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn ticket_qr(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
) -> ApiResult<Response> {
    let ticket = owned_ticket(&state, &account, &ticket_id).await?;
    let svg = boxoffice_tickets::qr_svg(&ticket.code).map_err(|e| {
        tracing::error!(%e, "rendering a QR code failed");
        ApiError::internal()
    })?;
    Ok(([(header::CONTENT_TYPE, "image/svg+xml")], svg).into_response())
}

/// The public key that verifies ticket codes offline (SPKI PEM).
#[utoipa::path(
    get, path = "/v1/tickets/public-key", tag = "tickets",
    responses((status = 200, description = "PEM", content_type = "application/x-pem-file"))
)]
pub async fn public_key(State(state): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/x-pem-file")],
        state.ticket_signer.public_key_pem(),
    )
        .into_response()
}

/// One key that verifies ticket codes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketPublicKey {
    /// The key's id: `ed-` and 16 hex digits (from the public key).
    #[schema(example = "ed-3f9a0c1d2b4e5f60")]
    pub kid: String,
    /// The Ed25519 public key, SPKI PEM.
    pub pem: String,
    /// Whether new codes are signed with it (the others verify codes issued before a key
    /// rollover).
    pub signing: bool,
}

/// Every key that verifies ticket codes, the signing one first.
#[derive(Debug, Serialize, ToSchema)]
pub struct TicketPublicKeys {
    pub keys: Vec<TicketPublicKey>,
}

/// Every public key that verifies ticket codes offline: the signing one, then those whose
/// codes are still accepted during a key rollover. A door app keeps them all and tries each.
#[utoipa::path(
    get, path = "/v1/tickets/public-keys", tag = "tickets",
    responses((status = 200, description = "The keys, the signing one first", body = TicketPublicKeys))
)]
pub async fn public_keys(State(state): State<AppState>) -> axum::Json<TicketPublicKeys> {
    let keys = state
        .ticket_signer
        .verifier()
        .public_keys()
        .into_iter()
        .enumerate()
        .map(|(i, (kid, pem))| TicketPublicKey {
            kid,
            pem,
            signing: i == 0,
        })
        .collect();
    axum::Json(TicketPublicKeys { keys })
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckInBody {
    pub code: String,
}

/// Admits a ticket at the door: 200 the first time, 409 after.
#[utoipa::path(
    post, path = "/v1/admin/checkin", tag = "tickets",
    request_body = CheckInBody,
    responses(
        (status = 200, description = "Checked in", body = TicketResponse),
        (status = 400, description = "INVALID_TICKET: bad signature, a rotating code out of its window or forged, unknown or voided", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 409, description = "ALREADY_CHECKED_IN, or TICKET_EXCHANGING while an exchange of it awaits payment", body = Problem),
        (status = 422, description = "VALIDATION: no JSON body, or no code in it", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn check_in(
    State(state): State<AppState>,
    _admin: Admin,
    body: JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<CheckInBody>()?;
    let invalid =
        |detail: &str| ApiError::new(StatusCode::BAD_REQUEST, "INVALID_TICKET", detail.to_owned());
    let code = request.code.trim();
    let verifier = state.ticket_signer.verifier();
    // A rotating code (BR1) carries the static one: that names the event whose key checks
    // the rotating part, by the store's clock.
    let claims = match crate::routes::door::rotating_parts(code) {
        Some(static_code) => {
            let event_id = verifier
                .verify(static_code)
                .map_err(|e| invalid(&format!("the code does not verify: {e}")))?
                .event_id;
            let key =
                boxoffice_tickets::rotating::event_key(&state.ticket_signer.seed(), &event_id);
            let now = state.store.now().await?.unix_timestamp();
            boxoffice_tickets::rotating::verify_rotating(&verifier, &event_id, &key, code, now)
                .map_err(|e| invalid(&format!("the rotating code does not verify: {e}")))?
        }
        None => verifier
            .verify(code)
            .map_err(|e| invalid(&format!("the code does not verify: {e}")))?,
    };
    let Some((admitted, status)) = state.store.check_in(&claims.ticket_id).await? else {
        return Err(invalid("no such ticket"));
    };
    match (admitted, status.as_str()) {
        (true, _) => {
            let ticket = state
                .store
                .get_ticket(&claims.ticket_id)
                .await?
                .ok_or_else(|| invalid("no such ticket"))?;
            Ok(axum::Json(TicketResponse {
                ticket_id: ticket.ticket_id,
                event_id: ticket.event_id,
                order_id: ticket.order_id,
                seat_id: ticket.seat_id,
                tier_id: ticket.tier_id,
                code: ticket.code,
                status: ticket.status,
            })
            .into_response())
        }
        (false, "CHECKED_IN") => Err(ApiError::new(
            StatusCode::CONFLICT,
            "ALREADY_CHECKED_IN",
            "this ticket was already checked in",
        )),
        (false, "EXCHANGING") => Err(ApiError::new(
            StatusCode::CONFLICT,
            "TICKET_EXCHANGING",
            "this ticket is being exchanged; it can be checked in once the exchange ends",
        )),
        (false, _) => Err(invalid("the ticket is voided")),
    }
}
