//! A fan's refund (API.md, "Refunds and cancellation"): `POST /v1/orders/{orderId}/refunds`
//! gives back tickets of the caller's confirmed order within the event's `refundPolicy`, and
//! `GET /v1/orders/{orderId}/refunds/{refundId}` shows one.
//!
//! The refund goes through the event's writer like a transfer: the engine frees the seats (or
//! units) in the group that voids the tickets and records the refund `PENDING` with its outbox
//! message; the group refuses it alone if the order or a ticket changed since it was read here
//! (a check-in, an exchange, a transfer offer or another refund that committed first). The
//! relay then asks the provider (`boxoffice_workers::relay`) and the refund settles
//! `SUCCEEDED` or `FAILED`.
//!
//! Idempotency: the refund is stored with its key and request digest; a retry answers the
//! same refund as it stands now, the key with another body is refused.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::request_digest;
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_store::checkout::OrderView;
use boxoffice_store::refund::{
    REASON_REQUESTED_BY_CUSTOMER, RefundStatus, RefundView, RefundWrite, TICKETS_PER_REFUND_MAX,
    fan_refund_amount, fan_refund_closed,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::request_key;
use crate::routes::transfers::TicketIdText;
use crate::runtime::writer::RefundAnswer;

/// `POST /v1/orders/{orderId}/refunds` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRefundBody {
    /// Tickets of the order to refund (1-100, no duplicates); absent: every valid ticket.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100, value_type = Option<Vec<TicketIdText>>)]
    pub ticket_ids: Option<Vec<String>>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// A refund of tickets of an order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundResponse {
    pub refund_id: String,
    pub order_id: String,
    pub ticket_ids: Vec<String>,
    /// What goes back: the tickets' prices less the policy's kept fee per ticket.
    pub amount_minor: i64,
    pub currency: String,
    #[schema(value_type = crate::api::status_names::RefundStatus, example = "PENDING")]
    pub status: String,
    /// `REQUESTED_BY_CUSTOMER` for a fan's refund.
    pub reason: String,
    /// Why the provider refused (`FAILED`: the money is still owed; an operator's case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub settled_at: Option<OffsetDateTime>,
}

impl RefundResponse {
    pub fn new(refund: &RefundView) -> Self {
        Self {
            refund_id: refund.refund_id.clone(),
            order_id: refund.order_id.clone(),
            ticket_ids: refund.ticket_ids.clone(),
            amount_minor: refund.amount_minor,
            currency: refund.currency.clone(),
            status: refund.status.as_str().to_owned(),
            reason: refund.reason.clone(),
            failure: refund
                .last_error
                .clone()
                .filter(|_| refund.status == RefundStatus::Failed),
            created_at: refund.created_at,
            settled_at: refund.settled_at,
        }
    }
}

fn answer(refund: &RefundView, replayed: bool) -> Response {
    let mut response = (
        StatusCode::ACCEPTED,
        axum::Json(RefundResponse::new(refund)),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", HeaderValue::from_static("true"));
    }
    response
}

fn conflict(detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "REFUND_CONFLICT", detail)
}

