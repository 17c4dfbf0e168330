//! Exchanges (rebooking, 改签): a confirmed order's tickets move to other seats or tier units
//! of the same event or another one (a bus or train trip is an event), all or nothing.
//!
//! The request is validated here against the cached event records (seat ids, tiers, prices,
//! currency) and the tickets given up are picked from the order as read; the target event's
//! writer then decides the exchange with the event's other commands and writes it in its
//! group, which refuses it alone if the order or the tickets changed since they were read
//! (see `boxoffice_store::exchange`). A price increase answers `PAYMENT_REQUIRED`: the new
//! seats are held and `POST /v1/exchanges/{id}/checkout` pays the difference through the same
//! checkout as a hold's, whose confirmation swaps the tickets atomically. Between events on
//! two shards, [`exchange_across_shards`] takes DESIGN §7's recorded steps instead.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse, request_digest};
use boxoffice_domain::ids::SeatRef;
use boxoffice_store::checkout::OrderView;
use boxoffice_store::checkout::TicketDraft;
use boxoffice_store::exchange::{
    ExchangeBegun, ExchangeRefused, ExchangeStart, ExchangeStatus, ExchangeView, FromSide,
    OwnedTicket, SignedTicket, ToSide, surrender,
};
use boxoffice_store::{EventRecord, HeldSeat};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::{HoldResponse, Problem};
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{request_key, stored_response};
use crate::routes::checkout::{CheckoutBody, CheckoutResponse, OrderResponse};

/// Most tickets one exchange may move.
pub const EXCHANGE_TICKETS_MAX: usize = 50;

/// `POST /v1/orders/{orderId}/exchanges` body: `fromSeatIds` or `fromTierId`, and
/// `toSeatIds` or `toTierId`; `quantity` counts the tier units (with seats on the other side
/// it must equal their number).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateExchangeBody {
    /// The order's seats given back (or `fromTierId`).
    #[serde(default)]
    #[schema(min_items = 1, max_items = 50, value_type = Option<Vec<crate::api::SeatId>>)]
    pub from_seat_ids: Option<Vec<String>>,
    /// The order's tier whose tickets are given back (or `fromSeatIds`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64)]
    pub from_tier_id: Option<String>,
    /// Defaults to the order's event.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 128)]
    pub to_event_id: Option<String>,
    /// The new seats (or `toTierId`).
    #[serde(default)]
    #[schema(min_items = 1, max_items = 50, value_type = Option<Vec<crate::api::SeatId>>)]
    pub to_seat_ids: Option<Vec<String>>,
    /// The new tier (or `toSeatIds`).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 64)]
    pub to_tier_id: Option<String>,
    /// The number of tickets exchanged: required when both sides are tiers; otherwise it
    /// must equal the number of seats named.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 50)]
    pub quantity: Option<u32>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
    /// Needed when the target event's waiting room is enabled (or header `Admission-Token`).
    #[serde(default)]
    pub admission_token: Option<String>,
}

/// An exchange. `order` is the order the tickets came from, as it stands (its replaced
/// tickets `VOIDED`, or `EXCHANGING` while the difference is unpaid); the new seats have
/// their own hold (`hold`) and, once completed, their own order (`newOrderId`), ticketed when
/// the exchange completes (in its transaction; after a paid difference, like any order).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExchangeResponse {
    pub exchange_id: String,
    /// `PAYMENT_REQUIRED`, `COMPLETED`, `FAILED` or `EXPIRED`.
    #[schema(value_type = crate::api::status_names::ExchangeStatus, example = "COMPLETED")]
    pub status: String,
    pub order: OrderResponse,
    /// What is left to pay: above 0 with `PAYMENT_REQUIRED`; 0 or below (a refund due) once
    /// completed without payment.
    pub amount_due_minor: i64,
    pub currency: String,
    pub from_event_id: String,
    pub to_event_id: String,
    /// The tickets given up.
    pub ticket_ids: Vec<String>,
    /// What the given-up tickets were bought for, and what the new seats cost.
    pub from_value_minor: i64,
    pub to_value_minor: i64,
    /// The hold of the new seats (until it is paid: its `expiresAt` is the deadline).
    pub hold: HoldResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_order_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
}

