//! The storefront (`/`), the admin page (`/admin`) and the door app (`/door/`, installable,
//! kept offline by its service worker): static files compiled into the binary, gzipped once
//! on first use, served with an ETag so a reload costs a 304. The vendored libraries (jsQR,
//! qrcode-generator) are served unchanged, with their licence headers.

use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// One embedded file.
struct Asset {
    body: &'static str,
    content_type: &'static str,
    gzip: OnceLock<Vec<u8>>,
    etag: OnceLock<HeaderValue>,
}

impl Asset {
    const fn new(body: &'static str, content_type: &'static str) -> Self {
        Self {
            body,
            content_type,
            gzip: OnceLock::new(),
            etag: OnceLock::new(),
        }
    }

    fn etag(&self) -> &HeaderValue {
        self.etag.get_or_init(|| {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(self.body.as_bytes());
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header")
        })
    }

    fn respond(&self, request: &HeaderMap) -> Response {
        let etag = self.etag().clone();
        let cache = HeaderValue::from_static("no-cache");
        if request
            .get(header::IF_NONE_MATCH)
            .is_some_and(|tag| tag.as_bytes() == etag.as_bytes())
        {
            return (
                StatusCode::NOT_MODIFIED,
                [(header::ETAG, etag), (header::CACHE_CONTROL, cache)],
            )
                .into_response();
        }
        let content_type = HeaderValue::from_static(self.content_type);
        if accepts_gzip(request) {
            let gzip = self.gzip.get_or_init(|| gzip(self.body.as_bytes()));
            return (
                [
                    (header::CONTENT_TYPE, content_type),
                    (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
                    (header::VARY, HeaderValue::from_static("accept-encoding")),
                    (header::ETAG, etag),
                    (header::CACHE_CONTROL, cache),
                ],
                gzip.clone(),
            )
                .into_response();
        }
        (
            [
                (header::CONTENT_TYPE, content_type),
                (header::VARY, HeaderValue::from_static("accept-encoding")),
                (header::ETAG, etag),
                (header::CACHE_CONTROL, cache),
            ],
            self.body,
        )
            .into_response()
    }
}

static INDEX: Asset = Asset::new(
    include_str!("../web/index.html"),
    "text/html; charset=utf-8",
);
static ADMIN: Asset = Asset::new(
    include_str!("../web/admin.html"),
    "text/html; charset=utf-8",
);
static APP_JS: Asset = Asset::new(
    include_str!("../web/app.js"),
    "text/javascript; charset=utf-8",
);
static ADMIN_JS: Asset = Asset::new(
    include_str!("../web/admin.js"),
    "text/javascript; charset=utf-8",
);
static STYLE: Asset = Asset::new(include_str!("../web/style.css"), "text/css; charset=utf-8");
static DOOR: Asset = Asset::new(include_str!("../web/door.html"), "text/html; charset=utf-8");
static DOOR_JS: Asset = Asset::new(
    include_str!("../web/door.js"),
    "text/javascript; charset=utf-8",
);
static DOOR_SW: Asset = Asset::new(
    include_str!("../web/door-sw.js"),
    "text/javascript; charset=utf-8",
);
static DOOR_MANIFEST: Asset = Asset::new(
    include_str!("../web/door-manifest.webmanifest"),
    "application/manifest+json",
);
static DOOR_ICON: Asset = Asset::new(include_str!("../web/door-icon.svg"), "image/svg+xml");
static JSQR: Asset = Asset::new(
    include_str!("../web/vendor/jsqr.js"),
    "text/javascript; charset=utf-8",
);
static QRCODE: Asset = Asset::new(
    include_str!("../web/vendor/qrcode.js"),
    "text/javascript; charset=utf-8",
);

/// Whether the request's `Accept-Encoding` lists gzip (with a non-zero weight).
pub fn accepts_gzip(request: &HeaderMap) -> bool {
    request
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|coding| {
            let mut parts = coding.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    == Some(0.0)
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

/// Gzip at a level that favours speed: snapshots are recompressed as the map changes.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

/// The page routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|h: HeaderMap| async move { INDEX.respond(&h) }))
        .route(
            "/admin",
            get(|h: HeaderMap| async move { ADMIN.respond(&h) }),
        )
        .route(
            "/assets/app.js",
            get(|h: HeaderMap| async move { APP_JS.respond(&h) }),
        )
        .route(
            "/assets/admin.js",
            get(|h: HeaderMap| async move { ADMIN_JS.respond(&h) }),
        )
        .route(
            "/assets/style.css",
            get(|h: HeaderMap| async move { STYLE.respond(&h) }),
        )
        .route(
            "/assets/vendor/qrcode.js",
            get(|h: HeaderMap| async move { QRCODE.respond(&h) }),
        )
        .route(
            "/door",
            get(|| async { axum::response::Redirect::permanent("/door/") }),
        )
        .route(
            "/door/",
            get(|h: HeaderMap| async move { DOOR.respond(&h) }),
        )
        .route(
            "/door/door.js",
            get(|h: HeaderMap| async move { DOOR_JS.respond(&h) }),
        )
        .route(
            "/door/jsqr.js",
            get(|h: HeaderMap| async move { JSQR.respond(&h) }),
        )
        .route(
            "/door/sw.js",
            get(|h: HeaderMap| async move { DOOR_SW.respond(&h) }),
        )
        .route(
            "/door/manifest.webmanifest",
            get(|h: HeaderMap| async move { DOOR_MANIFEST.respond(&h) }),
        )
        .route(
            "/door/icon.svg",
            get(|h: HeaderMap| async move { DOOR_ICON.respond(&h) }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(accept).unwrap(),
        );
        map
    }

    #[test]
    fn gzip_is_chosen_only_when_asked_for() {
        assert!(accepts_gzip(&headers("gzip, deflate, br")));
        assert!(accepts_gzip(&headers("br;q=1.0, gzip;q=0.8")));
        assert!(!accepts_gzip(&headers("gzip;q=0")));
        assert!(!accepts_gzip(&headers("identity")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let body = "seat ".repeat(1000);
        let packed = gzip(body.as_bytes());
        assert!(packed.len() < body.len() / 10);
        let mut unpacked = String::new();
        flate2::read::GzDecoder::new(packed.as_slice())
            .read_to_string(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked, body);
    }
}
