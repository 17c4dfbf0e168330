//! Ticket transfers between accounts (issue 19): the owner offers tickets of a confirmed
//! order to another account; the receiver accepts or declines; the giver may withdraw an open
//! offer.
//!
//! An offer changes no inventory: it is one transaction of the store, which checks the order
//! and its tickets under lock (`boxoffice_store::transfer`). Accepting goes through the event's
//! writer like a hold: the engine moves the seats (or units) from the giver's hold to a new
//! hold of the receiver — no capacity is consumed — and checks the receiver's purchase limit
//! and the event's transfer cutoff; the group voids the old tickets and issues the new ones
//! (signed here, before the transaction) in the receiver's new order, and refuses the
//! transfer alone if the offer, the order or a ticket changed since they were read here (a
//! check-in or an exchange wins over a transfer that comes after it, and the other way round).
//!
//! Idempotency: an offer is stored with its key (a retry answers the same offer; the key with
//! another body is refused). Accepting, declining and withdrawing are idempotent by state: a
//! retry finds the offer in the state the first request left it and answers it again.

use std::collections::BTreeSet;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::TransferRequest;
use boxoffice_domain::idempotency::{IdempotencyScope, request_digest};
use boxoffice_store::HeldSeat;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::exchange::SignedTicket;
use boxoffice_store::transfer::{
    OfferRefused, Offered, TICKETS_PER_TRANSFER_MAX, TransferOffer, TransferRole, TransferStatus,
    TransferView, TransferWrite,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::request_key;
use crate::runtime::writer::TransferAnswer;

/// `POST /v1/orders/{orderId}/transfers` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateTransferBody {
    /// Tickets of the order to give (1-64, no duplicates).
    #[schema(min_items = 1, max_items = 64, value_type = Vec<TicketIdText>)]
    pub ticket_ids: Vec<String>,
    /// The account that receives them (not the giver's own).
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"
    )]
    pub to_account_id: String,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// The schema of a ticket id in a request.
#[derive(Debug, ToSchema)]
#[schema(value_type = String, min_length = 1, max_length = 128)]
#[allow(dead_code)] // the schema only: ids are compared as strings
pub struct TicketIdText(String);

/// A transfer offer and what became of it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferResponse {
    pub transfer_id: String,
    /// `OFFERED`, `ACCEPTED`, `DECLINED`, `WITHDRAWN` or `EXPIRED` (an offer past
    /// `expiresAt`, by the store's clock).
    #[schema(value_type = crate::api::status_names::TransferStatus, example = "OFFERED")]
    pub status: String,
    pub event_id: String,
    /// The giver's order the tickets are from.
    pub order_id: String,
    pub from_account_id: String,
    pub to_account_id: String,
    /// The tickets offered (void once accepted).
    pub ticket_ids: Vec<String>,
    /// The offer's deadline: a week after it was made, or the event's transfer cutoff if
    /// sooner.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: OffsetDateTime,
    /// The receiver's new order with the new tickets, once accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_order_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
}

impl TransferResponse {
    pub fn new(view: &TransferView) -> Self {
        Self {
            transfer_id: view.transfer_id.clone(),
            status: view.status.as_str().to_owned(),
            event_id: view.event_id.clone(),
            order_id: view.order_id.clone(),
            from_account_id: view.from_account_id.clone(),
            to_account_id: view.to_account_id.clone(),
            ticket_ids: view.ticket_ids.clone(),
            expires_at: view.expires_at,
            new_order_id: view.new_order_id.clone(),
            created_at: view.created_at,
            updated_at: view.updated_at,
        }
    }
}

fn answer(status: StatusCode, view: &TransferView) -> Response {
    (status, axum::Json(TransferResponse::new(view))).into_response()
}

fn conflict(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "TRANSFER_CONFLICT", detail)
}

fn closed() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "TRANSFER_CLOSED",
        "transfers of this event have closed (its start minus transferCutoffSeconds)",
    )
}