impl ExchangeResponse {
    /// `now` is the store's clock: an unpaid exchange whose hold ran out reads `EXPIRED`
    /// before the sweeper writes it.
    pub fn new(exchange: &ExchangeView, order: &OrderView, now: OffsetDateTime) -> Self {
        let hold = HoldResponse::from_view(&exchange.new_hold, now);
        let lapsed = exchange.status == ExchangeStatus::PaymentRequired
            && hold.status == boxoffice_domain::hold::HoldStatus::Expired.as_str();
        Self {
            exchange_id: exchange.exchange_id.clone(),
            status: if lapsed {
                ExchangeStatus::Expired.as_str().to_owned()
            } else {
                exchange.status.as_str().to_owned()
            },
            order: OrderResponse::new(order),
            amount_due_minor: exchange.amount_due_minor,
            currency: exchange.currency.clone(),
            from_event_id: exchange.from_event_id.clone(),
            to_event_id: exchange.to_event_id.clone(),
            ticket_ids: exchange.ticket_ids.clone(),
            from_value_minor: exchange.from_value_minor,
            to_value_minor: exchange.to_value_minor,
            hold,
            new_order_id: exchange.new_order_id.clone(),
            created_at: exchange.created_at,
            updated_at: exchange.updated_at,
        }
    }
}

/// The stored answer of a committed exchange (rendered inside its transaction).
pub fn render_exchange(exchange: &ExchangeView, order: &OrderView) -> StoredResponse {
    let body = ExchangeResponse::new(exchange, order, exchange.updated_at);
    StoredResponse {
        status: 201,
        body: serde_json::to_vec(&body).unwrap_or_default(),
    }
}

/// Seat ids: 1 to [`EXCHANGE_TICKETS_MAX`], well formed, no duplicates.
fn seat_list(field: &str, ids: &[String]) -> ApiResult<Vec<SeatRef>> {
    if ids.is_empty() || ids.len() > EXCHANGE_TICKETS_MAX {
        return Err(ApiError::validation(
            field,
            format!("must name 1-{EXCHANGE_TICKETS_MAX} seats"),
        ));
    }
    let mut seen = BTreeSet::new();
    ids.iter()
        .map(|id| {
            if !seen.insert(id.as_str()) {
                return Err(ApiError::validation(field, format!("names {id} twice")));
            }
            SeatRef::parse(id).map_err(|e| ApiError::validation(field, e))
        })
        .collect()
}

fn quantity_of(body: &CreateExchangeBody, seats: Option<usize>) -> ApiResult<u32> {
    match (body.quantity, seats) {
        (Some(q), Some(n)) if q as usize != n => Err(ApiError::validation(
            "quantity",
            "must equal the number of seats on the other side",
        )),
        (Some(q), _) if q == 0 || q as usize > EXCHANGE_TICKETS_MAX => Err(ApiError::validation(
            "quantity",
            format!("must be 1-{EXCHANGE_TICKETS_MAX}"),
        )),
        (Some(q), _) => Ok(q),
        (None, Some(n)) => Ok(n as u32),
        (None, None) => Err(ApiError::validation(
            "quantity",
            "is required when both sides are tiers",
        )),
    }
}

/// One side of the request, before pricing.
enum Named<'a> {
    Seats(&'a [String], Vec<SeatRef>),
    Tier(&'a str),
}

fn named<'a>(
    seats_field: &str,
    seat_ids: &'a Option<Vec<String>>,
    tier_field: &str,
    tier_id: &'a Option<String>,
) -> ApiResult<Named<'a>> {
    match (seat_ids, tier_id) {
        (Some(ids), None) => Ok(Named::Seats(ids, seat_list(seats_field, ids)?)),
        (None, Some(tier_id)) if !tier_id.is_empty() && tier_id.chars().count() <= 64 => {
            Ok(Named::Tier(tier_id))
        }
        (None, Some(_)) => Err(ApiError::validation(tier_field, "must be 1-64 characters")),
        _ => Err(ApiError::validation(
            seats_field,
            format!("give exactly one of {seats_field} and {tier_field}"),
        )),
    }
}

