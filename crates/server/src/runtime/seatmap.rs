//! The live seat map: per event, an in-memory [`SeatMap`] built from the store and advanced
//! only from the store's committed change rows (see `boxoffice_store::seatmap`).
//!
//! - A map is loaded on first use: one consistent snapshot of every seat and tier with its
//!   version, and the most recent change rows to seed the log (so a client that was a little
//!   behind before a restart still catches up).
//! - The feeder polls each loaded map's change rows after its version every
//!   [`FEED_POLL_MS`] (sooner when a handler in this process pokes it after a write). The
//!   rows are written in the changing transactions themselves, so a missed poke delays a
//!   change, never loses it. A gap (rows pruned while the feeder was away) reloads the map
//!   and tells every stream to reset.
//! - Each applied batch becomes one pre-rendered frame broadcast to the SSE streams.
//! - The snapshot is rendered (JSON and gzip) at most every [`RENDER_INTERVAL_MS`] and
//!   shared by every request meanwhile; it is a consistent older version at worst, which the
//!   client brings up to date with the changes since.
//!
//! The map is a hint for fans: it never grants a hold.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use boxoffice_domain::decide::{HoldOutcome, HoldShape};
use boxoffice_domain::hold::SeatStatus;
use boxoffice_domain::seatmap::{
    ApplyError, ChangeBatch, MapStatus, SeatChange, SeatMap, SinceError, TierChange,
};
use boxoffice_store::seatmap::{MapSeat, StoredBatch};
use boxoffice_store::{EventRecord, Store, StoreError, StoreResult};
use tokio::sync::{Notify, broadcast};

use crate::api::rfc3339_ms;
use crate::runtime::waitroom::unix_ms;

/// How often the feeder looks for new change rows of each loaded map.
pub const FEED_POLL_MS: u64 = 50;
/// Shortest time between two polls: pokes in between coalesce into the next poll, so a burst
/// of writes costs at most one store query per map per this interval.
pub const FEED_GAP_MS: u64 = 10;
/// Most change rows read per map per poll.
pub const FEED_ROWS_MAX: u32 = 1_000;
/// Seat and tier changes kept in memory per map: how far behind a client may fall and still
/// catch up with changes instead of a new snapshot.
pub const LOG_CHANGES_MAX: usize = 200_000;
/// Change rows read at load to seed the log.
pub const SEED_ROWS_MAX: u32 = 2_000;
/// Change rows kept in the store per event (older ones are pruned).
pub const STORE_KEEP_VERSIONS: u64 = 20_000;
/// How often old change rows are pruned.
pub const PRUNE_INTERVAL_S: u64 = 60;
/// A map nobody has asked for this long and nobody streams is unloaded (and no longer
/// polled); the next request loads it again.
pub const IDLE_UNLOAD_MS: i64 = 10 * 60 * 1_000;
/// Shortest time between two renders of one map's snapshot.
pub const RENDER_INTERVAL_MS: u64 = 200;
/// Most seat changes one `changes?since=` answer carries; more costs a snapshot.
pub const CHANGES_ANSWER_MAX: usize = 50_000;
/// Frames buffered per stream subscriber before it counts as lagging.
pub const FRAME_BUFFER: usize = 1_024;

/// What a stream subscriber receives.
#[derive(Debug, Clone)]
pub enum Frame {
    /// One committed batch, rendered as the `changes` answer of that single version.
    Batch { version: u64, json: Arc<str> },
    /// The map was reloaded: refetch the snapshot.
    Reset { version: u64 },
}

/// One rendered snapshot.
#[derive(Debug)]
pub struct Rendered {
    pub version: u64,
    /// Shared by every response: a clone is a reference count, not a copy.
    pub json: axum::body::Bytes,
    pub gzip: axum::body::Bytes,
    rendered_at: Instant,
    /// Unix ms when the earliest live hold in it runs out (the render shows it held).
    stale_after_ms: i64,
}

/// The seat layout of an event: ids in layout order, and the index of each.
#[derive(Debug)]
pub struct Layout {
    pub seat_ids: Vec<String>,
    /// Each seat id as a JSON string literal, rendered once.
    seat_json: Vec<String>,
    /// A chart event's seats: what the snapshot shows of each beside its status (its labels,
    /// position, category, kind: `,"rowLabel":"A",…`), rendered once, in `seat_ids`' order;
    /// empty for an event without a chart.
    seat_place_json: Vec<String>,
    index: HashMap<String, u32>,
    pub tier_ids: Vec<String>,
    tier_json: Vec<String>,
    tier_index: HashMap<String, u32>,
    /// Each section's name, its JSON string literal and the seat indexes of its rows.
    sections: Vec<(String, String, Vec<std::ops::Range<usize>>)>,
}