/// Offers tickets of a confirmed order to another account.
#[utoipa::path(
    post, path = "/v1/orders/{orderId}/transfers", tag = "transfers",
    params(
        ("orderId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CreateTransferBody,
    responses(
        (status = 201, description = "Offered (or the key's earlier offer, as it stands)", body = TransferResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such order for this account", body = Problem),
        (status = 409, description = "TRANSFER_CONFLICT (a ticket checked in, being exchanged, void or already offered; the order not confirmed or its payment not captured yet) or TRANSFER_CLOSED", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "RATE_LIMITED, or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_transfer(
    State(state): State<AppState>,
    account: Account,
    Path(order_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    state.limits.take(
        crate::limits::Limit::CheckoutsPerAccount,
        account.account_id.as_str(),
    )?;
    let key = request_key(&headers, &body)?;
    let request = body.parse::<CreateTransferBody>()?;
    if order_id.is_empty() || order_id.len() > 128 {
        return Err(ApiError::not_found("order"));
    }
    if request.ticket_ids.is_empty() || request.ticket_ids.len() > TICKETS_PER_TRANSFER_MAX {
        return Err(ApiError::validation(
            "ticketIds",
            format!("must name 1-{TICKETS_PER_TRANSFER_MAX} tickets"),
        ));
    }
    let mut seen = BTreeSet::new();
    for ticket_id in &request.ticket_ids {
        // Characters, as the document counts them (`TicketIdText`), not bytes.
        if ticket_id.is_empty() || ticket_id.chars().count() > 128 {
            return Err(ApiError::validation(
                "ticketIds",
                "each must be 1-128 characters",
            ));
        }
        if !seen.insert(ticket_id.as_str()) {
            return Err(ApiError::validation(
                "ticketIds",
                format!("names {ticket_id} twice"),
            ));
        }
    }
    let to = request.to_account_id.as_str();
    if to.is_empty() || to.chars().count() > 128 || to.chars().any(char::is_control) {
        return Err(ApiError::validation(
            "toAccountId",
            "must be 1-128 characters, none a control character",
        ));
    }
    if to == account.account_id.as_str() {
        return Err(ApiError::validation(
            "toAccountId",
            "is the giver's own account",
        ));
    }
    let path = format!("/v1/orders/{order_id}/transfers");
    let scope = IdempotencyScope {
        account_id: account.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    let order = state
        .store
        .order_head(&order_id)
        .await?
        .filter(|o| o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let event = state.event(&order.event_id).await?;
    let offer = TransferOffer {
        scope,
        request_digest: digest,
        transfer_id: uuid::Uuid::now_v7().to_string(),
        event_id: order.event_id.clone(),
        order_id,
        to_account_id: to.to_owned(),
        ticket_ids: request.ticket_ids,
    };
    let closes_at = boxoffice_store::transfer::closes_at(&event);
    match state.store.offer_transfer(&offer, closes_at).await? {
        Ok(Offered::Created(view)) => {
            metrics::counter!("boxoffice_transfers_total", "status" => "OFFERED").increment(1);
            Ok(answer(StatusCode::CREATED, &view))
        }
        Ok(Offered::Replayed(view)) => Ok(answer(StatusCode::CREATED, &view)),
        Err(OfferRefused::OrderNotFound) => Err(ApiError::not_found("order")),
        Err(OfferRefused::KeyReused) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
            "this Idempotency-Key was used with a different request",
        )),
        Err(OfferRefused::Closed) => Err(closed()),
        Err(OfferRefused::Conflict(why)) => Err(conflict(why)),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TransfersQuery {
    /// `received` (offers to the caller, the default) or `given` (offers the caller made).
    #[param(pattern = "^(received|given)$")]
    pub role: Option<String>,
    /// 1-100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// The caller's transfers on one side, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferList {
    pub transfers: Vec<TransferResponse>,
}

/// The caller's transfers (received, or given), newest first.
#[utoipa::path(
    get, path = "/v1/transfers", tag = "transfers", params(TransfersQuery),
    responses(
        (status = 200, description = "The transfers", body = TransferList),
        (status = 401, description = "No valid token", body = Problem),
        (status = 422, description = "Bad role or limit", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_transfers(
    State(state): State<AppState>,
    account: Account,
    query: Result<Query<TransfersQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(query) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let role = match query.role.as_deref() {
        None | Some("received") => TransferRole::Received,
        Some("given") => TransferRole::Given,
        Some(_) => return Err(ApiError::validation("role", "must be received or given")),
    };
    let limit = query.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::validation("limit", "must be between 1 and 100"));
    }
    let transfers = state
        .store
        .list_transfers(account.account_id.as_str(), role, limit)
        .await?;
    let list = TransferList {
        transfers: transfers.iter().map(TransferResponse::new).collect(),
    };
    Ok(axum::Json(list).into_response())
}

/// The transfer if the caller is its giver or receiver; else 404, as for no transfer.
async fn transfer_of(
    state: &AppState,
    account: &Account,
    transfer_id: &str,
) -> ApiResult<TransferView> {
    if transfer_id.is_empty() || transfer_id.len() > 128 {
        return Err(ApiError::not_found("transfer"));
    }
    let me = account.account_id.as_str();
    state
        .store
        .get_transfer(transfer_id)
        .await?
        .filter(|t| t.from_account_id == me || t.to_account_id == me)
        .ok_or_else(|| ApiError::not_found("transfer"))
}

/// One transfer, for its giver or its receiver.
#[utoipa::path(
    get, path = "/v1/transfers/{transferId}", tag = "transfers",
    params(("transferId" = String, Path)),
    responses(
        (status = 200, description = "The transfer", body = TransferResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such transfer for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_transfer(
    State(state): State<AppState>,
    account: Account,
    Path(transfer_id): Path<String>,
) -> ApiResult<Response> {
    let view = transfer_of(&state, &account, &transfer_id).await?;
    Ok(answer(StatusCode::OK, &view))
}

/// The key of a request without a body (accept, decline, withdraw): required, checked like
/// any other; these are idempotent by the offer's state.
fn bodiless_key(headers: &HeaderMap) -> ApiResult<String> {
    request_key(headers, &JsonBody(serde_json::Value::Null))
}

/// Why an offer in `status` cannot be answered.
fn ended(view: &TransferView) -> ApiError {
    conflict(format!(
        "the offer is {}",
        view.status.as_str().to_ascii_lowercase()
    ))
}

/// Accepts an offer made to the caller: the offered tickets become void and new tickets for
/// the same seats are issued to the caller in a new order, without consuming capacity.
#[utoipa::path(
    post, path = "/v1/transfers/{transferId}/accept", tag = "transfers",
    params(
        ("transferId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters"),
    ),
    responses(
        (status = 200, description = "ACCEPTED, with newOrderId (also the answer to a retry)", body = TransferResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such transfer offered to this account", body = Problem),
        (status = 409, description = "TRANSFER_CONFLICT (declined, withdrawn, expired, or a ticket checked in or exchanged meanwhile), TRANSFER_CLOSED or PURCHASE_LIMIT", body = Problem),
        (status = 422, description = "VALIDATION", body = Problem),
        (status = 429, description = "The event's writer or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn accept_transfer(
    State(state): State<AppState>,
    account: Account,
    Path(transfer_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    bodiless_key(&headers)?;
    let view = transfer_of(&state, &account, &transfer_id).await?;
    if view.to_account_id != account.account_id.as_str() {
        return Err(ApiError::not_found("transfer"));
    }
    let event = state.event(&view.event_id).await?;
    match view.status {
        TransferStatus::Accepted => return Ok(answer(StatusCode::OK, &view)),
        TransferStatus::Offered => {}
        // An offer that lapsed with the event's transfer cutoff: transfers have closed.
        TransferStatus::Expired
            if view.expires_at >= boxoffice_store::transfer::closes_at(&event) =>
        {
            return Err(closed());
        }
        _ => return Err(ended(&view)),
    }
    let order = state
        .store
        .order_to_exchange(&view.order_id)
        .await?
        .filter(|o| o.account_id == view.from_account_id)
        .ok_or_else(|| conflict("the giver's order is gone"))?;
    let (request, write) = accepted(&state, &event, &view, &order, account.account_id.as_str())?;
    let answered = state.writers.transfer(event, request, write).await?;
    let after = |state: AppState| async move {
        state
            .store
            .get_transfer(&transfer_id)
            .await?
            .ok_or_else(ApiError::internal)
    };
    match answered {
        TransferAnswer::Accepted => {
            metrics::counter!("boxoffice_transfers_total", "status" => "ACCEPTED").increment(1);
            let view = after(state).await?;
            Ok(answer(StatusCode::OK, &view))
        }
        TransferAnswer::Closed => Err(closed()),
        TransferAnswer::PurchaseLimit => Err(ApiError::new(
            StatusCode::CONFLICT,
            "PURCHASE_LIMIT",
            "accepting would take the account past the event's maxTicketsPerAccount",
        )),
        TransferAnswer::Conflict(why) => {
            // A retry racing its first request finds the offer accepted by the first.
            let view = after(state).await?;
            if view.status == TransferStatus::Accepted {
                return Ok(answer(StatusCode::OK, &view));
            }
            Err(conflict(why))
        }
        TransferAnswer::NotKept => Err(conflict("the giver's order is no longer confirmed")),
    }
}

/// The engine's command and the store's rows for accepting `view`, from the giver's order as
/// read: the offered tickets must still be valid in it (the group checks them again).
fn accepted(
    state: &AppState,
    event: &boxoffice_store::EventRecord,
    view: &TransferView,
    order: &OrderView,
    receiver: &str,
) -> ApiResult<(TransferRequest, TransferWrite)> {
    if order.status != boxoffice_domain::order::OrderStatus::Confirmed {
        return Err(conflict(format!(
            "order {} is not confirmed",
            order.order_id
        )));
    }
    let mut seats = Vec::new();
    let mut units = 0u32;
    for ticket_id in &view.ticket_ids {
        let ticket = order
            .tickets
            .iter()
            .find(|t| &t.ticket_id == ticket_id)
            .ok_or_else(|| conflict(format!("ticket {ticket_id} is no longer the order's")))?;
        if ticket.status != "VALID" {
            return Err(conflict(format!(
                "ticket {ticket_id} is {}",
                ticket.status.to_ascii_lowercase()
            )));
        }
        match &ticket.seat_id {
            Some(seat_id) => {
                let price_minor = order
                    .seats
                    .iter()
                    .find(|s| &s.seat_id == seat_id)
                    .map_or(0, |s| s.price_minor);
                seats.push(HeldSeat {
                    seat_id: seat_id.clone(),
                    price_minor,
                });
            }
            None => units += 1,
        }
    }
    let tier = match (&order.tier_id, units) {
        (_, 0) => None,
        (Some(tier_id), units) => Some((tier_id.clone(), units)),
        (None, _) => return Err(conflict("the order's tickets do not match its seats")),
    };
    let unit_price = tier
        .as_ref()
        .and_then(|(tier_id, _)| event.tiers.iter().find(|t| &t.tier_id == tier_id))
        .map_or(0, |t| t.price_minor);
    let total_minor =
        seats.iter().map(|s| s.price_minor).sum::<i64>() + i64::from(units) * unit_price;
    let new_order_id = uuid::Uuid::now_v7().to_string();
    let new_tickets = signed_tickets(state, &new_order_id, &event.event_id, &seats, &tier);
    let new_hold_id = uuid::Uuid::now_v7().to_string();
    let seat_ids: Vec<String> = seats.iter().map(|s| s.seat_id.clone()).collect();
    let request = TransferRequest {
        transfer_id: view.transfer_id.clone(),
        from_account_id: view.from_account_id.clone(),
        old_hold_id: order.hold_id.clone(),
        to_account_id: receiver.to_owned(),
        new_hold_id: new_hold_id.clone(),
        seat_ids,
        tier: tier.clone(),
        ticket_ids: view.ticket_ids.clone(),
        closes_at: boxoffice_store::transfer::closes_at(event),
    };
    let write = TransferWrite {
        transfer: view.clone(),
        old_hold_id: order.hold_id.clone(),
        new_hold_id,
        new_order_id,
        operation_id: uuid::Uuid::now_v7().to_string(),
        quantity: seats.len() as u32 + units,
        seats,
        tier_id: tier.map(|(tier_id, _)| tier_id),
        total_minor,
        currency: order.currency.clone(),
        new_tickets,
    };
    Ok((request, write))
}

/// The receiver's tickets: one per seat, or per tier unit.
fn signed_tickets(
    state: &AppState,
    order_id: &str,
    event_id: &str,
    seats: &[HeldSeat],
    tier: &Option<(String, u32)>,
) -> Vec<SignedTicket> {
    let mut units: Vec<(Option<String>, Option<String>)> = seats
        .iter()
        .map(|seat| (Some(seat.seat_id.clone()), None))
        .collect();
    if let Some((tier_id, n)) = tier {
        units.extend((0..*n).map(|_| (None, Some(tier_id.clone()))));
    }
    crate::routes::exchanges::sign_units(state, order_id, event_id, units)
}

/// Declines an offer made to the caller.
#[utoipa::path(
    post, path = "/v1/transfers/{transferId}/decline", tag = "transfers",
    params(
        ("transferId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters"),
    ),
    responses(
        (status = 200, description = "DECLINED (also the answer to a retry)", body = TransferResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such transfer offered to this account", body = Problem),
        (status = 409, description = "TRANSFER_CONFLICT: accepted, withdrawn or expired already", body = Problem),
        (status = 422, description = "VALIDATION", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn decline_transfer(
    State(state): State<AppState>,
    account: Account,
    Path(transfer_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    bodiless_key(&headers)?;
    end(&state, &account, &transfer_id, TransferStatus::Declined).await
}

/// Withdraws an open offer the caller made.
#[utoipa::path(
    delete, path = "/v1/transfers/{transferId}", tag = "transfers",
    params(("transferId" = String, Path)),
    responses(
        (status = 200, description = "WITHDRAWN (also the answer to a retry)", body = TransferResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such transfer made by this account", body = Problem),
        (status = 409, description = "TRANSFER_CONFLICT: accepted, declined or expired already", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn withdraw_transfer(
    State(state): State<AppState>,
    account: Account,
    Path(transfer_id): Path<String>,
) -> ApiResult<Response> {
    end(&state, &account, &transfer_id, TransferStatus::Withdrawn).await
}

async fn end(
    state: &AppState,
    account: &Account,
    transfer_id: &str,
    to: TransferStatus,
) -> ApiResult<Response> {
    if transfer_id.is_empty() || transfer_id.len() > 128 {
        return Err(ApiError::not_found("transfer"));
    }
    let view = state
        .store
        .end_transfer(transfer_id, account.account_id.as_str(), to)
        .await?
        .ok_or_else(|| ApiError::not_found("transfer"))?;
    if view.status == to {
        metrics::counter!("boxoffice_transfers_total", "status" => to.as_str()).increment(1);
        return Ok(answer(StatusCode::OK, &view));
    }
    Err(ended(&view))
}
