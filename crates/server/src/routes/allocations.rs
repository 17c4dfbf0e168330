//! Allocations and comps (issue 40): seats and tier units an operator keeps back from sale,
//! released at their `releaseAt` or by hand, and comp tickets issued from them.
//!
//! What an allocation keeps is one hold per seat and per unit, owned by the allocation's
//! system account (`boxoffice_domain::allocation`): the event's writer grants, releases and
//! lapses them like any hold, so fans are refused kept seats (`SEATS_UNAVAILABLE`), best
//! available skips them, the seat map shows them `HELD`, and the sweeper puts them back on
//! sale at `releaseAt` by the store's clock. The store keeps beside them what the holds cannot
//! say: the allocation as given, and its comps.
//!
//! Every POST is idempotent: its holds are asked under keys derived from the request's key,
//! and its answer is stored with what it recorded (`boxoffice_store::allocation`).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use boxoffice_domain::allocation::{
    self as rules, Allocation, KeptHold, KeptItem, Selection, SelectionError,
};
use boxoffice_domain::decide::HoldRequest;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse, request_digest};
use boxoffice_domain::ids::{AccountId, SeatRef, check_name_id};
use boxoffice_store::allocation::{Answer, CompRecord, KeptRow};
use boxoffice_store::checkout::{CheckoutBegun, CheckoutStart, OrderView, ProviderVerdict};
use boxoffice_store::{EventRecord, NewRecord, ReleaseOutcome};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::auth::Admin;
use crate::body::JsonBody;
use crate::error::{ApiError, ApiResult};
use crate::idempotency::{answer, request_key, stored_response};
use crate::sale_api::allocations::AllocationBody;

/// `POST /v1/admin/events/{eventId}/allocations` body: one allocation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddAllocationBody {
    #[schema(pattern = "^[A-Za-z0-9_]{1,32}$", example = "sponsor")]
    pub allocation_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Sponsor seats",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    /// At most 1,000 seats and units per allocation.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub seat_ids: Vec<String>,
    /// Units kept back by tier id.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, u32>)]
    pub tier_units: BTreeMap<String, u32>,
    /// When what is still kept goes on sale by itself (store clock); absent: only by hand.
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub release_at: Option<boxoffice_domain::OffsetDateTime>,
    /// Alternative to the `Idempotency-Key` header.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `POST .../allocations/{allocationId}/release` body: what to release; empty: all of it.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseAllocationBody {
    #[serde(default)]
    pub seat_ids: Vec<String>,
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, u32>)]
    pub tier_units: BTreeMap<String, u32>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `POST .../allocations/{allocationId}/comps` body: whom, and which kept seats or how many
/// kept units.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompBody {
    /// The account that owns the comp's tickets.
    #[schema(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
    pub account_id: String,
    /// Kept seats to give (or `quantity`): 1-100.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100, value_type = Option<Vec<crate::api::SeatId>>)]
    pub seat_ids: Option<Vec<String>>,
    /// Kept units to give, of `tierId` (needed when the allocation keeps units of several
    /// tiers).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: Option<u32>,
    #[serde(default)]
    pub tier_id: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// What an allocation still keeps.
#[derive(Debug, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeptView {
    pub seat_ids: Vec<String>,
    #[schema(value_type = BTreeMap<String, u32>)]
    pub tier_units: BTreeMap<String, u32>,
}

/// An allocation as given, with what it still keeps and how many comps it issued.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AllocationView {
    #[serde(flatten)]
    pub allocation: AllocationBody,
    pub kept: KeptView,
    pub comps: u32,
}

/// `GET /v1/admin/events/{eventId}/allocations`.
#[derive(Debug, Serialize, ToSchema)]
pub struct AllocationsView {
    pub allocations: Vec<AllocationView>,
}

/// A comp issued: its order (amount 0, confirmed) and tickets, owned by `accountId`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompView {
    pub order_id: String,
    pub allocation_id: String,
    pub account_id: String,
    pub status: String,
    pub total_minor: i64,
    pub seat_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub ticket_ids: Vec<String>,
}

/// The path of an event's allocations.
fn allocations_path(event_id: &str) -> String {
    format!("/v1/admin/events/{event_id}/allocations")
}