/// The two sides of the request, checked against the target event's layout and priced.
pub(crate) fn sides(
    body: &CreateExchangeBody,
    order: &OrderView,
    target: &EventRecord,
) -> ApiResult<(FromSide, ToSide)> {
    let from = named(
        "fromSeatIds",
        &body.from_seat_ids,
        "fromTierId",
        &body.from_tier_id,
    )?;
    let to = named("toSeatIds", &body.to_seat_ids, "toTierId", &body.to_tier_id)?;
    let n_seats = match (&from, &to) {
        (Named::Seats(a, _), Named::Seats(b, _)) if a.len() != b.len() => {
            return Err(ApiError::validation(
                "toSeatIds",
                "must name as many seats as fromSeatIds (one new ticket for each old one)",
            ));
        }
        (Named::Seats(ids, _), _) | (_, Named::Seats(ids, _)) => Some(ids.len()),
        _ => None,
    };
    let quantity = quantity_of(body, n_seats)?;
    if target.currency != order.currency {
        return Err(ApiError::validation(
            "toEventId",
            format!(
                "sells in {}, the order was paid in {}",
                target.currency, order.currency
            ),
        ));
    }
    let from = match from {
        Named::Seats(ids, _) => FromSide::Seats(ids.to_vec()),
        Named::Tier(tier_id) => FromSide::Tier {
            tier_id: tier_id.to_owned(),
            quantity,
        },
    };
    let prices = boxoffice_domain::pricing::PriceList::of(&target.sale);
    let all_in = |face_minor: i64| prices.ticket(face_minor).all_in_minor;
    let to = match to {
        Named::Seats(_, refs) => {
            let mut seats = Vec::with_capacity(refs.len());
            // The new tickets are valued like the old: all-in (a standard ticket's face,
            // per-ticket fees and added tax; issue 40), so the difference compares like with
            // like. Without fees or tax it is the face.
            for seat in &refs {
                let seat_id = seat.to_string();
                // A chart's seat is worth its category's price, another its section's.
                let face_minor = target.seat_price_minor(seat).ok_or_else(|| {
                    ApiError::validation(
                        "toSeatIds",
                        format!("{seat_id} is not a seat of event {}", target.event_id),
                    )
                })?;
                if target.event_id == order.event_id
                    && let FromSide::Seats(given) = &from
                    && given.contains(&seat_id)
                {
                    return Err(ApiError::validation(
                        "toSeatIds",
                        format!("{seat_id} is also given up"),
                    ));
                }
                seats.push(HeldSeat {
                    seat_id,
                    price_minor: all_in(face_minor),
                });
            }
            ToSide::Seats(seats)
        }
        Named::Tier(tier_id) => {
            let tier = target
                .tiers
                .iter()
                .find(|t| t.tier_id == tier_id)
                .ok_or_else(|| {
                    ApiError::validation(
                        "toTierId",
                        format!("event {} has no tier {tier_id}", target.event_id),
                    )
                })?;
            ToSide::Tier {
                tier_id: tier_id.to_owned(),
                quantity,
                price_minor: all_in(tier.price_minor),
            }
        }
    };
    if to.quantity() > target.max_seats_per_hold {
        return Err(ApiError::validation(
            "quantity",
            format!(
                "at most {} per request on event {}",
                target.max_seats_per_hold, target.event_id
            ),
        ));
    }
    Ok((from, to))
}

/// The new order's tickets (one per seat, or per tier unit from 1), drafted and signed
/// before the transaction that issues them if the exchange completes at once.
fn signed_tickets(
    state: &AppState,
    order_id: &str,
    event_id: &str,
    to: &ToSide,
) -> Vec<SignedTicket> {
    let units: Vec<(Option<String>, Option<String>)> = match to {
        ToSide::Seats(seats) => seats
            .iter()
            .map(|seat| (Some(seat.seat_id.clone()), None))
            .collect(),
        ToSide::Tier {
            tier_id, quantity, ..
        } => (0..*quantity)
            .map(|_| (None, Some(tier_id.clone())))
            .collect(),
    };
    sign_units(state, order_id, event_id, units)
}

