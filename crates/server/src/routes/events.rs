//! Events: admin creation (idempotent), listing, and one event with live counts.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::idempotency::{IdempotencyScope, StoredResponse, request_digest};
use boxoffice_store::EventRecord;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::AppState;
use crate::api::{CreateEventBody, EventPage, EventView, Problem};
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
    let spec = body.parse::<CreateEventBody>()?.into_spec();
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
        let view = EventView::new(event, Some(&EventView::fresh_counts(event)));
        StoredResponse {
            status: 201,
            body: serde_json::to_vec(&view).unwrap_or_default(),
        }
    };
    let result = state
        .store
        .create_event(&scope, &digest, &event_id, &spec, &render)
        .await?;
    Ok(answer(result))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// 1-200, default 50.
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
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
    if page
        .cursor
        .as_ref()
        .is_some_and(|c| c.is_empty() || c.len() > CURSOR_LEN_MAX)
    {
        return Err(ApiError::validation(
            "cursor",
            "is not a cursor this server gave out",
        ));
    }
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
    let event = state.event(&event_id).await?;
    let counts = state.store.event_counts(&event).await?;
    Ok(axum::Json(EventView::new(&event, Some(&counts))).into_response())
}

impl AppState {
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
        let event = self
            .store
            .get_event(event_id)
            .await?
            .ok_or_else(|| ApiError::not_found("event"))?;
        let event = Arc::new(event);
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(event_id.to_owned(), event.clone());
        Ok(event)
    }
}