/// The tickets a refund names: each 1-128 characters, 1-100 of them, none twice.
fn check_ticket_ids(ticket_ids: &[String]) -> ApiResult<()> {
    if ticket_ids.is_empty() || ticket_ids.len() > TICKETS_PER_REFUND_MAX {
        return Err(ApiError::validation(
            "ticketIds",
            format!("must name 1-{TICKETS_PER_REFUND_MAX} tickets, or be left out for all"),
        ));
    }
    let mut seen = BTreeSet::new();
    for ticket_id in ticket_ids {
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
    Ok(())
}

/// Refunds tickets of the caller's order.
#[utoipa::path(
    post, path = "/v1/orders/{orderId}/refunds", tag = "refunds",
    params(
        ("orderId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CreateRefundBody,
    responses(
        (status = 202, description = "Recorded: the tickets are void and their seats back on sale; the money goes back as the refund settles (or the key's earlier refund, as it stands, with Idempotent-Replayed)", body = RefundResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such order for this account", body = Problem),
        (status = 409, description = "REFUND_NOT_ALLOWED (no refund policy, or past its cutoff) or REFUND_CONFLICT (a ticket checked in, being exchanged, offered in a transfer or void; the order not paid yet or cancelled)", body = Problem),
        (status = 422, description = "VALIDATION (a ticket not of this order) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "RATE_LIMITED, or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_refund(
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
    let request = body.parse::<CreateRefundBody>()?;
    if order_id.is_empty() || order_id.len() > 128 {
        return Err(ApiError::not_found("order"));
    }
    if let Some(ticket_ids) = &request.ticket_ids {
        check_ticket_ids(ticket_ids)?;
    }
    let order = state
        .store
        .get_order(&order_id)
        .await?
        .filter(|o| o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let path = format!("/v1/orders/{order_id}/refunds");
    let digest = request_digest("POST", &path, &body.0);
    let account_id = account.account_id.as_str();
    if let Some(answered) = replay(&state, &order, account_id, &key, &digest).await? {
        return Ok(answered);
    }
    let event = state.current_event(&order.event_id).await?;
    let now = state.store.now().await?;
    if let Some(why) = fan_refund_closed(&event, now) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "REFUND_NOT_ALLOWED",
            why,
        ));
    }
    let Some(policy) = event.refund_policy else {
        return Err(ApiError::internal());
    };
    let ticket_ids = refundable(&order, request.ticket_ids.as_deref())?;
    let prices: Vec<i64> = ticket_ids
        .iter()
        .map(|ticket_id| ticket_price(&order, ticket_id))
        .collect();
    let write = RefundWrite::new(
        &order,
        account_id,
        ticket_ids,
        fan_refund_amount(&policy, &prices),
        REASON_REQUESTED_BY_CUSTOMER,
        (&key, &digest),
        now,
    );
    refund_tickets(&state, event, &order, write).await
}

/// Submits a refund of tickets to the event's writer and answers it: the refund as recorded,
/// the key's refund when a retry raced its first request, or why it was refused.
async fn refund_tickets(
    state: &AppState,
    event: std::sync::Arc<boxoffice_store::EventRecord>,
    order: &OrderView,
    write: RefundWrite,
) -> ApiResult<Response> {
    let command = write.command(order);
    let (event_id, refund_id) = (order.event_id.clone(), write.refund.refund_id.clone());
    let (account_id, key, digest) = (
        write.refund.account_id.clone(),
        write.idempotency_key.clone(),
        write.request_digest.clone(),
    );
    match state.writers.refund(event, command, write).await? {
        RefundAnswer::Refunded => {
            boxoffice_workers::crash::point("refund_committed");
            recorded(state);
            let refund = state
                .store
                .get_refund(&event_id, &refund_id)
                .await?
                .ok_or_else(ApiError::internal)?;
            Ok(answer(&refund, false))
        }
        RefundAnswer::Conflict(why) => {
            // A retry racing its first request finds the refund the first one recorded.
            if let Some(answered) = replay(state, order, &account_id, &key, &digest).await? {
                return Ok(answered);
            }
            Err(conflict(why))
        }
        RefundAnswer::NotKept => Err(conflict("the order is no longer confirmed")),
    }
}

/// A refund recorded: counted, and the relay woken to pay it.
fn recorded(state: &AppState) {
    metrics::counter!("boxoffice_refunds_total", "status" => "PENDING").increment(1);
    state.relay.poke();
}

/// The key's earlier refund, answered again as it stands (or the key with another request
/// refused); `None` when the key is new.
async fn replay(
    state: &AppState,
    order: &OrderView,
    account_id: &str,
    key: &str,
    digest: &str,
) -> ApiResult<Option<Response>> {
    let Some((refund, stored)) = state
        .store
        .refund_by_key(&order.event_id, account_id, key)
        .await?
    else {
        return Ok(None);
    };
    if stored != digest {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
            "this Idempotency-Key was used with a different request",
        ));
    }
    Ok(Some(answer(&refund, true)))
}

/// The tickets to refund: those named (each the order's and valid), or every valid one; the
/// order confirmed, paid and not cancelled.
fn refundable(order: &OrderView, named: Option<&[String]>) -> ApiResult<Vec<String>> {
    match order.status {
        OrderStatus::Confirmed => {}
        OrderStatus::PendingPayment => {
            return Err(conflict("the order is not paid yet"));
        }
        OrderStatus::Cancelled => return Err(conflict("the order is cancelled")),
    }
    if !matches!(
        order.payment_status,
        PaymentStatus::Authorized | PaymentStatus::Captured
    ) {
        return Err(conflict(format!(
            "the order's payment is {}",
            order.payment_status.as_str()
        )));
    }
    let Some(named) = named else {
        let valid: Vec<String> = order
            .tickets
            .iter()
            .filter(|t| t.status == "VALID")
            .map(|t| t.ticket_id.clone())
            .collect();
        if valid.is_empty() {
            return Err(conflict(if order.tickets.is_empty() {
                "the order's tickets are not issued yet; try again in a moment"
            } else {
                "the order has no valid ticket left"
            }));
        }
        return Ok(valid);
    };
    for ticket_id in named {
        let Some(ticket) = order.tickets.iter().find(|t| &t.ticket_id == ticket_id) else {
            return Err(ApiError::validation(
                "ticketIds",
                format!("{ticket_id} is not a ticket of this order"),
            ));
        };
        match ticket.status.as_str() {
            "VALID" => {}
            "CHECKED_IN" => return Err(conflict(format!("ticket {ticket_id} is checked in"))),
            "EXCHANGING" => {
                return Err(conflict(format!("ticket {ticket_id} is being exchanged")));
            }
            _ => return Err(conflict(format!("ticket {ticket_id} is void"))),
        }
    }
    Ok(named.to_vec())
}

/// What a ticket of `order` was bought for: its seat's price, or the tier's unit price.
fn ticket_price(order: &OrderView, ticket_id: &str) -> i64 {
    let ticket = order.tickets.iter().find(|t| t.ticket_id == ticket_id);
    match ticket.and_then(|t| t.seat_id.as_deref()) {
        Some(seat_id) => order
            .seats
            .iter()
            .find(|s| s.seat_id == seat_id)
            .map_or(0, |s| s.price_minor),
        None => order.total_minor / i64::from(order.quantity.max(1)),
    }
}

/// One refund of an order (its owner, or an admin).
#[utoipa::path(
    get, path = "/v1/orders/{orderId}/refunds/{refundId}", tag = "refunds",
    params(("orderId" = String, Path), ("refundId" = String, Path)),
    responses(
        (status = 200, description = "The refund", body = RefundResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such order for this account, or no such refund of it", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_refund(
    State(state): State<AppState>,
    account: Account,
    Path((order_id, refund_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    if order_id.is_empty() || order_id.len() > 128 || refund_id.len() > 128 {
        return Err(ApiError::not_found("refund"));
    }
    let order = state
        .store
        .order_head(&order_id)
        .await?
        .filter(|o| account.admin || o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let refund = state
        .store
        .get_refund(&order.event_id, &refund_id)
        .await?
        .filter(|r| r.order_id == order.order_id)
        .ok_or_else(|| ApiError::not_found("refund"))?;
    Ok(axum::Json(RefundResponse::new(&refund)).into_response())
}

/// `POST /v1/admin/orders/{orderId}/refunds` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdminRefundBody {
    /// What goes back (at most what the order paid less its refunds); with `ticketIds`, left
    /// out: the tickets' prices.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100_000_000_000_i64)]
    pub amount_minor: Option<i64>,
    /// Tickets of the order to void (1-100, no duplicates); left out: money alone, the
    /// tickets stay valid.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100, value_type = Option<Vec<TicketIdText>>)]
    pub ticket_ids: Option<Vec<String>>,
    /// Whether the voided tickets' seats (or units) go back on sale; `false` keeps them sold
    /// to the order, off sale (a broken seat, a blocked view). Only with `ticketIds`.
    #[serde(default = "default_release")]
    #[schema(default = true)]
    pub release_seats: bool,
    /// Why, for the fan and the books (1-500 characters, not only white space, no control
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

fn default_release() -> bool {
    true
}

/// An organiser's refund of an order: chosen tickets voided (their seats back on sale), or
/// money alone (a goodwill amount; the tickets stay valid), with a reason.
#[utoipa::path(
    post, path = "/v1/admin/orders/{orderId}/refunds", tag = "refunds",
    params(
        ("orderId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = AdminRefundBody,
    responses(
        (status = 202, description = "Recorded; the money goes back as the refund settles (or the key's earlier refund, as it stands, with Idempotent-Replayed)", body = RefundResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such order", body = Problem),
        (status = 409, description = "REFUND_CONFLICT (a ticket checked in, being exchanged, offered in a transfer or void; the order not paid yet or cancelled)", body = Problem),
        (status = 422, description = "VALIDATION (more than the order paid less its refunds, no amountMinor and no ticketIds, a ticket not of this order) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn admin_refund(
    State(state): State<AppState>,
    crate::auth::Admin(account): crate::auth::Admin,
    Path(order_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<AdminRefundBody>()?;
    if order_id.is_empty() || order_id.len() > 128 {
        return Err(ApiError::not_found("order"));
    }
    let reason = request.reason.trim();
    if reason.is_empty() || request.reason.chars().count() > 500 {
        return Err(ApiError::validation(
            "reason",
            "must be 1-500 characters, not only white space",
        ));
    }
    if request.reason.chars().any(char::is_control) {
        return Err(ApiError::validation(
            "reason",
            "must not contain control characters",
        ));
    }
    if let Some(ticket_ids) = &request.ticket_ids {
        check_ticket_ids(ticket_ids)?;
    }
    if request.ticket_ids.is_none() && request.amount_minor.is_none() {
        return Err(ApiError::validation(
            "amountMinor",
            "give amountMinor, ticketIds or both",
        ));
    }
    if let Some(amount) = request.amount_minor
        && !(1..=boxoffice_domain::event::PRICE_MINOR_MAX * 1_000).contains(&amount)
    {
        return Err(ApiError::validation(
            "amountMinor",
            "must be at least 1 and within the order's payment",
        ));
    }
    let order = state
        .store
        .get_order(&order_id)
        .await?
        .ok_or_else(|| ApiError::not_found("order"))?;
    let path = format!("/v1/admin/orders/{order_id}/refunds");
    let digest = request_digest("POST", &path, &body.0);
    let account_id = account.account_id.as_str();
    if let Some(answered) = replay(&state, &order, account_id, &key, &digest).await? {
        return Ok(answered);
    }
    let event = state.event(&order.event_id).await?;
    let now = state.store.now().await?;
    let too_much = |left: i64| {
        ApiError::validation(
            "amountMinor",
            format!("at most {left} can still go back to this order"),
        )
    };
    let left = order.total_minor - order.refunded_minor();
    let Some(named) = request.ticket_ids.as_deref() else {
        // Money alone: one transaction of the store, no inventory.
        let amount = request.amount_minor.unwrap_or(0);
        if amount > left {
            return Err(too_much(left));
        }
        let write = RefundWrite::new(
            &order,
            account_id,
            Vec::new(),
            amount,
            reason,
            (&key, &digest),
            now,
        );
        return match state.store.refund_money(&write).await? {
            Ok(view) => {
                recorded(&state);
                Ok(answer(&view, false))
            }
            Err(why) => {
                if let Some(answered) = replay(&state, &order, account_id, &key, &digest).await? {
                    return Ok(answered);
                }
                if why.starts_with("at most") {
                    Err(ApiError::validation("amountMinor", why))
                } else {
                    Err(conflict(why))
                }
            }
        };
    };
    let ticket_ids = refundable(&order, Some(named))?;
    let prices: i64 = ticket_ids
        .iter()
        .map(|ticket_id| ticket_price(&order, ticket_id))
        .sum();
    let amount = request.amount_minor.unwrap_or(prices);
    if amount > left {
        return Err(too_much(left));
    }
    let write = RefundWrite::new(
        &order,
        account_id,
        ticket_ids,
        amount,
        reason,
        (&key, &digest),
        now,
    );
    let write = if request.release_seats {
        write
    } else {
        write.keeping_seats()
    };
    refund_tickets(&state, event, &order, write).await
}
