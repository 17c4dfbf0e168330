//! Holds: create and release (through the event's writer), read.

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse, request_digest};
use boxoffice_domain::ids::SeatRef;
use boxoffice_store::{EventRecord, ReleaseOutcome};
use boxoffice_waitroom::admission::Shop;

use crate::AppState;
use crate::api::{CreateHoldBody, HoldResponse, Problem};
use crate::auth::Account;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::gate::{admission_lane, replay_or};
use crate::idempotency::{answer, request_key};
use crate::runtime::writer::SubmitError;

/// Holds a set of seats or a tier quantity, all or nothing.
#[utoipa::path(
    post, path = "/v1/events/{eventId}/holds", tag = "holds",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
        ("Admission-Token" = Option<String>, Header, description = "required when the event's waiting room is enabled"),
    ),
    request_body = CreateHoldBody,
    responses(
        (status = 201, description = "Held", body = HoldResponse),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Admission token missing or invalid, or ACCESS_CODE_REQUIRED: the phase sells to access-code holders and the account redeemed none", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 409, description = "SEATS_UNAVAILABLE (for best available with `largestBlock`: the most seats still free together in the asked sections), SOLD_OUT, PURCHASE_LIMIT (the event's or the phase's), SALE_NOT_OPEN (the phase's `onSaleAt`: when it starts), PHASE_ENDED, OUTSIDE_PHASE (the seats, tier or section are not sold in the phase), COMPANION_SEAT_ALONE (a companion seat without a wheelchair space of its section in the hold: `seatId`), SEAT_KEPT_ACCESSIBLE (wheelchair spaces or companion seats kept until the chart's `accessibleReleaseAt` for holds with `accessible: true`: `unavailableSeatIds`, `releaseAt`), EVENT_CANCELLED or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "VALIDATION, IDEMPOTENCY_KEY_REUSED or IDEMPOTENCY_KEY_MISMATCH", body = Problem),
        (status = 429, description = "RATE_LIMITED: holds-per-account, holds-per-address, live-holds-per-account or lapsed-holds-per-account (the problem's `limit`), too many queued requests for this event, or the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_hold(
    State(state): State<AppState>,
    account: Account,
    Path(event_id): Path<String>,
    address: Option<axum::Extension<crate::ClientAddr>>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    state.limits.take_both(
        crate::limits::Limit::HoldsPerAccount,
        account.account_id.as_str(),
        crate::limits::Limit::HoldsPerAddress,
        address.as_ref(),
    )?;
    let key = request_key(&headers, &body)?;
    let hold_body = body.parse::<CreateHoldBody>()?;
    let event = state.event(&event_id).await?;
    let path = format!("/v1/events/{}/holds", event.event_id);
    let scope = IdempotencyScope {
        account_id: account.account_id.to_string(),
        endpoint: crate::runtime::writer::hold_endpoint(&event.event_id),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    if let Err(refused) = state
        .ledger
        .check(account.account_id.as_str(), std::time::Instant::now())
    {
        // A retry of a request granted before still gets its first answer.
        metrics::counter!("boxoffice_limit_refused_total", "limit" => refused.limit).increment(1);
        let refused = ApiError::rate_limited(refused.limit, refused.wait);
        return replay_or(&state, &scope, &digest, refused).await;
    }
    let admitted = admission_lane(
        &state,
        &event,
        &account,
        &headers,
        hold_body.admission_token.as_deref(),
        true,
    )
    .await;
    let lane = match admitted {
        Ok(lane) => lane,
        Err(refused) => return replay_or(&state, &scope, &digest, refused).await,
    };
    let phase_id = match hold_body.phase_id.clone() {
        Some(phase_id) => {
            boxoffice_domain::ids::check_name_id(&phase_id, "phase id")
                .map_err(|e| ApiError::validation("phaseId", e.0))?;
            Some(phase_id)
        }
        None => None,
    };
    // The admission names the lane the fan queued for: its holds are decided in it, and its
    // shopper slot is one of the lane's room.
    let room_lane = lane.clone();
    let phase_id = match (lane, phase_id) {
        (Some(lane), Some(asked)) if lane != asked => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "OUTSIDE_PHASE",
                format!("the admission is for phase {lane}, not {asked}; nothing was held"),
            )
            .with("phaseId", lane));
        }
        (Some(lane), _) => Some(lane),
        (None, asked) => asked,
    };
    let ticket_types = hold_body.ticket_types.clone().unwrap_or_default();
    let accessible = hold_body.accessible.unwrap_or(false);
    let shape = hold_shape(&event, hold_body)?;
    if let Some(map) = state.seatmaps.loaded(&event.event_id)
        && let Some(refusal) = map.sure_refusal(&shape)
    {
        // Sold seats, or a sold-out event: refused from the seat map, without a store
        // write (a flood after sell-out never reaches the hold transaction). A retry of a
        // request that was granted before still gets its first answer.
        if let Some(stored) = state.lookup.stored_answer(&scope, &digest).await? {
            return Ok(answer(stored));
        }
        metrics::counter!("boxoffice_holds_rejected_early_total").increment(1);
        if event.waiting_room.enabled {
            state
                .waitroom
                .shopped_in(
                    &event.event_id,
                    room_lane.as_deref(),
                    account.account_id.as_str(),
                    Shop::Refused,
                )
                .await;
        }
        return Ok(crate::idempotency::stored_response(
            &render_hold_outcome(&event, &refusal),
            false,
        ));
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    let request = HoldRequest {
        account_id: scope.account_id.clone(),
        idempotency_key: scope.key.clone(),
        request_digest: digest,
        new_hold_id: uuid::Uuid::now_v7().to_string(),
        shape,
        phase_id,
        ticket_types,
        accessible,
    };
    let timer = state.waitroom.meter.hold_started();
    let room_enabled = event.waiting_room.enabled;
    let event_id = event.event_id.clone();
    let seats = request.shape.quantity();
    let submitted = state.writers.hold(event, request).await;
    drop(timer);
    if matches!(submitted, Err(SubmitError::Store(_))) {
        state.waitroom.meter.store_error();
    }
    let submitted = submitted?;
    // The slot follows the fan: holding after a grant; given back after a refusal (a fan
    // still holding other seats keeps it).
    if room_enabled && let Idempotent::Fresh(response) = &submitted {
        if response.status == 201 {
            state
                .waitroom
                .granted(&event_id, room_lane.as_deref(), seats);
        }
        let shop = match response.status {
            201 => Some(Shop::Held),
            409 => Some(Shop::Refused),
            _ => None,
        };
        if let Some(shop) = shop {
            state
                .waitroom
                .shopped_in(
                    &event_id,
                    room_lane.as_deref(),
                    account.account_id.as_str(),
                    shop,
                )
                .await;
        }
    }
    Ok(answer(submitted))
}

