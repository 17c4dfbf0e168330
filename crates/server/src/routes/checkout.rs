//! Checkout, orders and payment webhooks.
//!
//! Checkout is three steps and never holds a transaction across the provider call: (1) one
//! short transaction creates the order and its payment operation and moves the hold to
//! `PAYMENT_PENDING`; (2) the provider authorizes, outside any transaction, with the
//! operation id as its idempotency key; (3) one short transaction applies the answer (sold
//! and confirmed, or cancelled, or recorded as unknown for the reconciler).

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::engine::CheckoutDecision;
use boxoffice_domain::hold::HoldStatus;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse, request_digest};
use boxoffice_domain::settlement::{self, Step};
use boxoffice_store::checkout::{CheckoutBegun, CheckoutStart, OrderView};
use boxoffice_store::refund::RefundStatus;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::{HeldSeatView, Problem};
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{answer, request_key, stored_response};

/// Longest payment method token accepted.
pub const PAYMENT_METHOD_LEN_MAX: usize = 255;
/// Default and largest page of `GET /v1/orders`.
pub const ORDERS_PAGE_DEFAULT: u32 = 20;
pub const ORDERS_PAGE_MAX: u32 = 100;
/// Largest webhook body accepted.
pub const WEBHOOK_BYTES_MAX: usize = 64 * 1024;

/// `POST /v1/holds/{holdId}/checkout` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckoutBody {
    /// A provider payment method, e.g. `pm_card_visa`: 1-255 visible ASCII characters.
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub payment_method_token: String,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
    #[serde(default)]
    pub admission_token: Option<String>,
    /// A promo code of the event (any case): applied to the hold before the checkout starts,
    /// the order charged the re-priced total; 409 `PROMO_CODE_INVALID` when it cannot be
    /// used. Ignored by an exchange's checkout.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_-]{1,32}$")]
    pub promo_code: Option<String>,
}

/// What the shopper must do next (3-D Secure).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextAction {
    #[serde(rename = "type")]
    pub kind: String,
    pub url: String,
}

/// The checkout answer: it may come before the payment outcome is known (poll the order).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutResponse {
    pub order_id: String,
    #[schema(value_type = boxoffice_domain::order::OrderStatus, example = "CONFIRMED")]
    pub order_status: String,
    #[schema(value_type = boxoffice_domain::order::PaymentStatus, example = "AUTHORIZED")]
    pub payment_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_action: Option<NextAction>,
    /// Why the payment failed, when `paymentStatus` is `FAILED`: the provider's decline code
    /// (`generic_decline`, `card_declined`, `insufficient_funds`, ...) or its error code
    /// (`resource_missing`: the payment method does not exist).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "generic_decline")]
    pub payment_failure_code: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TicketSummary {
    pub ticket_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    pub code: String,
    #[schema(value_type = crate::api::status_names::TicketStatus, example = "VALID")]
    pub status: String,
    /// Why a `VOIDED` ticket is void: `REFUND` (its refund is in the order's `refunds`),
    /// `EXCHANGE` (replaced by an exchange's new ticket) or `EVENT_CANCELLED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^(REFUND|EXCHANGE|EVENT_CANCELLED)$")]
    pub void_reason: Option<String>,
    /// Who will use it, when a name or answers were given; absent: the account holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder: Option<crate::api::HolderView>,
}

