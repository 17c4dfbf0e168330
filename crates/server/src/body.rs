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
        Self::from_bytes(&bytes)
    }
}

/// Largest integer a JSON number written with a fraction or an exponent still names exactly.
const EXACT_INTEGER_MAX: f64 = 9_007_199_254_740_992.0; // 2^53

/// `45.0` and `4.5e1` are the integer 45, as JSON Schema reads them (an integer is a number
/// whose fractional part is zero): written as integers, so that the typed fields take them.
fn integral_numbers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64())
                && float.fract() == 0.0
                && float.abs() <= EXACT_INTEGER_MAX
            {
                // In range: the cast is exact.
                *number = serde_json::Number::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(members) => members.values_mut().for_each(integral_numbers),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

impl JsonBody {
    /// The body of a request whose bytes were read (at most [`BODY_BYTES_MAX`]): a JSON
    /// object, its integral numbers written as integers.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ApiError> {
        if bytes.is_empty() {
            return Err(ApiError::validation("body", "a JSON object is required"));
        }
        let mut value: Value = serde_json::from_slice(bytes)
            .map_err(|e| ApiError::validation("body", format!("malformed JSON: {e}")))?;
        integral_numbers(&mut value);
        if !value.is_object() {
            return Err(ApiError::validation("body", "must be a JSON object"));
        }
        Ok(Self(value))
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integral_numbers_are_integers_whatever_their_spelling() {
        let mut value = serde_json::json!({
            "a": 45.0, "b": [4.5e1, -3.0, 0.5], "c": {"d": 1e300, "e": 7, "f": "8.0"}
        });
        integral_numbers(&mut value);
        assert_eq!(value["a"], serde_json::json!(45));
        assert!(value["a"].is_i64());
        assert_eq!(value["b"], serde_json::json!([45, -3, 0.5]));
        // Beyond 2^53 a float no longer names one integer: left as it is (and refused).
        assert!(value["c"]["d"].is_f64());
        assert_eq!(value["c"]["e"], serde_json::json!(7));
        assert_eq!(value["c"]["f"], serde_json::json!("8.0"));
    }
}
