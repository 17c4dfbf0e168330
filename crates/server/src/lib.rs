//! The HTTP API of boxoffice (axum). [`app`] builds the router from an [`AppState`];
//! [`serve`] binds it and runs the background workers beside it. The event runtime (the
//! per-event writers, the leases, the live seat maps and waiting rooms) is [`runtime`]; the
//! rest of the crate is the HTTP side around it.
//!
//! Where to start: `routes/holds.rs` (the write path, through the event's
//! [`runtime::writer`]), then `idempotency.rs` and `error.rs`. Handlers parse and answer;
//! the event's engine decides holds and releases, the store checks and persists.
//!
//! Architecture invariant: no handler writes to the store except through one store call
//! that is a single short transaction, or through the event's writer; no handler answers a
//! write before its commit.

pub mod api;
pub mod auth;
pub mod body;
pub mod coalesce;
pub mod error;
pub mod forwarded;
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
pub mod idempotency;
pub mod limits;
pub mod listener;
pub mod lookup;
pub mod metrics_help;
pub mod policy;
pub mod pressure;
pub mod routes;
pub mod runtime;
pub mod sale_api;
pub mod token_cache;
pub mod turns;
pub mod web;

use boxoffice_store::OneShot as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use boxoffice_store::engine::EngineStore;
use boxoffice_store::{EventRecord, Store};
use boxoffice_workers::expiry::ExpirySweeper;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use boxoffice_payments::PaymentProvider;
use boxoffice_tickets::TicketSigner;
use boxoffice_workers::reconciler::PaymentReconciler;
use boxoffice_workers::relay::OutboxRelay;
use boxoffice_workers::webhooks::WebhookSender;

use crate::auth::TokenVerifier;
use crate::error::ApiError;
use crate::idempotency::InFlight;
pub use crate::routes::delivery::WalletConfig;
use crate::runtime::seatmap::SeatMaps;
use crate::runtime::waitroom::{SlotReturner, WaitingRoom, WaitingRoomOptions};
use crate::runtime::writer::EventWriters;
use boxoffice_waitroom_state::RoomStore;

/// Shared state of every handler. Cloning it (axum does, several times per request) copies
/// one pointer.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] points to.
pub struct Shared {
    pub store: Arc<dyn Store>,
    /// The headers of [`policy`], made once.
    pub web: policy::Headers,
    /// The abuse limits' buckets.
    pub limits: limits::Limits,
    /// This node's holds per account, and their lapses.
    pub ledger: Arc<runtime::ledger::HoldLedger>,
    /// Whose `X-Forwarded-For` is believed.
    pub trusted_proxies: forwarded::TrustedProxies,
    /// The store as the background workers reach it (their own small pool on PostgreSQL).
    pub workers_store: Arc<dyn Store>,
    pub verifier: TokenVerifier,
    /// One writer per event: every inventory command of an event is decided by it.
    pub writers: EventWriters,
    /// Coalesced look-ups of the answers keys already have.
    pub lookup: lookup::AnswerLookup,
    pub in_flight: InFlight,
    /// Checkouts take turns in arrival order.
    pub checkout_turns: turns::CheckoutTurns,
    /// Events are immutable once created, so they are cached for the life of the process.
    pub events: Arc<Mutex<HashMap<String, Arc<EventRecord>>>>,
    /// Reads of events not cached yet: one per event at a time, shared by the requests that
    /// arrive meanwhile (at most [`EVENT_LOAD_WAIT_MS`] each, then 503).
    pub event_loads: coalesce::Coalesced<Option<Arc<EventRecord>>>,
    pub metrics: PrometheusHandle,
    pub openapi_json: Arc<String>,
    pub provider: Arc<dyn PaymentProvider>,
    pub ticket_signer: TicketSigner,
    /// Poked after a confirmation so capture and tickets go out at once.
    pub relay: OutboxRelay,
    /// Poked when a payment's outcome could not be recorded.
    pub reconciler: PaymentReconciler,
    /// Records the refunds of cancelled events; poked by a cancellation.
    pub cancellations: boxoffice_workers::cancellation::CancellationJob,
    /// Sends integrators' webhook deliveries; poked by the relay's fan-out and by a replay.
    pub webhooks: WebhookSender,
    /// Sends fans' mail (when configured); poked by the relay's fan-out and by a resend.
    pub mail: Option<boxoffice_workers::mail::MailSender>,
    /// The addresses of identity tokens' `email` claims, recorded off the request path.
    pub token_emails: Mutex<Option<tokio::sync::mpsc::Receiver<auth::TokenEmail>>>,
    pub waitroom: WaitingRoom,
    /// The server signs with the public development secret: `POST /v1/dev/token` works.
    pub dev_auth: bool,
    /// The live seat maps (read model) and their feeder.
    pub seatmaps: SeatMaps,
    /// Seat-map streams open now.
    pub seatmap_streams: std::sync::atomic::AtomicUsize,
    /// This node's leases and its forwarding to the other nodes' (`None`: a server without
    /// leases, as in most tests: its writers are fenced by the writer sequence alone).
    pub cluster: Option<runtime::cluster::Cluster>,
    /// The keys that sign Apple and Google Wallet passes (either may be absent).
    pub wallet: WalletConfig,
}

