//! The storefront (`/`), the admin page (`/admin`) and the door app (`/door/`, installable,
//! kept offline by its service worker): static files compiled into the binary, gzipped once
//! on first use, served with an ETag so a reload costs a 304. The vendored libraries (jsQR,
//! qrcode-generator) are served unchanged, with their licence headers.
//!
//! The pages speak five languages (`boxoffice_i18n`): their texts are the catalogues served
//! at `/i18n/{locale}/{file}.json` (the same ETag and gzip, one copy per language built on
//! first use), and the storefront and the door app are served with `<html lang>` set from the
//! request's `Accept-Language` ([`LocalizedPage`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::Router;
use axum::body::Bytes;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// One embedded file.
struct Asset {
    /// Shared, so that a copy built at run time (a language's page, a catalogue) is served
    /// without copying, as a compiled-in file is.
    body: Bytes,
    content_type: &'static str,
    gzip: OnceLock<Vec<u8>>,
    etag: OnceLock<HeaderValue>,
}

impl Asset {
    const fn new(body: &'static str, content_type: &'static str) -> Self {
        Self {
            body: Bytes::from_static(body.as_bytes()),
            content_type,
            gzip: OnceLock::new(),
            etag: OnceLock::new(),
        }
    }

    /// A copy made at run time (a language's page, a catalogue).
    fn owned(body: String, content_type: &'static str) -> Self {
        Self {
            body: Bytes::from(body),
            content_type,
            gzip: OnceLock::new(),
            etag: OnceLock::new(),
        }
    }

    fn etag(&self) -> &HeaderValue {
        self.etag.get_or_init(|| {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(&self.body[..]);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a valid header")
        })
    }

    fn respond(&self, request: &HeaderMap) -> Response {
        self.respond_varying(request, "accept-encoding")
    }

    /// The answer, its `Vary` naming `vary` (the request headers that chose this copy).
    fn respond_varying(&self, request: &HeaderMap, vary: &'static str) -> Response {
        let etag = self.etag().clone();
        let cache = HeaderValue::from_static("no-cache");
        let vary = HeaderValue::from_static(vary);
        if request
            .get(header::IF_NONE_MATCH)
            .is_some_and(|tag| tag.as_bytes() == etag.as_bytes())
        {
            return (
                StatusCode::NOT_MODIFIED,
                [
                    (header::ETAG, etag),
                    (header::CACHE_CONTROL, cache),
                    (header::VARY, vary),
                ],
            )
                .into_response();
        }
        let content_type = HeaderValue::from_static(self.content_type);
        if accepts_gzip(request) {
            let gzip = self.gzip.get_or_init(|| gzip(&self.body[..]));
            return (
                [
                    (header::CONTENT_TYPE, content_type),
                    (header::CONTENT_ENCODING, HeaderValue::from_static("gzip")),
                    (header::VARY, vary),
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
                (header::VARY, vary),
                (header::ETAG, etag),
                (header::CACHE_CONTROL, cache),
            ],
            self.body.clone(),
        )
            .into_response()
    }
}

/// A page served with `<html lang>` naming the spoken language the request's
/// `Accept-Language` prefers ([`boxoffice_i18n::negotiate`]): the page's script starts in
/// that language unless the visitor chose another. One copy per language, made on first use.
struct LocalizedPage {
    /// The page as written, `<html lang="en">` on its second line.
    template: &'static str,
    copies: OnceLock<HashMap<&'static str, Asset>>,
}

/// What a page's `<html>` tag says in the file; replaced by the language served.
const HTML_LANG_AS_WRITTEN: &str = "<html lang=\"en\">";

impl LocalizedPage {
    const fn new(template: &'static str) -> Self {
        Self {
            template,
            copies: OnceLock::new(),
        }
    }

    fn respond(&self, request: &HeaderMap) -> Response {
        let accept_language = request
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|value| value.to_str().ok());
        let locale = boxoffice_i18n::negotiate(accept_language);
        let copies = self.copies.get_or_init(|| {
            boxoffice_i18n::LOCALES
                .iter()
                .map(|&locale| {
                    let page = self.template.replacen(
                        HTML_LANG_AS_WRITTEN,
                        &format!("<html lang=\"{locale}\">"),
                        1,
                    );
                    (locale, Asset::owned(page, "text/html; charset=utf-8"))
                })
                .collect()
        });
        let Some(copy) = copies.get(locale) else {
            return crate::error::ApiError::not_found("page").into_response();
        };
        let mut response = copy.respond_varying(request, "accept-encoding, accept-language");
        response
            .headers_mut()
            .insert(header::CONTENT_LANGUAGE, HeaderValue::from_static(locale));
        response
    }
}

static INDEX: LocalizedPage = LocalizedPage::new(include_str!("../web/index.html"));
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
static ADMIN_BOXOFFICE_JS: Asset = Asset::new(
    include_str!("../web/admin-boxoffice.js"),
    "text/javascript; charset=utf-8",
);
static STYLE: Asset = Asset::new(include_str!("../web/style.css"), "text/css; charset=utf-8");
static DOOR: LocalizedPage = LocalizedPage::new(include_str!("../web/door.html"));
static I18N_JS: Asset = Asset::new(
    include_str!("../web/i18n.js"),
    "text/javascript; charset=utf-8",
);