impl Layout {
    pub fn of(event: &EventRecord) -> Self {
        let mut seat_ids = Vec::new();
        let mut seat_place_json = Vec::new();
        let mut sections = Vec::with_capacity(event.sections.len());
        for section in &event.sections {
            let charted = event
                .chart
                .as_ref()
                .and_then(|chart| chart.section(&section.name));
            let mut rows = Vec::with_capacity(section.rows as usize);
            for row in 1..=section.rows {
                let first = seat_ids.len();
                let chart_row = charted.and_then(|s| s.rows.get(row as usize - 1));
                for number in 1..=section.row_len(row) {
                    seat_ids.push(format!("{}-{row}-{number}", section.name));
                    if let Some(chart_row) = chart_row
                        && let Some(seat) = chart_row.seats.get(number as usize - 1)
                    {
                        seat_place_json.push(seat_place_json_of(&chart_row.label, seat));
                    }
                }
                rows.push(first..seat_ids.len());
            }
            sections.push((section.name.clone(), json_string(&section.name), rows));
        }
        if seat_place_json.len() != seat_ids.len() {
            // Only a chart's every seat has its place; anything else shows none.
            seat_place_json.clear();
        }
        let tier_ids: Vec<String> = event.tiers.iter().map(|t| t.tier_id.clone()).collect();
        Self {
            seat_json: seat_ids.iter().map(|id| json_string(id)).collect(),
            index: seat_ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.clone(), i as u32))
                .collect(),
            seat_ids,
            seat_place_json,
            tier_json: tier_ids.iter().map(|id| json_string(id)).collect(),
            tier_index: tier_ids
                .iter()
                .enumerate()
                .map(|(i, id)| (id.clone(), i as u32))
                .collect(),
            tier_ids,
            sections,
        }
    }

    pub fn seat_index(&self, seat_id: &str) -> Option<u32> {
        self.index.get(seat_id).copied()
    }
}

fn json_string(raw: &str) -> String {
    serde_json::to_string(raw).unwrap_or_else(|_| "\"\"".into())
}

/// A chart seat as the snapshot shows it beside its id and status:
/// `,"rowLabel":"A","seatLabel":"5","x":10,"y":58,"category":"A","kind":"aisle"` (no `kind`
/// for a standard seat).
fn seat_place_json_of(row_label: &str, seat: &boxoffice_domain::venue::ChartSeat) -> String {
    let mut out = format!(
        ",\"rowLabel\":{},\"seatLabel\":{},\"x\":{},\"y\":{},\"category\":{}",
        json_string(row_label),
        json_string(&seat.label),
        coordinate(seat.x),
        coordinate(seat.y),
        json_string(&seat.category),
    );
    if seat.kind != boxoffice_domain::venue::SeatKind::Standard {
        out.push_str(&format!(",\"kind\":\"{}\"", seat.kind.as_str()));
    }
    out
}

