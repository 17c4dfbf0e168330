//! The box office (issue 40): an operator sells in person through the event's writer, under
//! the same rules, limits and invariants as any sale — a hold, then its checkout and payment
//! verdict as commands of the writer. Cash: the operator took the money, the verdict is
//! theirs and the order confirms at once. `card_present`: the configured payment provider
//! authorises the card as for any checkout. The answer carries the order, its tickets with
//! their QR codes, and where to print them (`GET /v1/admin/orders/{orderId}/tickets.pdf`).
//!
//! Each sale's order belongs to a system account of its own (`box-office:<id>`, which no
//! token can be), so the event's purchase limit bounds one sale, not the box office's day;
//! the buyer's email, when given, is that account's address, so the tickets are mailed.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use boxoffice_domain::decide::HoldRequest;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, request_digest};
use boxoffice_store::allocation::BoxOfficeSale;
use boxoffice_store::checkout::OrderView;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::{BestAvailableBody, CreateHoldBody, Problem};
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{answer, request_key, stored_response};
use crate::routes::allocations::{
    confirm_free, derived, derived_hold_id, event_of, issue_now, json_response, record, replayed,
    settled_order, start_checkout,
};

/// How a buyer at the box office pays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PaymentKind {
    /// The operator took the money: the order confirms at once.
    Cash,
    /// A card at the counter, authorised by the payment provider.
    CardPresent,
}

impl PaymentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cash => "cash",
            Self::CardPresent => "card_present",
        }
    }
}

/// Who bought, when the operator asks.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BuyerBody {
    /// An address (at most 254 characters, one `@`, no spaces or control characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 254,
        pattern = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$"
    )]
    pub email: Option<String>,
    /// 1-200 characters, not only white space, no control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
}

/// `POST /v1/admin/events/{eventId}/box-office/sales` body: what (exactly one of `seatIds`,
/// `tierId` + `quantity`, `bestAvailable`, as for a hold), how it is paid, and the buyer.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BoxOfficeSaleBody {
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100, value_type = Option<Vec<crate::api::SeatId>>)]
    pub seat_ids: Option<Vec<String>>,
    #[serde(default)]
    pub tier_id: Option<String>,
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: Option<u32>,
    #[serde(default)]
    pub best_available: Option<BestAvailableBody>,
    /// Ticket types by count, as for a hold (absent: every ticket `standard`).
    #[serde(default)]
    pub ticket_types: Option<std::collections::BTreeMap<String, u32>>,
    pub payment: PaymentKind,
    #[serde(default)]
    pub buyer: Option<BuyerBody>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// A ticket sold at the box office, with its QR code to show or print.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoxOfficeTicket {
    pub ticket_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    /// The ticket's static code (what the door scans).
    pub code: String,
    /// The code as a QR code (SVG).
    pub qr_svg: String,
}

/// A box-office sale: the order, its tickets, where to print them.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BoxOfficeSaleView {
    pub order_id: String,
    pub event_id: String,
    /// `CONFIRMED` once paid.
    pub status: String,
    pub payment: PaymentKind,
    pub payment_status: String,
    pub total_minor: i64,
    pub currency: String,
    pub seat_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub tickets: Vec<BoxOfficeTicket>,
    /// `GET` it with an admin token to print the tickets.
    pub pdf_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buyer: Option<BuyerBody>,
}

fn check_buyer(buyer: &BuyerBody) -> ApiResult<()> {
    if let Some(email) = &buyer.email
        && !boxoffice_store::mail::email_is_valid(email)
    {
        return Err(ApiError::validation(
            "buyer.email",
            "is not an email address",
        ));
    }
    if let Some(name) = &buyer.name
        && (name.trim().is_empty()
            || name.chars().count() > 200
            || name.chars().any(char::is_control))
    {
        return Err(ApiError::validation(
            "buyer.name",
            "must be 1-200 characters, no control characters",
        ));
    }
    Ok(())
}