/// What a server needs besides its store.
#[derive(Clone)]
pub struct ServerConfig {
    /// HS256 secret of account tokens.
    pub jwt_secret: String,
    /// Secrets of account tokens that still verify during a key rollover (never sign).
    pub jwt_previous_secrets: Vec<String>,
    pub provider: Arc<dyn PaymentProvider>,
    /// Signs ticket codes; its public key verifies them offline.
    pub ticket_signer: TicketSigner,
    /// Where the waiting rooms live (in process and journaled, or Redis).
    pub waitroom_state: Arc<dyn RoomStore>,
    /// Signs queue tickets and admission tokens; `None` derives it from `jwt_secret`.
    /// Every node of one deployment must use the same.
    pub waitroom_secret: Option<String>,
    /// Waiting-room secrets that still verify during a rollover; `None` derives them from
    /// `jwt_previous_secrets` (with `waitroom_secret` unset).
    pub waitroom_previous_secrets: Vec<String>,
    pub waitroom_options: WaitingRoomOptions,
    /// The same store on a small pool of its own for the background workers (outbox relay,
    /// payment reconciler, sweeper), so that they never starve requests; `None`: they share
    /// the requests' store.
    pub workers_store: Option<Arc<dyn Store>>,
    /// The same store on a pool of its own for the event writers' groups, so that a crowd
    /// of reads never keeps a group waiting for a connection. The writers then run on a
    /// thread of their own (`EventWriters::on_own_thread`), so the pool must open its
    /// connections lazily, there. `None`: the requests' store, on the requests' runtime.
    pub writer_store: Option<Arc<dyn EngineStore>>,
    /// The same store on a pool of its own (two connections) for this node's lease
    /// renewals, its registration and its hand-backs, so that a crowd holding every
    /// connection of the requests' pool cannot make the node lose a lease mid-sale. `None`:
    /// the requests' store.
    pub lease_store: Option<Arc<dyn Store>>,
    /// How long an event's writer stays loaded without commands, and how many engines the
    /// node loads at once.
    pub writer_limits: runtime::writer::WriterLimits,
    /// Connections `serve` accepts at once (see [`listener`]); 0: from the descriptor limit.
    pub max_connections: usize,
    /// One owner per event across the nodes of one store (`boxoffice serve` always sets
    /// it): writes go to the event's owner, every group is fenced by its lease.
    pub cluster: Option<runtime::cluster::ClusterConfig>,
    /// Security headers, the pages' Content Security Policy, CORS.
    pub web: policy::WebPolicy,
    /// Abuse limits per account and per client address.
    pub limits: limits::LimitsConfig,
    /// Proxies (addresses or blocks) whose `X-Forwarded-For` names the client
    /// ([`forwarded`]); empty: the TCP peer is the client.
    pub trusted_proxies: Vec<String>,
    /// Where fans' mail goes (an SMTP server or a folder); `None`: no mail is made.
    pub mail: Option<boxoffice_workers::mail::MailConfig>,
    /// The keys that sign wallet passes; `Default`: none (the wallet routes answer 409
    /// `WALLET_NOT_CONFIGURED`).
    pub wallet: WalletConfig,
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("provider", &self.provider.name())
            .field("waitroom_state", &self.waitroom_state.backend())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("store", &self.store.backend())
            .finish_non_exhaustive()
    }
}

/// The process-wide Prometheus recorder (metrics macros write to one global recorder).
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (a test process building several
            // apps); the handle then renders an empty page rather than failing.
            if metrics::set_global_recorder(recorder).is_ok() {
                metrics_help::describe();
            }
            handle
        })
        .clone()
}

struct SecurityAddon;

impl Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "boxoffice", description = "Ticket reservation API: events, waiting room, holds, checkout, orders, tickets. See API.md for the contract."),
    modifiers(&SecurityAddon),
    components(schemas(api::Problem))
)]
struct ApiDoc;