/// Tickets of a new order for `units` (a seat id or a tier id each), numbered from 1, drafted
/// and signed before the transaction that issues them (exchanges and transfers).
pub(crate) fn sign_units(
    state: &AppState,
    order_id: &str,
    event_id: &str,
    units: Vec<(Option<String>, Option<String>)>,
) -> Vec<SignedTicket> {
    let issued_at_unix_s = time::OffsetDateTime::now_utc().unix_timestamp();
    units
        .into_iter()
        .zip(1..)
        .map(|((seat_id, tier_id), unit)| {
            let draft = TicketDraft {
                ticket_id: uuid::Uuid::now_v7().to_string(),
                event_id: event_id.to_owned(),
                order_id: order_id.to_owned(),
                seat_id,
                tier_id,
                unit,
            };
            let code = boxoffice_workers::relay::sign_draft(
                &state.ticket_signer,
                &draft,
                issued_at_unix_s,
            );
            SignedTicket { draft, code }
        })
        .collect()
}

fn refusal(refused: ExchangeRefused) -> ApiError {
    match refused {
        ExchangeRefused::Closed(detail) => {
            ApiError::new(StatusCode::CONFLICT, "EXCHANGE_CLOSED", detail)
        }
        ExchangeRefused::SeatsUnavailable(seats) => {
            let detail = if seats.is_empty() {
                "the target tier has too few units left".to_owned()
            } else {
                format!("not available: {}", seats.join(", "))
            };
            ApiError::new(StatusCode::CONFLICT, "SEATS_UNAVAILABLE", detail)
                .with("unavailableSeatIds", seats)
        }
        ExchangeRefused::Conflict(detail) => {
            ApiError::new(StatusCode::CONFLICT, "EXCHANGE_CONFLICT", detail)
        }
        ExchangeRefused::PurchaseLimit => ApiError::new(
            StatusCode::CONFLICT,
            "PURCHASE_LIMIT",
            "the account would exceed the target event's maxTicketsPerAccount",
        ),
        ExchangeRefused::SaleNotOpen => ApiError::new(
            StatusCode::CONFLICT,
            "SALE_NOT_OPEN",
            "the target event's sale is not open yet",
        ),
        ExchangeRefused::EventCancelled => crate::routes::cancellation::event_cancelled(),
        ExchangeRefused::CompanionSeatAlone(seat_id) => ApiError::new(
            StatusCode::CONFLICT,
            "COMPANION_SEAT_ALONE",
            format!(
                "companion seat {seat_id} is sold with a wheelchair space of its section among the new seats"
            ),
        )
        .with("seatId", seat_id),
        ExchangeRefused::SeatKeptAccessible {
            seat_ids,
            release_at,
        } => ApiError::new(
            StatusCode::CONFLICT,
            "SEAT_KEPT_ACCESSIBLE",
            format!(
                "{} of the new seats are kept for fans who need accessible places until the release time",
                seat_ids.len()
            ),
        )
        .with("unavailableSeatIds", seat_ids)
        .with(
            "releaseAt",
            release_at
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        ),
    }
}

