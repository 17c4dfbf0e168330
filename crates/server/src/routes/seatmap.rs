//! The seat map: snapshot (ETag = version, 304, gzip), changes since a version, and a
//! Server-Sent Events stream of change batches. Served from the in-memory read model
//! ([`crate::runtime::seatmap`]); no store round trip per request.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use utoipa::ToSchema;

use crate::AppState;
use crate::api::Problem;
use crate::error::{ApiError, ApiResult};
use crate::runtime::seatmap::{Frame, LiveMap, SeatMaps, Since};

/// Most open seat-map streams per process; beyond it a stream is refused with 503.
pub const STREAMS_MAX: usize = 20_000;
/// Comment line sent on an idle stream so proxies keep it open.
pub const STREAM_KEEP_ALIVE_S: u64 = 15;

/// One seat as the map shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MapSeatView {
    pub seat_id: String,
    /// `AVAILABLE`, `HELD` or `SOLD`; a hold past its deadline shows `AVAILABLE`.
    #[schema(value_type = boxoffice_domain::hold::SeatStatus)]
    pub status: String,
    /// When the hold runs out (held seats only): clients may show the seat available after it.
    pub hold_expires_at: Option<String>,
}

/// Available units of a tier.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MapTierView {
    pub tier_id: String,
    pub available: i64,
}

/// `GET /v1/events/{eventId}/seatmap`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeatMapView {
    pub event_id: String,
    pub version: u64,
    /// Every seat, in layout order (sections as created, rows and numbers from 1).
    pub seats: Vec<MapSeatView>,
    pub tiers: Vec<MapTierView>,
    /// What is left per section, in the event's section order.
    pub sections: Vec<MapSectionView>,
}

/// What is left of a section on the map.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MapSectionView {
    pub name: String,
    /// The most seats side by side in one row free at the snapshot (a hold past its
    /// deadline counts as free): the largest party that can still sit together.
    pub largest_block: u32,
}

/// One seat change.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MapSeatChange {
    pub seat_id: String,
    #[schema(value_type = boxoffice_domain::hold::SeatStatus)]
    pub status: String,
    pub version: u64,
    pub hold_expires_at: Option<String>,
}

/// One tier change.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MapTierChange {
    pub tier_id: String,
    pub available: i64,
    pub version: u64,
}

/// `GET /v1/events/{eventId}/seatmap/changes` and each stream message.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeatMapChanges {
    pub event_id: String,
    pub from_version: u64,
    pub to_version: u64,
    /// In version order; a seat may appear more than once (its last entry wins).
    pub changes: Vec<MapSeatChange>,
    pub tiers: Vec<MapTierChange>,
}

async fn live_map(state: &AppState, event_id: &str) -> ApiResult<Arc<LiveMap>> {
    let event = state.event(event_id).await?;
    Ok(state.seatmaps.get(&event).await?)
}

/// Whether `If-None-Match` lists `etag` (or `*`).
fn matches_etag(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| tag.trim().trim_start_matches("W/"))
        .any(|tag| tag == etag || tag == "*")
}

