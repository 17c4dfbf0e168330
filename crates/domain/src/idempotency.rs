//! Idempotency: the canonical digest of a request, and the stored response a replay returns.
//!
//! Keys are scoped per account and endpoint. The digest covers method, path and the JSON
//! body in canonical form (object keys sorted, no insignificant whitespace), minus the
//! fields that carry the key or the admission token themselves, so the same request sent
//! with the key in a header or in the body digests the same.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Body fields that are transport, not request: left out of the digest.
pub const DIGEST_EXCLUDED_FIELDS: [&str; 2] = ["idempotencyKey", "admissionToken"];

/// Who asked, where, under which key: the primary key of an idempotency record.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IdempotencyScope {
    pub account_id: String,
    /// A route template plus its path parameters, e.g. `POST /v1/events/{id}/holds`.
    pub endpoint: String,
    pub key: String,
}

/// A response exactly as first sent; a replay returns these bytes unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// How the store answered one idempotent request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotent {
    /// Executed now; this response was stored with the state it created, in one transaction.
    Fresh(StoredResponse),
    /// The same key and digest were seen before: the first response, byte for byte.
    Replayed(StoredResponse),
    /// The same key was used for a different request.
    KeyReusedWithOtherRequest,
}

/// The hex SHA-256 of `method`, `path` and the canonical form of `body`.
pub fn request_digest(method: &str, path: &str, body: &serde_json::Value) -> String {
    let mut body = body.clone();
    if let serde_json::Value::Object(map) = &mut body {
        for field in DIGEST_EXCLUDED_FIELDS {
            map.remove(field);
        }
    }
    // serde_json's Map is a BTreeMap (no `preserve_order` feature), so serializing a Value
    // writes object keys sorted: a canonical form.
    let canonical = serde_json::to_vec(&body).unwrap_or_default();
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    hasher.update(&canonical);
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_whitespace_and_transport_fields() {
        let a: serde_json::Value =
            serde_json::from_str(r#"{"seatIds":["A-1-1"],"x":{"b":1,"a":2}}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(
            r#"{ "x": {"a":2, "b":1}, "idempotencyKey":"k", "seatIds": ["A-1-1"] }"#,
        )
        .unwrap();
        assert_eq!(
            request_digest("POST", "/p", &a),
            request_digest("POST", "/p", &b)
        );
    }

    #[test]
    fn digest_covers_method_path_and_body() {
        let body = json!({"seatIds": ["A-1-1"]});
        let base = request_digest("POST", "/v1/events/e1/holds", &body);
        assert_ne!(base, request_digest("PUT", "/v1/events/e1/holds", &body));
        assert_ne!(base, request_digest("POST", "/v1/events/e2/holds", &body));
        assert_ne!(
            base,
            request_digest(
                "POST",
                "/v1/events/e1/holds",
                &json!({"seatIds": ["A-1-2"]})
            )
        );
        assert_eq!(base.len(), 64);
    }
}