/// Checks the request against the event's layout and limits, without the store.
pub(crate) fn hold_shape(event: &EventRecord, body: CreateHoldBody) -> ApiResult<HoldShape> {
    let shapes = [
        body.seat_ids.is_some(),
        body.tier_id.is_some() || body.quantity.is_some(),
        body.best_available.is_some(),
    ];
    if shapes.iter().filter(|given| **given).count() != 1 {
        return Err(ApiError::validation(
            "body",
            "give exactly one of seatIds, tierId + quantity, bestAvailable",
        ));
    }
    let max = event.max_seats_per_hold;
    if let Some(seat_ids) = body.seat_ids {
        if seat_ids.is_empty() {
            return Err(ApiError::validation(
                "seatIds",
                "must name at least one seat",
            ));
        }
        if seat_ids.len() > max as usize {
            return Err(ApiError::validation(
                "seatIds",
                format!("at most {max} seats per hold"),
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, raw) in seat_ids.iter().enumerate() {
            let field = format!("seatIds[{i}]");
            let seat = SeatRef::parse(raw).map_err(|e| ApiError::validation(&field, e))?;
            if !event.has_seat(&seat) {
                return Err(ApiError::validation(&field, format!("unknown seat {raw}")));
            }
            if !seen.insert(raw.as_str()) {
                return Err(ApiError::validation(
                    &field,
                    format!("duplicate seat {raw}"),
                ));
            }
        }
        return Ok(HoldShape::Seats { seat_ids });
    }
    if let Some(best) = body.best_available {
        if best.quantity == 0 || best.quantity > max {
            return Err(ApiError::validation(
                "bestAvailable.quantity",
                format!("must be 1-{max}"),
            ));
        }
        if let Some(section) = &best.section
            && !event.sections.iter().any(|s| s.name == *section)
        {
            return Err(ApiError::validation(
                "bestAvailable.section",
                format!("unknown section {section}"),
            ));
        }
        if best.max_price_minor.is_some_and(|p| p < 0) {
            return Err(ApiError::validation(
                "bestAvailable.maxPriceMinor",
                "must not be negative",
            ));
        }
        if event.sections.is_empty() {
            return Err(ApiError::validation(
                "bestAvailable",
                "this event has no reserved seats",
            ));
        }
        return Ok(HoldShape::BestAvailable {
            quantity: best.quantity,
            section: best.section,
            max_price_minor: best.max_price_minor,
            together: best.together.map(Into::into).unwrap_or_default(),
        });
    }
    let tier_id = body
        .tier_id
        .ok_or_else(|| ApiError::validation("tierId", "is required with quantity"))?;
    let quantity = body
        .quantity
        .ok_or_else(|| ApiError::validation("quantity", "is required with tierId"))?;
    if !event.has_tier(&tier_id) {
        return Err(ApiError::validation(
            "tierId",
            format!("unknown tier {tier_id}"),
        ));
    }
    if quantity == 0 || quantity > max {
        return Err(ApiError::validation(
            "quantity",
            format!("must be between 1 and {max}"),
        ));
    }
    Ok(HoldShape::Tier { tier_id, quantity })
}

/// The stored response of one decided hold request.
pub fn render_hold_outcome(event: &EventRecord, outcome: &HoldOutcome) -> StoredResponse {
    let error = match outcome {
        HoldOutcome::Held(hold) => {
            let view = HoldResponse {
                hold_id: hold.hold_id.clone(),
                event_id: event.event_id.clone(),
                status: "HELD".into(),
                expires_at: hold.expires_at,
                seats: Vec::new(),
                tier_id: hold.tier_id.clone(),
                quantity: hold.tier_id.as_ref().map(|_| hold.quantity),
                total_minor: hold.total_minor,
                currency: event.currency.clone(),
                split: hold.split.then_some(true),
                lines: Vec::new(),
                breakdown: Default::default(),
            }
            .priced(&hold.price);
            return StoredResponse {
                status: 201,
                body: serde_json::to_vec(&view).unwrap_or_default(),
            };
        }
        HoldOutcome::SeatsUnavailable { unavailable_seat_ids, largest_block: None } => ApiError::new(
            StatusCode::CONFLICT,
            "SEATS_UNAVAILABLE",
            format!("{} of the requested seats are sold or held; nothing was held", unavailable_seat_ids.len()),
        )
        .with("unavailableSeatIds", unavailable_seat_ids.clone()),
        // Best available: what a smaller party would still get together.
        HoldOutcome::SeatsUnavailable { unavailable_seat_ids, largest_block: Some(largest) } => ApiError::new(
            StatusCode::CONFLICT,
            "SEATS_UNAVAILABLE",
            if *largest == 0 {
                "no seat is free in the asked sections; nothing was held".to_owned()
            } else {
                format!("the asked sections cannot seat the party as asked; at most {largest} seats together are left; nothing was held")
            },
        )
        .with("unavailableSeatIds", unavailable_seat_ids.clone())
        .with("largestBlock", *largest),
        HoldOutcome::SoldOut { tier_id, available } => ApiError::new(
            StatusCode::CONFLICT,
            "SOLD_OUT",
            format!("tier {tier_id} has {available} left; nothing was held"),
        )
        .with("tierId", tier_id.clone())
        .with("available", *available),
        HoldOutcome::PurchaseLimit { limit, current, requested } => ApiError::new(
            StatusCode::CONFLICT,
            "PURCHASE_LIMIT",
            format!("at most {limit} tickets per account for this event: you hold or own {current}, asked for {requested}"),
        )
        .with("limit", *limit)
        .with("current", *current),
        HoldOutcome::SaleNotOpen { on_sale_at } => ApiError::new(
            StatusCode::CONFLICT,
            "SALE_NOT_OPEN",
            "the sale has not opened yet",
        )
        .with(
            "onSaleAt",
            on_sale_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        ),
        HoldOutcome::EventCancelled => crate::routes::cancellation::event_cancelled(),
        HoldOutcome::PhaseEnded { phase_id, ended_at } => ApiError::new(
            StatusCode::CONFLICT,
            "PHASE_ENDED",
            format!("phase {phase_id} has ended; nothing was held"),
        )
        .with("phaseId", phase_id.clone())
        .with(
            "endedAt",
            ended_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        ),
        HoldOutcome::OutsidePhase { phase_id, reason } => ApiError::new(
            StatusCode::CONFLICT,
            "OUTSIDE_PHASE",
            format!("{reason}; nothing was held"),
        )
        .with("phaseId", phase_id.clone()),
        HoldOutcome::AccessCodeRequired { phase_id } => ApiError::new(
            StatusCode::FORBIDDEN,
            "ACCESS_CODE_REQUIRED",
            format!("phase {phase_id} sells to access-code holders: redeem a code first"),
        )
        .with("phaseId", phase_id.clone()),
        HoldOutcome::CompanionSeatAlone { seat_id } => ApiError::new(
            StatusCode::CONFLICT,
            "COMPANION_SEAT_ALONE",
            format!("companion seat {seat_id} is sold with a wheelchair space of its section in the same hold; nothing was held"),
        )
        .with("seatId", seat_id.clone()),
        HoldOutcome::SeatKeptAccessible { seat_ids, release_at } => ApiError::new(
            StatusCode::CONFLICT,
            "SEAT_KEPT_ACCESSIBLE",
            format!("{} of the requested seats are kept for fans who need accessible places until the release time; ask with \"accessible\": true if you do; nothing was held", seat_ids.len()),
        )
        .with("unavailableSeatIds", seat_ids.clone())
        .with(
            "releaseAt",
            release_at.format(&time::format_description::well_known::Rfc3339).unwrap_or_default(),
        ),
        HoldOutcome::Invalid { field, reason } => ApiError::validation(field, reason),
        HoldOutcome::Replayed | HoldOutcome::ReplayOfEarlierInBatch { .. } | HoldOutcome::KeyReusedWithOtherRequest => {
            // Never rendered: replays answer with stored bytes (see boxoffice_store::answer_batch).
            ApiError::internal()
        }
    };
    StoredResponse {
        status: error.status.as_u16(),
        body: error.body(),
    }
}

/// The hold, if it is the caller's.
#[utoipa::path(
    get, path = "/v1/holds/{holdId}", tag = "holds",
    params(("holdId" = String, Path)),
    responses(
        (status = 200, description = "The hold", body = HoldResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such hold for this account", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_hold(
    State(state): State<AppState>,
    account: Account,
    Path(hold_id): Path<String>,
) -> ApiResult<Response> {
    let hold = state.store.get_hold(&hold_id).await?;
    let hold = hold
        .filter(|h| h.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("hold"))?;
    let now = state.store.now().await?;
    let price = state
        .store
        .hold_price(&hold.event_id, &hold.hold_id)
        .await?;
    let view = HoldResponse::from_view(&hold, now);
    Ok(axum::Json(match price {
        Some(price) => view.priced(&price),
        None => view,
    })
    .into_response())
}

/// Releases a held hold; repeating it is harmless.
#[utoipa::path(
    delete, path = "/v1/holds/{holdId}", tag = "holds",
    params(("holdId" = String, Path)),
    responses(
        (status = 200, description = "The hold, now released (or already ended)", body = HoldResponse),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such hold for this account", body = Problem),
        (status = 409, description = "HOLD_IN_CHECKOUT", body = Problem),
        (status = 429, description = "RATE_LIMITED: too many requests are queued for the hold's event, or the store is busy (Retry-After)", body = Problem),
        (status = 503, description = "Store unavailable (Retry-After)", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn release_hold(
    State(state): State<AppState>,
    account: Account,
    Path(hold_id): Path<String>,
) -> ApiResult<Response> {
    // The hold names its event, whose writer decides the release.
    let event_id = state
        .store
        .get_hold(&hold_id)
        .await?
        .filter(|hold| hold.account_id == account.account_id.as_str())
        .map(|hold| hold.event_id)
        .ok_or_else(|| ApiError::not_found("hold"))?;
    let event = state.event(&event_id).await?;
    let outcome = state
        .writers
        .release(event, account.account_id.as_str(), &hold_id)
        .await?;
    let now = state.store.now().await?;
    if let ReleaseOutcome::Released(hold) = &outcome {
        // The shopper gave the seats back: its slot goes to the next in line at once (the
        // relay repeats this from `hold.released`, harmlessly); the admission stays for
        // another try, which takes a slot again if one is free.
        state
            .waitroom
            .shopped(&hold.event_id, &hold.account_id, Shop::Ended)
            .await;
    }
    match outcome {
        ReleaseOutcome::Released(hold) | ReleaseOutcome::AlreadyEnded(hold) => {
            let price = state
                .store
                .hold_price(&hold.event_id, &hold.hold_id)
                .await?;
            let view = HoldResponse::from_view(&hold, now);
            Ok(axum::Json(match price {
                Some(price) => view.priced(&price),
                None => view,
            })
            .into_response())
        }
        ReleaseOutcome::InCheckout(_) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "HOLD_IN_CHECKOUT",
            "the hold is in checkout and cannot be released",
        )),
        ReleaseOutcome::NotFound => Err(ApiError::not_found("hold")),
    }
}