/// The seat map snapshot.
#[utoipa::path(
    get, path = "/v1/events/{eventId}/seatmap", tag = "seatmap",
    params(
        ("eventId" = String, Path),
        ("If-None-Match" = Option<String>, Header, description = "an ETag from an earlier answer: 304 if the map is still at that version"),
    ),
    responses(
        (status = 200, description = "Every seat's status at `version` (ETag); gzip when asked", body = SeatMapView),
        (status = 304, description = "Still at the version of If-None-Match"),
        (status = 404, description = "No such event", body = Problem),
        (status = 429, description = "RATE_LIMITED: the store is busy; retry after Retry-After", body = Problem),
        (status = 503, description = "Store unavailable while loading the map", body = Problem),
    )
)]
pub async fn get_seatmap(
    State(state): State<AppState>,
    Path(event_id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let map = live_map(&state, &event_id).await?;
    let rendered = map.snapshot().await;
    let etag = format!("\"{}\"", rendered.version);
    let etag_value = HeaderValue::from_str(&etag).map_err(|_| ApiError::internal())?;
    let no_cache = HeaderValue::from_static("no-cache");
    if matches_etag(&headers, &etag) {
        return Ok((
            StatusCode::NOT_MODIFIED,
            [
                (header::ETAG, etag_value),
                (header::CACHE_CONTROL, no_cache),
            ],
        )
            .into_response());
    }
    let json = HeaderValue::from_static("application/json");
    let vary = HeaderValue::from_static("accept-encoding");
    if crate::web::accepts_gzip(&headers) {
        let gzip = HeaderValue::from_static("gzip");
        return Ok((
            [
                (header::CONTENT_TYPE, json),
                (header::CONTENT_ENCODING, gzip),
                (header::ETAG, etag_value),
                (header::CACHE_CONTROL, no_cache),
                (header::VARY, vary),
            ],
            rendered.gzip.clone(),
        )
            .into_response());
    }
    Ok((
        [
            (header::CONTENT_TYPE, json),
            (header::ETAG, etag_value),
            (header::CACHE_CONTROL, no_cache),
            (header::VARY, vary),
        ],
        rendered.json.clone(),
    )
        .into_response())
}

/// `since` as a version, or a 422 naming the field.
pub(crate) fn parse_version(raw: Option<&str>, field: &str) -> ApiResult<Option<u64>> {
    match raw {
        None => Ok(None),
        // Versions are PostgreSQL bigints: 0 to i64::MAX, as the document says.
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|version| i64::try_from(*version).is_ok())
            .map(Some)
            .ok_or_else(|| ApiError::validation(field, "must be an integer version, 0 to 2^63-1")),
    }
}

/// The `Last-Event-ID` header: `None` when absent, `Some(None)` when it is not a version of
/// ours (the stream then resets).
pub(crate) fn last_event_id(headers: &HeaderMap) -> Option<Option<u64>> {
    headers.get("last-event-id").map(|value| {
        value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
    })
}

fn too_old(detail: String) -> ApiError {
    ApiError::new(StatusCode::GONE, "SNAPSHOT_TOO_OLD", detail)
}

/// The changes after a version.
#[utoipa::path(
    get, path = "/v1/events/{eventId}/seatmap/changes", tag = "seatmap",
    params(
        ("eventId" = String, Path),
        ("since" = u64, Query, description = "the version the client has (a snapshot's `version` or a change's)"),
    ),
    responses(
        (status = 200, description = "Changes after `since`, in version order", body = SeatMapChanges),
        (status = 404, description = "No such event", body = Problem),
        (status = 410, description = "SNAPSHOT_TOO_OLD: refetch the snapshot", body = Problem),
        (status = 422, description = "`since` missing or not a version", body = Problem),
    )
)]
pub async fn get_changes(
    State(state): State<AppState>,
    Path(event_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult<Response> {
    let since = parse_version(query.get("since").map(String::as_str), "since")?
        .ok_or_else(|| ApiError::validation("since", "is required"))?;
    let map = live_map(&state, &event_id).await?;
    match map.changes_since(since) {
        Since::Changes(json) => {
            Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
        }
        Since::TooOld { oldest_kept } => Err(too_old(format!(
            "changes after version {since} are no longer kept (oldest kept: {oldest_kept}); refetch the snapshot"
        ))),
        Since::Unknown { at } => Err(too_old(format!(
            "version {since} is not known here (the map is at {at}); refetch the snapshot"
        ))),
    }
}

/// Decrements the open-stream count when a stream ends.
struct StreamSlot(AppState);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.seatmap_streams.fetch_sub(1, Ordering::Relaxed);
        metrics::gauge!("boxoffice_seatmap_streams").decrement(1.0);
    }
}

fn batch_event(version: u64, json: &str) -> Event {
    Event::default().id(version.to_string()).data(json)
}

fn reset_event(version: u64) -> Event {
    Event::default()
        .event("reset")
        .data(format!("{{\"version\":{version}}}"))
}

