//! The HTTP side of idempotency: which key a request carries (header or body), the
//! in-process in-flight guard that answers 409 `IDEMPOTENCY_IN_PROGRESS`, and turning a
//! stored answer into a response with `Idempotent-Replayed: true`.
//!
//! The authority is the store: a request's record is written in the same transaction as the
//! state it creates, under a unique key, so two executions of one key are impossible even
//! across processes. The in-flight guard only makes the concurrent case visible early.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::ids::check_idempotency_key;

use crate::body::JsonBody;
use crate::error::{ApiError, PROBLEM_JSON};

pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// The key of a request: the `Idempotency-Key` header or the body's `idempotencyKey`; both
/// present and different is a 422.
pub fn request_key(headers: &HeaderMap, body: &JsonBody) -> Result<String, ApiError> {
    let from_header = match headers.get(IDEMPOTENCY_KEY_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| ApiError::validation("Idempotency-Key", "must be visible ASCII"))?
                .to_owned(),
        ),
    };
    let from_body = body.str_field("idempotencyKey")?.map(str::to_owned);
    let key = match (from_header, from_body) {
        (Some(h), Some(b)) if h != b => {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "IDEMPOTENCY_KEY_MISMATCH",
                "the Idempotency-Key header and the body's idempotencyKey differ",
            ));
        }
        (Some(h), _) => h,
        (None, Some(b)) => b,
        (None, None) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "IDEMPOTENCY_KEY_REQUIRED",
                "this endpoint needs an Idempotency-Key header",
            ));
        }
    };
    check_idempotency_key(&key).map_err(|e| ApiError::validation("Idempotency-Key", e))?;
    Ok(key)
}

/// Keys whose first request is being executed by this process.
#[derive(Debug, Default, Clone)]
pub struct InFlight {
    scopes: Arc<Mutex<HashSet<IdempotencyScope>>>,
}

/// Holds a scope in flight until dropped.
#[derive(Debug)]
pub struct InFlightGuard {
    scopes: Arc<Mutex<HashSet<IdempotencyScope>>>,
    scope: IdempotencyScope,
}

impl InFlight {
    /// Claims `scope`, or answers 409 when a request with the same key is still running.
    pub fn claim(&self, scope: &IdempotencyScope) -> Result<InFlightGuard, ApiError> {
        let mut scopes = self
            .scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if !scopes.insert(scope.clone()) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "IDEMPOTENCY_IN_PROGRESS",
                "a request with this Idempotency-Key is still in progress",
            ));
        }
        Ok(InFlightGuard {
            scopes: self.scopes.clone(),
            scope: scope.clone(),
        })
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut scopes = self
            .scopes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        scopes.remove(&self.scope);
    }
}

/// A stored response as sent: the same bytes, status and media type every time.
pub fn stored_response(stored: &StoredResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let media = if status.is_success() {
        "application/json"
    } else {
        PROBLEM_JSON
    };
    let mut response = (status, stored.body.clone()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if replayed {
        headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    response
}

/// The response for an idempotent answer.
pub fn answer(result: Idempotent) -> Response {
    match result {
        Idempotent::Fresh(stored) => stored_response(&stored, false),
        Idempotent::Replayed(stored) => stored_response(&stored, true),
        Idempotent::KeyReusedWithOtherRequest => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "IDEMPOTENCY_KEY_REUSED",
            "this Idempotency-Key was used for a different request",
        )
        .into_response(),
    }
}
