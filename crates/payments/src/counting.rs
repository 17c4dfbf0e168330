//! A counting proxy for tests: [`CountingProxy`] stands between the Stripe adapter and any
//! Stripe-speaking server (the [`crate::simulator`], localstripe), forwards every request
//! unchanged and remembers what was sent, so a test can check how often the provider was
//! asked, e.g. that an authorization refused for good was sent exactly once and never again
//! by the reconciler. It counts requests, not what the server made of them: a replay under
//! the same idempotency key counts too.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

/// One request the proxy forwarded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    pub method: String,
    /// Path and query, e.g. `/v1/payment_intents`.
    pub path: String,
    pub idempotency_key: Option<String>,
}

/// A proxy on 127.0.0.1:0 in front of `upstream`, running until the runtime ends.
#[derive(Debug, Clone)]
pub struct CountingProxy {
    /// Where to point the adapter: `http://127.0.0.1:PORT`.
    pub base_url: String,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

#[derive(Clone)]
struct Forward {
    upstream: String,
    http: reqwest::Client,
    seen: Arc<Mutex<Vec<SeenRequest>>>,
}

/// The request headers the adapter sends that the upstream needs.
const FORWARDED_HEADERS: [header::HeaderName; 3] = [
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    header::HeaderName::from_static("idempotency-key"),
];

impl CountingProxy {
    /// Starts a proxy forwarding to `upstream` (a base URL without a trailing slash).
    pub async fn start(upstream: &str) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let forward = Forward {
            upstream: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            seen: seen.clone(),
        };
        let app = Router::new().fallback(forward_request).with_state(forward);
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "counting proxy stopped");
            }
        });
        Ok(Self { base_url, seen })
    }

    /// Every request forwarded so far, oldest first.
    pub fn requests(&self) -> Vec<SeenRequest> {
        self.seen.lock().expect("proxy lock").clone()
    }

    /// How many authorizations (`POST /v1/payment_intents`) were sent under the idempotency
    /// key `operation_id` (the adapter's key for an operation's authorization).
    pub fn authorizations_sent(&self, operation_id: &str) -> usize {
        self.requests()
            .iter()
            .filter(|seen| {
                seen.method == "POST"
                    && seen.path == "/v1/payment_intents"
                    && seen.idempotency_key.as_deref() == Some(operation_id)
            })
            .count()
    }

    /// How many refunds (`POST /v1/refunds`) were sent under the idempotency key
    /// `refund_id` (the adapter's key for a refund).
    pub fn refunds_sent(&self, refund_id: &str) -> usize {
        self.requests()
            .iter()
            .filter(|seen| {
                seen.method == "POST"
                    && seen.path == "/v1/refunds"
                    && seen.idempotency_key.as_deref() == Some(refund_id)
            })
            .count()
    }
}

async fn forward_request(
    State(forward): State<Forward>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned());
    forward.seen.lock().expect("proxy lock").push(SeenRequest {
        method: method.to_string(),
        path: path.clone(),
        idempotency_key: headers
            .get("idempotency-key")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
    });
    let mut request = forward
        .http
        .request(method, format!("{}{path}", forward.upstream))
        .body(body);
    for name in FORWARDED_HEADERS {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status();
            let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
            let body = answer.bytes().await.unwrap_or_default();
            let mut response = (status, body).into_response();
            if let Some(content_type) = content_type {
                response
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, content_type);
            }
            response
        }
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}