fn api_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(routes::health::healthz))
        .routes(routes!(routes::health::readyz))
        .routes(routes!(routes::health::metrics))
        .routes(routes!(web::catalogue))
        .routes(routes!(routes::events::create_event))
        .routes(routes!(routes::events::list_events))
        .routes(routes!(routes::events::get_event))
        .routes(routes!(routes::cluster::get_owner))
        .routes(routes!(routes::reports::get_report))
        .routes(routes!(routes::reports::get_report_csv))
        .routes(routes!(routes::reports::get_timeline))
        .routes(routes!(routes::reports::get_timeline_csv))
        .routes(routes!(routes::holds::create_hold))
        .routes(routes!(
            routes::holds::get_hold,
            routes::holds::release_hold
        ))
        .routes(routes!(
            routes::holders::get_hold_holders,
            routes::holders::put_hold_holders
        ))
        .routes(routes!(routes::holders::put_ticket_holder))
        .routes(routes!(routes::checkout::checkout))
        .routes(routes!(routes::checkout::get_order))
        .routes(routes!(routes::checkout::list_orders))
        .routes(routes!(routes::checkout::webhook))
        .routes(routes!(routes::exchanges::create_exchange))
        .routes(routes!(routes::exchanges::get_exchange))
        .routes(routes!(routes::exchanges::checkout_exchange))
        .routes(routes!(routes::events::create_trips))
        .routes(routes!(routes::transfers::create_transfer))
        .routes(routes!(routes::transfers::list_transfers))
        .routes(routes!(
            routes::transfers::get_transfer,
            routes::transfers::withdraw_transfer
        ))
        .routes(routes!(routes::transfers::accept_transfer))
        .routes(routes!(routes::refunds::create_refund))
        .routes(routes!(routes::refunds::get_refund))
        .routes(routes!(routes::refunds::admin_refund))
        .routes(routes!(
            routes::allocations::list_allocations,
            routes::allocations::add_allocation
        ))
        .routes(routes!(routes::allocations::release_allocation))
        .routes(routes!(routes::allocations::issue_comp))
        .routes(routes!(routes::box_office::sell))
        .routes(routes!(routes::box_office::admin_order_pdf))
        .routes(routes!(routes::events::update_event))
        .routes(routes!(
            routes::promo::create_promo_code,
            routes::promo::list_promo_codes
        ))
        .routes(routes!(routes::cancellation::cancel_event))
        .routes(routes!(routes::cancellation::get_cancellation))
        .routes(routes!(routes::transfers::decline_transfer))
        .routes(routes!(routes::waitlist::join_waitlist))
        .routes(routes!(
            routes::phases::generate_codes,
            routes::phases::list_codes
        ))
        .routes({
            // An import is a CSV of up to 100,000 codes: its own body limit.
            let (schemas, paths, method_router) = routes!(routes::phases::import_codes);
            let limit = DefaultBodyLimit::max(routes::phases::IMPORT_BODY_BYTES_MAX);
            (schemas, paths, method_router.layer(limit))
        })
        .routes(routes!(
            routes::phases::redeem_access,
            routes::phases::get_access
        ))
        .routes({
            // A venue chart of up to 200,000 seats: its own body limit.
            let (schemas, paths, method_router) =
                routes!(routes::venues::create_chart, routes::venues::list_charts);
            let limit = DefaultBodyLimit::max(routes::venues::VENUE_CHART_BODY_BYTES_MAX);
            (schemas, paths, method_router.layer(limit))
        })
        .routes({
            let (schemas, paths, method_router) = routes!(routes::venues::validate_chart);
            let limit = DefaultBodyLimit::max(routes::venues::VENUE_CHART_BODY_BYTES_MAX);
            (schemas, paths, method_router.layer(limit))
        })
        .routes(routes!(routes::venues::get_chart))
        .routes(routes!(
            routes::waitlist::get_waitlist_entry,
            routes::waitlist::leave_waitlist
        ))
        .routes(routes!(
            routes::webhooks::create_webhook,
            routes::webhooks::list_webhooks
        ))
        .routes(routes!(
            routes::webhooks::get_webhook,
            routes::webhooks::update_webhook,
            routes::webhooks::delete_webhook
        ))
        .routes(routes!(routes::webhooks::list_deliveries))
        .routes(routes!(routes::me::get_me, routes::me::update_me))
        .routes(routes!(routes::mail::list_mail))
        .routes(routes!(routes::mail::mail_file))
        .routes(routes!(routes::mail::resend_mail))
        .routes(routes!(routes::webhooks::replay_delivery))
        .routes(routes!(routes::tickets::public_key))
        .routes(routes!(routes::tickets::public_keys))
        .routes(routes!(routes::tickets::get_ticket))
        .routes(routes!(routes::tickets::ticket_qr))
        .routes(routes!(routes::tickets::check_in))
        .routes(routes!(routes::delivery::order_pdf))
        .routes(routes!(routes::delivery::apple_pass))
        .routes(routes!(routes::delivery::google_link))
        .routes(routes!(routes::door::rotating_ticket))
        .routes(routes!(routes::door::door_bundle))
        .routes(routes!(routes::door::door_sync))
        .routes(routes!(
            routes::queue::join_queue,
            routes::queue::leave_queue
        ))
        .routes(routes!(routes::queue::queue_status))
        .routes(routes!(
            routes::queue::get_queue,
            routes::queue::update_queue
        ))
        .routes(routes!(routes::dev::dev_token))
        .routes(routes!(routes::seatmap::get_seatmap))
        .routes(routes!(routes::seatmap::get_changes))
        .routes(routes!(routes::seatmap::stream))
}

/// The reconciler's verdicts take the routes' path (`routes::checkout::settle`): one that
/// sells or cancels a pending order goes to its event's writer, so no verdict bypasses the
/// event's engine while a writer keeps the event.
struct WriterSettler {
    shared: std::sync::Weak<Shared>,
    /// The store's own settlement once the server is gone (a reconciler still running).
    store: Arc<dyn Store>,
}

#[async_trait::async_trait]
impl boxoffice_workers::payment::Settler for WriterSettler {
    async fn settle(
        &self,
        operation: &boxoffice_store::checkout::PaymentOperation,
        verdict: &boxoffice_store::checkout::ProviderVerdict,
    ) -> boxoffice_store::StoreResult<Option<boxoffice_store::checkout::Settled>> {
        let Some(shared) = self.shared.upgrade() else {
            return self
                .store
                .settle_payment(&operation.operation_id, verdict, None, None)
                .await;
        };
        let state = AppState(shared);
        let (order, event) = if boxoffice_domain::settlement::order_unsettled(operation.status) {
            (
                state.workers_store.order_head(&operation.order_id).await?,
                state.event(&operation.event_id).await.ok(),
            )
        } else {
            (None, None)
        };
        routes::checkout::settle(
            &state,
            event,
            operation,
            verdict,
            order.as_ref(),
            None,
            None,
        )
        .await
    }

