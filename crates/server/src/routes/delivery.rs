//! What a fan keeps of a purchase, served to the owner only: the order's tickets as a PDF,
//! a ticket's Apple Wallet pass, a ticket's "Save to Google Wallet" link. The documents
//! themselves are made by `boxoffice-delivery` from an [`OrderSheet`] that [`sheet_of`]
//! builds (the one place that maps the store's order to what is printed).
//!
//! Anyone but the owner gets 404, as for the order and ticket reads. An order without
//! tickets yet (payment not captured) is 409 `TICKETS_NOT_ISSUED`; a wallet the server has
//! no keys for is 409 `WALLET_NOT_CONFIGURED` (`README.md` says how to configure them).
//! Rendering and signing are CPU work: they run on the blocking pool, at most
//! [`RENDERS_IN_FLIGHT_MAX`] at once.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use boxoffice_delivery::apple::{ApplePassSigner, PKPASS_CONTENT_TYPE};
use boxoffice_delivery::google::GoogleWalletIssuer;
use boxoffice_delivery::{DeliveryError, OrderSheet, TicketSheet};
use boxoffice_store::EventRecord;
use boxoffice_store::checkout::OrderView;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::AppState;
use crate::api::Problem;
use crate::auth::Account;
use crate::error::{ApiError, ApiResult};

/// Documents rendered or signed at once on this node; more wait (see [`RENDER_WAIT_MS`]).
pub const RENDERS_IN_FLIGHT_MAX: usize = 4;
/// How long a request waits for a render slot before a 503, in milliseconds.
pub const RENDER_WAIT_MS: u64 = 5_000;
/// Longest `lang` query value read, in bytes.
const LANG_LEN_MAX: usize = 35;

/// The media types of the PDF a client may ask for with `Accept`, the first by default: the
/// second is the same bytes under a type a client generator maps to bytes
/// ([`crate::routes::tickets::negotiated`]).
pub const PDF_MEDIA_TYPES: [&str; 2] = ["application/pdf", "application/octet-stream"];
/// See [`PDF_MEDIA_TYPES`].
pub const PKPASS_MEDIA_TYPES: [&str; 2] = [PKPASS_CONTENT_TYPE, "application/octet-stream"];

static RENDERS: LazyLock<tokio::sync::Semaphore> =
    LazyLock::new(|| tokio::sync::Semaphore::new(RENDERS_IN_FLIGHT_MAX));

/// The wallet keys this server signs passes with (`boxoffice serve --pass-cert …`,
/// `--google-wallet-key …`); either may be absent, and its route then answers 409
/// `WALLET_NOT_CONFIGURED`.
#[derive(Debug, Clone, Default)]
pub struct WalletConfig {
    pub apple: Option<Arc<ApplePassSigner>>,
    pub google: Option<Arc<GoogleWalletIssuer>>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LangQuery {
    /// The language to print in (`en`, `de`, `fr`, `es`, `zh`); without it, the
    /// `Accept-Language` header chooses, and English when it names none of them.
    #[param(
        example = "de",
        max_length = 35,
        pattern = "^([Ee][Nn]|[Dd][Ee]|[Ff][Rr]|[Ee][Ss]|[Zz][Hh])([-_][\\s\\S]*)?$"
    )]
    pub lang: Option<String>,
}

/// The language of a document: `?lang=` when given (422 when boxoffice does not speak it),
/// else the best match of `Accept-Language`.
pub(crate) fn locale_of(
    query: Result<Query<LangQuery>, axum::extract::rejection::QueryRejection>,
    headers: &HeaderMap,
) -> ApiResult<&'static str> {
    let Query(query) = query.map_err(|e| ApiError::validation("query", e.body_text()))?;
    if let Some(lang) = query.lang {
        let spoken = (lang.len() <= LANG_LEN_MAX)
            .then(|| boxoffice_i18n::spoken(&lang))
            .flatten();
        return spoken.ok_or_else(|| {
            ApiError::validation(
                "lang",
                format!(
                    "is not a language tickets are printed in ({})",
                    boxoffice_i18n::LOCALES.join(", ")
                ),
            )
        });
    }
    let accept = headers
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|value| value.to_str().ok());
    Ok(boxoffice_i18n::negotiate(accept))
}

