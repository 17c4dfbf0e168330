//! JSON request bodies: at most [`BODY_BYTES_MAX`], parsed once into a `Value` (kept for the
//! idempotency digest) and then into the typed request with unknown fields refused. Every
//! failure is a 422 `VALIDATION` whose detail names the field, or a 413.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::AppState;
use crate::error::ApiError;

/// Largest request body accepted (API.md: 64 KiB).
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// A JSON body as a generic value; see [`JsonBody::parse`] for the typed form.
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl FromRequest<AppState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "PAYLOAD_TOO_LARGE",
                        format!("request bodies are limited to {BODY_BYTES_MAX} bytes"),
                    )
                } else {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "BAD_REQUEST",
                        "could not read the request body",
                    )
                }
            })?;
        if bytes.is_empty() {
            return Err(ApiError::validation("body", "a JSON object is required"));
        }
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| ApiError::validation("body", format!("malformed JSON: {e}")))?;
        if !value.is_object() {
            return Err(ApiError::validation("body", "must be a JSON object"));
        }
        Ok(Self(value))
    }
}

impl JsonBody {
    /// The typed request; the error names the offending field by its JSON path.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_path_to_error::deserialize(&self.0).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::validation(&field, e.inner())
        })
    }

    /// A string member of the body, if present.
    pub fn str_field(&self, member: &str) -> Result<Option<&str>, ApiError> {
        match self.0.get(member) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::validation(member, "must be a string")),
        }
    }
}
