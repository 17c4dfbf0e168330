//! Events: admin creation (idempotent), listing, and one event with live counts.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::event::{EventSpec, RefundPolicy, SEATS_PER_EVENT_MAX};
use boxoffice_domain::event_chart::EventChart;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse, request_digest};
use boxoffice_store::EventRecord;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::{CreateEventBody, EventChartBody, EventPage, EventView, Problem};
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{answer, request_key};

/// Default page size of `GET /v1/events`.
pub const EVENTS_PAGE_DEFAULT: u32 = 50;
/// Largest page size of `GET /v1/events`.
pub const EVENTS_PAGE_MAX: u32 = 200;
/// Longest cursor accepted.
const CURSOR_LEN_MAX: usize = 128;

/// Creates an event with its seats and tiers.
#[utoipa::path(
    post, path = "/v1/admin/events", tag = "events",
    request_body = CreateEventBody,
    params(("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey")),
    responses(
        (status = 201, description = "Created", body = EventView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 409, description = "Same key in flight", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "Invalid field, or key reused", body = Problem),
        (status = 429, description = "RATE_LIMITED: the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_event(
    State(state): State<AppState>,
    Admin(admin): Admin,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let mut request = body.parse::<CreateEventBody>()?;
    let chart = request.chart.take();
    let mut spec = request.into_spec();
    if let Some(chart) = chart {
        on_chart(&state, &mut spec, chart).await?;
    }
    spec.validate()
        .map_err(|e| ApiError::validation(&e.field, e.reason))?;
    let path = "/v1/admin/events";
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", path, &body.0);
    let _in_flight = state.in_flight.claim(&scope)?;
    let event_id = uuid::Uuid::now_v7().to_string();
    let render = |event: &EventRecord| {
        let view = EventView::new(event, Some(&EventView::fresh_counts(event)))
            .with_largest_blocks(&EventView::fresh_largest_blocks(event));
        StoredResponse {
            status: 201,
            body: serde_json::to_vec(&view).unwrap_or_default(),
        }
    };
    let result = state
        .store
        .create_event(&scope, &digest, &event_id, &spec, &render)
        .await?;
    if !spec.sale.allocations.is_empty() {
        crate::routes::allocations::keep_created(&state, &result).await?;
    }
    Ok(answer(result))
}

/// Puts the event on a stored chart: its sections and tiers become the chart's, priced by
/// category, and the event keeps its own copy of the chart (the stored one is never read for
/// it again). Refused (422 `VALIDATION`): `sections` or `tiers` given as well, a chart that
/// does not exist, a category used and not priced, a price for a category the chart lacks.
async fn on_chart(state: &AppState, spec: &mut EventSpec, body: EventChartBody) -> ApiResult<()> {
    let chart = event_chart(state, body, "chart").await?;
    place_on_chart(spec, chart, "chart")
}

/// The stored chart `body` names with its prices, as an event's own copy; errors name
/// fields under `field` (`chart`, or a trip's `trip.chart`).
async fn event_chart(state: &AppState, body: EventChartBody, field: &str) -> ApiResult<EventChart> {
    let chart = match state.store.venue_chart(&body.chart_id).await? {
        Some((_, chart)) => chart,
        None => {
            return Err(ApiError::validation(
                &format!("{field}.chartId"),
                format!("no venue chart {}", body.chart_id),
            ));
        }
    };
    let mut chart = EventChart::new(
        body.chart_id,
        chart,
        body.category_prices,
        &format!("{field}.categoryPrices"),
    )
    .map_err(|e| ApiError::validation(&e.field, e.reason))?;
    chart.accessible_release_at = body.accessible_release_at;
    Ok(chart)
}

/// The spec's sections and tiers become the chart's (refused when the request gave its own).
fn place_on_chart(spec: &mut EventSpec, chart: EventChart, field: &str) -> ApiResult<()> {
    if !spec.sections.is_empty() || !spec.tiers.is_empty() {
        return Err(ApiError::validation(
            field,
            "give sections and tiers, or a chart, not both",
        ));
    }
    spec.sections = chart.sections();
    spec.tiers = chart.tiers();
    spec.chart = Some(Arc::new(chart));
    Ok(())
}

/// Most trips one `POST /v1/admin/trips` creates.
pub const TRIPS_MAX: u32 = 500;
/// Longest interval between two departures (a week).
pub const TRIP_INTERVAL_MAX_S: u32 = 7 * 24 * 3600;

/// `POST /v1/admin/trips` body: the trips of one route, `count` departures `everySeconds`
/// apart. Each trip is an event of its own (its own seats, classes as tiers, cutoff and
/// inventory keys: nothing is shared per route).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateTripsBody {
    /// The first trip: `name` is the route's (each trip is named "<route> <departure>"),
    /// `startsAt` the first departure; everything else is copied to every trip.
    pub trip: CreateEventBody,
    /// 60 s to a week.
    #[schema(minimum = 60, maximum = 604_800)]
    pub every_seconds: u32,
    /// 1-500 trips.
    #[schema(minimum = 1, maximum = 500)]
    pub count: u32,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// The trips created (or, on a replay, found) in departure order.
#[derive(Debug, Serialize, ToSchema)]
pub struct TripsCreated {
    #[schema(value_type = Vec<EventView>)]
    pub trips: Vec<serde_json::Value>,
}

/// Creates the trips of a route in one call: each departure is an event with its own
/// inventory. Idempotent per trip: a replay (or a retry after a failure half way) creates
/// only the trips that are missing and answers the same list.
#[utoipa::path(
    post, path = "/v1/admin/trips", tag = "events",
    request_body = CreateTripsBody,
    params(("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey")),
    responses(
        (status = 201, description = "Created", body = TripsCreated),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 409, description = "Same key in flight", body = Problem),
        (status = 422, description = "Invalid field, or key reused", body = Problem),
        (status = 429, description = "RATE_LIMITED: the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_trips(
    State(state): State<AppState>,
    Admin(admin): Admin,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let mut trips = body.parse::<CreateTripsBody>()?;
    // Every trip of a chart gets its own copy of the chart as one event would.
    let chart = match trips.trip.chart.take() {
        Some(chart) => Some(event_chart(&state, chart, "trip.chart").await?),
        None => None,
    };
    let specs = trip_specs(trips, chart)?;
    let path = "/v1/admin/trips";
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let _in_flight = state.in_flight.claim(&scope)?;
    let render = |event: &EventRecord| {
        let view = EventView::new(event, Some(&EventView::fresh_counts(event)))
            .with_largest_blocks(&EventView::fresh_largest_blocks(event));
        StoredResponse {
            status: 201,
            body: serde_json::to_vec(&view).unwrap_or_default(),
        }
    };
    let mut created = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        // One idempotency record per trip, under the call's key and the trip's number.
        let trip_scope = IdempotencyScope {
            key: format!("{}#{i}", scope.key),
            ..scope.clone()
        };
        let digest = request_digest("POST", &format!("{path}#{i}"), &body.0);
        let event_id = uuid::Uuid::now_v7().to_string();
        let stored = match state
            .store
            .create_event(&trip_scope, &digest, &event_id, spec, &render)
            .await?
        {
            Idempotent::Fresh(stored) | Idempotent::Replayed(stored) => stored,
            Idempotent::KeyReusedWithOtherRequest => {
                return Ok(answer(Idempotent::KeyReusedWithOtherRequest));
            }
        };
        created.push(serde_json::from_slice(&stored.body).unwrap_or_default());
    }
    Ok((
        StatusCode::CREATED,
        axum::Json(TripsCreated { trips: created }),
    )
        .into_response())
}