    async fn compensate(
        &self,
        operation_id: &str,
        reason: &str,
    ) -> boxoffice_store::StoreResult<bool> {
        let Some(shared) = self.shared.upgrade() else {
            return self
                .store
                .compensate_failed_capture(operation_id, reason)
                .await;
        };
        let state = AppState(shared);
        let store = &state.workers_store;
        let Some(operation) = store.payment_operation(operation_id).await? else {
            return Ok(false);
        };
        let Some(order) = store.order_head(&operation.order_id).await? else {
            return Ok(false);
        };
        if order.status != boxoffice_domain::order::OrderStatus::Confirmed {
            return Ok(false);
        }
        let Ok(event) = state.event(&operation.event_id).await else {
            return store.compensate_failed_capture(operation_id, reason).await;
        };
        match state
            .writers
            .compensate(event, &order, operation, reason)
            .await
        {
            Ok(given_back) => Ok(given_back),
            Err(runtime::writer::SubmitError::Overloaded) => Err(
                boxoffice_store::StoreError::Busy("the event's writer is full".into()),
            ),
            // Another node owns the event: the store's own compensation (fenced by the
            // writer sequence; the owner catches up), rather than waiting for the relay of
            // the owner to claim the message.
            Err(runtime::writer::SubmitError::Store(boxoffice_store::StoreError::Fenced(_))) => {
                store.compensate_failed_capture(operation_id, reason).await
            }
            Err(runtime::writer::SubmitError::Store(error)) => Err(error),
        }
    }
}

/// The OpenAPI document, generated from the handlers' annotations. Error answers are
/// `application/problem+json` (RFC 9457), as the server sends them: the annotations name
/// their body, and this says which media type it has.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = api_router().into_openapi();
    problem_json_errors(&mut document);
    exact_shapes(document)
}

