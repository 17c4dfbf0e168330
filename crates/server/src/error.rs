//! The one HTTP error type. Every failure the API reports is an [`ApiError`], rendered as
//! RFC 9457 problem details with a stable `code`. A 500 never carries internal details: they
//! are logged, the client gets a bare title.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_store::StoreError;
use serde_json::{Map, Value, json};

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";
/// Seconds a client should wait after a 503 (a 429 asks for [`crate::pressure`]'s wait).
pub const RETRY_AFTER_S: u32 = 1;

/// An error answer: status, stable code, human detail, optional extra members.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
    pub extra: Map<String, Value>,
    /// A 429 of an abuse limit: the seconds until its bucket has a token again (the store's
    /// 429s ask for [`crate::pressure`]'s wait).
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            extra: Map::new(),
            retry_after_s: None,
        }
    }

    /// 429 `RATE_LIMITED` of an abuse limit ([`crate::limits`]): the limit's name in `limit`,
    /// and `Retry-After` the whole seconds until a token is there again (at least 1).
    pub fn rate_limited(limit: &'static str, wait: std::time::Duration) -> Self {
        let mut error = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "RATE_LIMITED",
            format!("too many requests ({limit}); retry after the time given"),
        )
        .with("limit", limit);
        error.retry_after_s = Some(wait.as_secs_f64().ceil().max(1.0) as u64);
        error
    }

    pub fn with(mut self, member: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(member.to_owned(), value.into());
        self
    }

    pub fn validation(field: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "VALIDATION",
            format!("{field}: {reason}"),
        )
        .with("field", field)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            format!("{what} not found"),
        )
    }

    pub fn unauthenticated(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "UNAUTHENTICATED", detail)
    }

    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "UNAVAILABLE", detail)
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL",
            "internal error",
        )
    }

    /// The problem document, as bytes: also what an idempotency record stores.
    pub fn body(&self) -> Vec<u8> {
        let title = self.status.canonical_reason().unwrap_or("Error");
        let mut doc = json!({
            "type": format!("/problems/{}", self.code.to_ascii_lowercase().replace('_', "-")),
            "title": title,
            "status": self.status.as_u16(),
            "detail": self.detail,
            "code": self.code,
        });
        if let Value::Object(map) = &mut doc {
            for (member, value) in &self.extra {
                map.insert(member.clone(), value.clone());
            }
        }
        serde_json::to_vec(&doc).unwrap_or_default()
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(why) => {
                tracing::warn!(%why, "store unavailable");
                Self::unavailable("the inventory store is unavailable; retry shortly")
            }
            StoreError::Busy(why) => {
                tracing::debug!(%why, "store busy");
                let what = if why.contains("lookups") {
                    "lookups"
                } else if why.contains(boxoffice_store::gate::CALLS_BUSY) {
                    "calls"
                } else {
                    "pool"
                };
                metrics::counter!("boxoffice_refused_busy_total", "why" => what).increment(1);
                Self::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "RATE_LIMITED",
                    "the inventory store is busy; retry shortly",
                )
            }
            StoreError::Fenced(why) => {
                tracing::info!(%why, "not the event's owner");
                metrics::counter!("boxoffice_cluster_fenced_answers_total").increment(1);
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "UNAVAILABLE",
                    "the event is moving to another node; retry shortly",
                )
            }
            StoreError::Conflict(why) => {
                tracing::warn!(%why, "store conflict survived retries");
                Self::unavailable("the inventory store is busy; retry shortly")
            }
            StoreError::Internal(why) => {
                tracing::error!(%why, "store error");
                Self::internal()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        }
        if let (StatusCode::TOO_MANY_REQUESTS, Some(wait)) = (self.status, self.retry_after_s) {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(wait));
        } else if self.status == StatusCode::TOO_MANY_REQUESTS {
            // Overload: the more refusals per answer, the longer the wait asked for.
            let pressure = crate::pressure::global();
            pressure.refused();
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(pressure.retry_after_s()),
            );
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A saturated store is overload (429, retry shortly), an unreachable one is down (503);
    /// both say when to come back, and neither shows the store's own words.
    #[test]
    fn a_busy_store_is_a_429_and_an_unreachable_one_a_503() {
        let busy = ApiError::from(StoreError::Busy(
            "pool timed out while waiting for an open connection".into(),
        ))
        .into_response();
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        let wait: u64 = busy.headers()[header::RETRY_AFTER]
            .to_str()
            .expect("ASCII")
            .parse()
            .expect("seconds");
        assert!(
            (1..=crate::pressure::RETRY_AFTER_MAX_S).contains(&wait),
            "{wait}"
        );
        let down =
            ApiError::from(StoreError::Unavailable("connection refused".into())).into_response();
        assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(down.headers()[header::RETRY_AFTER], "1");
        let busy = ApiError::from(StoreError::Busy("pool timed out".into()));
        assert_eq!(busy.code, "RATE_LIMITED");
        assert!(!String::from_utf8_lossy(&busy.body()).contains("pool"));
    }
}
