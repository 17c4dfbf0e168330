//! Promo codes (issue 40): an organiser creates an event's codes and lists them with their
//! uses; a fan gives one at checkout (`routes::checkout`), where [`apply`] re-prices the hold
//! before its checkout starts.
//!
//! A code takes a share or an amount off the face value of each eligible ticket (never below
//! nothing); fees and tax are computed again on the discounted face
//! (`boxoffice_domain::pricing::price_order`). Its uses are counted by the store with a
//! conditional update (`uses < max_uses`) in the transaction that re-prices the hold, so N
//! racing checkouts of a code with one use left give one discounted order. A hold keeps the
//! code applied to it: a retried checkout does not count it again.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse, request_digest};
use boxoffice_domain::pricing::{PROMO_CODES_MAX, RATE_BP_MAX, STANDARD_TYPE};
use boxoffice_store::EventRecord;
use boxoffice_store::pricing::{PromoApplied, PromoCode};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{answer, request_key};

/// Longest promo code, in characters.
pub const PROMO_CODE_LEN_MAX: usize = 32;
/// Most uses one code may be given.
pub const PROMO_MAX_USES_MAX: u32 = 1_000_000;

/// `POST /v1/admin/events/{eventId}/promo-codes` body: exactly one of `percentOffBp` and
/// `amountOffMinor`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreatePromoCodeBody {
    /// 1-32 characters of `[A-Za-z0-9_-]`; stored and matched in upper case.
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = "^[A-Za-z0-9_-]{1,32}$",
        example = "SUMMER10"
    )]
    pub code: String,
    /// A share of each eligible ticket's face value, in basis points (1-10000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 10_000)]
    pub percent_off_bp: Option<u32>,
    /// An amount off each eligible ticket's face value.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100_000_000)]
    pub amount_off_minor: Option<i64>,
    /// The ticket types it applies to (`standard` or the event's); absent: every type.
    #[serde(default)]
    #[schema(max_items = 21)]
    pub ticket_types: Option<Vec<String>>,
    /// Checkouts it may discount, 1-1,000,000.
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_uses: u32,
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_from: Option<OffsetDateTime>,
    /// Exclusive; after `validFrom`.
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_until: Option<OffsetDateTime>,
    /// Alternative to the `Idempotency-Key` header.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// A promo code with its uses.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromoCodeView {
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent_off_bp: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount_off_minor: Option<i64>,
    /// Empty: every type.
    pub ticket_types: Vec<String>,
    pub max_uses: u32,
    /// Checkouts it discounted (applied to a hold).
    pub uses: u32,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_from: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub valid_until: Option<OffsetDateTime>,
}

impl PromoCodeView {
    fn of(code: &PromoCode) -> Self {
        Self {
            code: code.code.clone(),
            percent_off_bp: (code.percent_off_bp > 0).then_some(code.percent_off_bp),
            amount_off_minor: (code.amount_off_minor > 0).then_some(code.amount_off_minor),
            ticket_types: code.ticket_types.clone(),
            max_uses: code.max_uses,
            uses: code.uses,
            valid_from: code.valid_from,
            valid_until: code.valid_until,
        }
    }
}

/// `GET /v1/admin/events/{eventId}/promo-codes` answer.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromoCodesResponse {
    pub promo_codes: Vec<PromoCodeView>,
}

/// A code as fans type it, checked and in upper case.
pub fn normalized_code(raw: &str, field: &str) -> ApiResult<String> {
    let ok = !raw.is_empty()
        && raw.len() <= PROMO_CODE_LEN_MAX
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(ApiError::validation(
            field,
            format!("must be 1-{PROMO_CODE_LEN_MAX} characters of [A-Za-z0-9_-]"),
        ));
    }
    Ok(raw.to_ascii_uppercase())
}