/// What the handlers' annotations cannot say: an event has a section or a tier, lists of
/// seat ids name each seat once, a hold or an exchange names exactly one shape per side
/// (a field sent as `null` counts as absent, as serde reads it), and an exchange from a tier
/// to a tier gives its `quantity`; and what they say too much:
/// the body's `idempotencyKey`. Patched into the generated document as JSON Schema.
fn exact_shapes(document: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    use serde_json::json;
    use utoipa::openapi::{RefOr, Schema};
    let Ok(mut value) = serde_json::to_value(&document) else {
        return document;
    };
    // One shape: `given` present and not null, every other shape's fields absent or null.
    let shape = |given: &[(&str, &str)], others: &[&str]| {
        let mut properties = serde_json::Map::new();
        for (field, kind) in given {
            properties.insert((*field).into(), json!({ "type": kind }));
        }
        for field in others {
            properties.insert((*field).into(), json!({ "type": "null" }));
        }
        let required: Vec<&str> = given.iter().map(|(field, _)| *field).collect();
        json!({ "type": "object", "required": required, "properties": properties })
    };
    let patches = [
        // An event has sections or tiers of its own, or a stored chart's, not both.
        (
            "CreateEventBody",
            json!([{ "anyOf": [
                { "type": "object", "required": ["sections"],
                  "properties": { "sections": { "type": "array", "minItems": 1,
                      "items": { "$ref": "#/components/schemas/SectionBody" } },
                      "chart": { "type": "null" } } },
                { "type": "object", "required": ["tiers"],
                  "properties": { "tiers": { "type": "array", "minItems": 1,
                      "items": { "$ref": "#/components/schemas/TierBody" } },
                      "chart": { "type": "null" } } },
                { "type": "object", "required": ["chart"],
                  "properties": { "chart": { "type": "object" },
                      "sections": { "type": "array", "maxItems": 0 },
                      "tiers": { "type": "array", "maxItems": 0 } } },
            ]}]),
        ),
        (
            "CreateHoldBody",
            json!([{ "oneOf": [
                shape(&[("seatIds", "array")], &["tierId", "quantity", "bestAvailable"]),
                shape(&[("tierId", "string"), ("quantity", "integer")], &["seatIds", "bestAvailable"]),
                shape(&[("bestAvailable", "object")], &["seatIds", "tierId", "quantity"]),
            ]}]),
        ),
        // A box-office sale names its seats as a hold does.
        (
            "BoxOfficeSaleBody",
            json!([{ "oneOf": [
                shape(&[("seatIds", "array")], &["tierId", "quantity", "bestAvailable"]),
                shape(&[("tierId", "string"), ("quantity", "integer")], &["seatIds", "bestAvailable"]),
                shape(&[("bestAvailable", "object")], &["seatIds", "tierId", "quantity"]),
            ]}]),
        ),
        // A promo code takes a share or an amount off, not both.
        (
            "CreatePromoCodeBody",
            json!([{ "oneOf": [
                shape(&[("percentOffBp", "integer")], &["amountOffMinor"]),
                shape(&[("amountOffMinor", "integer")], &["percentOffBp"]),
            ]}]),
        ),
        // A comp is seats, or a quantity of units (of `tierId`, when given).
        (
            "CompBody",
            json!([{ "oneOf": [
                shape(&[("seatIds", "array")], &["quantity", "tierId"]),
                shape(&[("quantity", "integer")], &["seatIds"]),
            ]}]),
        ),
        // An allocation keeps something: seats, or units of a tier (on creation too).
        (
            "AllocationBody",
            json!([{ "anyOf": [
                { "type": "object", "required": ["seatIds"],
                  "properties": { "seatIds": { "type": "array", "minItems": 1 } } },
                { "type": "object", "required": ["tierUnits"],
                  "properties": { "tierUnits": { "type": "object", "minProperties": 1 } } },
            ]}]),
        ),
        (
            "AddAllocationBody",
            json!([{ "anyOf": [
                { "type": "object", "required": ["seatIds"],
                  "properties": { "seatIds": { "type": "array", "minItems": 1 } } },
                { "type": "object", "required": ["tierUnits"],
                  "properties": { "tierUnits": { "type": "object", "minProperties": 1 } } },
            ]}]),
        ),
        (
            "AdminRefundBody",
            json!([{ "anyOf": [
                shape(&[("amountMinor", "integer")], &[]),
                shape(&[("ticketIds", "array")], &[]),
            ]}]),
        ),
        (
            "CreateExchangeBody",
            json!([
                { "oneOf": [
                    shape(&[("fromSeatIds", "array")], &["fromTierId"]),
                    shape(&[("fromTierId", "string")], &["fromSeatIds"]),
                ]},
                { "oneOf": [
                    shape(&[("toSeatIds", "array")], &["toTierId"]),
                    shape(&[("toTierId", "string")], &["toSeatIds"]),
                ]},
                // A tier on both sides names no seats to count: `quantity` says how many.
                { "anyOf": [
                    shape(&[("quantity", "integer")], &[]),
                    shape(&[], &["fromTierId"]),
                    shape(&[], &["toTierId"]),
                ]},
            ]),
        ),
    ];
    let schemas = &mut value["components"]["schemas"];
    // The seed's body `idempotencyKey` is accepted but not described: the header is
    // (`problem_json_errors`), and a schema cannot say that the two must be equal.
    if let Some(all) = schemas.as_object_mut() {
        for schema in all.values_mut() {
            if let Some(properties) = schema
                .get_mut("properties")
                .and_then(serde_json::Value::as_object_mut)
            {
                properties.remove("idempotencyKey");
            }
        }
    }
    for (name, field) in [
        ("CreateHoldBody", "seatIds"),
        ("BoxOfficeSaleBody", "seatIds"),
        ("CreateExchangeBody", "fromSeatIds"),
        ("CreateExchangeBody", "toSeatIds"),
        // Ids compared as the strings they are, as JSON Schema compares items.
        ("CreateTransferBody", "ticketIds"),
        ("CreateRefundBody", "ticketIds"),
        ("AdminRefundBody", "ticketIds"),
    ] {
        if let Some(property) = schemas[name]["properties"][field].as_object_mut() {
            property.insert("uniqueItems".into(), json!(true));
        }
    }
    // A hold's (or box-office sale's) ticket types: at most 21, each counted at least once
    // (utoipa has no bound on a map's size or on its values).
    for name in ["CreateHoldBody", "BoxOfficeSaleBody"] {
        if let Some(types) = schemas[name]["properties"]["ticketTypes"].as_object_mut() {
            types.insert(
                "maxProperties".into(),
                json!(boxoffice_domain::pricing::TYPE_COUNTS_MAX),
            );
            types.insert(
                "additionalProperties".into(),
                json!({ "type": "integer", "minimum": 1, "maximum": 100 }),
            );
        }
    }
    // A chart's prices: one per category at most (50), each 0-100,000,000 minor units.
    if let Some(prices) = schemas["EventChartBody"]["properties"]["categoryPrices"].as_object_mut()
    {
        prices.insert(
            "maxProperties".into(),
            json!(boxoffice_domain::venue::CHART_CATEGORIES_MAX),
        );
        prices.insert(
            "additionalProperties".into(),
            json!({ "type": "integer", "minimum": 0,
                    "maximum": boxoffice_domain::event::PRICE_MINOR_MAX }),
        );
    }
    // A ticket type is priced in 1-400 places (utoipa has no bound on a map's size).
    if let Some(prices) = schemas["TicketTypeBody"]["properties"]["prices"].as_object_mut() {
        prices.insert("minProperties".into(), json!(1));
        prices.insert("maxProperties".into(), json!(400));
    }
    let mut exact: utoipa::openapi::OpenApi = match serde_json::from_value(value) {
        Ok(exact) => exact,
        Err(error) => {
            // Not reached: a test reads the shapes back from the served document.
            tracing::error!(%error, "the OpenAPI shapes could not be added");
            return document;
        }
    };
    // The shapes go beside the object's own properties, as its `allOf`: the object stays an
    // object with `additionalProperties: false` at its top, which a client generator reads
    // (wrapped as `allOf: [object, shapes]`, generated models took any member). utoipa's
    // model has no `allOf` on an object, so it is written as one of the object's extra
    // members, which serialize beside the others.
    if let Some(components) = exact.components.as_mut() {
        for (name, shapes) in patches {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name) {
                object
                    .extensions
                    .get_or_insert_with(Default::default)
                    .insert("allOf".to_owned(), shapes);
            }
        }
    }
    exact
}

