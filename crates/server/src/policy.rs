//! What browsers are told (issue 18, item 5): security headers on every answer, a Content
//! Security Policy on the pages, and an explicit CORS policy for the API.
//!
//! The pages load only their own scripts and styles (no inline code), may not be framed,
//! send no referrer, and fetch only their own origin and the payment provider's (the
//! simulator's 3-D Secure page). Cross-origin use of the API from a browser is refused
//! unless the operator names the origins (`--cors-allow-origin`): bearer tokens, never
//! cookies, so no credentials are allowed either way.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::Response;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::AppState;

/// Longest list of origins accepted (CORS or connect).
pub const ORIGINS_MAX: usize = 32;

/// The operator's choices.
#[derive(Debug, Clone, Default)]
pub struct WebPolicy {
    /// Origins whose pages may call the API from a browser; empty: the same origin only.
    pub cors_origins: Vec<String>,
    /// Origins the pages may fetch besides their own (the payment provider's pages).
    pub connect_origins: Vec<String>,
}

/// The headers, made once.
#[derive(Debug, Clone)]
pub struct Headers {
    page_csp: HeaderValue,
    cors: Option<Vec<HeaderValue>>,
}

/// `scheme://host[:port]`, nothing else (no path, no wildcard): what a browser sends as
/// `Origin` and what CSP and CORS compare.
pub fn origin(raw: &str) -> Result<String, String> {
    let bad = || format!("{raw:?} is not an origin (scheme://host[:port])");
    let (scheme, rest) = raw.split_once("://").ok_or_else(bad)?;
    if !matches!(scheme, "http" | "https") || rest.is_empty() {
        return Err(bad());
    }
    let host_ok = rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    if !host_ok || rest.starts_with(':') || rest.ends_with(':') {
        return Err(bad());
    }
    Ok(format!("{scheme}://{}", rest.to_ascii_lowercase()))
}

/// The origin of a URL (`http://127.0.0.1:9000/v1/x` → `http://127.0.0.1:9000`).
pub fn origin_of_url(url: &str) -> Result<String, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| format!("{url:?} is not a URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    origin(&format!("{scheme}://{authority}"))
}

impl Headers {
    pub fn new(policy: &WebPolicy) -> Result<Self, String> {
        if policy.cors_origins.len() > ORIGINS_MAX || policy.connect_origins.len() > ORIGINS_MAX {
            return Err(format!("at most {ORIGINS_MAX} origins"));
        }
        let connect = policy
            .connect_origins
            .iter()
            .map(|o| origin(o))
            .collect::<Result<Vec<_>, _>>()?;
        let csp = format!(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'{}; object-src 'none'; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'",
            connect.iter().map(|o| format!(" {o}")).collect::<String>()
        );
        let cors = if policy.cors_origins.is_empty() {
            None
        } else {
            Some(
                policy
                    .cors_origins
                    .iter()
                    .map(|o| {
                        let o = origin(o)?;
                        HeaderValue::from_str(&o).map_err(|e| e.to_string())
                    })
                    .collect::<Result<Vec<_>, String>>()?,
            )
        };
        Ok(Self {
            page_csp: HeaderValue::from_str(&csp).map_err(|e| e.to_string())?,
            cors,
        })
    }

    /// The CORS layer, when origins are named: the API's methods and request headers,
    /// the answers' headers a client reads, no credentials.
    pub fn cors_layer(&self) -> Option<CorsLayer> {
        let origins = self.cors.clone()?;
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
                .allow_headers([
                    header::AUTHORIZATION,
                    header::CONTENT_TYPE,
                    header::IF_NONE_MATCH,
                    HeaderName::from_static("idempotency-key"),
                    HeaderName::from_static("admission-token"),
                    HeaderName::from_static("queue-ticket"),
                    HeaderName::from_static("last-event-id"),
                ])
                .expose_headers([
                    header::RETRY_AFTER,
                    header::ETAG,
                    header::LOCATION,
                    HeaderName::from_static("idempotent-replayed"),
                ])
                .max_age(Duration::from_secs(600)),
        )
    }

    /// Whether a request must go through the router's CORS layer (the status poll's hot
    /// path answers without it).
    pub fn needs_cors(&self, request: &HeaderMap) -> bool {
        self.cors.is_some() && request.contains_key(header::ORIGIN)
    }
}

/// Headers every answer carries; the pages' policy on HTML.
pub fn add_to(headers: &mut HeaderMap, page_csp: Option<&HeaderValue>) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    let html = headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if let (true, Some(csp)) = (html, page_csp) {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp.clone());
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(
            HeaderName::from_static("cross-origin-opener-policy"),
            HeaderValue::from_static("same-origin"),
        );
        headers.insert(
            HeaderName::from_static("permissions-policy"),
            // The door app scans with the camera; no page asks for anything else.
            HeaderValue::from_static("camera=(self), microphone=(), geolocation=(), payment=()"),
        );
    }
}

/// The middleware: every answer of the router.
pub async fn security_headers(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    add_to(response.headers_mut(), Some(&state.web.page_csp));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(
            origin("https://Shop.Example").unwrap(),
            "https://shop.example"
        );
        assert_eq!(
            origin("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in [
            "*",
            "shop.example",
            "https://",
            "https://a/b",
            "ftp://a",
            "https://a b",
            "https://a:",
        ] {
            assert!(origin(bad).is_err(), "{bad}");
        }
        assert_eq!(
            origin_of_url("http://127.0.0.1:9000/sim/3ds/x/complete").unwrap(),
            "http://127.0.0.1:9000"
        );
    }

    #[test]
    fn pages_get_the_policy_and_every_answer_nosniff() {
        let headers = Headers::new(&WebPolicy {
            cors_origins: vec![],
            connect_origins: vec!["http://127.0.0.1:9000".into()],
        })
        .unwrap();
        let mut page = HeaderMap::new();
        page.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        add_to(&mut page, Some(&headers.page_csp));
        let csp = page[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(
            csp.contains("connect-src 'self' http://127.0.0.1:9000;"),
            "{csp}"
        );
        assert!(!csp.contains("unsafe"), "{csp}");
        assert_eq!(page[header::X_FRAME_OPTIONS], "DENY");
        let mut api = HeaderMap::new();
        api.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        add_to(&mut api, Some(&headers.page_csp));
        assert_eq!(api[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert!(!api.contains_key(header::CONTENT_SECURITY_POLICY));
        assert!(
            headers.cors_layer().is_none(),
            "no origins named: same origin only"
        );
        assert!(
            Headers::new(&WebPolicy {
                cors_origins: vec!["*".into()],
                connect_origins: vec![],
            })
            .is_err()
        );
    }
}