/// An order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderResponse {
    pub order_id: String,
    pub event_id: String,
    pub hold_id: String,
    /// `REFUNDED` once no valid ticket is left and every refund was paid back.
    #[schema(value_type = crate::api::status_names::OrderStatus)]
    pub order_status: String,
    #[schema(value_type = boxoffice_domain::order::PaymentStatus)]
    pub payment_status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_action: Option<NextAction>,
    pub seats: Vec<HeldSeatView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u32>,
    pub total_minor: i64,
    pub currency: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancel_reason: Option<String>,
    /// Why the payment failed, when `paymentStatus` is `FAILED` (as in the checkout answer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payment_failure_code: Option<String>,
    pub tickets: Vec<TicketSummary>,
    /// The order's refunds, oldest first.
    pub refunds: Vec<crate::routes::refunds::RefundResponse>,
    /// What the order's refunds give back (pending ones included; failed ones not).
    pub refunded_minor: i64,
    /// Each ticket priced (type, face, discount, fees, tax, all-in), in seat order; on
    /// `GET /v1/orders/{orderId}`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<crate::sale_api::pricing::PriceLineView>,
    /// The order's price in sums; on `GET /v1/orders/{orderId}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breakdown: Option<crate::sale_api::pricing::BreakdownView>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: time::OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: time::OffsetDateTime,
}

fn next_action(order: &OrderView) -> Option<NextAction> {
    let waiting = order.payment_status == boxoffice_domain::order::PaymentStatus::RequiresAction;
    order
        .next_action_url
        .as_ref()
        .filter(|_| waiting)
        .map(|url| NextAction {
            kind: "redirect_to_url".into(),
            url: url.clone(),
        })
}