/// Exchanges tickets of a confirmed, captured order for other seats, all or nothing.
#[utoipa::path(
    post, path = "/v1/orders/{orderId}/exchanges", tag = "exchanges",
    params(
        ("orderId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CreateExchangeBody,
    responses(
        (status = 201, description = "COMPLETED at once, or PAYMENT_REQUIRED (new seats held)", body = ExchangeResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "ADMISSION_REQUIRED or ADMISSION_INVALID (target event's waiting room)", body = Problem),
        (status = 404, description = "No such order for this account, or no such target event", body = Problem),
        (status = 409, description = "EXCHANGE_CLOSED, SEATS_UNAVAILABLE, EXCHANGE_CONFLICT (a ticket not the order's, checked in, void or being exchanged; the order not confirmed or its payment not captured yet), PURCHASE_LIMIT, SALE_NOT_OPEN, COMPANION_SEAT_ALONE (a new companion seat without a wheelchair space of its section among the new seats: `seatId`), SEAT_KEPT_ACCESSIBLE (new seats kept until the event's `accessibleReleaseAt`: `unavailableSeatIds`, `releaseAt`), EVENT_CANCELLED or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "RATE_LIMITED: checkouts-per-account (the problem's `limit`), or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_exchange(
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
    let request = body.parse::<CreateExchangeBody>()?;
    if order_id.is_empty() || order_id.len() > 128 {
        return Err(ApiError::not_found("order"));
    }
    let path = format!("/v1/orders/{order_id}/exchanges");
    let scope = IdempotencyScope {
        account_id: account.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    let order = state
        .store
        .order_to_exchange(&order_id)
        .await?
        .filter(|o| o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let to_event_id = request
        .to_event_id
        .clone()
        .unwrap_or_else(|| order.event_id.clone());
    let target = state.event(&to_event_id).await?;
    let (from, to) = sides(&request, &order, &target)?;
    // Events on two shards: DESIGN §7's two steps (see `exchange_across_shards`).
    let across_shards = to_event_id != order.event_id
        && !state
            .store
            .same_shard(&order.event_id, &to_event_id)
            .await?;
    let admitted = crate::gate::check_admission(
        &state,
        &target,
        &account,
        &headers,
        request.admission_token.as_deref(),
        false,
    )
    .await;
    if let Err(refused) = admitted {
        return crate::gate::replay_or(&state, &scope, &digest, refused).await;
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    // A key used before answers as before, without reaching the writer (an exchange the
    // group refuses for its key makes the writer load the event again). Coalesced with the
    // other look-ups in flight; a key committed since is still caught by the group.
    if let Some(seen) = state.lookup.stored_answer(&scope, &digest).await? {
        return Ok(crate::idempotency::answer(seen));
    }
    // The tickets given up, picked from the order as read (confirmed, its payment captured);
    // the writer's group writes them only if they are still as read (and the key is new). A
    // refusal answers what the key already has, if anything: a retry of an exchange that went
    // through finds its tickets gone, and gets its first answer.
    let tickets: Vec<OwnedTicket> = order.tickets.iter().map(OwnedTicket::from_view).collect();
    let gone = match surrender(&order, &tickets, &from) {
        Ok(gone) => gone,
        Err(refused) => {
            return crate::gate::replay_or(&state, &scope, &digest, refusal(refused)).await;
        }
    };
    let from_event = state.event(&order.event_id).await?;
    let new_order_id = uuid::Uuid::now_v7().to_string();
    let new_tickets = signed_tickets(&state, &new_order_id, &target.event_id, &to);
    let start = ExchangeStart {
        scope: scope.clone(),
        request_digest: digest.clone(),
        order_id,
        from_event,
        from,
        to_event: target.clone(),
        to,
        exchange_id: uuid::Uuid::now_v7().to_string(),
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        new_order_id,
        operation_id: uuid::Uuid::now_v7().to_string(),
        new_tickets,
        across_shards,
    };
    if across_shards {
        return exchange_across_shards(&state, target, start, gone, order).await;
    }
    let begun = state
        .writers
        .exchange(target, start, gone, order, &render_exchange)
        .await?;
    match begun {
        ExchangeBegun::Done { exchange, order } => {
            boxoffice_workers::crash::point("exchange_committed");
            metrics::counter!("boxoffice_exchanges_total", "status" => exchange.status.as_str())
                .increment(1);
            if exchange.status == ExchangeStatus::Completed {
                state.relay.poke();
            }
            Ok(stored_response(&render_exchange(&exchange, &order), false))
        }
        ExchangeBegun::Refused(refused) => {
            metrics::counter!("boxoffice_exchanges_refused_total").increment(1);
            crate::gate::replay_or(&state, &scope, &digest, refusal(refused)).await
        }
    }
}

/// An exchange between events on two shards (DESIGN §7), in three recorded steps: the old
/// tickets are marked on the old event's shard (its `OUT` row), the target event's writer
/// takes the new seats on the other shard (its `IN` row, the answer stored with it), then the
/// old side is swapped out (sold at once) or the marks taken back (refused). With a price
/// increase the last step waits for the difference: the exchange settler takes it when the
/// target's shard completes or ends the exchange. A request that dies between the steps is
/// finished by the settler too, which aborts the target's side first if it never came.
async fn exchange_across_shards(
    state: &AppState,
    target: std::sync::Arc<EventRecord>,
    start: ExchangeStart,
    gone: boxoffice_store::exchange::Surrender,
    order: OrderView,
) -> ApiResult<Response> {
    use boxoffice_store::exchange::{ExchangeOut, InFate, closes_at, settle_out};
    let scope = start.scope.clone();
    let digest = start.request_digest.clone();
    let out = ExchangeOut::new(&start, &gone, &order);
    let marked = state
        .store
        .mark_exchange_out(&out, closes_at(&start.from_event))
        .await?;
    if let Err(refused) = marked {
        return crate::gate::replay_or(state, &scope, &digest, refusal(refused)).await;
    }
    boxoffice_workers::crash::point("exchange_marked");
    let begun = state
        .writers
        .exchange(target, start, gone, order, &render_exchange)
        .await?;
    match begun {
        ExchangeBegun::Done { exchange, order } => {
            boxoffice_workers::crash::point("exchange_committed");
            metrics::counter!("boxoffice_exchanges_total", "status" => exchange.status.as_str())
                .increment(1);
            if exchange.status == ExchangeStatus::Completed {
                let fate = InFate::Completed {
                    new_order_id: exchange.new_order_id.clone().unwrap_or_default(),
                };
                // Sold on the target's shard: the answer stands whatever happens here; a
                // swap that fails now is the settler's to do.
                if let Err(error) = state
                    .store
                    .finish_exchange_out(&out.from_event_id, &out.exchange_id, &fate)
                    .await
                {
                    tracing::warn!(exchange_id = %out.exchange_id, %error,
                        "old side of an exchange across shards left to the settler");
                }
                state.relay.poke();
            }
            Ok(stored_response(&render_exchange(&exchange, &order), false))
        }
        ExchangeBegun::Refused(refused) => {
            metrics::counter!("boxoffice_exchanges_refused_total").increment(1);
            // Nothing was written on the target's shard: its side is aborted (so that it can
            // never be written later) and the marks taken back.
            if let Err(error) = settle_out(state.store.as_ref(), &out, true).await {
                tracing::warn!(exchange_id = %out.exchange_id, %error,
                    "marks of a refused exchange across shards left to the settler");
            }
            crate::gate::replay_or(state, &scope, &digest, refusal(refused)).await
        }
    }
}

async fn owned_exchange(
    state: &AppState,
    account: &Account,
    exchange_id: &str,
) -> ApiResult<ExchangeView> {
    if exchange_id.is_empty() || exchange_id.len() > 128 {
        return Err(ApiError::not_found("exchange"));
    }
    state
        .store
        .get_exchange(exchange_id)
        .await?
        .filter(|x| x.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("exchange"))
}

/// One of the caller's exchanges, as it stands.
#[utoipa::path(
    get, path = "/v1/exchanges/{exchangeId}", tag = "exchanges",
    params(("exchangeId" = String, Path)),
    responses(
        (status = 200, description = "The exchange", body = ExchangeResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such exchange for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_exchange(
    State(state): State<AppState>,
    account: Account,
    Path(exchange_id): Path<String>,
) -> ApiResult<Response> {
    let exchange = owned_exchange(&state, &account, &exchange_id).await?;
    let order = state
        .store
        .get_order(&exchange.order_id)
        .await?
        .ok_or_else(ApiError::internal)?;
    let now = state.store.now().await?;
    Ok(axum::Json(ExchangeResponse::new(&exchange, &order, now)).into_response())
}

/// Pays the difference of a `PAYMENT_REQUIRED` exchange: the checkout of its new seats'
/// hold, charged `amountDueMinor`. On authorization the exchange completes in the same
/// transaction that sells the new seats; a decline or a lapsed hold ends it and the old
/// tickets are valid again.
#[utoipa::path(
    post, path = "/v1/exchanges/{exchangeId}/checkout", tag = "exchanges",
    params(
        ("exchangeId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CheckoutBody,
    responses(
        (status = 201, description = "Order of the new seats created; payment outcome may still be pending", body = CheckoutResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such exchange for this account", body = Problem),
        (status = 409, description = "HOLD_EXPIRED (the exchange lapsed or ended), HOLD_IN_CHECKOUT or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "RATE_LIMITED: checkouts-per-account (the problem's `limit`), the event's writer has too much queued, the store is busy, or too many checkouts waited for their turn (arrival order, up to 20 s); retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn checkout_exchange(
    State(state): State<AppState>,
    account: Account,
    Path(exchange_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    state.limits.take(
        crate::limits::Limit::CheckoutsPerAccount,
        account.account_id.as_str(),
    )?;
    let exchange = owned_exchange(&state, &account, &exchange_id).await?;
    let path = format!("/v1/exchanges/{exchange_id}/checkout");
    crate::routes::checkout::checkout_hold(
        &state,
        &account,
        exchange.new_hold.hold_id,
        &path,
        &headers,
        &body,
    )
    .await
}