/// What is printed of `order` (its tickets in the order the store lists them) for `event`,
/// in `locale`: the same sheet the order's mail attaches (`boxoffice_workers::mail`).
pub fn sheet_of(order: &OrderView, event: &EventRecord, locale: &str) -> OrderSheet {
    boxoffice_workers::mail::order_sheet(order, &event.name, event.starts_at, locale)
}

/// The caller's order `order_id` (404 for anyone else) with its event.
async fn owned_order(
    state: &AppState,
    account: &Account,
    order_id: &str,
) -> ApiResult<(OrderView, Arc<EventRecord>)> {
    let order = state
        .store
        .get_order(order_id)
        .await?
        .filter(|o| o.account_id == account.account_id.as_str())
        .ok_or_else(|| ApiError::not_found("order"))?;
    let event = state.event(&order.event_id).await?;
    Ok((order, event))
}

/// The caller's ticket `ticket_id` (404 for anyone else) as one ticket of its order's sheet.
async fn owned_ticket_sheet(
    state: &AppState,
    account: &Account,
    ticket_id: &str,
    locale: &str,
) -> ApiResult<(OrderSheet, TicketSheet)> {
    let ticket = crate::routes::tickets::owned_ticket(state, account, ticket_id).await?;
    let (order, event) = owned_order(state, account, &ticket.order_id).await?;
    let sheet = sheet_of(&order, &event, locale);
    let ticket = sheet
        .tickets
        .iter()
        .find(|t| t.ticket_id == ticket.ticket_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found("ticket"))?;
    Ok((sheet, ticket))
}

/// Runs `render` on the blocking pool once a render slot is free.
pub(crate) async fn render<T: Send + 'static>(
    what: &'static str,
    render: impl FnOnce() -> Result<T, DeliveryError> + Send + 'static,
) -> ApiResult<T> {
    let _slot = tokio::time::timeout(Duration::from_millis(RENDER_WAIT_MS), RENDERS.acquire())
        .await
        .map_err(|_| ApiError::unavailable("too many documents are being made; retry shortly"))?
        .map_err(|_| ApiError::internal())?;
    tokio::task::spawn_blocking(render)
        .await
        .map_err(|error| {
            tracing::error!(%error, what, "a document render panicked");
            ApiError::internal()
        })?
        .map_err(|error| {
            tracing::error!(%error, what, "a document could not be made");
            ApiError::internal()
        })
}

fn not_configured(wallet: &'static str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "WALLET_NOT_CONFIGURED",
        format!("this server has no {wallet} wallet keys configured"),
    )
    .with("wallet", wallet)
}

/// A PDF, as bytes (a file, to a client generator).
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // schema only
pub struct PdfBytes(Vec<u8>);

/// An Apple Wallet pass (a signed zip), as bytes.
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // schema only
pub struct PkpassBytes(Vec<u8>);

/// The order's tickets as a PDF, one A4 page per ticket: the event and its date, the seat
/// or tier, the holder, the ticket and order ids, and the ticket's static code as a QR code
/// (a voided ticket is printed VOID, without a code). Labels in `?lang=` or the
/// `Accept-Language` language. The same bytes as `application/octet-stream` when `Accept`
/// asks for that.
#[utoipa::path(
    get, path = "/v1/orders/{orderId}/tickets.pdf", tag = "orders",
    params(("orderId" = String, Path), LangQuery),
    responses(
        (status = 200, description = "The tickets, one page each", content(
            (PdfBytes = "application/pdf"),
            (PdfBytes = "application/octet-stream"),
        )),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such order for this account", body = Problem),
        (status = 409, description = "TICKETS_NOT_ISSUED: the order has no tickets yet (its payment is not captured, or it was cancelled)", body = Problem),
        (status = 422, description = "A language tickets are not printed in", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn order_pdf(
    State(state): State<AppState>,
    account: Account,
    Path(order_id): Path<String>,
    query: Result<Query<LangQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let locale = locale_of(query, &headers)?;
    let (order, event) = owned_order(&state, &account, &order_id).await?;
    if order.tickets.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "TICKETS_NOT_ISSUED",
            "the order has no tickets yet: they are issued once its payment is captured",
        ));
    }
    let sheet = sheet_of(&order, &event, locale);
    let pdf = render("pdf", move || boxoffice_delivery::order_pdf(&sheet)).await?;
    let disposition = format!("inline; filename=\"tickets-{}.pdf\"", order.order_id);
    Ok(file_answer(&headers, PDF_MEDIA_TYPES, disposition, pdf))
}