/// A stable id or key from parts (hex of their SHA-256), so a retry asks the same.
pub(crate) fn derived(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex_of(&hasher.finalize())
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A hold id derived from parts: a UUID's form, stable across retries.
pub(crate) fn derived_hold_id(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("\u{0}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

fn conflict(code: &'static str, detail: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, code, detail)
}

/// Checks an allocation against its event (the rules of `allocation::validate` for one).
fn check_allocation(allocation: &Allocation, event: &EventRecord) -> ApiResult<()> {
    check_name_id(&allocation.allocation_id, "allocation id")
        .map_err(|e| ApiError::validation("allocationId", e.0))?;
    let name_len = allocation.name.chars().count();
    if allocation.name.trim().is_empty()
        || name_len > rules::ALLOCATION_NAME_LEN_MAX
        || allocation.name.chars().any(char::is_control)
    {
        return Err(ApiError::validation(
            "name",
            format!(
                "must be 1-{} characters, no control characters",
                rules::ALLOCATION_NAME_LEN_MAX
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for seat_id in &allocation.seat_ids {
        let known = SeatRef::parse(seat_id).is_ok_and(|seat| event.has_seat(&seat));
        if !known {
            return Err(ApiError::validation(
                "seatIds",
                format!("{seat_id:?} is no seat of the event"),
            ));
        }
        if !seen.insert(seat_id) {
            return Err(ApiError::validation(
                "seatIds",
                format!("{seat_id:?} kept twice"),
            ));
        }
    }
    for (tier_id, n) in &allocation.tier_units {
        let Some(tier) = event.tiers.iter().find(|t| &t.tier_id == tier_id) else {
            return Err(ApiError::validation(
                "tierUnits",
                format!("{tier_id:?} is no tier of the event"),
            ));
        };
        if *n == 0 || *n > tier.capacity {
            return Err(ApiError::validation(
                "tierUnits",
                format!("{tier_id:?}: from 1 to the tier's capacity"),
            ));
        }
    }
    let items = rules::kept_items(allocation).len();
    if items == 0 {
        return Err(ApiError::validation(
            "seatIds",
            "keeps nothing: give seatIds or tierUnits",
        ));
    }
    if items > rules::ALLOCATION_ITEMS_MAX {
        return Err(ApiError::validation(
            "seatIds",
            format!(
                "at most {} seats and units per allocation",
                rules::ALLOCATION_ITEMS_MAX
            ),
        ));
    }
    Ok(())
}

/// What came of keeping an allocation's items.
struct Kept {
    granted: Vec<String>,
    /// Seats that could not be kept (sold or held), and tiers short of units.
    unavailable_seat_ids: Vec<String>,
    short_tiers: Vec<String>,
    /// The event was cancelled: nothing can be kept.
    cancelled: bool,
}

/// Keeps each item of `allocation` on the event's writer, one hold each, under keys derived
/// from `key_base` (a retry asks the same holds again and is answered as their replay).
async fn keep(
    state: &AppState,
    event: &Arc<EventRecord>,
    allocation: &Allocation,
    key_base: &str,
) -> ApiResult<Kept> {
    let account_id = rules::account_for(&allocation.allocation_id);
    let until = rules::kept_until(allocation.release_at, event.starts_at);
    let items = rules::kept_items(allocation);
    let requests: Vec<(KeptItem, HoldRequest)> = items
        .into_iter()
        .enumerate()
        .map(|(n, item)| {
            let key = format!("{key_base}.{n}");
            let request = HoldRequest {
                account_id: account_id.clone(),
                idempotency_key: key.clone(),
                request_digest: derived(&[&key, &format!("{item:?}"), &until.to_string()]),
                new_hold_id: derived_hold_id(&[&event.event_id, &account_id, &key]),
                shape: rules::keep_shape(&item, until),
                phase_id: None,
                ticket_types: Default::default(),
                accessible: false,
            };
            (item, request)
        })
        .collect();
    let asked = requests.iter().map(|(item, request)| {
        let hold_id = request.new_hold_id.clone();
        let item = item.clone();
        let submitted = state.writers.hold(event.clone(), request.clone());
        async move { (item, hold_id, submitted.await) }
    });
    let mut kept = Kept {
        granted: Vec::new(),
        unavailable_seat_ids: Vec::new(),
        short_tiers: Vec::new(),
        cancelled: false,
    };
    for (item, hold_id, submitted) in futures_util::future::join_all(asked).await {
        let granted = match submitted? {
            Idempotent::Fresh(stored) | Idempotent::Replayed(stored) => {
                let code = serde_json::from_slice::<serde_json::Value>(&stored.body)
                    .ok()
                    .and_then(|body| body["code"].as_str().map(str::to_owned));
                kept.cancelled |= code.as_deref() == Some("EVENT_CANCELLED");
                stored.status == 201
            }
            Idempotent::KeyReusedWithOtherRequest => false,
        };
        if granted {
            kept.granted.push(hold_id);
            continue;
        }
        match item {
            KeptItem::Seat(seat_id) => kept.unavailable_seat_ids.push(seat_id),
            KeptItem::Unit(tier_id) => {
                if !kept.short_tiers.contains(&tier_id) {
                    kept.short_tiers.push(tier_id);
                }
            }
        }
    }
    Ok(kept)
}

/// Releases the allocation's holds `hold_ids` on the event's writer; the number released now.
async fn release_holds(
    state: &AppState,
    event: &Arc<EventRecord>,
    allocation_id: &str,
    hold_ids: &[String],
) -> ApiResult<u32> {
    let account_id = rules::account_for(allocation_id);
    let asked = hold_ids
        .iter()
        .map(|hold_id| state.writers.release(event.clone(), &account_id, hold_id));
    let mut released = 0;
    for outcome in futures_util::future::join_all(asked).await {
        if let ReleaseOutcome::Released(_) = outcome? {
            released += 1;
        }
    }
    Ok(released)
}

/// Keeps what the allocations given at an event's creation keep (`POST /v1/admin/events`
/// calls it with the creation's answer, on a replay too): records them and asks their holds,
/// under keys derived from the event, so a retry asks the same. A seat that cannot be kept
/// (the event was on sale and it sold meanwhile) is left to the sale.
pub async fn keep_created(state: &AppState, created: &Idempotent) -> ApiResult<()> {
    let stored = match created {
        Idempotent::Fresh(stored) | Idempotent::Replayed(stored) => stored,
        Idempotent::KeyReusedWithOtherRequest => return Ok(()),
    };
    if stored.status != 201 {
        return Ok(());
    }
    let body: serde_json::Value = serde_json::from_slice(&stored.body).unwrap_or_default();
    let Some(event_id) = body["eventId"].as_str() else {
        return Ok(());
    };
    let event = state.event(event_id).await?;
    if event.sale.allocations.is_empty() {
        return Ok(());
    }
    state
        .store
        .add_allocations(&event.event_id, &event.sale.allocations, None)
        .await?;
    for allocation in &event.sale.allocations {
        let base = format!("created.{}", &derived(&[&event.event_id])[..16]);
        let kept = keep(state, &event, allocation, &base).await?;
        if !kept.unavailable_seat_ids.is_empty() || !kept.short_tiers.is_empty() {
            tracing::warn!(
                event_id = %event.event_id,
                allocation_id = %allocation.allocation_id,
                seats = ?kept.unavailable_seat_ids,
                tiers = ?kept.short_tiers,
                "an allocation given at creation could not keep everything"
            );
        }
    }
    Ok(())
}

/// The allocations of an event with what each still keeps.
async fn views(state: &AppState, event_id: &str) -> ApiResult<Vec<AllocationView>> {
    let allocations = state.store.allocations(event_id).await?;
    let kept = state.store.kept_holds(event_id).await?;
    let comps = state.store.comps(event_id).await?;
    Ok(allocations
        .iter()
        .map(|allocation| view(allocation, &kept, &comps))
        .collect())
}

fn view(allocation: &Allocation, kept: &[KeptRow], comps: &[CompRecord]) -> AllocationView {
    let mut kept_view = KeptView::default();
    for row in kept
        .iter()
        .filter(|row| row.allocation_id == allocation.allocation_id)
    {
        if let Some(seat_id) = &row.seat_id {
            kept_view.seat_ids.push(seat_id.clone());
        }
        if let Some(tier_id) = &row.tier_id {
            *kept_view.tier_units.entry(tier_id.clone()).or_default() += row.quantity;
        }
    }
    kept_view.seat_ids.sort();
    AllocationView {
        allocation: AllocationBody::from(allocation),
        kept: kept_view,
        comps: u32::try_from(
            comps
                .iter()
                .filter(|c| c.allocation_id == allocation.allocation_id)
                .count(),
        )
        .unwrap_or(u32::MAX),
    }
}

/// The allocation's kept holds as the domain names them.
fn kept_holds(kept: &[KeptRow], allocation_id: &str) -> Vec<KeptHold> {
    kept.iter()
        .filter(|row| row.allocation_id == allocation_id)
        .filter_map(|row| {
            let item = match (&row.seat_id, &row.tier_id) {
                (Some(seat_id), _) => KeptItem::Seat(seat_id.clone()),
                (None, Some(tier_id)) => KeptItem::Unit(tier_id.clone()),
                (None, None) => return None,
            };
            Some(KeptHold {
                hold_id: row.hold_id.clone(),
                item,
            })
        })
        .collect()
}

pub(crate) fn json_response(status: u16, body: &impl Serialize) -> StoredResponse {
    StoredResponse {
        status,
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

/// A refusal as a stored answer (problem+json), so a retry of the key gets it again.
fn problem_response(error: &ApiError) -> StoredResponse {
    StoredResponse {
        status: error.status.as_u16(),
        body: error.body(),
    }
}

pub(crate) fn record(scope: &IdempotencyScope, digest: &str, response: &StoredResponse) -> Answer {
    Answer {
        endpoint: scope.endpoint.clone(),
        record: NewRecord {
            account_id: scope.account_id.clone(),
            key: scope.key.clone(),
            request_digest: digest.to_owned(),
            response: response.clone(),
        },
    }
}

/// The stored answer of this key, if it has one (a replay, or the key reused: 422).
pub(crate) async fn replayed(
    state: &AppState,
    scope: &IdempotencyScope,
    digest: &str,
) -> ApiResult<Option<Response>> {
    Ok(state.lookup.stored_answer(scope, digest).await?.map(answer))
}

/// The event, for an operator.
pub(crate) async fn event_of(state: &AppState, event_id: &str) -> ApiResult<Arc<EventRecord>> {
    if event_id.is_empty() || event_id.len() > 128 {
        return Err(ApiError::not_found("event"));
    }
    state.event(event_id).await
}

/// Lists an event's allocations with what each still keeps (its live holds, by the store's
/// clock) and how many comps it issued.
#[utoipa::path(
    get, path = "/v1/admin/events/{eventId}/allocations", tag = "allocations",
    params(("eventId" = String, Path)),
    responses(
        (status = 200, description = "The allocations, oldest first", body = AllocationsView),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn list_allocations(
    State(state): State<AppState>,
    Admin(_admin): Admin,
    Path(event_id): Path<String>,
) -> ApiResult<axum::Json<AllocationsView>> {
    let event = event_of(&state, &event_id).await?;
    Ok(axum::Json(AllocationsView {
        allocations: views(&state, &event.event_id).await?,
    }))
}

/// Keeps seats and tier units back under a name, all or nothing: each is held for the
/// allocation until its `releaseAt` (or until released by hand), whatever the sale's phase.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/allocations", tag = "allocations",
    params(
        ("eventId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = AddAllocationBody,
    responses(
        (status = 201, description = "Kept", body = AllocationView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event", body = Problem),
        (status = 409, description = "ALLOCATION_EXISTS (the id is taken), SEATS_UNAVAILABLE (`unavailableSeatIds` are held or sold; nothing was kept), SOLD_OUT (`tierIds` have fewer units left), EVENT_CANCELLED or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 413, description = "Body over 64 KiB", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The event's writer has too much queued, or the store is busy", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn add_allocation(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(event_id): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<AddAllocationBody>()?;
    let event = event_of(&state, &event_id).await?;
    let allocation = Allocation {
        allocation_id: request.allocation_id,
        name: request.name,
        seat_ids: request.seat_ids,
        tier_units: request.tier_units,
        release_at: request.release_at,
    };
    check_allocation(&allocation, &event)?;
    let path = allocations_path(&event.event_id);
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    if let Some(replay) = replayed(&state, &scope, &digest).await? {
        return Ok(replay);
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    let now = state.store.now().await?;
    if allocation.release_at.is_some_and(|at| at <= now) {
        return Err(ApiError::validation("releaseAt", "already passed"));
    }
    let existing = state.store.allocations(&event.event_id).await?;
    if existing.len() >= rules::ALLOCATIONS_PER_EVENT_MAX {
        return Err(ApiError::validation(
            "allocationId",
            format!(
                "an event has at most {} allocations",
                rules::ALLOCATIONS_PER_EVENT_MAX
            ),
        ));
    }
    if existing
        .iter()
        .any(|a| a.allocation_id == allocation.allocation_id)
    {
        return Err(conflict(
            "ALLOCATION_EXISTS",
            format!("the event has an allocation {:?}", allocation.allocation_id),
        ));
    }
    let base = format!(
        "add.{}",
        &derived(&[&scope.account_id, &scope.key, &digest])[..24]
    );
    let kept = keep(&state, &event, &allocation, &base).await?;
    let refusal = if kept.cancelled {
        Some(conflict("EVENT_CANCELLED", "the event was cancelled"))
    } else if !kept.unavailable_seat_ids.is_empty() {
        let mut error = conflict(
            "SEATS_UNAVAILABLE",
            "some seats are held or sold: nothing was kept",
        );
        error.extra.insert(
            "unavailableSeatIds".into(),
            serde_json::json!(kept.unavailable_seat_ids),
        );
        Some(error)
    } else if !kept.short_tiers.is_empty() {
        let mut error = conflict("SOLD_OUT", "a tier has fewer units left: nothing was kept");
        error
            .extra
            .insert("tierIds".into(), serde_json::json!(kept.short_tiers));
        Some(error)
    } else {
        None
    };
    if let Some(error) = refusal {
        // All or nothing: what was kept goes back on sale; the refusal is the key's answer.
        release_holds(&state, &event, &allocation.allocation_id, &kept.granted).await?;
        let response = problem_response(&error);
        state
            .store
            .record_answer(&event.event_id, &record(&scope, &digest, &response))
            .await?;
        return Ok(stored_response(&response, false));
    }
    let kept_rows = state.store.kept_holds(&event.event_id).await?;
    let response = json_response(201, &view(&allocation, &kept_rows, &[]));
    let added = state
        .store
        .add_allocations(
            &event.event_id,
            std::slice::from_ref(&allocation),
            Some(&record(&scope, &digest, &response)),
        )
        .await?;
    if added.is_empty() {
        // Another request added this id meanwhile: this one's holds go back.
        release_holds(&state, &event, &allocation.allocation_id, &kept.granted).await?;
        return Err(conflict(
            "ALLOCATION_EXISTS",
            format!("the event has an allocation {:?}", allocation.allocation_id),
        ));
    }
    metrics::counter!("boxoffice_allocation_items_kept_total").increment(kept.granted.len() as u64);
    Ok(stored_response(&response, false))
}

/// Puts what an allocation keeps back on sale now: the seats and units named, or everything
/// still kept. Each is released by the event's writer, as a fan's hold is; one already
/// released, lapsed or given as a comp is not kept any more, and naming it is a 409.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/allocations/{allocationId}/release", tag = "allocations",
    params(
        ("eventId" = String, Path),
        ("allocationId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = ReleaseAllocationBody,
    responses(
        (status = 200, description = "Released; the allocation as it is now", body = AllocationView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event or allocation", body = Problem),
        (status = 409, description = "NOT_KEPT: a seat or units named are not kept by the allocation (any more); nothing was released. IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The event's writer has too much queued, or the store is busy", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn release_allocation(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path((event_id, allocation_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<ReleaseAllocationBody>()?;
    if request.seat_ids.len() > rules::ALLOCATION_ITEMS_MAX {
        return Err(ApiError::validation(
            "seatIds",
            format!("at most {} seats", rules::ALLOCATION_ITEMS_MAX),
        ));
    }
    let event = event_of(&state, &event_id).await?;
    let allocation = allocation_of(&state, &event, &allocation_id).await?;
    let path = format!(
        "{}/{}/release",
        allocations_path(&event.event_id),
        allocation.allocation_id
    );
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    if let Some(replay) = replayed(&state, &scope, &digest).await? {
        return Ok(replay);
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    let kept = state.store.kept_holds(&event.event_id).await?;
    let holds = kept_holds(&kept, &allocation.allocation_id);
    let selection = Selection {
        seat_ids: request.seat_ids,
        tier_units: request.tier_units,
    };
    let chosen = rules::select(&holds, &selection).map_err(not_kept)?;
    let hold_ids: Vec<String> = chosen.into_iter().map(|k| k.hold_id).collect();
    let released = release_holds(&state, &event, &allocation.allocation_id, &hold_ids).await?;
    metrics::counter!("boxoffice_allocation_items_released_total").increment(u64::from(released));
    let kept = state.store.kept_holds(&event.event_id).await?;
    let comps = state.store.comps(&event.event_id).await?;
    let response = json_response(200, &view(&allocation, &kept, &comps));
    state
        .store
        .record_answer(&event.event_id, &record(&scope, &digest, &response))
        .await?;
    Ok(stored_response(&response, false))
}

fn not_kept(error: SelectionError) -> ApiError {
    match error {
        SelectionError::SeatsNotKept(seat_ids) => {
            let mut refused = conflict("NOT_KEPT", "the allocation does not keep these seats");
            refused
                .extra
                .insert("seatIds".into(), serde_json::json!(seat_ids));
            refused
        }
        SelectionError::UnitsNotKept { tier_id, kept } => conflict(
            "NOT_KEPT",
            format!("the allocation keeps {kept} units of {tier_id:?}"),
        ),
        SelectionError::Duplicate(seat_id) => {
            ApiError::validation("seatIds", format!("{seat_id:?} named twice"))
        }
    }
}

/// The event's allocation `allocation_id`, or 404.
async fn allocation_of(
    state: &AppState,
    event: &EventRecord,
    allocation_id: &str,
) -> ApiResult<Allocation> {
    if check_name_id(allocation_id, "allocation id").is_err() {
        return Err(ApiError::not_found("allocation"));
    }
    state
        .store
        .allocations(&event.event_id)
        .await?
        .into_iter()
        .find(|a| a.allocation_id == allocation_id)
        .ok_or_else(|| ApiError::not_found("allocation"))
}

/// Issues comp tickets from an allocation to an account: the kept seats named (or `quantity`
/// kept units) leave the allocation and are the account's at price 0 in one command of the
/// event's writer, then its order (amount 0, payment `comp`) is confirmed and its tickets
/// issued. The account's purchase limit applies; the report counts the tickets as comps.
#[utoipa::path(
    post, path = "/v1/admin/events/{eventId}/allocations/{allocationId}/comps", tag = "allocations",
    params(
        ("eventId" = String, Path),
        ("allocationId" = String, Path),
        ("Idempotency-Key" = String, Header, description = "1-255 characters; or body idempotencyKey"),
    ),
    request_body = CompBody,
    responses(
        (status = 201, description = "Issued", body = CompView),
        (status = 400, description = "Idempotency key missing", body = Problem),
        (status = 401, description = "No valid token", body = Problem),
        (status = 403, description = "Not an admin token", body = Problem),
        (status = 404, description = "No such event or allocation", body = Problem),
        (status = 409, description = "NOT_KEPT (a seat or units named are not kept by the allocation), PURCHASE_LIMIT (the account would own more than the event allows), EVENT_CANCELLED, or IDEMPOTENCY_IN_PROGRESS", body = Problem),
        (status = 422, description = "VALIDATION or IDEMPOTENCY_KEY_REUSED", body = Problem),
        (status = 429, description = "The event's writer has too much queued, or the store is busy", body = Problem),
        (status = 503, description = "Store unavailable", body = Problem),
    ),
    security(("bearer" = []))
)]
pub async fn issue_comp(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path((event_id, allocation_id)): Path<(String, String)>,
    headers: HeaderMap,
    body: JsonBody,
) -> ApiResult<Response> {
    let key = request_key(&headers, &body)?;
    let request = body.parse::<CompBody>()?;
    let to = AccountId::parse(&request.account_id)
        .map_err(|e| ApiError::validation("accountId", e.0))?;
    let selection = comp_selection(&request)?;
    let event = event_of(&state, &event_id).await?;
    let allocation = allocation_of(&state, &event, &allocation_id).await?;
    let path = format!(
        "{}/{}/comps",
        allocations_path(&event.event_id),
        allocation.allocation_id
    );
    let scope = IdempotencyScope {
        account_id: admin.account_id.to_string(),
        endpoint: format!("POST {path}"),
        key,
    };
    let digest = request_digest("POST", &path, &body.0);
    if let Some(replay) = replayed(&state, &scope, &digest).await? {
        return Ok(replay);
    }
    let _in_flight = state.in_flight.claim(&scope)?;
    let kept = state.store.kept_holds(&event.event_id).await?;
    let holds = kept_holds(&kept, &allocation.allocation_id);
    let selection = match selection {
        CompSelection::Seats(seat_ids) => Selection {
            seat_ids,
            ..Selection::default()
        },
        CompSelection::Units(tier_id, quantity) => {
            let tier_id = match tier_id {
                Some(tier_id) => tier_id,
                None => only_tier(&holds)?,
            };
            Selection {
                tier_units: BTreeMap::from([(tier_id, quantity)]),
                ..Selection::default()
            }
        }
    };
    let chosen = rules::select(&holds, &selection).map_err(not_kept)?;
    let Some(shape) = rules::comp_shape(&allocation.allocation_id, &chosen) else {
        return Err(ApiError::validation(
            "seatIds",
            "a comp is seats, or units of one tier",
        ));
    };
    let comp_key = format!(
        "comp.{}",
        &derived(&[&scope.account_id, &scope.key, &digest])[..32]
    );
    let hold_request = HoldRequest {
        account_id: to.to_string(),
        idempotency_key: comp_key.clone(),
        request_digest: derived(&[&comp_key, &format!("{shape:?}")]),
        new_hold_id: derived_hold_id(&[&event.event_id, to.as_str(), &comp_key]),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    };
    let hold_id = hold_request.new_hold_id.clone();
    let held = state.writers.hold(event.clone(), hold_request).await?;
    match &held {
        Idempotent::Fresh(stored) | Idempotent::Replayed(stored) if stored.status == 201 => {}
        Idempotent::Fresh(stored) | Idempotent::Replayed(stored) => {
            // Refused (not kept any more, the purchase limit, the event cancelled): the
            // writer's answer, which names why.
            return Ok(stored_response(stored, false));
        }
        Idempotent::KeyReusedWithOtherRequest => {
            return Ok(answer(Idempotent::KeyReusedWithOtherRequest));
        }
    }
    let order = confirm_free(
        &state,
        &event,
        to.as_str(),
        &hold_id,
        &IdempotencyScope {
            account_id: to.to_string(),
            endpoint: format!("POST {path}"),
            key: comp_key,
        },
        "comp",
    )
    .await?;
    let ticket_ids = issue_now(&state, &order.order_id).await?;
    let view = CompView {
        order_id: order.order_id.clone(),
        allocation_id: allocation.allocation_id.clone(),
        account_id: to.to_string(),
        status: order.status.as_str().to_owned(),
        total_minor: order.total_minor,
        seat_ids: order.seats.iter().map(|s| s.seat_id.clone()).collect(),
        tier_id: order.tier_id.clone(),
        quantity: order.quantity,
        ticket_ids,
    };
    let response = json_response(201, &view);
    state
        .store
        .record_comp(
            &CompRecord {
                event_id: event.event_id.clone(),
                order_id: order.order_id.clone(),
                allocation_id: allocation.allocation_id.clone(),
                account_id: to.to_string(),
                issued_by: admin.account_id.to_string(),
            },
            Some(&record(&scope, &digest, &response)),
        )
        .await?;
    metrics::counter!("boxoffice_comps_issued_total").increment(u64::from(order.quantity));
    Ok(stored_response(&response, false))
}

enum CompSelection {
    Seats(Vec<String>),
    Units(Option<String>, u32),
}

fn comp_selection(request: &CompBody) -> ApiResult<CompSelection> {
    match (&request.seat_ids, request.quantity) {
        (Some(seat_ids), None) if request.tier_id.is_none() => {
            if seat_ids.is_empty() || seat_ids.len() > rules::COMP_ITEMS_MAX {
                return Err(ApiError::validation(
                    "seatIds",
                    format!("1-{} seats", rules::COMP_ITEMS_MAX),
                ));
            }
            Ok(CompSelection::Seats(seat_ids.clone()))
        }
        (None, Some(quantity)) => {
            if quantity == 0 || quantity as usize > rules::COMP_ITEMS_MAX {
                return Err(ApiError::validation(
                    "quantity",
                    format!("1-{}", rules::COMP_ITEMS_MAX),
                ));
            }
            Ok(CompSelection::Units(request.tier_id.clone(), quantity))
        }
        _ => Err(ApiError::validation(
            "seatIds",
            "give seatIds, or quantity (with tierId when the allocation keeps several tiers)",
        )),
    }
}

/// The one tier whose units the allocation keeps (a comp of `quantity` without `tierId`).
fn only_tier(holds: &[KeptHold]) -> ApiResult<String> {
    let mut tiers: Vec<&String> = holds
        .iter()
        .filter_map(|k| match &k.item {
            KeptItem::Unit(tier_id) => Some(tier_id),
            KeptItem::Seat(_) => None,
        })
        .collect();
    tiers.sort();
    tiers.dedup();
    match tiers.as_slice() {
        [tier_id] => Ok((*tier_id).clone()),
        [] => Err(conflict("NOT_KEPT", "the allocation keeps no units")),
        _ => Err(ApiError::validation(
            "tierId",
            "the allocation keeps units of several tiers: name one",
        )),
    }
}

/// Confirms a hold without asking a payment provider: its checkout starts on the event's
/// writer with `provider` (`comp`, `cash`) as the payment's, and the operator's word is the
/// verdict (captured). The order as confirmed.
pub(crate) async fn confirm_free(
    state: &AppState,
    event: &Arc<EventRecord>,
    account_id: &str,
    hold_id: &str,
    scope: &IdempotencyScope,
    provider: &str,
) -> ApiResult<OrderView> {
    let (order, operation) = start_checkout(
        state,
        event,
        account_id,
        hold_id,
        scope,
        (provider, provider),
    )
    .await?;
    let verdict = ProviderVerdict::Captured {
        provider_ref: format!("{provider}_{}", order.order_id),
    };
    settled_order(state, event, order, &operation, &verdict, scope).await
}

/// Starts the checkout of `hold_id` (the account's, held) on the event's writer.
pub(crate) async fn start_checkout(
    state: &AppState,
    event: &Arc<EventRecord>,
    account_id: &str,
    hold_id: &str,
    scope: &IdempotencyScope,
    (provider, payment_method): (&str, &str),
) -> ApiResult<(OrderView, boxoffice_store::checkout::PaymentOperation)> {
    let hold = state
        .store
        .get_hold(hold_id)
        .await?
        .filter(|hold| hold.account_id == account_id)
        .ok_or_else(|| ApiError::not_found("hold"))?;
    let start = CheckoutStart {
        scope: scope.clone(),
        request_digest: derived(&[&scope.key, hold_id]),
        hold_id: hold_id.to_owned(),
        order_id: uuid::Uuid::now_v7().to_string(),
        operation_id: uuid::Uuid::now_v7().to_string(),
        provider: provider.to_owned(),
        payment_method: payment_method.to_owned(),
    };
    let begun = state
        .writers
        .checkout(
            event.clone(),
            start,
            hold,
            &crate::routes::checkout::render_checkout,
        )
        .await?;
    match begun {
        CheckoutBegun::Started { order, operation } => Ok((*order, *operation)),
        CheckoutBegun::HoldExpired => Err(conflict("HOLD_EXPIRED", "the hold expired")),
        CheckoutBegun::HoldInCheckout | CheckoutBegun::Replayed(_) => Err(conflict(
            "IDEMPOTENCY_IN_PROGRESS",
            "this request is being completed; retry it",
        )),
        CheckoutBegun::HoldNotFound | CheckoutBegun::KeyReusedWithOtherRequest => {
            Err(ApiError::not_found("hold"))
        }
    }
}

/// Applies `verdict` to the order as a checkout's answer does; the order after it.
pub(crate) async fn settled_order(
    state: &AppState,
    event: &Arc<EventRecord>,
    order: OrderView,
    operation: &boxoffice_store::checkout::PaymentOperation,
    verdict: &ProviderVerdict,
    scope: &IdempotencyScope,
) -> ApiResult<OrderView> {
    let settled = crate::routes::checkout::settle(
        state,
        Some(event.clone()),
        operation,
        verdict,
        Some(&order),
        Some(scope),
        None,
    )
    .await?;
    state.relay.poke();
    Ok(match settled {
        Some(settled) => settled.order,
        None => order,
    })
}

/// Issues the confirmed order's tickets now (the relay's `tickets.issue` finds them issued);
/// their ids.
pub(crate) async fn issue_now(state: &AppState, order_id: &str) -> ApiResult<Vec<String>> {
    let signer = state.ticket_signer.clone();
    let now_s = time::OffsetDateTime::now_utc().unix_timestamp();
    let sign = move |draft: &boxoffice_store::checkout::TicketDraft| {
        boxoffice_workers::relay::sign_draft(&signer, draft, now_s)
    };
    state.store.issue_tickets(order_id, &sign).await?;
    let order = state
        .store
        .get_order(order_id)
        .await?
        .ok_or_else(|| ApiError::not_found("order"))?;
    Ok(order.tickets.iter().map(|t| t.ticket_id.clone()).collect())
}
