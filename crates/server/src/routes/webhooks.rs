//! Outgoing webhooks (issue 19), the admin side: organisers register endpoints and choose
//! event types, read each endpoint's delivery log and replay a delivery.
//!
//! The deliveries themselves are made by the outbox relay's fan-out and sent by the webhook
//! sender (`boxoffice_workers::webhooks`); see `boxoffice_store::webhook` for the rules.
//! Creating an endpoint is idempotent by its key (stored on the endpoint: a retry answers the
//! same endpoint, secret included; the key with another body is refused). The secret is
//! generated here and answered only at creation. A replay is idempotent by state: it queues
//! the delivery again (`PENDING`, due now) and the integrator dedupes on the event id.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::request_digest;
use boxoffice_store::webhook::{
    ENDPOINT_URL_LEN_MAX, ENDPOINTS_MAX, EndpointCreated, NewEndpoint, WebhookDelivery,
    WebhookEndpoint,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::request_key;

/// Default page size of an endpoint's delivery log.
pub const DELIVERIES_PAGE_DEFAULT: u32 = 50;
/// Largest page size of an endpoint's delivery log.
pub const DELIVERIES_PAGE_MAX: u32 = 100;
/// Most entries of `eventTypes` (repeats included).
const EVENT_TYPES_MAX: usize = 16;
/// Longest endpoint id accepted in a path (ids are UUIDs).
const ENDPOINT_ID_LEN_MAX: usize = 64;

/// A webhook event type an endpoint may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, ToSchema)]
pub enum WebhookEventType {
    #[serde(rename = "order.confirmed")]
    OrderConfirmed,
    #[serde(rename = "order.cancelled")]
    OrderCancelled,
    #[serde(rename = "tickets.issued")]
    TicketsIssued,
    #[serde(rename = "tickets.transferred")]
    TicketsTransferred,
    #[serde(rename = "exchange.completed")]
    ExchangeCompleted,
    #[serde(rename = "refund.due")]
    RefundDue,
    #[serde(rename = "refund.succeeded")]
    RefundSucceeded,
    #[serde(rename = "refund.failed")]
    RefundFailed,
    #[serde(rename = "event.cancelled")]
    EventCancelled,
}

impl WebhookEventType {
    pub fn as_str(self) -> &'static str {
        use boxoffice_store::webhook::event_type;
        match self {
            Self::OrderConfirmed => event_type::ORDER_CONFIRMED,
            Self::OrderCancelled => event_type::ORDER_CANCELLED,
            Self::TicketsIssued => event_type::TICKETS_ISSUED,
            Self::TicketsTransferred => event_type::TICKETS_TRANSFERRED,
            Self::ExchangeCompleted => event_type::EXCHANGE_COMPLETED,
            Self::RefundDue => event_type::REFUND_DUE,
            Self::RefundSucceeded => event_type::REFUND_SUCCEEDED,
            Self::RefundFailed => event_type::REFUND_FAILED,
            Self::EventCancelled => event_type::EVENT_CANCELLED,
        }
    }
}

/// `POST /v1/admin/webhooks` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhookBody {
    /// Where deliveries are POSTed: an `http` or `https` URL of at most 2,048 characters.
    /// Private and loopback addresses are allowed in this build.
    #[schema(
        min_length = 1,
        max_length = 2048,
        pattern = "^[hH][tT][tT][pP][sS]?://[^\\s/?#@]+([/?#]\\S*)?$",
        example = "https://example.com/boxoffice/webhooks"
    )]
    pub url: String,
    /// The event types it receives (at least one; a repeated type counts once).
    #[schema(min_items = 1, max_items = 16)]
    pub event_types: Vec<WebhookEventType>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// `PATCH /v1/admin/webhooks/{endpointId}` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateWebhookBody {
    /// `false` stops deliveries (new events are not fanned out to it, pending ones wait);
    /// `true` resumes them.
    pub enabled: bool,
}

/// A webhook endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookEndpointView {
    pub endpoint_id: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// The signing secret: only in the answer that created the endpoint (and a replay of its
    /// key). Keep it: it is never shown again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
}