/// Live changes as Server-Sent Events.
#[utoipa::path(
    get, path = "/v1/events/{eventId}/seatmap/stream", tag = "seatmap",
    params(
        ("eventId" = String, Path),
        ("since" = Option<u64>, Query, description = "the version the client has; default: the current version"),
        ("Last-Event-ID" = Option<String>, Header, description = "sent by browsers on reconnect; wins over `since`"),
    ),
    responses(
        (status = 200, description = "text/event-stream: one message per committed change batch, `id:` = version, data as in /changes; `event: reset` when the client must refetch the snapshot", content_type = "text/event-stream"),
        (status = 404, description = "No such event", body = Problem),
        (status = 422, description = "`since` not a version", body = Problem),
        (status = 503, description = "Too many open streams", body = Problem),
    )
)]
pub async fn stream(
    State(state): State<AppState>,
    Path(event_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let since_query = parse_version(query.get("since").map(String::as_str), "since")?;
    // A Last-Event-ID that is not one of ours cannot be caught up: the stream resets.
    let last_event_id = last_event_id(&headers);
    let map = live_map(&state, &event_id).await?;
    if state.seatmap_streams.fetch_add(1, Ordering::Relaxed) >= STREAMS_MAX {
        state.seatmap_streams.fetch_sub(1, Ordering::Relaxed);
        return Err(ApiError::unavailable(
            "too many open seat-map streams; retry later",
        ));
    }
    metrics::gauge!("boxoffice_seatmap_streams").increment(1.0);
    let slot = StreamSlot(state.clone());
    let start = match last_event_id {
        Some(Some(version)) => Some(version),
        Some(None) => None,
        None => Some(since_query.unwrap_or_else(|| map.version())),
    };
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(64);
    let seatmaps = state.seatmaps.clone();
    tokio::spawn(async move {
        let _slot = slot;
        pump(seatmaps, map, start, tx).await;
    });
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(STREAM_KEEP_ALIVE_S));
    let mut response = Sse::new(ReceiverStream::new(rx))
        .keep_alive(keep_alive)
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// Sends the catch-up since `start`, then every new batch, until the client goes away or the
/// map resets. A subscriber that lagged catches up from the log, or resets.
async fn pump(
    seatmaps: SeatMaps,
    map: Arc<LiveMap>,
    start: Option<u64>,
    tx: mpsc::Sender<Result<Event, Infallible>>,
) {
    let mut frames = map.subscribe();
    let Some(mut last) = start else {
        let _ = tx.send(Ok(reset_event(map.version()))).await;
        return;
    };
    if !catch_up(&map, &mut last, &tx).await {
        return;
    }
    loop {
        let received = tokio::select! {
            () = tx.closed() => return,
            received = frames.recv() => received,
        };
        match received {
            Ok(Frame::Batch { version, json }) => {
                if version <= last {
                    continue;
                }
                if version == last + 1 {
                    if tx.send(Ok(batch_event(version, &json))).await.is_err() {
                        return;
                    }
                    last = version;
                } else if !catch_up(&map, &mut last, &tx).await {
                    return;
                }
            }
            Ok(Frame::Reset { version }) => {
                let _ = tx.send(Ok(reset_event(version))).await;
                return;
            }
            Err(RecvError::Lagged(_)) => {
                metrics::counter!("boxoffice_seatmap_stream_lagged_total").increment(1);
                if !catch_up(&map, &mut last, &tx).await {
                    return;
                }
            }
            Err(RecvError::Closed) => return,
        }
        // The map may have been replaced (reloaded) since this stream began.
        if seatmaps
            .loaded(&map.event_id)
            .is_some_and(|current| !Arc::ptr_eq(&current, &map))
        {
            let _ = tx.send(Ok(reset_event(map.version()))).await;
            return;
        }
    }
}

/// Sends every batch after `last` from the map's log; on a gap it cannot fill, sends a reset
/// and returns false.
async fn catch_up(
    map: &LiveMap,
    last: &mut u64,
    tx: &mpsc::Sender<Result<Event, Infallible>>,
) -> bool {
    match map.frames_since(*last) {
        Ok(frames) => {
            for frame in frames {
                if let Frame::Batch { version, json } = frame {
                    if tx.send(Ok(batch_event(version, &json))).await.is_err() {
                        return false;
                    }
                    *last = version;
                }
            }
            true
        }
        Err(current) => {
            let _ = tx.send(Ok(reset_event(current))).await;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_match_with_lists_weak_tags_and_star() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            HeaderValue::from_static("\"3\", W/\"7\""),
        );
        assert!(matches_etag(&headers, "\"7\""));
        assert!(matches_etag(&headers, "\"3\""));
        assert!(!matches_etag(&headers, "\"8\""));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(matches_etag(&headers, "\"8\""));
        assert!(!matches_etag(&HeaderMap::new(), "\"8\""));
    }
}
