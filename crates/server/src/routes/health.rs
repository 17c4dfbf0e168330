//! Liveness, readiness, metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, description = "Up")))]
pub async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// The store answers (the payment provider joins this check when checkout lands).
#[utoipa::path(get, path = "/readyz", tag = "ops", responses(
    (status = 200, description = "Ready"),
    (status = 503, description = "A dependency is unreachable", body = crate::api::Problem),
))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => {
            axum::Json(json!({"status": "ready", "store": state.store.backend()})).into_response()
        }
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "ops", responses((status = 200, description = "Prometheus metrics", content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> Response {
    let mut response = state.metrics.render().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}