impl WebhookEndpointView {
    fn new(endpoint: &WebhookEndpoint, with_secret: bool) -> Self {
        Self {
            endpoint_id: endpoint.endpoint_id.clone(),
            url: endpoint.url.clone(),
            event_types: endpoint.event_types.clone(),
            enabled: endpoint.enabled,
            secret: with_secret.then(|| endpoint.secret.clone()),
            created_at: endpoint.created_at,
        }
    }
}

/// Every endpoint, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookEndpointList {
    pub endpoints: Vec<WebhookEndpointView>,
}

/// One delivery of one event to one endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryView {
    pub delivery_id: i64,
    pub endpoint_id: String,
    /// The event id (the body's `id` and the `Boxoffice-Event-Id` header): integrators
    /// dedupe on it.
    pub event_id: String,
    pub event_type: String,
    /// `PENDING` (waiting for its next attempt), `DELIVERED` (answered 2xx) or `FAILED`
    /// (every attempt failed; a replay sends it again).
    #[schema(value_type = crate::api::status_names::DeliveryStatus, example = "DELIVERED")]
    pub status: String,
    /// Attempts since it was made or last replayed.
    pub attempts: u32,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub next_attempt_at: OffsetDateTime,
    /// The endpoint's status code at the last attempt (none: not reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_status_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When an attempt last got a 2xx.
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub delivered_at: Option<OffsetDateTime>,
    /// When the event happened.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub event_created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    /// The event's data, as sent.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

impl WebhookDeliveryView {
    fn new(delivery: &WebhookDelivery) -> Self {
        Self {
            delivery_id: delivery.delivery_id,
            endpoint_id: delivery.endpoint_id.clone(),
            event_id: delivery.event_id.to_string(),
            event_type: delivery.event_type.clone(),
            status: delivery.status.as_str().to_owned(),
            attempts: delivery.n_attempts,
            next_attempt_at: delivery.next_attempt_at,
            last_status_code: delivery.last_status_code,
            last_error: delivery.last_error.clone(),
            delivered_at: delivery.delivered_at,
            event_created_at: delivery.event_created_at,
            created_at: delivery.created_at,
            data: serde_json::from_str(&delivery.payload).unwrap_or(serde_json::Value::Null),
        }
    }
}

/// A page of an endpoint's deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDeliveryPage {
    pub deliveries: Vec<WebhookDeliveryView>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<i64>,
}

/// The endpoint's URL, checked: http or https, a host, at most [`ENDPOINT_URL_LEN_MAX`]
/// characters.
fn checked_url(raw: &str) -> ApiResult<String> {
    if raw.is_empty() || raw.chars().count() > ENDPOINT_URL_LEN_MAX {
        return Err(ApiError::validation(
            "url",
            format!("must be 1-{ENDPOINT_URL_LEN_MAX} characters"),
        ));
    }
    let url = reqwest::Url::parse(raw)
        .map_err(|e| ApiError::validation("url", format!("is not a valid URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ApiError::validation("url", "must be an http or https URL"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::validation("url", "is not a valid URL: no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ApiError::validation("url", "must not carry credentials"));
    }
    Ok(raw.to_owned())
}

/// A new signing secret: 32 random bytes, hex, after `whsec_`.
fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("whsec_{hex}")
}

fn endpoint_id_checked(endpoint_id: &str) -> ApiResult<()> {
    if endpoint_id.is_empty() || endpoint_id.len() > ENDPOINT_ID_LEN_MAX {
        return Err(ApiError::not_found("webhook endpoint"));
    }
    Ok(())
}

async fn endpoint_of(state: &AppState, endpoint_id: &str) -> ApiResult<WebhookEndpoint> {
    endpoint_id_checked(endpoint_id)?;
    state
        .store
        .get_webhook_endpoint(endpoint_id)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook endpoint"))
}