/// Every 4xx and 5xx answer documented as `application/json` becomes
/// `application/problem+json`; every `Idempotency-Key` header says what the server accepts
/// (1-255 visible ASCII characters, `idempotency::request_key`) and that it is required.
fn problem_json_errors(document: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{RefOr, path::ParameterIn};
    let key_schema = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(255))
        .pattern(Some("^[!-~]+$"))
        .build();
    for item in document.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            for parameter in operation.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && parameter.parameter_in == ParameterIn::Header
                    && parameter.name == "Idempotency-Key"
                {
                    parameter.schema = Some(RefOr::T(key_schema.clone().into()));
                    // Every operation that names the header refuses a request without a key
                    // (400 IDEMPOTENCY_KEY_REQUIRED). The seed's body `idempotencyKey` still
                    // stands in for it (API.md), but the document describes the header only:
                    // a request built from it can then never carry two different keys
                    // (422 IDEMPOTENCY_KEY_MISMATCH). `exact_shapes` leaves the body's out.
                    parameter.required = utoipa::openapi::Required::True;
                    parameter.description = Some(
                        "1-255 visible ASCII characters, scoped to the account and the \
                         endpoint. (The body member `idempotencyKey` is accepted in its place, \
                         as the same key when both are sent; this document describes the \
                         header.)"
                            .into(),
                    );
                }
            }
            for (status, response) in operation.responses.responses.iter_mut() {
                let is_error = status.starts_with('4') || status.starts_with('5');
                if let (true, RefOr::T(response)) = (is_error, response)
                    && let Some(content) = response.content.shift_remove("application/json")
                {
                    response
                        .content
                        .insert(crate::error::PROBLEM_JSON.to_owned(), content);
                }
            }
        }
    }
}

impl AppState {
    pub fn new(store: Arc<dyn Store>, config: &ServerConfig) -> Result<Self, String> {
        let render: runtime::writer::HoldRenderer = Arc::new(routes::holds::render_hold_outcome);
        let jwt_secret = config.jwt_secret.as_str();
        const WAITROOM_DERIVATION: &str = "boxoffice waiting room v1";
        let (waitroom_secret, waitroom_previous) = match &config.waitroom_secret {
            Some(secret) => (
                secret.as_bytes().to_vec(),
                config
                    .waitroom_previous_secrets
                    .iter()
                    .map(|s| s.as_bytes().to_vec())
                    .collect(),
            ),
            None => (
                derive_secret(jwt_secret, WAITROOM_DERIVATION),
                config
                    .jwt_previous_secrets
                    .iter()
                    .map(|s| derive_secret(s, WAITROOM_DERIVATION))
                    .collect::<Vec<_>>(),
            ),
        };
        let waitroom = WaitingRoom::with_previous(
            config.waitroom_state.clone(),
            &waitroom_secret,
            &waitroom_previous,
            config.waitroom_options,
        )?;
        let workers_store = config
            .workers_store
            .clone()
            .unwrap_or_else(|| store.clone());
        let slots = SlotReturner {
            waitroom: waitroom.clone(),
            store: workers_store.clone(),
        };
        let (token_emails_in, token_emails) =
            tokio::sync::mpsc::channel(auth::TOKEN_EMAILS_QUEUED_MAX);
        let verifier = TokenVerifier::with_previous(jwt_secret, &config.jwt_previous_secrets)?
            .with_email_sink(token_emails_in);
        let web = policy::Headers::new(&config.web)?;
        let cluster = config
            .cluster
            .clone()
            .map(|cluster| {
                runtime::cluster::Cluster::with_lease_store(
                    cluster,
                    store.clone(),
                    config.lease_store.clone().unwrap_or_else(|| store.clone()),
                )
            })
            .transpose()?;
        let writers = match &config.writer_store {
            Some(writer_store) => {
                EventWriters::with_engine_store(store.clone(), writer_store.clone(), render)
                    .on_own_thread()
            }
            None => EventWriters::new(store.clone(), render),
        }
        .with_limits(config.writer_limits);
        let writers = match &cluster {
            Some(cluster) => writers.with_cluster(cluster.clone()),
            None => writers,
        }
        .with_meter(waitroom.meter.clone());
        let trusted_proxies = forwarded::TrustedProxies::parse(&config.trusted_proxies)
            .map_err(|e| format!("trusted proxies: {e}"))?;
        let ledger = Arc::new(runtime::ledger::HoldLedger::new(
            config.limits.live_holds_per_account,
            config.limits.lapsed_holds_per_account,
        ));
        let writers = if ledger.is_on() {
            writers.with_ledger(ledger.clone())
        } else {
            writers
        };
        let webhooks = WebhookSender::new(workers_store.clone());
        let mail = config
            .mail
            .clone()
            .map(|mail| boxoffice_workers::mail::MailSender::new(workers_store.clone(), mail));
        let relay = OutboxRelay::new(
            workers_store.clone(),
            config.provider.clone(),
            config.ticket_signer.clone(),
        )
        .with_listener(Arc::new(slots))
        .with_webhooks_poke(webhooks.poke_handle());
        let relay = match &mail {
            Some(mail) => relay.with_mail(mail.poke_handle()),
            None => relay,
        };
        Ok(Self(Arc::new_cyclic(|shared| Shared {
            web,
            limits: limits::Limits::new(config.limits),
            ledger,
            trusted_proxies,
            relay: relay.with_settler(Arc::new(WriterSettler {
                shared: shared.clone(),
                store: workers_store.clone(),
            })),
            waitroom,
            reconciler: PaymentReconciler::new(workers_store.clone(), config.provider.clone())
                .with_settler(Arc::new(WriterSettler {
                    shared: shared.clone(),
                    store: workers_store.clone(),
                })),
            webhooks,
            mail,
            token_emails: Mutex::new(Some(token_emails)),
            cancellations: boxoffice_workers::cancellation::CancellationJob::new(
                workers_store.clone(),
                config.limits.cancellation_refunds_per_second,
            ),
            workers_store,
            provider: config.provider.clone(),
            ticket_signer: config.ticket_signer.clone(),
            writers,
            cluster,
            wallet: config.wallet.clone(),
            lookup: lookup::AnswerLookup::new(store.clone()),
            seatmaps: SeatMaps::new(store.clone()),
            store,
            verifier,
            in_flight: InFlight::default(),
            checkout_turns: turns::CheckoutTurns::default(),
            events: Arc::default(),
            event_loads: coalesce::Coalesced::new(
                "reading the event",
                Duration::from_millis(EVENT_LOAD_WAIT_MS),
            ),
            metrics: metrics_handle(),
            openapi_json: Arc::new(openapi().to_pretty_json().unwrap_or_default()),
            dev_auth: jwt_secret == auth::DEV_JWT_SECRET,
            seatmap_streams: std::sync::atomic::AtomicUsize::new(0),
        })))
    }
}