impl OrderResponse {
    pub fn new(order: &OrderView) -> Self {
        Self {
            order_id: order.order_id.clone(),
            event_id: order.event_id.clone(),
            hold_id: order.hold_id.clone(),
            order_status: order_status(order).into(),
            payment_status: order.payment_status.as_str().into(),
            next_action: next_action(order),
            seats: order
                .seats
                .iter()
                .map(|s| HeldSeatView {
                    seat_id: s.seat_id.clone(),
                    price_minor: s.price_minor,
                    ticket_type: None,
                    face_minor: None,
                    fees_minor: None,
                    tax_minor: None,
                })
                .collect(),
            tier_id: order.tier_id.clone(),
            quantity: order.tier_id.as_ref().map(|_| order.quantity),
            total_minor: order.total_minor,
            currency: order.currency.clone(),
            cancel_reason: order.cancel_reason.clone(),
            payment_failure_code: order.payment_failure_code.clone(),
            // Tickets appear only on a confirmed order.
            tickets: if order.status == boxoffice_domain::order::OrderStatus::Confirmed {
                order
                    .tickets
                    .iter()
                    .map(|t| TicketSummary {
                        ticket_id: t.ticket_id.clone(),
                        seat_id: t.seat_id.clone(),
                        tier_id: t.tier_id.clone(),
                        code: t.code.clone(),
                        status: t.status.clone(),
                        void_reason: void_reason(t),
                        holder: t.holder.as_ref().map(crate::api::HolderView::of),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            refunds: order
                .refunds
                .iter()
                .map(crate::routes::refunds::RefundResponse::new)
                .collect(),
            refunded_minor: order.refunded_minor(),
            lines: Vec::new(),
            breakdown: None,
            created_at: order.created_at,
            updated_at: order.updated_at,
        }
    }

    /// The order with its price's lines and breakdown (its seats with their types).
    pub fn priced(mut self, price: &boxoffice_domain::pricing::OrderPrice) -> Self {
        self.seats = HeldSeatView::of_price(price);
        self.lines = price.lines.iter().map(Into::into).collect();
        self.breakdown = Some(price.breakdown().into());
        self
    }
}

/// The order's status as the API shows it: a confirmed order whose every ticket a refund (or
/// the event's cancellation) voided and whose every refund was paid back is `REFUNDED` (a
/// `FAILED` refund is money
/// still owed; an order exchanged away stays `CONFIRMED`, its difference refunded or not).
fn order_status(order: &OrderView) -> &'static str {
    let refunded = order.status == boxoffice_domain::order::OrderStatus::Confirmed
        && !order.refunds.is_empty()
        && order
            .refunds
            .iter()
            .all(|r| r.status == RefundStatus::Succeeded)
        && order.tickets.iter().all(|t| {
            t.status == "VOIDED"
                && (t.refund_id.is_some()
                    || t.void_reason.as_deref()
                        == Some(boxoffice_store::cancellation::REASON_EVENT_CANCELLED))
        });
    if refunded {
        "REFUNDED"
    } else {
        order.status.as_str()
    }
}

fn void_reason(ticket: &boxoffice_store::checkout::TicketView) -> Option<String> {
    if ticket.status != "VOIDED" {
        return None;
    }
    if let Some(reason) = &ticket.void_reason {
        Some(reason.clone())
    } else if ticket.refund_id.is_some() {
        Some("REFUND".into())
    } else {
        ticket.exchange_id.as_ref().map(|_| "EXCHANGE".into())
    }
}

/// The stored checkout answer for an order as it stands.
pub fn render_checkout(order: &OrderView) -> StoredResponse {
    let body = CheckoutResponse {
        order_id: order.order_id.clone(),
        order_status: order.status.as_str().into(),
        payment_status: order.payment_status.as_str().into(),
        next_action: next_action(order),
        payment_failure_code: order.payment_failure_code.clone(),
    };
    StoredResponse {
        status: 201,
        body: serde_json::to_vec(&body).unwrap_or_default(),
    }
}

/// Pays for a hold: creates the order, authorizes, confirms.
#[utoipa::path(
    post, path = "/v1/holds/{holdId}/checkout", tag = "orders",
    params(
        ("holdId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CheckoutBody,
    responses(
        (status = 201, description = "Order created; payment outcome may still be pending", body = CheckoutResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such hold for this account", body = Problem),
        (status = 409, description = "HOLD_EXPIRED (also instead of a 403 when the hold's end ended the admission), HOLD_IN_CHECKOUT, IDEMPOTENCY_IN_PROGRESS or PROMO_CODE_INVALID (unknown, not valid yet, expired, used up, or the hold has another code)", body = Problem),
        (status = 422, description = "VALIDATION, IDEMPOTENCY_KEY_REUSED, or HOLDERS_REQUIRED: the event's holder policy asks a name or an answer that a ticket of the hold lacks (`PUT /v1/holds/{holdId}/holders` first)", body = Problem),
        (status = 429, description = "RATE_LIMITED: checkouts-per-account (the problem's `limit`), the event's writer has too much queued, the store is busy, or too many checkouts waited for their turn (arrival order, up to 20 s); retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn checkout(
    State(state): State<AppState>,
    account: Account,
    Path(hold_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    state.limits.take(
        crate::limits::Limit::CheckoutsPerAccount,
        account.account_id.as_str(),
    )?;
    let path = format!("/v1/holds/{hold_id}/checkout");
    let answer = checkout_hold(&state, &account, hold_id, &path, &headers, &body).await;
    // Server trouble (not a refusal) counts against the release rate.
    let failed = match &answer {
        Ok(response) => response.status().is_server_error(),
        Err(error) => error.status.is_server_error(),
    };
    state.waitroom.meter.checkout_answered(failed);
    answer
}

/// The checkout of one hold, requested at `path` (a hold's checkout, or an exchange's, whose
/// hold holds the new seats and costs the difference).
/// Whether `hold` is a waiting-list offer (its entry names it, for the same account).
async fn is_waitlist_offer(state: &AppState, hold: &boxoffice_store::HoldView) -> ApiResult<bool> {
    let Some(waitlist_id) = boxoffice_domain::engine::offer_waitlist_id(&hold.hold_id) else {
        return Ok(false);
    };
    Ok(state
        .store
        .get_waitlist_entry(waitlist_id)
        .await?
        .is_some_and(|entry| {
            entry.hold_id.as_deref() == Some(hold.hold_id.as_str())
                && entry.account_id == hold.account_id
                && entry.event_id == hold.event_id
        }))
}

/// The hold lapsed or was given back: nothing to check out.
fn hold_expired() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "HOLD_EXPIRED",
        "the hold expired or was released",
    )
}

/// The checkout request in `body`, its payment method checked.
pub(crate) fn checkout_body(body: &JsonBody) -> ApiResult<CheckoutBody> {
    let checkout = body.parse::<CheckoutBody>()?;
    let token = checkout.payment_method_token.as_str();
    if token.is_empty()
        || token.len() > PAYMENT_METHOD_LEN_MAX
        || !token.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(ApiError::validation(
            "paymentMethodToken",
            format!("must be 1-{PAYMENT_METHOD_LEN_MAX} visible ASCII characters"),
        ));
    }
    Ok(checkout)
}

pub async fn checkout_hold(
    state: &AppState,
    account: &Account,
    hold_id: String,
    path: &str,
    headers: &HeaderMap,
    body: &JsonBody,
) -> ApiResult<Response> {
    let key = request_key(headers, body)?;
    let checkout = checkout_body(body)?;
    if hold_id.is_empty() || hold_id.len() > 128 {
        return Err(ApiError::not_found("hold"));
    }
    let scope = IdempotencyScope {
        account_id: account.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", path, &body.0);
    // A fan at the checkout holds seats on a deadline: checkouts begin in arrival order. The
    // turn covers the start only (reads and the writer's group); the provider's authorization
    // and the settlement wait on nothing of the turns', so the provider's latency does not
    // bound the rate of starts.
    let mut stage = Stage::start();
    let turn = state.checkout_turns.take().await?;
    stage.done("turn");
    let hold = state
        .store
        .get_hold(&hold_id)
        .await?
        .filter(|hold| hold.account_id == account.account_id.as_str());
    let mut event = None;
    if let Some(hold) = &hold {
        let found = state.event(&hold.event_id).await?;
        // The waiting list is a line of its own: its offer is the fan's turn, so the offer's
        // checkout needs no admission (the fan may have left the room, or joined the list
        // after the sell-out, when the room admits nobody).
        let admitted = if found.waiting_room.enabled && is_waitlist_offer(state, hold).await? {
            Ok(())
        } else {
            crate::gate::check_admission(
                state,
                &found,
                account,
                headers,
                checkout.admission_token.as_deref(),
                false,
            )
            .await
        };
        if let Err(mut refused) = admitted {
            // A hold that lapsed or was released ends the fan's shopping session with it, so
            // a retry that outlived its hold is told about the hold (the answer the fan can
            // act on), not that its admission ended. Read again: the session may have ended
            // because the hold did, after the read above.
            let now_ended = state.store.get_hold(&hold_id).await?.is_some_and(|hold| {
                matches!(hold.status, HoldStatus::Expired | HoldStatus::Released)
            });
            if now_ended {
                refused = hold_expired();
            }
            return crate::gate::replay_or(state, &scope, &digest, refused).await;
        }
        // The event's holder questions are answered before payment: a fan's own checkout of
        // a held hold names what is missing (an exchange's or a retry's is not asked again).
        if hold.status == HoldStatus::Held && path.starts_with("/v1/holds/") {
            crate::routes::holders::require_holders(state, &found, hold).await?;
        }
        if let Some(code) = checkout.promo_code.as_deref()
            && hold.status == HoldStatus::Held
            && path.starts_with("/v1/holds/")
        {
            let account_id = account.account_id.as_str();
            crate::routes::promo::apply(state, &found, &hold.hold_id, account_id, code).await?;
        }
        event = Some(found);
    }
    stage.done("read");
    let _in_flight = state.in_flight.claim(&scope)?;
    let start = CheckoutStart {
        scope: scope.clone(),
        request_digest: digest,
        hold_id,
        order_id: uuid::Uuid::now_v7().to_string(),
        operation_id: uuid::Uuid::now_v7().to_string(),
        provider: state.provider.name().to_owned(),
        payment_method: checkout.payment_method_token.clone(),
    };
    let begun = match (hold, event.clone()) {
        // A held hold of the account: its event's writer starts the checkout in a group,
        // with no look at the key first. The key's endpoint names the hold, and only a
        // checkout of it that started stores an answer under it, after which the hold is
        // never `HELD` again: a key used before finds the hold in checkout or ended in the
        // writer's engine (or in the store's conditional write, which then refuses the
        // group), and that refusal looks at the key's stored answer (`refused_checkout`):
        // the replay, or the key reused with another body.
        (Some(hold), Some(event)) if hold.status == HoldStatus::Held => {
            state
                .writers
                .checkout(event, start.clone(), hold, &render_checkout)
                .await?
        }
        // No such hold for the account, or one in checkout or ended (a hold's status only
        // moves forward from `HELD`, so it cannot start now): the key's stored answer, else
        // the refusal its status gives. Nothing is written.
        (hold, _) => match state
            .lookup
            .stored_answer(&scope, &start.request_digest)
            .await?
        {
            Some(Idempotent::Replayed(stored)) => CheckoutBegun::Replayed(stored),
            Some(Idempotent::KeyReusedWithOtherRequest) => CheckoutBegun::KeyReusedWithOtherRequest,
            Some(Idempotent::Fresh(_)) | None => match hold {
                None => CheckoutBegun::HoldNotFound,
                Some(hold) => boxoffice_store::engine::checkout_refusal(
                    &CheckoutDecision::refused_for(hold.status),
                ),
            },
        },
    };
    let (order, operation) = match begun {
        CheckoutBegun::Started { order, operation } => (*order, *operation),
        CheckoutBegun::Replayed(stored) => return Ok(stored_response(&stored, true)),
        CheckoutBegun::KeyReusedWithOtherRequest => {
            return Ok(answer(
                boxoffice_domain::idempotency::Idempotent::KeyReusedWithOtherRequest,
            ));
        }
        CheckoutBegun::HoldNotFound => return Err(ApiError::not_found("hold")),
        CheckoutBegun::HoldExpired => return Err(hold_expired()),
        CheckoutBegun::HoldInCheckout => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "HOLD_IN_CHECKOUT",
                "the hold is already in checkout under another request",
            ));
        }
    };
    stage.done("start");
    drop(turn);
    boxoffice_workers::crash::point("checkout_committed");
    if let Some(event) = event.as_ref().filter(|event| event.waiting_room.enabled) {
        // The slot follows the fan: paying until the order is settled (the relay's
        // order.confirmed or order.cancelled gives it back).
        state
            .waitroom
            .shopped(
                &event.event_id,
                account.account_id.as_str(),
                boxoffice_waitroom::admission::Shop::Paying,
            )
            .await;
    }
    let verdict = boxoffice_workers::payment::authorize(&state.provider, &operation).await;
    stage.done("authorize");
    let settled = settle(
        state,
        event,
        &operation,
        &verdict,
        Some(&order),
        Some(&scope),
        None,
    )
    .await;
    stage.done("settle");
    // Provider or store trouble (not a card decline) counts against the release rate.
    state.waitroom.meter.payment_attempt(settled.is_err());
    let order = match settled {
        Ok(Some(settled)) => {
            if settled.order.status == boxoffice_domain::order::OrderStatus::Confirmed {
                boxoffice_workers::crash::point("sold_committed");
            }
            state.relay.poke();
            settled.order
        }
        Ok(None) => order,
        Err(error) => {
            // The order exists and the reconciler will settle it; answer what is known.
            tracing::warn!(%error, order_id = %order.order_id, "settling the authorization failed; the reconciler will");
            state.reconciler.poke();
            order
        }
    };
    Ok(stored_response(&render_checkout(&order), false))
}

/// Where a checkout's time goes: `boxoffice_checkout_stage_seconds{stage}` (waiting for a turn,
/// reading the hold, the start's group (with the key's look-up when it is refused), the provider, the settlement).
struct Stage(std::time::Instant);

impl Stage {
    fn start() -> Self {
        Self(std::time::Instant::now())
    }

    /// Records the time since the last stage ended as `name`'s.
    fn done(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        metrics::histogram!("boxoffice_checkout_stage_seconds", "stage" => name)
            .record(now.duration_since(self.0).as_secs_f64());
        self.0 = now;
    }
}

/// Applies a payment verdict, whichever way it came (the provider's answer to a checkout, its
/// webhook, the reconciler's look): a verdict that sells or cancels a pending order
/// (`settlement::Step::Confirm` or `Cancel`) goes to the event's writer (`settle_by_writer`),
/// so it is decided by the event's engine beside the event's other commands and never races
/// them at the store; any other (3-D Secure asked, an answer lost, the capture of a sold
/// order, money to give back), or one the writer did not take (an exchange's hold, a full or
/// failing writer: a verdict is never lost), by the store's own settlement, which applies
/// the same rules. `scope`: the checkout request whose answer is stored with it; `webhook`:
/// the provider event that brought it.
pub(crate) async fn settle(
    state: &AppState,
    event: Option<std::sync::Arc<boxoffice_store::EventRecord>>,
    operation: &boxoffice_store::checkout::PaymentOperation,
    verdict: &boxoffice_store::checkout::ProviderVerdict,
    order: Option<&OrderView>,
    scope: Option<&IdempotencyScope>,
    webhook: Option<(&str, &str)>,
) -> boxoffice_store::StoreResult<Option<boxoffice_store::checkout::Settled>> {
    if let Some(order) = order
        && let Some(settled) =
            settle_by_writer(state, event, operation, verdict, order, scope).await
    {
        return settled;
    }
    let answer = scope.map(|scope| {
        (
            scope,
            &render_checkout as &boxoffice_store::checkout::RenderOrder,
        )
    });
    state
        .store
        .settle_payment(&operation.operation_id, verdict, webhook, answer)
        .await
}

async fn settle_by_writer(
    state: &AppState,
    event: Option<std::sync::Arc<boxoffice_store::EventRecord>>,
    operation: &boxoffice_store::checkout::PaymentOperation,
    verdict: &boxoffice_store::checkout::ProviderVerdict,
    order: &OrderView,
    scope: Option<&IdempotencyScope>,
) -> Option<boxoffice_store::StoreResult<Option<boxoffice_store::checkout::Settled>>> {
    let moves_inventory = matches!(
        settlement::step(operation.status, verdict.payment_status(), order.status),
        Step::Confirm | Step::Cancel { .. }
    );
    let event = event.filter(|_| moves_inventory)?;
    let context = crate::runtime::writer::SettleContext {
        operation: operation.clone(),
        verdict: verdict.clone(),
        order: order.clone(),
        scope: scope.cloned(),
        render: &render_checkout,
    };
    state.writers.settle(event, context).await.ok().map(Ok)
}

/// One of the caller's orders.
#[utoipa::path(
    get, path = "/v1/orders/{orderId}", tag = "orders",
    params(("orderId" = String, Path)),
    responses(
        (status = 200, description = "The order", body = OrderResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such order for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_order(
    State(state): State<AppState>,
    account: Account,
    Path(order_id): Path<String>,
) -> ApiResult<Response> {
    let order = state
        .store
        .get_order(&order_id)
        .await?
        .filter(|o| o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let stored = state
        .store
        .hold_price(&order.event_id, &order.hold_id)
        .await?;
    let price = crate::sale_api::pricing::shown_price(
        stored,
        &order.seats,
        order.quantity,
        order.total_minor,
    );
    Ok(axum::Json(OrderResponse::new(&order).priced(&price)).into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct OrdersQuery {
    /// 1-100, default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page (an order id: a UUID, lower-case).
    #[param(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    pub cursor: Option<String>,
}

/// A page of the caller's orders, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderPage {
    pub orders: Vec<OrderResponse>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// The caller's orders, newest first.
#[utoipa::path(
    get, path = "/v1/orders", tag = "orders", params(OrdersQuery),
    responses(
        (status = 200, description = "A page of orders", body = OrderPage),
        (status = 401, description = "No valid token", body = Problem),
        (status = 422, description = "Bad limit or cursor", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_orders(
    State(state): State<AppState>,
    account: Account,
    query: Result<Query<OrdersQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(page) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let limit = page.limit.unwrap_or(ORDERS_PAGE_DEFAULT);
    if !(1..=ORDERS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            format!("must be between 1 and {ORDERS_PAGE_MAX}"),
        ));
    }
    crate::routes::check_cursor(page.cursor.as_deref())?;
    let mut orders = state
        .store
        .list_orders(
            account.account_id.as_str(),
            page.cursor.as_deref(),
            limit + 1,
        )
        .await?;
    let next_cursor = if orders.len() > limit as usize {
        orders.truncate(limit as usize);
        orders.last().map(|o| o.order_id.clone())
    } else {
        None
    };
    let page = OrderPage {
        orders: orders.iter().map(OrderResponse::new).collect(),
        next_cursor,
    };
    Ok(axum::Json(page).into_response())
}

/// The payment provider's signed callbacks. Bad signature: 400; duplicates are acknowledged
/// and ignored; each event is applied at most once and only moves a payment forward.
#[utoipa::path(
    post, path = "/v1/payments/webhooks/{provider}", tag = "orders",
    params(("provider" = String, Path, description = "the configured provider, e.g. stripe")),
    responses(
        (status = 200, description = "Received"),
        (status = 400, description = "Bad signature or body", body = Problem),
        (status = 404, description = "Not the configured provider", body = Problem),
    )
)]
pub async fn webhook(
    State(state): State<AppState>,
    Path(provider): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<Response> {
    if provider != state.provider.name() {
        return Err(ApiError::not_found("payment provider"));
    }
    if body.len() > WEBHOOK_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
            "webhook too large",
        ));
    }
    let signature = headers
        .get("stripe-signature")
        .and_then(|v| v.to_str().ok());
    let now_unix_s = time::OffsetDateTime::now_utc().unix_timestamp();
    let event = state
        .provider
        .verify_webhook(signature, &body, now_unix_s)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "INVALID_WEBHOOK", e.to_string()))?;
    let operation = match &event.payment.operation_id {
        Some(operation_id) => state.store.payment_operation(operation_id).await?,
        None => None,
    };
    let operation = match operation {
        Some(operation) => Some(operation),
        None => {
            state
                .store
                .payment_operation_by_ref(state.provider.name(), &event.payment.provider_ref)
                .await?
        }
    };
    let Some(operation) = operation else {
        tracing::info!(event_id = %event.event_id, "webhook for a payment we do not know; acknowledged");
        return Ok(axum::Json(serde_json::json!({"received": true})).into_response());
    };
    let verdict = boxoffice_workers::payment::verdict_of(&event.payment);
    // Payment statuses only move forward: a verdict the operation can no longer take (the
    // capture's webhook after the relay's capture applied, a copy of one seen) changes
    // nothing now or later, so it is acknowledged without a settlement.
    if !operation.status.can_become(verdict.payment_status()) {
        return Ok(axum::Json(serde_json::json!({"received": true})).into_response());
    }
    // A verdict that may still sell or cancel the order goes to the event's writer, like the
    // provider's answer to the checkout request, so the two never race at the store.
    let (order, found) = if settlement::order_unsettled(operation.status) {
        (
            state.store.order_head(&operation.order_id).await?,
            state.event(&operation.event_id).await.ok(),
        )
    } else {
        (None, None)
    };
    let webhook = Some((state.provider.name(), event.event_id.as_str()));
    let applied = settle(
        &state,
        found,
        &operation,
        &verdict,
        order.as_ref(),
        None,
        webhook,
    )
    .await?;
    if applied.is_some_and(|s| s.changed) {
        state.relay.poke();
    }
    Ok(axum::Json(serde_json::json!({"received": true})).into_response())
}