/// The code the body describes, checked against the event.
fn promo_code(event: &EventRecord, body: CreatePromoCodeBody) -> ApiResult<PromoCode> {
    let code = normalized_code(&body.code, "code")?;
    let (percent_off_bp, amount_off_minor) = match (body.percent_off_bp, body.amount_off_minor) {
        (Some(bp), None) if (1..=RATE_BP_MAX).contains(&bp) => (bp, 0),
        (Some(_), None) => {
            return Err(ApiError::validation(
                "percentOffBp",
                format!("must be 1-{RATE_BP_MAX}"),
            ));
        }
        (None, Some(amount))
            if (1..=boxoffice_domain::event::PRICE_MINOR_MAX).contains(&amount) =>
        {
            (0, amount)
        }
        (None, Some(_)) => {
            return Err(ApiError::validation(
                "amountOffMinor",
                "must be between 1 and 100000000",
            ));
        }
        _ => {
            return Err(ApiError::validation(
                "body",
                "give exactly one of percentOffBp and amountOffMinor",
            ));
        }
    };
    let ticket_types = body.ticket_types.unwrap_or_default();
    if ticket_types.len() > event.sale.ticket_types.len() + 1 {
        return Err(ApiError::validation("ticketTypes", "too many types"));
    }
    for (i, type_id) in ticket_types.iter().enumerate() {
        let known = type_id == STANDARD_TYPE
            || event
                .sale
                .ticket_types
                .iter()
                .any(|t| t.type_id == *type_id);
        if !known {
            return Err(ApiError::validation(
                &format!("ticketTypes[{i}]"),
                format!("unknown ticket type {type_id}"),
            ));
        }
    }
    if !(1..=PROMO_MAX_USES_MAX).contains(&body.max_uses) {
        return Err(ApiError::validation(
            "maxUses",
            format!("must be 1-{PROMO_MAX_USES_MAX}"),
        ));
    }
    if let (Some(from), Some(until)) = (body.valid_from, body.valid_until)
        && until <= from
    {
        return Err(ApiError::validation(
            "validUntil",
            "must be after validFrom",
        ));
    }
    Ok(PromoCode {
        event_id: event.event_id.clone(),
        code,
        percent_off_bp,
        amount_off_minor,
        ticket_types,
        max_uses: body.max_uses,
        uses: 0,
        valid_from: body.valid_from,
        valid_until: body.valid_until,
        created_at: OffsetDateTime::UNIX_EPOCH,
    })
}

/// Creates a promo code for the event (admin).
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/promo-codes", tag = "events",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CreatePromoCodeBody,
    responses(
        (status = 201, description = "Created (a retry answers the same, Idempotent-Replayed)", body = PromoCodeView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 409, description = "PROMO_CODE_EXISTS, or PROMO_CODES_LIMIT (1,000 per event)", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_promo_code(
    State(state): State<AppState>,
    Admin(account): Admin,
    Path(event_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<CreatePromoCodeBody>()?;
    let event = state.event(&event_id).await?;
    let code = promo_code(&event, request)?;
    if state.store.promo_codes(&event.event_id).await?.len() >= PROMO_CODES_MAX {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "PROMO_CODES_LIMIT",
            format!("at most {PROMO_CODES_MAX} promo codes per event"),
        ));
    }
    let path = format!("/v1/admin/events/{}/promo-codes", event.event_id);
    let scope = IdempotencyScope {
        account_id: account.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    let _in_flight = state.in_flight.claim(&scope)?;
    let response = StoredResponse {
        status: 201,
        body: serde_json::to_vec(&PromoCodeView::of(&code)).unwrap_or_default(),
    };
    match state
        .store
        .create_promo_code(&code, &scope, &digest, &response)
        .await?
    {
        Some(answered) => Ok(answer(answered)),
        None => Err(ApiError::new(
            StatusCode::CONFLICT,
            "PROMO_CODE_EXISTS",
            format!("the event already has code {}", code.code),
        )),
    }
}

/// The event's promo codes with their uses (admin).
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/promo-codes", tag = "events",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The codes, by code", body = PromoCodesResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_promo_codes(
    State(state): State<AppState>,
    Admin(_account): Admin,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let event = state.event(&event_id).await?;
    let codes = state.store.promo_codes(&event.event_id).await?;
    Ok(axum::Json(PromoCodesResponse {
        promo_codes: codes.iter().map(PromoCodeView::of).collect(),
    })
    .into_response())
}

/// Applies the fan's code to a held hold before its checkout starts: 409
/// `PROMO_CODE_INVALID` (unknown, not valid yet, expired, used up, or another code already
/// applied). A hold no longer held is left to the checkout to answer (its replay, or
/// `HOLD_EXPIRED`).
pub async fn apply(
    state: &AppState,
    event: &EventRecord,
    hold_id: &str,
    account_id: &str,
    raw_code: &str,
) -> ApiResult<()> {
    let code = normalized_code(raw_code, "promoCode")?;
    match state
        .store
        .apply_promo_code(event, hold_id, account_id, &code)
        .await?
    {
        PromoApplied::Applied(_) => {
            metrics::counter!("boxoffice_promo_codes_applied_total").increment(1);
            Ok(())
        }
        PromoApplied::HoldNotOpen => Ok(()),
        PromoApplied::Invalid(reason) => {
            metrics::counter!("boxoffice_promo_codes_refused_total").increment(1);
            Err(
                ApiError::new(StatusCode::CONFLICT, "PROMO_CODE_INVALID", reason)
                    .with("promoCode", code),
            )
        }
    }
}