/// A key for one purpose derived from the account-token secret (SHA-256 of a label and the
/// secret), so one configured secret serves both without the two keys being equal.
fn derive_secret(secret: &str, label: &str) -> Vec<u8> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    hasher.update(label.as_bytes());
    hasher.update([0]);
    hasher.update(secret.as_bytes());
    hasher.finalize().to_vec()
}

async fn openapi_json(State(state): State<AppState>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        state.openapi_json.as_str().to_owned(),
    )
        .into_response()
}

async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

/// Counts and times every request by route template and status.
async fn track(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    // A 429 counts itself where it is rendered (`error.rs`), with the wait it asks for.
    if response.status() != axum::http::StatusCode::TOO_MANY_REQUESTS && route != "/metrics" {
        pressure::global().answered();
    }
    let status = response.status().as_u16().to_string();
    metrics::histogram!("boxoffice_http_request_seconds", "route" => route.clone(), "method" => method.clone())
        .record(started.elapsed().as_secs_f64());
    metrics::counter!("boxoffice_http_requests_total", "route" => route, "method" => method, "status" => status).increment(1);
    response
}

/// After a request that may have written seats (any POST or DELETE), the seat-map feeder
/// looks for new change rows at once instead of at its next poll.
async fn poke_seatmaps(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let writes = matches!(request.method(), &Method::POST | &Method::DELETE);
    let response = next.run(request).await;
    if writes {
        state.seatmaps.poke();
    }
    response
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a handler panicked");
    ApiError::internal().into_response()
}

/// The whole HTTP application.
pub fn app(state: AppState) -> Router {
    let (router, _) = api_router().split_for_parts();
    let router = router
        .route("/openapi.json", axum::routing::get(openapi_json))
        .merge(web::routes())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body::BODY_BYTES_MAX))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            runtime::cluster::forward_writes,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), poke_seatmaps))
        .layer(middleware::from_fn(track))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            policy::security_headers,
        ));
    // Outermost: preflights are answered, and every answer (errors too) carries the headers.
    let router = match state.web.cors_layer() {
        Some(cors) => router.layer(cors),
        None => router,
    };
    router.with_state(state)
}

/// The whole HTTP service: the status poll's hot path in front of [`app`]. A waiting fan's
/// poll whose tokens verified before is answered from memory before routing and middleware
/// (`routes::queue::status_from_memory`), with the answer the route would give; every other
/// request goes to the router.
#[derive(Clone)]
pub struct Front {
    router: Router,
    state: AppState,
    /// The connection's peer, given to every request as [`ClientAddr`].
    peer: Option<std::net::IpAddr>,
}

/// The address a request came from: the TCP peer, or, from a trusted proxy, the client its
/// `X-Forwarded-For` names ([`forwarded`]).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::IpAddr);

impl std::fmt::Debug for Front {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Front").finish_non_exhaustive()
    }
}

/// [`app`] behind the status poll's hot path.
pub fn front(state: AppState) -> Front {
    Front {
        router: app(state.clone()),
        state,
        peer: None,
    }
}

/// The route the hot path answers, as the router's metrics name it.
const STATUS_ROUTE: &str = "/v1/events/{eventId}/queue/status";

impl tower::Service<Request> for Front {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures_util::future::Either<
        std::future::Ready<Result<Response, std::convert::Infallible>>,
        <Router as tower::Service<Request>>::Future,
    >;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        if let Some(peer) = self.peer {
            let client = self.state.trusted_proxies.client(peer, request.headers());
            request.extensions_mut().insert(ClientAddr(client));
        }
        if request.method() == Method::GET && !self.state.web.needs_cors(request.headers()) {
            let started = Instant::now();
            if let Some(mut response) = routes::queue::status_from_memory(
                &self.state,
                request.uri().path(),
                request.headers(),
            ) {
                // What `track` records for the route, with handles made once.
                static HANDLES: std::sync::OnceLock<(metrics::Histogram, metrics::Counter)> =
                    std::sync::OnceLock::new();
                let (latency, answered) = HANDLES.get_or_init(|| {
                    (
                        metrics::histogram!("boxoffice_http_request_seconds", "route" => STATUS_ROUTE, "method" => "GET"),
                        metrics::counter!("boxoffice_http_requests_total", "route" => STATUS_ROUTE, "method" => "GET", "status" => "200"),
                    )
                });
                policy::add_to(response.headers_mut(), None);
                pressure::global().answered();
                latency.record(started.elapsed().as_secs_f64());
                answered.increment(1);
                return futures_util::future::Either::Left(std::future::ready(Ok(response)));
            }
        }
        futures_util::future::Either::Right(self.router.call(request))
    }
}