/// A chart coordinate to the chart's resolution, 0.01 unit (`venue::POSITION_STEP`: two
/// seats closer than that are one position), with no trailing zeros: `10`, `-12.5`,
/// `181.37`. Keeps a 50,000-seat snapshot short.
pub fn coordinate(value: f64) -> String {
    let hundredths = (value * 100.0).round();
    if hundredths == 0.0 || !hundredths.is_finite() {
        return "0".into();
    }
    let text = format!("{:.2}", hundredths / 100.0);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn map_status(seat: MapSeat) -> MapStatus {
    match seat.status {
        SeatStatus::Available => MapStatus::Available,
        SeatStatus::Sold => MapStatus::Sold,
        SeatStatus::Held => MapStatus::Held {
            until_ms: seat.held_until_ms.unwrap_or(i64::MIN),
        },
    }
}

/// Appends one seat's `{"seatId", "status", "holdExpiresAt"?}` as a fan sees it at `now_ms`,
/// with `extra` (e.g. `,"version":7`) before the closing brace.
fn push_seat(out: &mut String, seat_json: &str, status: MapStatus, now_ms: i64, extra: &str) {
    out.push_str("{\"seatId\":");
    out.push_str(seat_json);
    match status {
        MapStatus::Held { until_ms } if until_ms > now_ms => {
            out.push_str(",\"status\":\"HELD\",\"holdExpiresAt\":\"");
            out.push_str(&rfc3339_ms(until_ms));
            out.push('"');
        }
        MapStatus::Sold => out.push_str(",\"status\":\"SOLD\""),
        _ => out.push_str(",\"status\":\"AVAILABLE\""),
    }
    out.push_str(extra);
    out.push('}');
}

/// One event's live map.
pub struct LiveMap {
    pub event_id: String,
    pub layout: Layout,
    state: RwLock<SeatMap>,
    frames: broadcast::Sender<Frame>,
    rendered: Mutex<Option<Arc<Rendered>>>,
    /// One render at a time; the others serve the previous one.
    rendering: tokio::sync::Mutex<()>,
    /// One feed at a time (the feeder's, or a read that needs the latest changes): two
    /// feeds reading the same rows would apply them twice and see a gap. It keeps when the
    /// last feed began: a read that arrived before that needs no feed of its own, so a crowd
    /// of reads costs one or two feeds, not one each.
    feeding: tokio::sync::Mutex<Option<Instant>>,
    /// Unix ms of the last request that used this map (idle maps are unloaded).
    last_used_ms: std::sync::atomic::AtomicI64,
}

impl std::fmt::Debug for LiveMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveMap")
            .field("event_id", &self.event_id)
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

/// The answer to `changes?since=`.
#[derive(Debug)]
pub enum Since {
    /// `{"fromVersion", "toVersion", "changes", "tiers"}` as JSON.
    Changes(String),
    TooOld {
        oldest_kept: u64,
    },
    Unknown {
        at: u64,
    },
}

impl LiveMap {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, SeatMap> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub fn version(&self) -> u64 {
        self.read().version()
    }

    /// The refusal a hold request is sure to get, judged from the map alone (no store): every
    /// named seat is sold, or (best available) every seat of the event is. `None` when the
    /// store must decide. A seat shown sold is sold (only a refund or an exchange would
    /// bring it back), so the refusal is the one the hold transaction would give.
    pub fn sure_refusal(&self, shape: &HoldShape) -> Option<HoldOutcome> {
        let map = self.read();
        match shape {
            HoldShape::Seats { seat_ids } => {
                let distinct = seat_ids
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
                    == seat_ids.len();
                let all_sold = !seat_ids.is_empty()
                    && distinct
                    && seat_ids.iter().all(|id| {
                        self.layout
                            .seat_index(id)
                            .is_some_and(|i| map.is_sold(i as usize))
                    });
                all_sold.then(|| HoldOutcome::SeatsUnavailable {
                    unavailable_seat_ids: seat_ids.clone(),
                    largest_block: None,
                })
            }
            HoldShape::BestAvailable { .. } => {
                // Nothing left together anywhere: the largest block is none.
                map.sold_out().then(|| HoldOutcome::SeatsUnavailable {
                    unavailable_seat_ids: Vec::new(),
                    largest_block: Some(0),
                })
            }
            // Tier counts exclude held units that may expire: the store decides.
            HoldShape::Tier { .. } | HoldShape::Allocation(_) => None,
        }
    }

    /// Free and held at `now_ms` (see [`SeatMap::left_at`]).
    pub fn left_at(&self, now_ms: i64) -> (u64, u64) {
        self.read().left_at(now_ms)
    }

    /// Each section's largest block free now (the most seats side by side in one row), in
    /// the event's section order, by section name.
    pub fn largest_blocks(&self) -> Vec<(String, u32)> {
        let now_ms = unix_ms();
        let map = self.read();
        self.layout
            .sections
            .iter()
            .map(|(name, _, rows)| {
                (
                    name.clone(),
                    map.largest_block(rows.iter().cloned(), now_ms),
                )
            })
            .collect()
    }

    /// Whether nothing is free on the map (see [`SeatMap::nothing_free`]).
    pub fn nothing_free(&self) -> bool {
        self.read().nothing_free()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Frame> {
        self.frames.subscribe()
    }

    /// The changes after `since` as one JSON answer, each seat with its batch's version.
    pub fn changes_since(&self, since: u64) -> Since {
        let now_ms = unix_ms();
        let map = self.read();
        let batches = match map.changes_since(since) {
            Ok(batches) => batches,
            Err(SinceError::TooOld { oldest_kept, .. }) => return Since::TooOld { oldest_kept },
            Err(SinceError::Ahead { at, .. }) => return Since::Unknown { at },
        };
        let total: usize = batches.iter().map(|b| b.changes.len()).sum();
        if total > CHANGES_ANSWER_MAX {
            return Since::TooOld {
                oldest_kept: map.version(),
            };
        }
        Since::Changes(self.render_changes(since, map.version(), &batches, now_ms))
    }

    /// The batches after `since`, each rendered as its own frame (stream catch-up);
    /// `Err(current version)` when the log no longer reaches `since`: the stream resets.
    pub fn frames_since(&self, since: u64) -> Result<Vec<Frame>, u64> {
        let now_ms = unix_ms();
        let map = self.read();
        let batches = map.changes_since(since).map_err(|_| map.version())?;
        Ok(batches
            .iter()
            .map(|batch| self.frame(batch, now_ms))
            .collect())
    }

    fn frame(&self, batch: &ChangeBatch, now_ms: i64) -> Frame {
        Frame::Batch {
            version: batch.version,
            json: self
                .render_changes(
                    batch.version - 1,
                    batch.version,
                    std::slice::from_ref(&batch),
                    now_ms,
                )
                .into(),
        }
    }

    fn render_changes(&self, from: u64, to: u64, batches: &[&ChangeBatch], now_ms: i64) -> String {
        let mut out = String::with_capacity(64 + 64 * batches.len());
        out.push_str(&format!(
            "{{\"eventId\":{},\"fromVersion\":{from},\"toVersion\":{to},\"changes\":[",
            json_string(&self.event_id)
        ));
        let mut first = true;
        for batch in batches {
            let extra = format!(",\"version\":{}", batch.version);
            for change in &batch.changes {
                if !first {
                    out.push(',');
                }
                first = false;
                let seat_json = &self.layout.seat_json[change.seat as usize];
                push_seat(&mut out, seat_json, change.status, now_ms, &extra);
            }
        }
        out.push_str("],\"tiers\":[");
        let mut first = true;
        for batch in batches {
            for change in &batch.tiers {
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&format!(
                    "{{\"tierId\":{},\"available\":{},\"version\":{}}}",
                    self.layout.tier_json[change.tier as usize], change.available, batch.version
                ));
            }
        }
        out.push_str("]}");
        out
    }

    /// The current snapshot, rendered again only when the cached one is older than
    /// [`RENDER_INTERVAL_MS`] and out of date (newer version, or a hold in it ran out).
    pub async fn snapshot(self: &Arc<Self>) -> Arc<Rendered> {
        if let Some(fresh) = self.cached_if_fresh() {
            return fresh;
        }
        let Ok(_guard) = self.rendering.try_lock() else {
            // Another request is rendering: serve the previous render if there is one.
            if let Some(previous) = self.cached() {
                return previous;
            }
            let _wait = self.rendering.lock().await;
            if let Some(fresh) = self.cached() {
                return fresh;
            }
            return self.render_now().await;
        };
        if let Some(fresh) = self.cached_if_fresh() {
            return fresh;
        }
        self.render_now().await
    }

    fn cached(&self) -> Option<Arc<Rendered>> {
        self.rendered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn cached_if_fresh(&self) -> Option<Arc<Rendered>> {
        let cached = self.cached()?;
        let young = cached.rendered_at.elapsed() < Duration::from_millis(RENDER_INTERVAL_MS);
        let current = cached.version == self.version() && cached.stale_after_ms > unix_ms();
        (young || current).then_some(cached)
    }

    async fn render_now(self: &Arc<Self>) -> Arc<Rendered> {
        let map = self.clone();
        let rendered = tokio::task::spawn_blocking(move || Arc::new(map.render()))
            .await
            .unwrap_or_else(|_| Arc::new(self.render()));
        *self.rendered.lock().unwrap_or_else(|p| p.into_inner()) = Some(rendered.clone());
        rendered
    }

    fn render(&self) -> Rendered {
        let now_ms = unix_ms();
        let (version, statuses, tiers) = {
            let map = self.read();
            (map.version(), map.statuses().to_vec(), map.tiers().to_vec())
        };
        let place_bytes: usize = self.layout.seat_place_json.iter().map(String::len).sum();
        let mut out = String::with_capacity(64 + statuses.len() * 44 + place_bytes);
        out.push_str(&format!(
            "{{\"eventId\":{},\"version\":{version},\"seats\":[",
            json_string(&self.event_id)
        ));
        let mut stale_after_ms = i64::MAX;
        for (i, status) in statuses.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if let MapStatus::Held { until_ms } = *status
                && until_ms > now_ms
            {
                stale_after_ms = stale_after_ms.min(until_ms);
            }
            let place = self
                .layout
                .seat_place_json
                .get(i)
                .map_or("", String::as_str);
            push_seat(&mut out, &self.layout.seat_json[i], *status, now_ms, place);
        }
        out.push_str("],\"tiers\":[");
        for (i, available) in tiers.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!(
                "{{\"tierId\":{},\"available\":{available}}}",
                self.layout.tier_json[i]
            ));
        }
        // What is left per section, from the same statuses at the same instant.
        out.push_str("],\"sections\":[");
        for (i, (_, name_json, rows)) in self.layout.sections.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let largest =
                boxoffice_domain::seatmap::largest_block(&statuses, rows.iter().cloned(), now_ms);
            out.push_str(&format!(
                "{{\"name\":{name_json},\"largestBlock\":{largest}}}"
            ));
        }
        out.push_str("]}");
        let json = axum::body::Bytes::from(out.into_bytes());
        let gzip = axum::body::Bytes::from(crate::web::gzip(&json));
        metrics::counter!("boxoffice_seatmap_renders_total").increment(1);
        Rendered {
            version,
            json,
            gzip,
            rendered_at: Instant::now(),
            stale_after_ms,
        }
    }

    /// Applies committed rows in order; an error means the map must be reloaded.
    fn apply(&self, rows: Vec<StoredBatch>) -> Result<Vec<Frame>, ApplyError> {
        let now_ms = unix_ms();
        let mut frames = Vec::with_capacity(rows.len());
        let mut map = self.state.write().unwrap_or_else(|p| p.into_inner());
        for row in rows {
            let batch = self.batch_of(row)?;
            let frame = self.frame(&batch, now_ms);
            map.apply(batch)?;
            frames.push(frame);
        }
        Ok(frames)
    }

    fn batch_of(&self, row: StoredBatch) -> Result<ChangeBatch, ApplyError> {
        let mut changes = Vec::with_capacity(row.changes.seats.len());
        for (seat_id, seat) in row.changes.seats {
            let seat_index = self
                .layout
                .seat_index(&seat_id)
                .ok_or(ApplyError::UnknownSeat(u32::MAX))?;
            changes.push(SeatChange {
                seat: seat_index,
                status: map_status(seat),
            });
        }
        let mut tiers = Vec::with_capacity(row.changes.tiers.len());
        for (tier_id, available) in row.changes.tiers {
            let tier = *self
                .layout
                .tier_index
                .get(&tier_id)
                .ok_or(ApplyError::UnknownTier(u32::MAX))?;
            tiers.push(TierChange { tier, available });
        }
        Ok(ChangeBatch {
            version: row.version,
            changes,
            tiers,
        })
    }
}