/// The catalogues the pages fetch (`crates/i18n/locales/<locale>/<file>.ftl`); the others
/// (mails, tickets) are the server's own and not served.
pub const PAGE_CATALOGUES: [&str; 2] = ["storefront", "door"];

/// Every page catalogue in every language as JSON, made on first use.
static CATALOGUES: OnceLock<HashMap<(&'static str, &'static str), Asset>> = OnceLock::new();

// In the OpenAPI document (a client of the pages' texts may fetch them too), so it is routed
// by `crate::api_router` rather than `routes` below.
/// The messages of a page catalogue in a language.
///
/// `file` is `storefront.json` or `door.json`. A language boxoffice does not speak answers
/// English, and so does a message the language lacks; any other file is 404.
#[utoipa::path(
    get, path = "/i18n/{locale}/{file}", tag = "pages",
    params(
        ("locale" = String, Path, description = "A language tag (`de`, `de-AT`, `zh-Hans`): its primary language counts; one not spoken answers English"),
        ("file" = String, Path, description = "`storefront.json` or `door.json`"),
    ),
    responses(
        (status = 200, description = "Message id → the message's text as written, `{ $name }` placeables left to fill; `Content-Language` names the language", body = std::collections::BTreeMap<String, String>),
        (status = 304, description = "Not modified (`If-None-Match` named the current `ETag`)"),
        (status = 404, description = "No such page catalogue", body = crate::api::Problem),
    )
)]
pub async fn catalogue(
    path: Result<Path<(String, String)>, PathRejection>,
    request: HeaderMap,
) -> Response {
    let Ok(Path((locale, file))) = path else {
        return crate::error::ApiError::not_found("catalogue").into_response();
    };
    let locale = boxoffice_i18n::spoken(&locale).unwrap_or(boxoffice_i18n::DEFAULT_LOCALE);
    let Some(&file) = file
        .strip_suffix(".json")
        .and_then(|name| PAGE_CATALOGUES.iter().find(|known| **known == name))
    else {
        return crate::error::ApiError::not_found("catalogue").into_response();
    };
    let catalogues = CATALOGUES.get_or_init(|| {
        let mut all = HashMap::new();
        for locale in boxoffice_i18n::LOCALES {
            for file in PAGE_CATALOGUES {
                if let Some(json) = boxoffice_i18n::catalogue_json(locale, file) {
                    all.insert(
                        (locale, file),
                        Asset::owned(json, "application/json; charset=utf-8"),
                    );
                }
            }
        }
        all
    });
    let Some(asset) = catalogues.get(&(locale, file)) else {
        return crate::error::ApiError::not_found("catalogue").into_response();
    };
    let mut response = asset.respond(&request);
    response
        .headers_mut()
        .insert(header::CONTENT_LANGUAGE, HeaderValue::from_static(locale));
    response
}
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
            "/assets/admin-boxoffice.js",
            get(|h: HeaderMap| async move { ADMIN_BOXOFFICE_JS.respond(&h) }),
        )
        .route(
            "/assets/i18n.js",
            get(|h: HeaderMap| async move { I18N_JS.respond(&h) }),
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

    /// The message ids a page's files name: `t('id'` calls in its scripts, `data-i18n="id"`
    /// (or `'data-i18n': 'id'`) and `data-i18n-attr="name:id …"` in its markup.
    fn message_ids_named(sources: &[&str]) -> std::collections::BTreeSet<String> {
        let is_id = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        let mut ids = std::collections::BTreeSet::new();
        for source in sources {
            for opening in ["t('", "data-i18n=\"", "'data-i18n': '"] {
                for (at, _) in source.match_indices(opening) {
                    // `t('` must be the function, not the end of another name (`split('`).
                    let before = source[..at].chars().next_back();
                    if opening == "t('"
                        && before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
                    {
                        continue;
                    }
                    let rest = &source[at + opening.len()..];
                    let id: String = rest.chars().take_while(|&c| is_id(c)).collect();
                    ids.insert(id);
                }
            }
            for (at, _) in source.match_indices("data-i18n-attr=\"") {
                let rest = &source[at + "data-i18n-attr=\"".len()..];
                let value = &rest[..rest.find('"').unwrap_or(0)];
                for pair in value.split_whitespace() {
                    ids.insert(pair.split_once(':').map_or(pair, |(_, id)| id).to_owned());
                }
            }
        }
        ids
    }

    /// Every message a page names is in its English catalogue (a typo, or a message added to
    /// the page but not to the catalogue, would show its id to the fan), and every message of
    /// the catalogue is named by the page (none left over from removed code). The other
    /// languages having every English message is `boxoffice-i18n`'s own test.
    #[test]
    fn the_pages_name_exactly_the_messages_of_their_english_catalogues() {
        let pages: [(&str, &[&str]); 2] = [
            (
                "storefront",
                &[
                    include_str!("../web/index.html"),
                    include_str!("../web/app.js"),
                ],
            ),
            (
                "door",
                &[
                    include_str!("../web/door.html"),
                    include_str!("../web/door.js"),
                ],
            ),
        ];
        for (file, sources) in pages {
            let named = message_ids_named(sources);
            let english: std::collections::BTreeSet<String> =
                boxoffice_i18n::message_ids("en", file)
                    .into_iter()
                    .collect();
            assert!(!english.is_empty(), "no English catalogue {file}.ftl");
            let missing: Vec<_> = named.difference(&english).collect();
            assert!(
                missing.is_empty(),
                "the {file} page names messages en/{file}.ftl lacks: {missing:?}"
            );
            let unused: Vec<_> = english.difference(&named).collect();
            assert!(
                unused.is_empty(),
                "en/{file}.ftl has messages the page never names: {unused:?}"
            );
            let foreign: Vec<_> = named
                .iter()
                .filter(|id| !id.starts_with(&format!("{file}-")))
                .collect();
            assert!(
                foreign.is_empty(),
                "ids without the {file}- prefix: {foreign:?}"
            );
        }
    }

    /// The scanner itself: it finds ids in each form, and not in look-alikes.
    #[test]
    fn message_ids_are_found_in_each_form_and_only_there() {
        let named = message_ids_named(&[
            "t('storefront-a'); x.split('-'); t('storefront-b', { n: 1 })",
            "<p data-i18n=\"storefront-c\"></p><nav data-i18n-attr=\"aria-label:storefront-d title:storefront-e\">",
            "h('label', { 'data-i18n': 'storefront-f' })",
        ]);
        let expected: Vec<&str> = vec![
            "storefront-a",
            "storefront-b",
            "storefront-c",
            "storefront-d",
            "storefront-e",
            "storefront-f",
        ];
        assert_eq!(
            named.iter().map(String::as_str).collect::<Vec<_>>(),
            expected
        );
    }

    fn accept_language(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            header::ACCEPT_LANGUAGE,
            HeaderValue::from_str(value).unwrap(),
        );
        map
    }

    async fn body_text(response: Response) -> String {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    /// The storefront and the door app start in the language `Accept-Language` prefers:
    /// `<html lang>` says it, `Content-Language` too, and caches keep one copy per language.
    #[tokio::test]
    async fn the_pages_are_served_in_the_language_asked_for() {
        for page in [&INDEX, &DOOR] {
            assert!(page.template.contains(HTML_LANG_AS_WRITTEN));
            let response = page.respond(&accept_language("zh-CN,zh;q=0.9,en;q=0.8"));
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(response.headers()[header::CONTENT_LANGUAGE], "zh");
            assert_eq!(
                response.headers()[header::VARY],
                "accept-encoding, accept-language"
            );
            let html = body_text(response).await;
            assert!(html.contains("<html lang=\"zh\">"), "{html}");
            let german = body_text(page.respond(&accept_language("de-AT"))).await;
            assert!(german.contains("<html lang=\"de\">"));
            let unknown = body_text(page.respond(&accept_language("it"))).await;
            assert!(unknown.contains("<html lang=\"en\">"));
            let none = body_text(page.respond(&HeaderMap::new())).await;
            assert!(none.contains("<html lang=\"en\">"));
        }
    }

    /// `/i18n/{locale}/{file}.json`: the catalogue in the language (English for one not
    /// spoken), cacheable with an ETag, 404 for a file that is not a page catalogue.
    #[tokio::test]
    async fn catalogues_are_served_by_language_and_unknown_files_are_404() {
        let get = |locale: &str, file: &str, headers: HeaderMap| {
            catalogue(Ok(Path((locale.to_owned(), file.to_owned()))), headers)
        };
        let german = get("de", "storefront.json", HeaderMap::new()).await;
        assert_eq!(german.status(), StatusCode::OK);
        assert_eq!(german.headers()[header::CONTENT_LANGUAGE], "de");
        assert!(
            german.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let etag = german.headers()[header::ETAG].clone();
        let json: serde_json::Value = serde_json::from_str(&body_text(german).await).unwrap();
        assert_eq!(json["storefront-sign-in"], "Anmelden");
        assert_eq!(
            json["storefront-seat-label"],
            boxoffice_i18n::message(
                "de",
                "storefront-seat-label",
                &[
                    ("section", "{ $section }"),
                    ("row", "{ $row }"),
                    ("seat", "{ $seat }"),
                ]
            )
        );

        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let revalidated = get("de", "storefront.json", again).await;
        assert_eq!(revalidated.status(), StatusCode::NOT_MODIFIED);

        let unknown = get("xx-YY", "door.json", HeaderMap::new()).await;
        assert_eq!(unknown.status(), StatusCode::OK);
        assert_eq!(unknown.headers()[header::CONTENT_LANGUAGE], "en");
        let json: serde_json::Value = serde_json::from_str(&body_text(unknown).await).unwrap();
        assert_eq!(json["door-result-valid"], "Welcome!");

        for file in ["nothing.json", "storefront", "common.json", "../door.json"] {
            let response = get("de", file, HeaderMap::new()).await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{file}");
        }
    }

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
