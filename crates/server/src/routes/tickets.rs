//! Tickets: read, QR code, check-in. A ticket's `code` is signed with the server's Ed25519
//! key and can be verified offline with the public key (`GET /v1/tickets/public-key`; during
//! a key rollover, every key that verifies: `GET /v1/tickets/public-keys`).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
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
    #[schema(value_type = crate::api::status_names::TicketStatus, example = "VALID")]
    pub status: String,
    /// Who will use it, when a name or answers were given; absent: the account holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<crate::api::HolderView>,
    /// A seat of an event on a venue chart: the seat as fans read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_place: Option<SeatPlaceView>,
}

/// A chart seat as printed on its ticket (the seat map shows the same per seat).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeatPlaceView {
    /// The section's title in the chart, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section_title: Option<String>,
    pub row_label: String,
    pub seat_label: String,
    /// Its price category's key.
    pub category: String,
    /// `standard`, `wheelchair`, `companion`, `restricted_view` or `aisle`.
    #[schema(value_type = boxoffice_domain::venue::SeatKind)]
    pub kind: boxoffice_domain::venue::SeatKind,
}

impl SeatPlaceView {
    /// The seat's place in the event's chart; `None` without a chart (or for a tier).
    pub fn of(event: &boxoffice_store::EventRecord, seat_id: &str) -> Option<Self> {
        let chart = event.chart.as_ref()?;
        let seat = boxoffice_domain::ids::SeatRef::parse(seat_id).ok()?;
        let (row, chart_seat) = chart.seat(&seat)?;
        Some(Self {
            section_title: chart.section(&seat.section).and_then(|s| s.title.clone()),
            row_label: row.label.clone(),
            seat_label: chart_seat.label.clone(),
            category: chart_seat.category.clone(),
            kind: chart_seat.kind,
        })
    }
}

impl TicketResponse {
    pub fn new(ticket: boxoffice_store::checkout::TicketView) -> Self {
        Self {
            holder: ticket.holder.as_ref().map(crate::api::HolderView::of),
            ticket_id: ticket.ticket_id,
            event_id: ticket.event_id,
            order_id: ticket.order_id,
            seat_id: ticket.seat_id,
            tier_id: ticket.tier_id,
            code: ticket.code,
            status: ticket.status,
            seat_place: None,
        }
    }

    /// Adds the seat's labels when its event is on a chart (the event comes from the cache).
    pub async fn placed(mut self, state: &AppState) -> ApiResult<Self> {
        if let Some(seat_id) = &self.seat_id {
            let event = state.event(&self.event_id).await?;
            if event.chart.is_some() {
                self.seat_place = SeatPlaceView::of(&event, seat_id);
            }
        }
        Ok(self)
    }
}

pub(crate) async fn owned_ticket(
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
    Ok(axum::Json(TicketResponse::new(ticket).placed(&state).await?).into_response())
}

/// The media types a client may ask for with `Accept`, the first of each pair by default: the
/// second is one that a client generator maps to a type (text or bytes), where the first is
/// not (openapi-python-client maps `text/*`, JSON and `application/octet-stream` only).
pub const QR_MEDIA_TYPES: [&str; 2] = ["image/svg+xml", "application/octet-stream"];
/// See [`QR_MEDIA_TYPES`].
pub const PUBLIC_KEY_MEDIA_TYPES: [&str; 2] = ["application/x-pem-file", "text/plain"];

/// The media type to answer with: `[default, other]`'s `other` only when `Accept` names it
/// (with a q above 0) and does not name `default`; `default` otherwise, `*/*` and no `Accept`
/// included. The bytes are the same either way.
pub fn negotiated(headers: &HeaderMap, [default, other]: [&'static str; 2]) -> &'static str {
    let accepted: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|range| {
            let mut parts = range.split(';');
            let media = parts.next()?.trim().to_ascii_lowercase();
            let refused = parts.any(|param| {
                let param = param.trim().replace(' ', "");
                param.starts_with("q=") && param[2..].parse::<f32>().is_ok_and(|q| q <= 0.0)
            });
            (!refused).then_some(media)
        })
        .collect();
    let names = |media: &str| accepted.iter().any(|a| a == media);
    if names(other) && !names(default) {
        other
    } else {
        default
    }
}

/// The QR code's SVG as bytes (a file, to a client generator).
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // schema only
pub struct QrBytes(Vec<u8>);

/// The ticket's code as a QR image: SVG, or the same bytes as `application/octet-stream`
/// when `Accept` asks for that.
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}/qr.svg", tag = "tickets",
    params(("ticketId" = String, Path)),
    responses(
        (status = 200, description = "SVG image", content(
            (String = "image/svg+xml"),
            (QrBytes = "application/octet-stream"),
        )),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn ticket_qr(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let ticket = owned_ticket(&state, &account, &ticket_id).await?;
    let svg = boxoffice_tickets::qr_svg(&ticket.code).map_err(|e| {
        tracing::error!(%e, "rendering a QR code failed");
        ApiError::internal()
    })?;
    let media = negotiated(&headers, QR_MEDIA_TYPES);
    Ok(([(header::CONTENT_TYPE, media)], svg).into_response())
}

/// The public key that verifies ticket codes offline (SPKI PEM), as
/// `application/x-pem-file`, or as `text/plain` when `Accept` asks for that.
#[utoipa::path(
    get, path = "/v1/tickets/public-key", tag = "tickets",
    responses((status = 200, description = "PEM", content(
        (String = "application/x-pem-file"),
        (String = "text/plain"),
    )))
)]
pub async fn public_key(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let media = negotiated(&headers, PUBLIC_KEY_MEDIA_TYPES);
    (
        [(header::CONTENT_TYPE, media)],
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
            Ok(axum::Json(TicketResponse::new(ticket)).into_response())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, value.parse().expect("header value"));
        headers
    }

    #[test]
    fn the_default_type_unless_only_the_other_is_asked_for() {
        let types = PUBLIC_KEY_MEDIA_TYPES;
        assert_eq!(
            negotiated(&HeaderMap::new(), types),
            "application/x-pem-file"
        );
        assert_eq!(negotiated(&accept("*/*"), types), "application/x-pem-file");
        assert_eq!(negotiated(&accept("text/plain"), types), "text/plain");
        assert_eq!(
            negotiated(&accept("Text/Plain; charset=utf-8, */*;q=0.1"), types),
            "text/plain"
        );
        assert_eq!(
            negotiated(&accept("text/plain, application/x-pem-file"), types),
            "application/x-pem-file"
        );
        assert_eq!(
            negotiated(&accept("text/plain;q=0"), types),
            "application/x-pem-file"
        );
        assert_eq!(
            negotiated(&accept("application/octet-stream"), QR_MEDIA_TYPES),
            "application/octet-stream"
        );
        assert_eq!(
            negotiated(&accept("image/*"), QR_MEDIA_TYPES),
            "image/svg+xml"
        );
    }
}