/// The events of a trips request, each checked as a created event would be, on `chart` when
/// the request names one (resolved by the caller); refused as a whole (422) if any is not
/// valid.
pub(crate) fn trip_specs(
    trips: CreateTripsBody,
    chart: Option<EventChart>,
) -> ApiResult<Vec<EventSpec>> {
    if !(1..=TRIPS_MAX).contains(&trips.count) {
        return Err(ApiError::validation(
            "count",
            format!("must be 1-{TRIPS_MAX}"),
        ));
    }
    if !(60..=TRIP_INTERVAL_MAX_S).contains(&trips.every_seconds) {
        return Err(ApiError::validation(
            "everySeconds",
            format!("must be 60-{TRIP_INTERVAL_MAX_S}"),
        ));
    }
    let mut first = trips.trip.into_spec();
    if let Some(chart) = chart {
        place_on_chart(&mut first, chart, "trip.chart")?;
    }
    // One request creates at most one event's worth of seats in all (found by
    // schemathesis: 22 trips of 192,000 seats each kept the server busy past its client's
    // timeout).
    let seats: u64 = first.sections.iter().map(|s| s.seat_count()).sum();
    if seats.saturating_mul(u64::from(trips.count)) > SEATS_PER_EVENT_MAX {
        return Err(ApiError::validation(
            "count",
            format!("count x seats per trip must be at most {SEATS_PER_EVENT_MAX} seats"),
        ));
    }
    let mut specs = Vec::with_capacity(trips.count as usize);
    for i in 0..trips.count {
        let mut spec = first.clone();
        let after_first = time::Duration::seconds(i64::from(i) * i64::from(trips.every_seconds));
        spec.starts_at = first.starts_at.checked_add(after_first).ok_or_else(|| {
            ApiError::validation("trip.startsAt", "the last trip would depart after 9999")
        })?;
        // Checked under the route's name as given (the document's rules for `trip.name`:
        // "\u{c}" is only white space, and 200 characters are allowed), then named with the
        // departure (found by schemathesis: "\u{c} 2000-01-01T00:00:00Z" was a name).
        spec.validate()
            .map_err(|e| ApiError::validation(&format!("trip.{}", e.field), e.reason))?;
        let departure = spec
            .starts_at
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        spec.name = format!("{} {departure}", first.name);
        specs.push(spec);
    }
    Ok(specs)
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PageQuery {
    /// 1-200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page (an event id: a UUID, lower-case).
    #[param(pattern = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")]
    pub cursor: Option<String>,
}

/// Lists events, oldest first. Public: anyone may read events.
#[utoipa::path(
    get, path = "/v1/events", tag = "events", params(PageQuery),
    responses(
        (status = 200, description = "A page of events", body = EventPage),
        (status = 422, description = "Bad limit or cursor", body = Problem),
    )
)]
pub async fn list_events(
    State(state): State<AppState>,
    query: Result<Query<PageQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(page) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let limit = page.limit.unwrap_or(EVENTS_PAGE_DEFAULT);
    if !(1..=EVENTS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            format!("must be between 1 and {EVENTS_PAGE_MAX}"),
        ));
    }
    crate::routes::check_cursor(page.cursor.as_deref())?;
    // One extra row tells whether there is a next page.
    let mut events = state
        .store
        .list_events(page.cursor.as_deref(), limit + 1)
        .await?;
    let next_cursor = if events.len() > limit as usize {
        events.truncate(limit as usize);
        events.last().map(|e| e.event_id.clone())
    } else {
        None
    };
    let page = EventPage {
        events: events.iter().map(|e| EventView::new(e, None)).collect(),
        next_cursor,
    };
    Ok((StatusCode::OK, axum::Json(page)).into_response())
}