/// A document as the answer: its media type as `Accept` negotiates it among `media_types`,
/// its file name, and never cached (it is the account's own).
pub(crate) fn file_answer(
    headers: &HeaderMap,
    media_types: [&'static str; 2],
    disposition: String,
    bytes: Vec<u8>,
) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                crate::routes::tickets::negotiated(headers, media_types).to_owned(),
            ),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "private, no-store".to_owned()),
        ],
        bytes,
    )
        .into_response()
}

/// The ticket's Apple Wallet pass (`.pkpass`): an event ticket whose QR code is the ticket's
/// static code, signed with the server's pass certificate; `voided` once the ticket is void.
/// The same bytes as `application/octet-stream` when `Accept` asks for that.
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}/wallet/apple", tag = "tickets",
    params(("ticketId" = String, Path), LangQuery),
    responses(
        (status = 200, description = "The pass", content(
            (PkpassBytes = "application/vnd.apple.pkpass"),
            (PkpassBytes = "application/octet-stream"),
        )),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
        (status = 409, description = "WALLET_NOT_CONFIGURED: the server has no pass certificate", body = Problem),
        (status = 422, description = "A language passes are not labelled in", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn apple_pass(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
    query: Result<Query<LangQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let locale = locale_of(query, &headers)?;
    let (sheet, ticket) = owned_ticket_sheet(&state, &account, &ticket_id, locale).await?;
    let signer = state.wallet.apple.clone().ok_or(not_configured("apple"))?;
    let pass = render("pkpass", move || {
        boxoffice_delivery::apple::pkpass(&signer, &sheet, &ticket)
    })
    .await?;
    let disposition = format!("attachment; filename=\"ticket-{ticket_id}.pkpass\"");
    Ok(file_answer(&headers, PKPASS_MEDIA_TYPES, disposition, pass))
}

/// A "Save to Google Wallet" link of one ticket.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GoogleWalletLink {
    pub ticket_id: String,
    /// `https://pay.google.com/gp/v/save/<jwt>`: open it to add the pass.
    pub save_url: String,
    /// The RS256 JWT in the link (claims `iss`, `aud` = `google`, `typ` = `savetowallet`,
    /// `payload.eventTicketClasses`, `payload.eventTicketObjects`).
    pub jwt: String,
}

/// The ticket's "Save to Google Wallet" link: a JWT signed with the server's service-account
/// key that carries the event's class and the ticket's object (QR code: the static code;
/// `INACTIVE` once the ticket is void).
#[utoipa::path(
    get, path = "/v1/tickets/{ticketId}/wallet/google", tag = "tickets",
    params(("ticketId" = String, Path), LangQuery),
    responses(
        (status = 200, description = "The save link", body = GoogleWalletLink),
        (status = 401, description = "No valid token", body = Problem),
        (status = 404, description = "No such ticket for this account", body = Problem),
        (status = 409, description = "WALLET_NOT_CONFIGURED: the server has no Google Wallet key", body = Problem),
        (status = 422, description = "A language passes are not labelled in", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn google_link(
    State(state): State<AppState>,
    account: Account,
    Path(ticket_id): Path<String>,
    query: Result<Query<LangQuery>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let locale = locale_of(query, &headers)?;
    let (sheet, ticket) = owned_ticket_sheet(&state, &account, &ticket_id, locale).await?;
    let issuer = state
        .wallet
        .google
        .clone()
        .ok_or(not_configured("google"))?;
    let now = state.store.now().await?;
    let link = render("google-wallet", move || {
        boxoffice_delivery::google::save_link(&issuer, &sheet, &ticket, now)
    })
    .await?;
    Ok(axum::Json(GoogleWalletLink {
        ticket_id,
        save_url: link.save_url,
        jwt: link.jwt,
    })
    .into_response())
}