/// Registers a webhook endpoint; the answer carries its signing secret, once.
#[utoipa::path(
    post, path = "/v1/admin/webhooks", tag = "webhooks",
    request_body = CreateWebhookBody,
    params(("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey")),
    responses(
        (status = 201, description = "Created (or the key's earlier endpoint), with its secret", body = WebhookEndpointView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 409, description = "Same key in flight, or WEBHOOK_ENDPOINTS_FULL (100 endpoints exist)", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "VALIDATION (url, eventTypes) or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "RATE_LIMITED: the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    Admin(admin): Admin,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<CreateWebhookBody>()?;
    let url = checked_url(&request.url)?;
    if request.event_types.is_empty() {
        return Err(ApiError::validation(
            "eventTypes",
            "must name at least one event type",
        ));
    }
    if request.event_types.len() > EVENT_TYPES_MAX {
        return Err(ApiError::validation(
            "eventTypes",
            format!("must name at most {EVENT_TYPES_MAX} event types"),
        ));
    }
    let mut event_types: Vec<WebhookEventType> = request.event_types;
    event_types.sort_unstable();
    event_types.dedup();
    let path = "/v1/admin/webhooks";
    let scope = boxoffice_domain::idempotency::IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let _in_flight = state.in_flight.claim(&scope)?;
    let new = NewEndpoint {
        endpoint_id: uuid::Uuid::now_v7().to_string(),
        url,
        event_types: event_types.iter().map(|t| t.as_str().to_owned()).collect(),
        secret: new_secret(),
        created_by: scope.account_id.clone(),
        idempotency_key: scope.key.clone(),
        request_digest: request_digest("POST", path, &body.0),
    };
    let endpoint = match state.store.create_webhook_endpoint(&new).await? {
        EndpointCreated::Created(endpoint) | EndpointCreated::Replayed(endpoint) => endpoint,
        EndpointCreated::KeyReused => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used with a different request",
            ));
        }
        EndpointCreated::TooMany => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "WEBHOOK_ENDPOINTS_FULL",
                format!("at most {ENDPOINTS_MAX} webhook endpoints; delete one first"),
            ));
        }
    };
    Ok((
        StatusCode::CREATED,
        axum::Json(WebhookEndpointView::new(&endpoint, true)),
    )
        .into_response())
}