/// Every loaded map of this process and the feeder that keeps them current.
#[derive(Clone)]
pub struct SeatMaps(Arc<Inner>);

struct Inner {
    store: Arc<dyn Store>,
    maps: Mutex<HashMap<String, Arc<LiveMap>>>,
    /// Loads happen one at a time (a 50,000-seat load is one big read).
    loading: tokio::sync::Mutex<()>,
    wake: Notify,
    /// Changes kept in memory per map loaded from now on.
    log_changes_max: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for SeatMaps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeatMaps").finish_non_exhaustive()
    }
}

impl SeatMaps {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self(Arc::new(Inner {
            store,
            maps: Mutex::default(),
            loading: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
            log_changes_max: std::sync::atomic::AtomicUsize::new(LOG_CHANGES_MAX),
        }))
    }

    /// Keeps at most `changes` seat and tier changes per map loaded from now on (default
    /// [`LOG_CHANGES_MAX`]); clients further behind get 410 / `event: reset`.
    pub fn set_log_changes_max(&self, changes: usize) {
        self.0
            .log_changes_max
            .store(changes.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Asks the feeder to look for new rows now (after a write in this process).
    pub fn poke(&self) {
        self.0.wake.notify_one();
    }

    /// The map of `event_id` if loaded (a stream checks whether its map was replaced).
    pub fn loaded(&self, event_id: &str) -> Option<Arc<LiveMap>> {
        self.0
            .maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(event_id)
            .cloned()
    }

    /// The live map of `event`, loaded from the store on first use.
    pub async fn get(&self, event: &EventRecord) -> StoreResult<Arc<LiveMap>> {
        if let Some(map) = self.loaded(&event.event_id) {
            map.last_used_ms
                .store(unix_ms(), std::sync::atomic::Ordering::Relaxed);
            return Ok(map);
        }
        let _one_at_a_time = self.0.loading.lock().await;
        if let Some(map) = self.loaded(&event.event_id) {
            return Ok(map);
        }
        let map = Arc::new(self.load(event, broadcast::channel(FRAME_BUFFER).0).await?);
        self.0
            .maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(event.event_id.clone(), map.clone());
        self.poke();
        Ok(map)
    }

    async fn load(
        &self,
        event: &EventRecord,
        frames: broadcast::Sender<Frame>,
    ) -> StoreResult<LiveMap> {
        let started = Instant::now();
        let layout = Layout::of(event);
        let snapshot = self
            .0
            .store
            .seat_map(&event.event_id)
            .await?
            .ok_or_else(|| {
                StoreError::Internal(format!("event {} has no seat map", event.event_id))
            })?;
        let mut statuses = vec![MapStatus::Available; layout.seat_ids.len()];
        for (seat_id, seat) in snapshot.seats {
            if let Some(index) = layout.seat_index(&seat_id) {
                statuses[index as usize] = map_status(seat);
            }
        }
        let mut tiers = vec![0; layout.tier_ids.len()];
        for (tier_id, available) in snapshot.tiers {
            if let Some(&index) = layout.tier_index.get(&tier_id) {
                tiers[index as usize] = available;
            }
        }
        let log_changes_max = self
            .0
            .log_changes_max
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut map = SeatMap::new(statuses, tiers, snapshot.version, log_changes_max);
        let live = LiveMap {
            event_id: event.event_id.clone(),
            layout,
            state: RwLock::new(SeatMap::new(Vec::new(), Vec::new(), 0, 1)),
            frames,
            rendered: Mutex::new(None),
            rendering: tokio::sync::Mutex::new(()),
            feeding: tokio::sync::Mutex::new(None),
            last_used_ms: std::sync::atomic::AtomicI64::new(unix_ms()),
        };
        // Seed the log with the rows that led here; best effort (they may be pruned).
        let seed_from = snapshot.version.saturating_sub(u64::from(SEED_ROWS_MAX));
        if seed_from < snapshot.version {
            let rows = self
                .0
                .store
                .seat_map_changes(&event.event_id, seed_from, SEED_ROWS_MAX)
                .await?;
            let batches: Result<Vec<ChangeBatch>, ApplyError> = rows
                .into_iter()
                .filter(|row| row.version <= snapshot.version)
                .map(|row| live.batch_of(row))
                .collect();
            if let Ok(batches) = batches {
                map.seed_log(batches);
            }
        }
        *live.state.write().unwrap_or_else(|p| p.into_inner()) = map;
        tracing::info!(
            event_id = %event.event_id,
            version = snapshot.version,
            seats = live.layout.seat_ids.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "seat map loaded"
        );
        Ok(live)
    }

    /// The live map of `event` with every change committed so far applied (one read of the
    /// change rows after the map's version): for a read that must agree with the answers
    /// already given, such as the event's largest blocks.
    pub async fn current(&self, event: &EventRecord) -> StoreResult<Arc<LiveMap>> {
        let arrived = Instant::now();
        let map = self.get(event).await?;
        let mut last_feed_began = map.feeding.lock().await;
        // A feed that began after this read arrived read every change committed before it.
        if last_feed_began.is_none_or(|began| began < arrived) {
            *last_feed_began = Some(Instant::now());
            self.feed_locked(&map).await?;
        }
        drop(last_feed_began);
        // A gap reloads the map in place of this one.
        Ok(self.loaded(&event.event_id).unwrap_or(map))
    }

    /// Brings one map up to date with the committed rows; reloads it after a gap.
    async fn feed(&self, map: &Arc<LiveMap>) -> StoreResult<()> {
        let mut last_feed_began = map.feeding.lock().await;
        *last_feed_began = Some(Instant::now());
        self.feed_locked(map).await
    }

    /// [`Self::feed`] for a caller that holds the map's `feeding` lock.
    async fn feed_locked(&self, map: &Arc<LiveMap>) -> StoreResult<()> {
        loop {
            let after = map.version();
            let rows = self
                .0
                .store
                .seat_map_changes(&map.event_id, after, FEED_ROWS_MAX)
                .await?;
            let full = rows.len() == FEED_ROWS_MAX as usize;
            if rows.is_empty() {
                return Ok(());
            }
            match map.apply(rows) {
                Ok(frames) => {
                    metrics::counter!("boxoffice_seatmap_batches_applied_total")
                        .increment(frames.len() as u64);
                    for frame in frames {
                        // No subscribers is fine.
                        let _ = map.frames.send(frame);
                    }
                }
                Err(error) => {
                    tracing::warn!(event_id = %map.event_id, %error, "seat map reloads");
                    self.reload(map).await?;
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Replaces a map that cannot continue (a gap in the feed) and resets its streams.
    async fn reload(&self, stale: &Arc<LiveMap>) -> StoreResult<()> {
        let event = self
            .0
            .store
            .get_event(&stale.event_id)
            .await?
            .ok_or_else(|| StoreError::Internal(format!("event {} vanished", stale.event_id)))?;
        let fresh = Arc::new(self.load(&event, stale.frames.clone()).await?);
        self.0
            .maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(event.event_id.clone(), fresh.clone());
        metrics::counter!("boxoffice_seatmap_reloads_total").increment(1);
        let _ = stale.frames.send(Frame::Reset {
            version: fresh.version(),
        });
        Ok(())
    }

    /// The feeder: polls every loaded map, prunes old rows now and then. Runs forever.
    pub async fn run(self) {
        let mut last_prune = Instant::now();
        loop {
            tokio::select! {
                () = self.0.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(FEED_POLL_MS)) => {}
            }
            let maps: Vec<Arc<LiveMap>> = self
                .0
                .maps
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .values()
                .cloned()
                .collect();
            for map in maps {
                if let Err(error) = self.feed(&map).await {
                    tracing::warn!(event_id = %map.event_id, %error, "seat map feed failed; retrying");
                }
            }
            self.unload_idle();
            tokio::time::sleep(Duration::from_millis(FEED_GAP_MS)).await;
            if last_prune.elapsed() > Duration::from_secs(PRUNE_INTERVAL_S) {
                last_prune = Instant::now();
                match self
                    .0
                    .store
                    .prune_seat_map_changes(STORE_KEEP_VERSIONS)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::debug!(rows = n, "seat-map change rows pruned"),
                    Err(error) => tracing::warn!(%error, "pruning seat-map change rows"),
                }
            }
        }
    }

    /// Drops maps that nobody used for [`IDLE_UNLOAD_MS`] and nobody streams.
    fn unload_idle(&self) {
        let now_ms = unix_ms();
        self.0
            .maps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|event_id, map| {
                let idle = now_ms - map.last_used_ms.load(std::sync::atomic::Ordering::Relaxed)
                    > IDLE_UNLOAD_MS;
                let unload = idle && map.frames.receiver_count() == 0;
                if unload {
                    tracing::info!(%event_id, "idle seat map unloaded");
                }
                !unload
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seats_render_as_fans_see_them() {
        let mut out = String::new();
        push_seat(
            &mut out,
            "\"A-1-1\"",
            MapStatus::Held { until_ms: 2_000 },
            1_000,
            "",
        );
        assert_eq!(
            out,
            "{\"seatId\":\"A-1-1\",\"status\":\"HELD\",\"holdExpiresAt\":\"1970-01-01T00:00:02Z\"}"
        );
        out.clear();
        push_seat(
            &mut out,
            "\"A-1-1\"",
            MapStatus::Held { until_ms: 2_000 },
            2_000,
            ",\"version\":3",
        );
        assert_eq!(
            out,
            "{\"seatId\":\"A-1-1\",\"status\":\"AVAILABLE\",\"version\":3}"
        );
    }
}