impl<'a, L> tower::Service<axum::serve::IncomingStream<'a, L>> for Front
where
    L: axum::serve::Listener<Addr = std::net::SocketAddr>,
{
    type Response = Front;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Front, std::convert::Infallible>>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: axum::serve::IncomingStream<'a, L>) -> Self::Future {
        let mut front = self.clone();
        front.peer = Some(stream.remote_addr().ip());
        std::future::ready(Ok(front))
    }
}

/// Runs the background workers (expiry sweeper, outbox relay, payment reconciler) beside
/// the app, serves on `listener` until the process ends.
pub async fn serve(
    store: Arc<dyn Store>,
    config: &ServerConfig,
    listener: tokio::net::TcpListener,
) -> std::io::Result<()> {
    let state = AppState::new(store.clone(), config).map_err(std::io::Error::other)?;
    // The rooms are known before the relay runs, so the first delivered `hold.expired` or
    // `order.confirmed` after a restart already returns its slot.
    if let Err(error) = state.waitroom.resume().await {
        tracing::warn!(%error, "waiting rooms not loaded yet; they load on first use");
    }
    spawn_workers(&state);
    let max_connections = match config.max_connections {
        0 => listener::default_max_connections(),
        n => n,
    };
    let listener = listener::Limited::new(listener, max_connections);
    tracing::info!(
        max_connections = listener.permits(),
        "accepting connections"
    );
    if let Some(cluster) = &state.cluster {
        // Registered before the first request, so a forward to this node finds it.
        cluster.register().await.map_err(std::io::Error::other)?;
        tokio::spawn(cluster.clone().run());
    }
    let cluster = state.cluster.clone();
    let (stopping, stop) = tokio::sync::oneshot::channel::<()>();
    let server = axum::serve(listener, front(state)).with_graceful_shutdown(async move {
        shutdown_signal().await;
        let _ = stopping.send(());
    });
    let mut server = std::pin::pin!(server.into_future());
    tokio::select! {
        served = &mut server => served?,
        _ = stop => {
            // The requests in flight finish (their groups commit under this node's lease);
            // streams that never end are cut after SHUTDOWN_DRAIN_S.
            let drained = std::time::Duration::from_secs(SHUTDOWN_DRAIN_S);
            if tokio::time::timeout(drained, &mut server).await.is_err() {
                tracing::info!("streams still open after the drain; closing them");
            }
        }
    }
    // A graceful stop hands the leases back, so another node takes each event at once.
    if let Some(cluster) = cluster {
        cluster.release_all().await;
    }
    Ok(())
}

/// How long a request waits for the read of its event that another request started, before
/// it is answered 503 with `Retry-After` (the read is one indexed row: this only bounds a
/// store that stopped answering).
pub const EVENT_LOAD_WAIT_MS: u64 = 5_000;

/// How long a graceful stop waits for the requests in flight before it hands the event
/// leases back and ends.
pub const SHUTDOWN_DRAIN_S: u64 = 5;

/// SIGTERM or Ctrl-C: stop taking connections, finish the requests in flight, then return.
async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down: finishing the requests in flight");
}

/// Starts the reconcilers of `state` (and the webhook sender) as background tasks.
pub fn spawn_workers(state: &AppState) {
    tokio::spawn(ExpirySweeper::new(state.workers_store.clone()).run());
    tokio::spawn(
        boxoffice_workers::exchanges::ExchangeSettler::new(state.workers_store.clone()).run(),
    );
    tokio::spawn(state.relay.clone().run());
    tokio::spawn(state.reconciler.clone().run());
    tokio::spawn(state.webhooks.clone().run());
    if let Some(mail) = &state.mail {
        tokio::spawn(mail.clone().run());
    }
    let token_emails = state
        .token_emails
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(token_emails) = token_emails {
        tokio::spawn(auth::record_token_emails(
            state.workers_store.clone(),
            token_emails,
        ));
    }
    tokio::spawn(state.cancellations.clone().run());
    tokio::spawn(
        state
            .waitroom
            .clone()
            .run(state.store.clone(), state.seatmaps.clone()),
    );
    tokio::spawn(metrics_upkeep(state.metrics.clone()));
    tokio::spawn(state.seatmaps.clone().run());
}

/// How often the metrics recorder folds recorded samples into its summaries.
pub const METRICS_UPKEEP_INTERVAL_S: u64 = 5;

/// Without upkeep the Prometheus recorder keeps every histogram sample until the next
/// scrape: memory would grow with traffic when nobody scrapes.
async fn metrics_upkeep(handle: PrometheusHandle) {
    let mut interval =
        tokio::time::interval(std::time::Duration::from_secs(METRICS_UPKEEP_INTERVAL_S));
    loop {
        interval.tick().await;
        handle.run_upkeep();
    }
}