/// Every webhook endpoint, oldest first (without secrets).
#[utoipa::path(
    get, path = "/v1/admin/webhooks", tag = "webhooks",
    responses(
        (status = 200, description = "The endpoints", body = WebhookEndpointList),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_webhooks(
    State(state): State<AppState>,
    Admin(_admin): Admin,
) -> ApiResult<Response> {
    let endpoints = state.store.list_webhook_endpoints().await?;
    Ok(axum::Json(WebhookEndpointList {
        endpoints: endpoints
            .iter()
            .map(|endpoint| WebhookEndpointView::new(endpoint, false))
            .collect(),
    })
    .into_response())
}

/// One webhook endpoint (without its secret).
#[utoipa::path(
    get, path = "/v1/admin/webhooks/{endpointId}", tag = "webhooks",
    params(("endpointId" = String, Path)),
    responses(
        (status = 200, description = "The endpoint", body = WebhookEndpointView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such endpoint", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn get_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(endpoint_id): Path<String>,
) -> ApiResult<Response> {
    let endpoint = endpoint_of(&state, &endpoint_id).await?;
    Ok(axum::Json(WebhookEndpointView::new(&endpoint, false)).into_response())
}

/// Enables or disables a webhook endpoint.
#[utoipa::path(
    patch, path = "/v1/admin/webhooks/{endpointId}", tag = "webhooks",
    params(("endpointId" = String, Path)),
    request_body = UpdateWebhookBody,
    responses(
        (status = 200, description = "The endpoint as it now is", body = WebhookEndpointView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such endpoint", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "VALIDATION", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn update_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(endpoint_id): Path<String>,
    body: JsonBody,
) -> ApiResult<Response> {
    let request = body.parse::<UpdateWebhookBody>()?;
    endpoint_id_checked(&endpoint_id)?;
    let endpoint = state
        .store
        .set_webhook_endpoint_enabled(&endpoint_id, request.enabled)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    if endpoint.enabled {
        state.webhooks.poke();
    }
    Ok(axum::Json(WebhookEndpointView::new(&endpoint, false)).into_response())
}

/// Deletes a webhook endpoint and its delivery log (to stop deliveries but keep the log,
/// disable it instead).
#[utoipa::path(
    delete, path = "/v1/admin/webhooks/{endpointId}", tag = "webhooks",
    params(("endpointId" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such endpoint", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(endpoint_id): Path<String>,
) -> ApiResult<Response> {
    endpoint_id_checked(&endpoint_id)?;
    if !state.store.delete_webhook_endpoint(&endpoint_id).await? {
        return Err(ApiError::not_found("webhook endpoint"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Only deliveries with a smaller `deliveryId` (the previous page's `nextBefore`).
    #[param(minimum = 1)]
    pub before: Option<i64>,
    /// 1-100, default 50.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}

/// An endpoint's delivery log, newest first.
#[utoipa::path(
    get, path = "/v1/admin/webhooks/{endpointId}/deliveries", tag = "webhooks",
    params(("endpointId" = String, Path), DeliveriesQuery),
    responses(
        (status = 200, description = "A page of deliveries", body = WebhookDeliveryPage),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such endpoint", body = Problem),
        (status = 422, description = "Bad before or limit", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_deliveries(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(endpoint_id): Path<String>,
    query: Result<Query<DeliveriesQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(query) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    let limit = query.limit.unwrap_or(DELIVERIES_PAGE_DEFAULT);
    if !(1..=DELIVERIES_PAGE_MAX).contains(&limit) {
        return Err(ApiError::validation(
            "limit",
            format!("must be between 1 and {DELIVERIES_PAGE_MAX}"),
        ));
    }
    if query.before.is_some_and(|before| before < 1) {
        return Err(ApiError::validation("before", "must be at least 1"));
    }
    let endpoint = endpoint_of(&state, &endpoint_id).await?;
    let deliveries = state
        .store
        .list_webhook_deliveries(&endpoint.endpoint_id, query.before, limit)
        .await?;
    let next_before = (deliveries.len() == limit as usize)
        .then(|| deliveries.last().map(|d| d.delivery_id))
        .flatten();
    Ok(axum::Json(WebhookDeliveryPage {
        deliveries: deliveries.iter().map(WebhookDeliveryView::new).collect(),
        next_before,
    })
    .into_response())
}

/// Queues a delivery again (`PENDING`, due now, attempts from zero); the endpoint receives
/// the same event id again.
#[utoipa::path(
    post, path = "/v1/admin/webhooks/{endpointId}/deliveries/{deliveryId}/replay", tag = "webhooks",
    params(("endpointId" = String, Path), ("deliveryId" = i64, Path, minimum = 1)),
    responses(
        (status = 200, description = "Queued again", body = WebhookDeliveryView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin", body = Problem),
        (status = 404, description = "No such endpoint, or no such delivery of it", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn replay_delivery(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path((endpoint_id, delivery_id)): Path<(String, String)>,
) -> ApiResult<Response> {
    endpoint_id_checked(&endpoint_id)?;
    let delivery_id: i64 = delivery_id
        .parse()
        .ok()
        .filter(|id| *id >= 1)
        .ok_or_else(|| ApiError::not_found("webhook delivery"))?;
    let delivery = state
        .store
        .replay_webhook_delivery(&endpoint_id, delivery_id)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook delivery"))?;
    metrics::counter!("boxoffice_webhook_replays_total").increment(1);
    state.webhooks.poke();
    Ok(axum::Json(WebhookDeliveryView::new(&delivery)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_with_a_host_are_accepted() {
        assert!(checked_url("https://example.com/hooks").is_ok());
        assert!(checked_url("http://127.0.0.1:8080/").is_ok());
        for bad in [
            "",
            "ftp://example.com/",
            "file:///etc/passwd",
            "example.com",
            "http://user:pw@example.com/",
            "http://[/",
        ] {
            assert!(checked_url(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(ENDPOINT_URL_LEN_MAX));
        assert!(checked_url(&long).is_err());
    }

    #[test]
    fn every_event_type_of_the_api_is_one_the_store_fans_out() {
        use WebhookEventType::*;
        let names: Vec<&str> = [
            OrderConfirmed,
            OrderCancelled,
            TicketsIssued,
            TicketsTransferred,
            ExchangeCompleted,
            RefundDue,
            RefundSucceeded,
            RefundFailed,
            EventCancelled,
        ]
        .iter()
        .map(|t| t.as_str())
        .collect();
        assert_eq!(names, boxoffice_store::webhook::event_type::ALL);
    }

    #[test]
    fn secrets_differ_and_are_prefixed() {
        let (a, b) = (new_secret(), new_secret());
        assert_ne!(a, b);
        assert!(a.starts_with("whsec_") && a.len() == 6 + 64, "{a}");
    }
}