/// Sells seats or units in person, all or nothing, through the event's writer: held, then
/// paid (cash: confirmed at once; `card_present`: authorised by the payment provider), its
/// tickets issued before the answer.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/box-office/sales", tag = "box office",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = BoxOfficeSaleBody,
    responses(
        (status = 201, description = "Sold: the order, its tickets and QR codes", body = BoxOfficeSaleView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 409, description = "SEATS_UNAVAILABLE, SOLD_OUT, SALE_NOT_OPEN, EVENT_CANCELLED (as for a hold), PAYMENT_NOT_CONFIRMED (the card was declined: `orderId`, `paymentStatus`), or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The event's writer has too much queued, or the store is busy", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn sell(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(event_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<BoxOfficeSaleBody>()?;
    if let Some(buyer) = &request.buyer {
        check_buyer(buyer)?;
    }
    let event = event_of(&state, &event_id).await?;
    let shape = crate::routes::holds::hold_shape(
        &event,
        CreateHoldBody {
            seat_ids: request.seat_ids,
            tier_id: request.tier_id,
            quantity: request.quantity,
            best_available: request.best_available,
            idempotency_key: None,
            admission_token: None,
            phase_id: None,
            ticket_types: None,
            accessible: None,
        },
    )?;
    let path = format!("/v1/admin/events/{}/box-office/sales", event.event_id);
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    if let Some(replay) = replayed(&state, &scope, &digest).await? {
        return Ok(replay);
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    let sale_id = derived(&[&scope.account_id, &scope.key, &digest]);
    let buyer_account = format!("box-office:{}", &sale_id[..32]);
    let hold_key = format!("sale.{}", &sale_id[..32]);
    let hold_request = HoldRequest {
        account_id: buyer_account.clone(),
        idempotency_key: hold_key.clone(),
        request_digest: digest.clone(),
        new_hold_id: derived_hold_id(&[&event.event_id, &buyer_account, &hold_key]),
        shape,
        phase_id: None,
        ticket_types: request.ticket_types.clone().unwrap_or_default(),
        // The box office sells at the counter, where the operator sees who needs accessible
        // places: it may sell kept wheelchair spaces and companion seats (the companion rule
        // still binds it).
        accessible: true,
    };
    let hold_id = hold_request.new_hold_id.clone();
    match state.writers.hold(event.clone(), hold_request).await? {
        Idempotent::Fresh(stored) | Idempotent::Replayed(stored) if stored.status == 201 => {}
        Idempotent::Fresh(stored) | Idempotent::Replayed(stored) => {
            // Refused as a fan's hold would be (held or sold seats, sold out, not open).
            return Ok(stored_response(&stored, false));
        }
        Idempotent::KeyReusedWithOtherRequest => {
            return Ok(answer(Idempotent::KeyReusedWithOtherRequest));
        }
    }
    if let Some(email) = request.buyer.as_ref().and_then(|b| b.email.as_deref()) {
        // The sale's account gets the buyer's address: its tickets are mailed as any
        // order's are.
        state
            .store
            .record_token_email(&buyer_account, email)
            .await?;
    }
    let checkout_scope = IdempotencyScope {
        account_id: buyer_account.clone(),
        endpoint: format!("POST {path}"),
        key: hold_key,
    };
    let order = match request.payment {
        PaymentKind::Cash => {
            confirm_free(
                &state,
                &event,
                &buyer_account,
                &hold_id,
                &checkout_scope,
                "cash",
            )
            .await?
        }
        PaymentKind::CardPresent => {
            let (order, operation) = start_checkout(
                &state,
                &event,
                &buyer_account,
                &hold_id,
                &checkout_scope,
                (state.provider.name(), "pm_card_visa"),
            )
            .await?;
            let verdict = boxoffice_workers::payment::authorize(&state.provider, &operation).await;
            settled_order(&state, &event, order, &operation, &verdict, &checkout_scope).await?
        }
    };
    if order.status != boxoffice_domain::order::OrderStatus::Confirmed {
        let mut refused = ApiError::new(
            StatusCode::CONFLICT,
            "PAYMENT_NOT_CONFIRMED",
            "the payment was not confirmed: the seats went back on sale",
        );
        refused
            .extra
            .insert("orderId".into(), serde_json::json!(order.order_id));
        refused.extra.insert(
            "paymentStatus".into(),
            serde_json::json!(order.payment_status.as_str()),
        );
        return Err(refused);
    }
    issue_now(&state, &order.order_id).await?;
    let order = state
        .store
        .get_order(&order.order_id)
        .await?
        .unwrap_or(order);
    let view = sale_view(&order, request.payment, request.buyer.clone())?;
    let response = json_response(201, &view);
    let buyer = request.buyer.unwrap_or_default();
    state
        .store
        .record_box_office_sale(
            &BoxOfficeSale {
                event_id: event.event_id.clone(),
                order_id: order.order_id.clone(),
                payment_kind: request.payment.as_str().to_owned(),
                sold_by: admin.account_id.to_string(),
                buyer_email: buyer.email,
                buyer_name: buyer.name,
            },
            Some(&record(&scope, &digest, &response)),
        )
        .await?;
    metrics::counter!("boxoffice_box_office_sales_total", "payment" => request.payment.as_str())
        .increment(1);
    Ok(stored_response(&response, false))
}

fn sale_view(
    order: &OrderView,
    payment: PaymentKind,
    buyer: Option<BuyerBody>,
) -> ApiResult<BoxOfficeSaleView> {
    let mut tickets = Vec::with_capacity(order.tickets.len());
    for ticket in &order.tickets {
        let qr_svg = boxoffice_tickets::qr_svg(&ticket.code).map_err(|e| {
            tracing::error!(%e, "rendering a QR code failed");
            ApiError::internal()
        })?;
        tickets.push(BoxOfficeTicket {
            ticket_id: ticket.ticket_id.clone(),
            seat_id: ticket.seat_id.clone(),
            code: ticket.code.clone(),
            qr_svg,
        });
    }
    Ok(BoxOfficeSaleView {
        order_id: order.order_id.clone(),
        event_id: order.event_id.clone(),
        status: order.status.as_str().to_owned(),
        payment,
        payment_status: order.payment_status.as_str().to_owned(),
        total_minor: order.total_minor,
        currency: order.currency.clone(),
        seat_ids: order.seats.iter().map(|s| s.seat_id.clone()).collect(),
        tier_id: order.tier_id.clone(),
        quantity: order.quantity,
        tickets,
        pdf_url: format!("/v1/admin/orders/{}/tickets.pdf", order.order_id),
        buyer,
    })
}

/// Any order's tickets as a PDF, for an operator (a box-office sale's, a comp's): the same
/// document as `GET /v1/orders/{orderId}/tickets.pdf`.
#[utoipa::path(
    get, path = "/v1/admin/orders/{orderId}/tickets.pdf", tag = "box office",
    params(("orderId" = String, Path), crate::routes::delivery::LangQuery),
    responses(
        (status = 200, description = "The tickets, one page each", content(
            (crate::routes::delivery::PdfBytes = "application/pdf"),
            (crate::routes::delivery::PdfBytes = "application/octet-stream"),
        )),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such order", body = Problem),
        (status = 409, description = "TICKETS_NOT_ISSUED", body = Problem),
        (status = 422, description = "A language tickets are not printed in", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn admin_order_pdf(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(order_id): Path<String>,
    query: Result<
        Query<crate::routes::delivery::LangQuery>,
        axum::extract::rejection::QueryRejection,
    >,
    headers: HeaderMap,
) -> ApiResult<Response> {
    use crate::routes::delivery::{PDF_MEDIA_TYPES, file_answer, locale_of, render, sheet_of};
    let locale = locale_of(query, &headers)?;
    if order_id.is_empty() || order_id.len() > 128 {
        return Err(ApiError::not_found("order"));
    }
    let order = state
        .store
        .get_order(&order_id)
        .await?
        .ok_or_else(|| ApiError::not_found("order"))?;
    let event = state.event(&order.event_id).await?;
    if order.tickets.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "TICKETS_NOT_ISSUED",
            "the order has no tickets yet: they are issued once it is paid",
        ));
    }
    let sheet = sheet_of(&order, &event, locale);
    let pdf = render("pdf", move || boxoffice_delivery::order_pdf(&sheet)).await?;
    let disposition = format!("inline; filename=\"tickets-{}.pdf\"", order.order_id);
    Ok(file_answer(&headers, PDF_MEDIA_TYPES, disposition, pdf))
}