/// One event with live counts per section and tier. Public.
#[utoipa::path(
    get, path = "/v1/events/{eventId}", tag = "events",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The event", body = EventView),
        (status = 404, description = "No such event", body = Problem),
    )
)]
pub async fn get_event(
    State(state): State<AppState>,
    Path(event_id): Path<String>,
) -> ApiResult<Response> {
    let event = state.current_event(&event_id).await?;
    let counts = state.store.event_counts(&event).await?;
    // The largest blocks come from the live seat map, brought up to the store's latest
    // change first, so they agree with every hold answered before this read.
    let blocks = if event.sections.is_empty() {
        Vec::new()
    } else {
        state.seatmaps.current(&event).await?.largest_blocks()
    };
    Ok(
        axum::Json(EventView::new(&event, Some(&counts)).with_largest_blocks(&blocks))
            .into_response(),
    )
}

/// `PATCH /v1/admin/events/{eventId}` body: what may change after creation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateEventBody {
    /// The new refund policy; `null` removes it (fans can no longer refund on their own).
    /// Required: the only field an event changes.
    #[schema(required = true, value_type = Option<crate::api::RefundPolicyBody>)]
    pub refund_policy: Option<crate::api::RefundPolicyBody>,
}

/// Changes an event after its creation: its refund policy (the only thing that may change).
#[utoipa::path(
    patch, path = "/v1/admin/events/{eventId}", tag = "events",
    params(("eventId" = String, Path)),
    request_body = UpdateEventBody,
    responses(
        (status = 200, description = "The event as it is now", body = EventView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "VALIDATION: refundPolicy missing or out of bounds, or another field", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn update_event(
    State(state): State<AppState>,
    crate::auth::Admin(_account): crate::auth::Admin,
    Path(event_id): Path<String>,
    body: crate::body::JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<UpdateEventBody>()?;
    // `{}` would read as "no policy": the field must be there, `null` or a policy.
    let given = body.0.get("refundPolicy").is_some();
    if !given {
        return Err(ApiError::validation(
            "refundPolicy",
            "required: a policy, or null to remove it",
        ));
    }
    let policy = request.refund_policy.map(|p| RefundPolicy {
        fan_refund_cutoff_s: p.fan_refund_cutoff_seconds,
        keep_fee_minor: p.keep_fee_minor,
    });
    if let Some(policy) = &policy {
        if policy.fan_refund_cutoff_s > boxoffice_domain::event::REFUND_CUTOFF_MAX_S {
            return Err(ApiError::validation(
                "refundPolicy.fanRefundCutoffSeconds",
                format!(
                    "must be at most {}",
                    boxoffice_domain::event::REFUND_CUTOFF_MAX_S
                ),
            ));
        }
        if !(0..=boxoffice_domain::event::PRICE_MINOR_MAX).contains(&policy.keep_fee_minor) {
            return Err(ApiError::validation(
                "refundPolicy.keepFeeMinor",
                format!("must be 0-{}", boxoffice_domain::event::PRICE_MINOR_MAX),
            ));
        }
    }
    let event = state.event(&event_id).await?;
    if !state
        .store
        .set_refund_policy(&event.event_id, policy)
        .await?
    {
        return Err(ApiError::not_found("event"));
    }
    // This node's cache shows the new policy at once; every node's reads that depend on it
    // (the event's body, a fan's refund) read it from the store.
    let mut changed = (*event).clone();
    changed.refund_policy = policy;
    state
        .events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(event.event_id.clone(), Arc::new(changed));
    let event = state.current_event(&event_id).await?;
    let counts = state.store.event_counts(&event).await?;
    Ok(axum::Json(EventView::new(&event, Some(&counts))).into_response())
}

impl AppState {
    /// The event with its refund policy as stored now (the one thing that changes after
    /// creation): the cached record, its policy read again.
    pub async fn current_event(&self, event_id: &str) -> ApiResult<Arc<EventRecord>> {
        let event = self.event(event_id).await?;
        let Some(policy) = self.store.event_refund_policy(&event.event_id).await? else {
            return Err(ApiError::not_found("event"));
        };
        if policy == event.refund_policy {
            return Ok(event);
        }
        let mut current = (*event).clone();
        current.refund_policy = policy;
        Ok(Arc::new(current))
    }

    /// The event, from the in-memory cache (events are immutable) or the store.
    pub async fn event(&self, event_id: &str) -> ApiResult<Arc<EventRecord>> {
        if event_id.is_empty() || event_id.len() > CURSOR_LEN_MAX {
            return Err(ApiError::not_found("event"));
        }
        if let Some(event) = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(event_id)
        {
            return Ok(event.clone());
        }
        // The first request for an event this node has not seen reads it; the requests that
        // arrive meanwhile (a sale's opening burst) wait for that read instead of each
        // spending a store call (`crate::coalesce`).
        let store = self.store.clone();
        let events = self.events.clone();
        let owned_id = event_id.to_owned();
        let event = self
            .event_loads
            .load(event_id, move || async move {
                let Some(event) = store.get_event(&owned_id).await? else {
                    return Ok(None);
                };
                let event = Arc::new(event);
                events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(owned_id, event.clone());
                Ok(Some(event))
            })
            .await?;
        event.ok_or_else(|| ApiError::not_found("event"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trips(json: serde_json::Value) -> ApiResult<Vec<EventSpec>> {
        let body = JsonBody::from_bytes(json.to_string().as_bytes())?;
        trip_specs(body.parse()?, None)
    }

    /// A departure past the calendar's end (year 9999) panicked in the date addition (a 500
    /// from the catch-panic layer); found while writing the `request_bodies` fuzz target.
    #[test]
    fn trips_departing_after_9999_are_refused() {
        let trip = |starts_at: &str| {
            serde_json::json!({
                "trip": {
                    "name": "Night line",
                    "startsAt": starts_at,
                    "currency": "EUR",
                    "tiers": [{"tierId": "GA", "name": "Seat", "capacity": 50, "priceMinor": 900}],
                },
                "everySeconds": 3600,
                "count": 2,
            })
        };
        let error = trips(trip("9999-12-31T23:00:00Z")).unwrap_err();
        assert_eq!(error.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(error.detail.contains("trip.startsAt"), "{}", error.detail);
        let specs = trips(trip("9999-12-31T21:00:00Z")).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[1].starts_at.hour(), 22);
    }

    /// The route's name follows the rules of an event's name as given; the departure added
    /// to it does not count against them.
    #[test]
    fn a_route_is_named_as_an_event_is() {
        let named = |name: &str| {
            trips(serde_json::json!({
                "trip": {"name": name, "startsAt": "2030-01-01T20:00:00Z", "currency": "EUR",
                         "tiers": [{"tierId": "GA", "name": "Seat", "capacity": 5, "priceMinor": 1}]},
                "everySeconds": 3600, "count": 1,
            }))
        };
        for blank in ["\u{c}", " ", "\u{3000}"] {
            let error = named(blank).expect_err(blank);
            assert_eq!(error.extra["field"], "trip.name", "{blank:?}");
        }
        let longest: String = std::iter::repeat_n('é', 200).collect();
        let specs = named(&longest).expect("200 characters");
        assert_eq!(specs[0].name, format!("{longest} 2030-01-01T20:00:00Z"));
    }
}
