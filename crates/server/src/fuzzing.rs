//! Entry points of the fuzz targets (`fuzz/`, docs/FUZZING.md): the server's own reading and
//! checking of request bodies and seat-map headers, as the handlers do it before the store,
//! without a store, a runtime or a socket. Not an API: hidden from the docs, and nothing in
//! the server calls it.

use axum::http::{HeaderMap, HeaderValue};
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::{EventSpec, Section, Tier, WaitingRoomSettings};
use boxoffice_domain::idempotency::request_digest;
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_store::checkout::OrderView;
use boxoffice_store::{EventRecord, HeldSeat, event_record};
use boxoffice_tickets::TicketVerifier;

use crate::api::{CreateEventBody, CreateHoldBody, EventView};
use crate::body::JsonBody;
use crate::error::ApiError;
use crate::idempotency::{IDEMPOTENCY_KEY_HEADER, request_key};
use crate::routes;

/// Which request a body is read as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `POST /v1/admin/events`
    Event,
    /// `POST /v1/admin/trips`
    Trips,
    /// `POST /v1/events/{eventId}/holds`
    Hold,
    /// `POST /v1/holds/{holdId}/checkout`
    Checkout,
    /// `POST /v1/orders/{orderId}/exchanges`
    Exchange,
    /// `PUT /v1/admin/events/{eventId}/queue`
    QueueUpdate,
    /// `POST /v1/admin/checkin`
    CheckIn,
}

impl BodyKind {
    pub const ALL: [BodyKind; 7] = [
        BodyKind::Event,
        BodyKind::Trips,
        BodyKind::Hold,
        BodyKind::Checkout,
        BodyKind::Exchange,
        BodyKind::QueueUpdate,
        BodyKind::CheckIn,
    ];
}

/// What the handlers check bodies against: one event with two sections and a tier, and one
/// confirmed order of two of its seats.
#[derive(Debug)]
pub struct Fixture {
    pub event: EventRecord,
    pub order: OrderView,
    pub verifier: TicketVerifier,
}

/// The fixture's event id (its order's too).
pub const EVENT_ID: &str = "0193a4f2-7c1e-7b3a-9f0e-5d2c8b1a6e47";

impl Fixture {
    pub fn new(verifier: TicketVerifier) -> Self {
        let at = OffsetDateTime::from_unix_timestamp(1_790_000_000).expect("a valid time");
        let spec = EventSpec {
            name: "Fuzz night".into(),
            starts_at: at,
            on_sale_at: None,
            currency: "EUR".into(),
            hold_ttl_s: 300,
            payment_grace_s: 120,
            max_seats_per_hold: 6,
            max_tickets_per_account: 6,
            exchange_cutoff_s: 3600,
            transfer_cutoff_s: 0,
            waitlist_offer_ttl_s: 600,
            refund_policy: None,
            holder_policy: None,
            sale: Default::default(),
            chart: None,
            waiting_room: WaitingRoomSettings::default(),
            sections: vec![
                section("A", 10, 20, 4_500),
                section("BALCONY", 3, 12, 2_500),
            ],
            tiers: vec![Tier {
                tier_id: "GA".into(),
                name: "Standing".into(),
                capacity: 500,
                price_minor: 3_000,
            }],
        };
        let event = event_record(EVENT_ID, &spec, at);
        let order = OrderView {
            order_id: "0193a4f2-8d00-7000-8000-000000000001".into(),
            event_id: EVENT_ID.into(),
            hold_id: "0193a4f2-8d00-7000-8000-000000000002".into(),
            account_id: "fan_1".into(),
            status: OrderStatus::Confirmed,
            payment_status: PaymentStatus::Captured,
            next_action_url: None,
            seats: ["A-1-1", "A-1-2"]
                .into_iter()
                .map(|seat_id| HeldSeat {
                    seat_id: seat_id.into(),
                    price_minor: 4_500,
                })
                .collect(),
            tier_id: None,
            quantity: 2,
            total_minor: 9_000,
            currency: "EUR".into(),
            cancel_reason: None,
            payment_failure_code: None,
            tickets: Vec::new(),
            refunds: Vec::new(),
            created_at: at,
            updated_at: at,
        };
        Self {
            event,
            order,
            verifier,
        }
    }

    /// Reads `bytes` as the body of a `kind` request (with `Idempotency-Key:
    /// idempotency_key` when given and a valid header value) and checks it as its handler
    /// does before the store. A refusal must be a 4xx: the caller asserts it.
    pub fn check_body(
        &self,
        kind: BodyKind,
        bytes: &[u8],
        idempotency_key: Option<&[u8]>,
    ) -> Result<(), ApiError> {
        let body = JsonBody::from_bytes(bytes)?;
        let mut headers = HeaderMap::new();
        if let Some(value) = idempotency_key.and_then(|key| HeaderValue::from_bytes(key).ok()) {
            headers.insert(IDEMPOTENCY_KEY_HEADER, value);
        }
        let needs_key = !matches!(kind, BodyKind::QueueUpdate | BodyKind::CheckIn);
        if needs_key {
            request_key(&headers, &body)?;
            request_digest("POST", "/v1/fuzz", &body.0);
        }
        match kind {
            BodyKind::Event => {
                let spec = body.parse::<CreateEventBody>()?.into_spec();
                spec.validate()
                    .map_err(|e| ApiError::validation(&e.field, e.reason))?;
                let event = event_record(EVENT_ID, &spec, self.event.created_at);
                let view = EventView::new(&event, Some(&EventView::fresh_counts(&event)));
                serde_json::to_vec(&view).map_err(|_| ApiError::internal())?;
            }
            BodyKind::Trips => {
                routes::events::trip_specs(body.parse()?, None)?;
            }
            BodyKind::Hold => {
                routes::holds::hold_shape(&self.event, body.parse::<CreateHoldBody>()?)?;
            }
            BodyKind::Checkout => {
                routes::checkout::checkout_body(&body)?;
            }
            BodyKind::Exchange => {
                let request = body.parse()?;
                routes::exchanges::sides(&request, &self.order, &self.event)?;
            }
            BodyKind::QueueUpdate => {
                routes::queue::queue_update(&body)?;
            }
            BodyKind::CheckIn => {
                let request = body.parse::<routes::tickets::CheckInBody>()?;
                // The handler answers 400 INVALID_TICKET for any refusal; only a panic
                // matters here.
                let _ = self.verifier.verify(request.code.trim());
            }
        }
        Ok(())
    }
}

fn section(name: &str, rows: u32, seats_per_row: u32, price_minor: i64) -> Section {
    Section {
        name: name.into(),
        rows,
        seats_per_row,
        price_minor,
        row_lengths: Vec::new(),
    }
}

/// The seat-map stream's start as its handler reads it: `since` from the query and
/// `Last-Event-ID` from the headers (a header that is not a version resets the stream).
/// `Err` is the 422 of a `since` that is not a version.
pub fn stream_start(
    since: Option<&str>,
    last_event_id: Option<&[u8]>,
) -> Result<(Option<u64>, Option<Option<u64>>), ApiError> {
    let since = routes::seatmap::parse_version(since, "since")?;
    let mut headers = HeaderMap::new();
    if let Some(value) = last_event_id.and_then(|raw| HeaderValue::from_bytes(raw).ok()) {
        headers.insert("last-event-id", value);
    }
    Ok((since, routes::seatmap::last_event_id(&headers)))
}
