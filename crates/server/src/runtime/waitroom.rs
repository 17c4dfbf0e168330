//! The waiting room as the server runs it: a cached view per event for status polls, the
//! admission check of holds and checkout, the release controller ticking every 100 ms, and
//! the slot release when a shopper's trip ends.
//!
//! The model (`boxoffice-waitroom`) decides; the [`RoomStore`] keeps the rooms (in process
//! with a journal, or in Redis). This module adds time, signing and measurement:
//!
//! - **Status polls** are answered from [`RoomHandle::view`], a copy of the queue's view
//!   refreshed every [`TICK_MS`]: verify the queue ticket's signature, compute the position
//!   from its join index, compare with the serving counter. Only a released account goes to
//!   the store, once, to claim its admission.
//! - **Release**: once a second the AIMD [`ReleaseController`] turns the last second's
//!   [`Signals`] (hold p99, store errors, store reachability, payment errors, active
//!   shoppers) into a rate; each 100 ms tick releases a tenth of it, never more than the free
//!   shopper slots minus the released accounts that have not claimed yet. With Redis, one
//!   node per event holds a lease and releases; every node refreshes its view.
//! - **Slots come back** when a shopper's trip ends: a hold released by its owner (at once,
//!   in the handler), a hold expired or an order confirmed (when the outbox relay delivers
//!   `hold.released`, `hold.expired` or `order.confirmed`). An end only frees an admission
//!   that began before the hold ended, so a late message never ends a newer admission.
//! - **A room per lane**: the general room is keyed by the event id; a sale phase fans queue
//!   for (`?phaseId=`) has its own room, keyed [`room_key`] `{event_id}~{phase_id}` here and
//!   in the [`RoomStore`], with its own queue, controller, shopper slots and controls, and the
//!   phase's own settings ([`room_config_in`]). Tickets and admissions name the lane; an end
//!   without the admission goes to the room where the account shops ([`WaitingRoom::end`]).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use boxoffice_store::checkout::{OutboxMessage, topic};
use boxoffice_store::{EventRecord, Store};
use boxoffice_waitroom::admission::{Admission, Shop};
use boxoffice_waitroom::controller::{
    ControllerConfig, Decision, DecisionKind, Inventory, PACE_WINDOW_MIN_S, ReleaseController,
    Signals, pace,
};
use boxoffice_waitroom::queue::{QueueConfig, QueuePolicy, QueueView, Status};
use boxoffice_waitroom::room::{ClaimOutcome, Controls, RoomConfig, RoomStats};
use boxoffice_waitroom::token::{AdmissionError, QueueTicketClaims, QueueTicketError, TokenKeys};
use boxoffice_waitroom_state::{RoomStore, StateError};
use boxoffice_workers::relay::OutboxListener;

use crate::token_cache::TokenCache;

/// Between an event id and a phase id in a lane room's key (neither id may contain it).
pub const LANE_SEPARATOR: char = '~';

/// The key of a room: the event id for the general room, `"{event_id}~{phase_id}"` for the
/// room of a sale phase (a lane), which has its own queue, release and shopper slots.
pub fn room_key(event_id: &str, lane: Option<&str>) -> String {
    match lane {
        None => event_id.to_owned(),
        Some(phase_id) => format!("{event_id}{LANE_SEPARATOR}{phase_id}"),
    }
}

/// The event id and lane of a room key (see [`room_key`]).
pub fn split_room_key(key: &str) -> (&str, Option<&str>) {
    match key.split_once(LANE_SEPARATOR) {
        Some((event_id, lane)) => (event_id, Some(lane)),
        None => (key, None),
    }
}

/// How often rooms tick: release a slice, expire admissions, refresh views.
pub const TICK_MS: u64 = 100;
/// Ticks per controller decision (one decision per second).
pub const TICKS_PER_DECISION: u32 = 10;
/// How long a node's lead of one event's release lasts without renewal (Redis rooms).
pub const LEAD_LEASE_MS: u64 = 3_000;
/// Ticks of history (10 s) used to count released accounts that have not claimed yet.
pub const UNCLAIMED_WINDOW_TICKS: usize = 100;
/// Controller decisions the admin view shows (the last minute).
pub const DECISIONS_KEPT: usize = 60;
/// `Retry-After` of a sold-out answer: seats come back rarely (a lapsed hold, a refund).
pub const SOLD_OUT_RETRY_AFTER_S: u64 = 20;
/// How often the store is asked whether tier units are held, once the map shows none free.
pub const TIER_CHECK_INTERVAL_MS: i64 = 250;
/// Longest poll interval suggested by `Retry-After`, in seconds (Cloudflare refreshes
/// every 20 s).
pub const POLL_INTERVAL_MAX_S: u64 = 20;
/// How long the readiness probe of the store may take before it counts as down.
pub const STORE_PROBE_TIMEOUT_MS: u64 = 500;

/// Measurements of the last second, fed by handlers and read by the controller.
#[derive(Debug, Default)]
pub struct HealthMeter {
    hold_latencies_us: Mutex<Vec<u32>>,
    /// Holds not answered yet, by a request number: a store that hangs shows in the p99
    /// while it hangs, not only once the stuck requests finally return.
    holds_in_flight: Mutex<HashMap<u64, std::time::Instant>>,
    next_hold: AtomicU64,
    store_errors: AtomicU64,
    payment_attempts: AtomicU64,
    payment_failures: AtomicU64,
    checkout_attempts: AtomicU64,
    checkout_errors: AtomicU64,
    /// Event writers' group commits (decided to committed), microseconds.
    group_latencies_us: Mutex<Vec<u32>>,
    /// The deepest any event writer's queues were this second.
    writer_queue_depth: AtomicU64,
    /// Shopping trips that ended (slots returned) this second.
    completed: AtomicU64,
    /// Whether each room's queue has fans waiting, as its last tick read it: an event's
    /// writer lets the hold TTL follow the sale only while fans wait (`domain::hold_ttl`).
    queues_waiting: Mutex<HashMap<String, bool>>,
}

/// What the meter measured over the last second (see [`HealthMeter::take`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub hold_p99_ms: f64,
    pub store_errors: u32,
    pub payment_error_rate: f64,
    pub checkout_error_rate: f64,
    pub writer_group_p99_ms: f64,
    pub writer_queue_depth: u64,
    pub completed: u64,
}

/// Most latency samples kept per second; beyond it every other sample is dropped.
const LATENCY_SAMPLES_MAX: usize = 100_000;

/// Times one hold request; records it when dropped.
#[derive(Debug)]
pub struct HoldTimer<'a> {
    meter: &'a HealthMeter,
    id: u64,
    started: std::time::Instant,
}

impl Drop for HoldTimer<'_> {
    fn drop(&mut self) {
        self.meter
            .holds_in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.meter.hold_answered(self.started.elapsed());
    }
}

impl HealthMeter {
    /// Starts timing a hold request.
    pub fn hold_started(&self) -> HoldTimer<'_> {
        let id = self.next_hold.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        self.holds_in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, started);
        HoldTimer {
            meter: self,
            id,
            started,
        }
    }

    pub fn hold_answered(&self, elapsed: Duration) {
        let mut samples = self
            .hold_latencies_us
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if samples.len() < LATENCY_SAMPLES_MAX {
            samples.push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
        }
    }

    pub fn store_error(&self) {
        self.store_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A checkout was answered; `failed` when the answer was a server error (5xx).
    pub fn checkout_answered(&self, failed: bool) {
        self.checkout_attempts.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.checkout_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// An event writer's group committed (or failed) `elapsed` after it was decided.
    pub fn group_finished(&self, elapsed: Duration) {
        let mut samples = self
            .group_latencies_us
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if samples.len() < LATENCY_SAMPLES_MAX {
            samples.push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
        }
    }

    /// The room of `event_id` has fans waiting (or not), as a tick read it.
    pub fn set_queue_waiting(&self, event_id: &str, waiting: bool) {
        let mut queues = self
            .queues_waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if queues.get(event_id) != Some(&waiting) {
            queues.insert(event_id.to_owned(), waiting);
        }
    }

    /// Whether a room of `event_id` (the event's, or one of its lanes') has fans waiting;
    /// `None` for an event without a room on this node (a writer then assumes demand waits).
    pub fn queue_waiting(&self, event_id: &str) -> Option<bool> {
        let queues = self
            .queues_waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut known = queues.get(event_id).copied();
        if queues.len() > 1 {
            let lanes = format!("{event_id}{LANE_SEPARATOR}");
            for (key, waiting) in queues.iter() {
                if key.starts_with(&lanes) {
                    known = Some(known.unwrap_or(false) || *waiting);
                }
            }
        }
        known
    }

    /// An event writer's queues hold `depth` commands.
    pub fn writer_queue_depth(&self, depth: u64) {
        self.writer_queue_depth.fetch_max(depth, Ordering::Relaxed);
    }

    pub fn payment_attempt(&self, failed: bool) {
        self.payment_attempts.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.payment_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The last second's measurements; resets them.
    pub fn take(&self) -> Measured {
        let mut samples = std::mem::take(
            &mut *self
                .hold_latencies_us
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        let now = std::time::Instant::now();
        samples.extend(
            self.holds_in_flight
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .map(|started| {
                    u32::try_from(now.duration_since(*started).as_micros()).unwrap_or(u32::MAX)
                }),
        );
        let mut groups = std::mem::take(
            &mut *self
                .group_latencies_us
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        Measured {
            hold_p99_ms: p99_ms(&mut samples),
            store_errors: u32::try_from(self.store_errors.swap(0, Ordering::Relaxed))
                .unwrap_or(u32::MAX),
            payment_error_rate: rate(&self.payment_failures, &self.payment_attempts),
            checkout_error_rate: rate(&self.checkout_errors, &self.checkout_attempts),
            writer_group_p99_ms: p99_ms(&mut groups),
            writer_queue_depth: self.writer_queue_depth.swap(0, Ordering::Relaxed),
            completed: self.completed.swap(0, Ordering::Relaxed),
        }
    }
}

/// The p99 of `samples` (microseconds) in milliseconds; 0 without samples.
fn p99_ms(samples: &mut [u32]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let rank = (samples.len() * 99).div_ceil(100).saturating_sub(1);
    let (_, p99, _) = samples.select_nth_unstable(rank);
    f64::from(*p99) / 1_000.0
}

/// `failures / attempts` over the last second (0 without attempts); resets both.
fn rate(failures: &AtomicU64, attempts: &AtomicU64) -> f64 {
    let attempts = attempts.swap(0, Ordering::Relaxed);
    let failures = failures.swap(0, Ordering::Relaxed);
    if attempts == 0 {
        0.0
    } else {
        failures as f64 / attempts as f64
    }
}

/// The release state of one room on this node.
#[derive(Debug)]
struct Control {
    controller: ReleaseController,
    decision: Option<Decision>,
    /// Fraction of a position carried to the next tick.
    carry: f64,
    /// (serving, admitted_total) once per tick, newest last.
    history: VecDeque<(u64, u64)>,
    leader: bool,
    /// The last [`DECISIONS_KEPT`] decisions with their time (unix ms), newest last.
    decisions: VecDeque<(i64, Decision)>,
}

/// One room as this node serves it: an event's general room, or the room of one of its sale
/// phases (a lane, see [`room_key`]).
#[derive(Debug)]
pub struct RoomHandle {
    /// The room's key in the room map and the state store: the event id for the general
    /// room, `"{event_id}~{phase_id}"` for a lane's.
    pub key: String,
    pub event_id: String,
    /// The sale phase whose room this is (`None`: the event's general room).
    pub lane: Option<String>,
    pub config: RoomConfig,
    view: RwLock<Arc<QueueView>>,
    control: Mutex<Control>,
    polls: AtomicU64,
    /// Release ticks this node has run for the room.
    ticks: AtomicU64,
    /// The controller's current rate, readable by polls without the control lock.
    rate_per_s: AtomicU64,
    /// While slow start doubles the rate: the cap it doubles towards (0 otherwise).
    doubling_up_to: AtomicU64,
    /// The serving counter at each of the last [`UNCLAIMED_WINDOW_TICKS`] view refreshes on
    /// this node, newest last: what was really released lately paces the polls.
    served: Mutex<VecDeque<u64>>,
    /// Positions released per second over that window (`u64::MAX`: no window yet).
    released_per_s: AtomicU64,
    /// The event, once known (the seat map that says whether anything is left needs it).
    event: std::sync::OnceLock<Arc<EventRecord>>,
    /// Nothing is left to sell (see [`WaitingRoom::sold_out_now`]); polls read it.
    sold_out: std::sync::atomic::AtomicBool,
    /// The event was cancelled: every poll and join answers `CANCELLED` (set on the node that
    /// cancelled at once, on the others by the next decision tick's look at the store).
    cancelled: std::sync::atomic::AtomicBool,
    /// When the store last confirmed that no tier unit is held (unix ms), so that the check
    /// runs at most once a second.
    tiers_checked_ms: std::sync::atomic::AtomicI64,
    /// What is left to sell as this node's live seat map showed it at the last tick: free and
    /// held (`u64::MAX` free: not known yet).
    left_free: AtomicU64,
    left_held: AtomicU64,
    /// The most seats side by side still free in one row of any section (`u64::MAX`: not
    /// known, or no reserved seating): what a waiting party can expect.
    largest_block: AtomicU64,
    /// Holds granted through this node and their seats: the party size release assumes.
    holds_granted: AtomicU64,
    seats_granted: AtomicU64,
}

impl RoomHandle {
    /// What is left to sell at the last tick, with the party size measured so far (`None`
    /// before the seat map was read).
    pub fn inventory(&self) -> Option<Inventory> {
        let free = self.left_free.load(Ordering::Relaxed);
        if free == u64::MAX {
            return None;
        }
        let holds = self.holds_granted.load(Ordering::Relaxed);
        let seats = self.seats_granted.load(Ordering::Relaxed);
        Some(Inventory {
            free,
            held: self.left_held.load(Ordering::Relaxed),
            party_size: if holds == 0 {
                0.0
            } else {
                seats as f64 / holds as f64
            },
        })
    }

    /// The most seats side by side free in one row of any section at the last tick.
    pub fn largest_block(&self) -> Option<u32> {
        u32::try_from(self.largest_block.load(Ordering::Relaxed)).ok()
    }

    /// Nothing free now, but held seats may come back: waiting fans are told `ALL_HELD`.
    pub fn all_held(&self) -> bool {
        self.inventory()
            .is_some_and(|inventory| inventory.all_held())
    }

    pub fn view(&self) -> Arc<QueueView> {
        self.view.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_view(&self, view: QueueView) {
        *self.view.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(view);
    }

    pub fn polls(&self) -> u64 {
        self.polls.load(Ordering::Relaxed)
    }

    /// Release ticks this node has run for the room (one every [`TICK_MS`]).
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// Records the serving counter of a refresh and the release rate it shows.
    fn note_served(&self, serving: u64) {
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        served.push_back(serving);
        if served.len() > UNCLAIMED_WINDOW_TICKS {
            served.pop_front();
        }
        let window_s = (served.len() - 1) as f64 * TICK_MS as f64 / 1_000.0;
        let rate = match served.front() {
            Some(oldest) if window_s >= PACE_WINDOW_MIN_S => {
                (serving.saturating_sub(*oldest) as f64 / window_s) as u64
            }
            _ => u64::MAX,
        };
        self.released_per_s.store(rate, Ordering::Relaxed);
    }

    /// Whether this node last saw nothing left to sell.
    pub fn sold_out(&self) -> bool {
        self.sold_out.load(Ordering::Relaxed)
    }

    pub fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }
}

/// What a status poll answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollAnswer {
    Waiting {
        position: u64,
        ahead_of_you: u64,
        retry_after_s: u64,
        estimated_wait_s: u64,
        /// `ALL_HELD`: nothing is free now, but held seats may come back.
        reason: Option<&'static str>,
        /// The most seats side by side still free in one row (reserved seating).
        largest_block: Option<u32>,
    },
    Admitted {
        position: u64,
        token: String,
        admission: Admission,
    },
    Expired {
        position: u64,
    },
    /// Nothing is left to sell; the place is kept in case seats come back.
    SoldOut {
        position: u64,
        ahead_of_you: u64,
    },
    /// The event was cancelled: nothing will be sold.
    Cancelled {
        position: u64,
    },
}

/// Why a poll or an admission was refused.
#[derive(Debug, thiserror::Error)]
pub enum RoomError {
    #[error(transparent)]
    Ticket(#[from] QueueTicketError),
    #[error(transparent)]
    Admission(#[from] AdmissionError),
    #[error("the admission's shopping session has ended; poll the queue status for a new one")]
    SessionEnded,
    #[error(
        "your shopper slot went back to the queue (no hold within the hold window, or the last \
         hold ended or was refused) and every slot is taken: you are first in line; poll the \
         queue status to get one again"
    )]
    SlotGone,
    #[error(transparent)]
    Join(#[from] boxoffice_waitroom::queue::JoinError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("signing failed: {0}")]
    Signing(String),
}

/// A waiting fan's `reason` while everything left is held but not sold: seats may come back,
/// and release follows them.
pub const ALL_HELD: &str = "ALL_HELD";

/// Knobs of the waiting room (the defaults suit production; tests speed them up).
#[derive(Debug, Clone, Copy, Default)]
pub struct WaitingRoomOptions {
    /// Replaces every room's own controller settings (the event's `waitingRoom`) when set.
    pub controller: Option<ControllerConfig>,
}

/// The waiting rooms of this node. See the module docs.
#[derive(Clone)]
pub struct WaitingRoom {
    store: Arc<dyn RoomStore>,
    keys: TokenKeys,
    rooms: Arc<RwLock<HashMap<String, Arc<RoomHandle>>>>,
    node_id: Arc<str>,
    options: WaitingRoomOptions,
    pub meter: Arc<HealthMeter>,
    /// Queue tickets that verified (they carry no `exp`; the event and account are
    /// compared on every hit).
    tickets: Arc<TokenCache<QueueTicketClaims>>,
    /// Added to the wall clock: tests move the room's clock forward instead of sleeping
    /// (`advance_clock`); in production nothing moves it.
    clock_offset_ms: Arc<std::sync::atomic::AtomicI64>,
}

impl std::fmt::Debug for WaitingRoom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRoom")
            .field("backend", &self.store.backend())
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

/// Now, in unix milliseconds (the waiting room's clock).
pub fn unix_ms() -> i64 {
    unix_ms_of(time::OffsetDateTime::now_utc())
}

/// `at` in unix milliseconds.
pub fn unix_ms_of(at: time::OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The room settings of an event. The shuffle seed is drawn once, when the room is first
/// created; an existing room keeps its own (and logs it when it opens).
pub fn room_config(event: &EventRecord) -> RoomConfig {
    room_config_in(event, None)
}

/// The room settings of a lane (`lane`: a phase id): the phase's own `waitingRoom` when it
/// has one, else the event's; a lane's queue opens when its phase starts. Without `lane`,
/// or for a phase the event does not have, the event's room.
pub fn room_config_in(event: &EventRecord, lane: Option<&str>) -> RoomConfig {
    let phase = lane.and_then(|lane| event.sale.phases.iter().find(|p| p.phase_id == lane));
    let settings = phase
        .and_then(|phase| phase.waiting_room.as_ref())
        .unwrap_or(&event.waiting_room);
    let policy = match settings.policy {
        boxoffice_domain::event::QueuePolicy::Fifo => QueuePolicy::Fifo,
        boxoffice_domain::event::QueuePolicy::Random => QueuePolicy::Random,
    };
    let on_sale_at_ms = unix_ms_of(phase.map_or(event.on_sale_at, |phase| phase.starts_at));
    let mut queue = QueueConfig::new(policy, on_sale_at_ms, rand::random());
    queue.claim_window_ms = i64::from(settings.claim_window_seconds) * 1_000;
    RoomConfig {
        queue,
        max_active_shoppers: u64::from(settings.max_active_shoppers),
        admission_ttl_ms: i64::from(settings.admission_ttl_seconds) * 1_000,
        hold_window_ms: i64::from(settings.hold_window_seconds) * 1_000,
        release: ControllerConfig {
            start_release_per_s: u64::from(settings.start_release_per_second),
            max_release_per_s: u64::from(settings.max_release_per_second),
            target_hold_p99_ms: u64::from(settings.target_hold_p99_ms),
            ..ControllerConfig::default()
        },
    }
}

impl WaitingRoom {
    /// The room's clock: now in unix milliseconds, plus what a test advanced it by.
    pub fn now_ms(&self) -> i64 {
        unix_ms().saturating_add(self.clock_offset_ms.load(Ordering::Relaxed))
    }

    /// Moves this node's room clock forward by `ms` (tests: an idle slot's hold window, an
    /// admission's TTL, without sleeping).
    pub fn advance_clock(&self, ms: i64) {
        self.clock_offset_ms.fetch_add(ms, Ordering::Relaxed);
    }

    /// `secret` signs queue tickets and admission tokens (at least 16 bytes).
    pub fn new(
        store: Arc<dyn RoomStore>,
        secret: &[u8],
        options: WaitingRoomOptions,
    ) -> Result<Self, String> {
        Self::with_previous(store, secret, &[] as &[&[u8]], options)
    }

    /// As [`Self::new`], and tokens signed with one of `previous` still verify (a key
    /// rollover).
    pub fn with_previous<S: AsRef<[u8]>>(
        store: Arc<dyn RoomStore>,
        secret: &[u8],
        previous: &[S],
        options: WaitingRoomOptions,
    ) -> Result<Self, String> {
        Ok(Self {
            store,
            keys: TokenKeys::with_previous(secret, previous).map_err(|e| e.to_string())?,
            rooms: Arc::default(),
            node_id: uuid::Uuid::now_v7().to_string().into(),
            options,
            meter: Arc::default(),
            tickets: Arc::default(),
            clock_offset_ms: Arc::default(),
        })
    }

    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    pub fn keys(&self) -> &TokenKeys {
        &self.keys
    }

    /// The cached room of `key` (an event id, or a lane's [`room_key`]), if this node knows
    /// it.
    pub fn cached(&self, key: &str) -> Option<Arc<RoomHandle>> {
        self.rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
    }

    /// The cached rooms of `event_id`: its general room and its lanes' rooms.
    fn cached_of_event(&self, event_id: &str) -> Vec<Arc<RoomHandle>> {
        self.rooms
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|room| room.event_id == event_id)
            .cloned()
            .collect()
    }

    /// The general room of an event whose waiting room is enabled, created on first use.
    pub async fn room(&self, event: &EventRecord) -> Result<Arc<RoomHandle>, StateError> {
        self.room_in(event, None).await
    }

    /// The room of a lane of the event (`lane`: a phase id; `None`: the general room),
    /// created on first use.
    pub async fn room_in(
        &self,
        event: &EventRecord,
        lane: Option<&str>,
    ) -> Result<Arc<RoomHandle>, StateError> {
        let key = room_key(&event.event_id, lane);
        if let Some(room) = self.cached(&key) {
            return Ok(room);
        }
        let config = self
            .store
            .ensure_room(&key, room_config_in(event, lane))
            .await?;
        let room = self.adopt(&key, config).await?;
        let _ = room.event.set(Arc::new(event.clone()));
        Ok(room)
    }

    async fn adopt(&self, key: &str, config: RoomConfig) -> Result<Arc<RoomHandle>, StateError> {
        let (event_id, lane) = split_room_key(key);
        let view = self.store.view(key).await?;
        let stats = self.store.stats(key).await?;
        let settings = self.controller_config(&config);
        let mut controller = ReleaseController::new(settings);
        apply_controls(&mut controller, stats.controls, settings);
        let handle = Arc::new(RoomHandle {
            key: key.to_owned(),
            event_id: event_id.to_owned(),
            lane: lane.map(str::to_owned),
            config,
            view: RwLock::new(Arc::new(view)),
            control: Mutex::new(Control {
                controller,
                decision: None,
                carry: 0.0,
                history: VecDeque::new(),
                leader: false,
                decisions: VecDeque::new(),
            }),
            polls: AtomicU64::new(0),
            ticks: AtomicU64::new(0),
            rate_per_s: AtomicU64::new(settings.start_release_per_s),
            doubling_up_to: AtomicU64::new(0),
            served: Mutex::new(VecDeque::new()),
            released_per_s: AtomicU64::new(u64::MAX),
            event: std::sync::OnceLock::new(),
            sold_out: std::sync::atomic::AtomicBool::new(false),
            cancelled: std::sync::atomic::AtomicBool::new(false),
            tiers_checked_ms: std::sync::atomic::AtomicI64::new(0),
            left_free: AtomicU64::new(u64::MAX),
            left_held: AtomicU64::new(0),
            largest_block: AtomicU64::new(u64::MAX),
            holds_granted: AtomicU64::new(0),
            seats_granted: AtomicU64::new(0),
        });
        let mut rooms = self.rooms.write().unwrap_or_else(|e| e.into_inner());
        Ok(rooms.entry(key.to_owned()).or_insert(handle).clone())
    }

    /// The controller settings of a room: its own, unless the options replace them.
    fn controller_config(&self, config: &RoomConfig) -> ControllerConfig {
        self.options.controller.unwrap_or(config.release)
    }

    /// Loads every room the store knows (a restarted node resumes their release).
    pub async fn resume(&self) -> Result<usize, StateError> {
        let rooms = self.store.rooms().await?;
        let n = rooms.len();
        for (key, config) in rooms {
            if self.cached(&key).is_none() {
                self.adopt(&key, config).await?;
            }
        }
        Ok(n)
    }

    /// Joins `account_id` to the room; returns the signed queue ticket and the place. A fan
    /// who queues in a lane's room gets a ticket, then an admission, naming the lane.
    pub async fn join(
        &self,
        room: &RoomHandle,
        account_id: &str,
    ) -> Result<(String, boxoffice_waitroom::queue::Place, PollAnswer), RoomError> {
        let now_ms = self.now_ms();
        let place = self.store.join(&room.key, account_id, now_ms).await??;
        let ticket = self
            .keys
            .issue_queue_ticket_in_lane(
                &room.event_id,
                account_id,
                place.index,
                room.lane.as_deref(),
            )
            .map_err(|e| RoomError::Signing(e.to_string()))?;
        let view = room.view();
        let ahead = place.position.saturating_sub(view.serving + 1);
        let answer = if room.cancelled() {
            PollAnswer::Cancelled {
                position: place.position,
            }
        } else if room.sold_out() {
            PollAnswer::SoldOut {
                position: place.position,
                ahead_of_you: ahead,
            }
        } else {
            waiting(room, place.position, ahead)
        };
        Ok((ticket, place, answer))
    }

    /// Verifies a queue ticket for `account_id` on `event_id`; its `lane` names the room it
    /// is a place in.
    pub fn verify_ticket(
        &self,
        event_id: &str,
        ticket: &str,
        account_id: &str,
    ) -> Result<QueueTicketClaims, RoomError> {
        if let Some(claims) = self.tickets.get(ticket) {
            if claims.evt != event_id {
                return Err(QueueTicketError::OtherEvent.into());
            }
            if claims.sub != account_id {
                return Err(QueueTicketError::OtherAccount.into());
            }
            return Ok(claims);
        }
        let claims = self
            .keys
            .verify_queue_ticket(ticket, event_id, account_id)?;
        self.tickets.insert(ticket, claims.clone());
        Ok(claims)
    }

    /// The status poll of the hot path, from memory alone: the room cached, the queue ticket
    /// verified before (for this event and `account_id`), and the place waiting (or the
    /// house sold out). `None` for anything else — a first poll, a released place, a ticket
    /// of another account — which [`Self::verify_ticket`] and [`Self::poll`] answer.
    pub fn poll_cached(
        &self,
        event_id: &str,
        account_id: &str,
        ticket: &str,
    ) -> Option<PollAnswer> {
        let (index, room) = self
            .tickets
            .with(ticket, |claims| {
                (claims.evt == event_id && claims.sub == account_id).then(|| {
                    (
                        claims.idx,
                        match claims.lane.as_deref() {
                            None => self.cached(event_id),
                            lane => self.cached(&room_key(event_id, lane)),
                        },
                    )
                })
            })
            .flatten()?;
        let room = room?;
        let view = room.view();
        match view.status(index, self.now_ms()) {
            Status::Waiting {
                position,
                ahead_of_you,
                ..
            } => {
                room.polls.fetch_add(1, Ordering::Relaxed);
                Some(if room.cancelled() {
                    PollAnswer::Cancelled { position }
                } else if room.sold_out() {
                    PollAnswer::SoldOut {
                        position,
                        ahead_of_you,
                    }
                } else {
                    waiting(&room, position, ahead_of_you)
                })
            }
            Status::Released { .. } | Status::Expired { .. } => None,
        }
    }

    /// Answers a status poll: from the cached view, unless the account's turn has come.
    pub async fn poll(
        &self,
        room: &RoomHandle,
        claims: &QueueTicketClaims,
    ) -> Result<PollAnswer, RoomError> {
        room.polls.fetch_add(1, Ordering::Relaxed);
        let now_ms = self.now_ms();
        let view = room.view();
        if room.cancelled() {
            let (Status::Waiting { position, .. }
            | Status::Released { position }
            | Status::Expired { position }) = view.status(claims.idx, now_ms);
            return Ok(PollAnswer::Cancelled { position });
        }
        match view.status(claims.idx, now_ms) {
            Status::Waiting {
                position,
                ahead_of_you,
                ..
            } if room.sold_out() => Ok(PollAnswer::SoldOut {
                position,
                ahead_of_you,
            }),
            Status::Waiting {
                position,
                ahead_of_you,
                ..
            } => Ok(waiting(room, position, ahead_of_you)),
            // Released but not shopping yet: no admission into a sold-out sale (one already
            // taken is answered as before, so a reloaded page keeps its token).
            Status::Released { position }
                if room.sold_out()
                    && self
                        .store
                        .admission(&room.key, &claims.sub, now_ms)
                        .await?
                        .is_none() =>
            {
                Ok(PollAnswer::SoldOut {
                    position,
                    ahead_of_you: 0,
                })
            }
            Status::Released { position } | Status::Expired { position } => {
                self.claim(room, &claims.sub, position, now_ms).await
            }
        }
    }

    async fn claim(
        &self,
        room: &RoomHandle,
        account_id: &str,
        position: u64,
        now_ms: i64,
    ) -> Result<PollAnswer, RoomError> {
        let session_id = uuid::Uuid::now_v7().simple().to_string();
        match self
            .store
            .claim(&room.key, account_id, &session_id, now_ms)
            .await?
        {
            ClaimOutcome::Admitted(admission) => {
                let exp_s = u64::try_from(admission.expires_at_ms / 1_000).unwrap_or(0);
                let token = self
                    .keys
                    .issue_admission_in_lane(
                        &room.event_id,
                        account_id,
                        &admission.session_id,
                        exp_s,
                        room.lane.as_deref(),
                    )
                    .map_err(|e| RoomError::Signing(e.to_string()))?;
                Ok(PollAnswer::Admitted {
                    position,
                    token,
                    admission,
                })
            }
            // Released, but every slot is taken: first in line for the next free one.
            ClaimOutcome::Full | ClaimOutcome::NotReleased => Ok(PollAnswer::Waiting {
                position,
                ahead_of_you: 0,
                retry_after_s: 1,
                estimated_wait_s: 1,
                reason: room.all_held().then_some(ALL_HELD),
                largest_block: room.largest_block(),
            }),
            ClaimOutcome::Expired => Ok(PollAnswer::Expired { position }),
        }
    }

    /// Checks an admission token for a hold or checkout on `event`: signature, event,
    /// account, expiry, then that its session is still the account's live admission. With
    /// `take_slot` (a hold: the fan shops), the admission must also hold a shopper slot: one
    /// given back (idle past the hold window, a refused hold, a trip that ended) is taken
    /// again if one is free, else the fan is sent back to the head of the queue.
    pub async fn check_admission(
        &self,
        event: &EventRecord,
        account_id: &str,
        token: &str,
        take_slot: bool,
    ) -> Result<Option<String>, RoomError> {
        let now_ms = self.now_ms();
        let now_s = u64::try_from(now_ms / 1_000).unwrap_or(0);
        let claims = self
            .keys
            .verify_admission(token, &event.event_id, account_id, now_s)?;
        // The admission's lane names the room whose slot it takes.
        let room = self.room_in(event, claims.lane.as_deref()).await?;
        match self.store.admission(&room.key, account_id, now_ms).await? {
            Some(admission) if admission.session_id == claims.sid => {
                if !take_slot || admission.slot.is_some() {
                    return Ok(claims.lane);
                }
                match self
                    .store
                    .claim(&room.key, account_id, &admission.session_id, now_ms)
                    .await?
                {
                    ClaimOutcome::Admitted(again)
                        if again.session_id == claims.sid && again.slot.is_some() =>
                    {
                        metrics::counter!("boxoffice_waitroom_slots_retaken_total").increment(1);
                        Ok(claims.lane)
                    }
                    _ => Err(RoomError::SlotGone),
                }
            }
            _ => Err(RoomError::SessionEnded),
        }
    }

    /// A hold of `seats` was granted on `event_id` to a fan admitted in `lane` (`None`: the
    /// general room): counted for the party size release assumes.
    pub fn granted(&self, event_id: &str, lane: Option<&str>, seats: u32) {
        if let Some(room) = self.cached(&room_key(event_id, lane)) {
            room.holds_granted.fetch_add(1, Ordering::Relaxed);
            room.seats_granted
                .fetch_add(u64::from(seats), Ordering::Relaxed);
        }
    }

    /// The room where the account's shopping trip on `event_id` is: the general room, unless
    /// the event has lane rooms on this node and the account holds a slot in one of them
    /// (a lane first; an account shopping in two rooms of one event at once is rare).
    async fn trip_room(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> Result<Option<Arc<RoomHandle>>, StateError> {
        let rooms = self.cached_of_event(event_id);
        let mut general = None;
        for room in rooms {
            if room.lane.is_none() {
                general = Some(room);
            } else if self
                .store
                .admission(&room.key, account_id, now_ms)
                .await?
                .is_some_and(|admission| admission.slot.is_some())
            {
                return Ok(Some(room));
            }
        }
        Ok(general)
    }

    /// What a fan's request did to its shopper slot (a hold granted or refused, a checkout
    /// started), in the room of the admission's `lane` (`None`: the general room): the room
    /// moves the slot (`Op::Shop`). A failure of the room's state is logged, never the
    /// request's: the slot then lapses by its hold window or TTL.
    pub async fn shopped_in(
        &self,
        event_id: &str,
        lane: Option<&str>,
        account_id: &str,
        shop: Shop,
    ) {
        let Some(room) = self.cached(&room_key(event_id, lane)) else {
            return;
        };
        self.shop_room(&room, account_id, shop).await;
    }

    /// As [`Self::shopped_in`], for a request that does not carry the admission (a hold
    /// released, a checkout): the room is the one where the account shops.
    pub async fn shopped(&self, event_id: &str, account_id: &str, shop: Shop) {
        let room = match self.trip_room(event_id, account_id, self.now_ms()).await {
            Ok(Some(room)) => room,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, event_id, "waiting room: slot not moved");
                return;
            }
        };
        self.shop_room(&room, account_id, shop).await;
    }

    async fn shop_room(&self, room: &RoomHandle, account_id: &str, shop: Shop) {
        match self
            .store
            .shop(&room.key, account_id, shop, self.now_ms())
            .await
        {
            Ok(true) => {
                metrics::counter!("boxoffice_waitroom_slot_moves_total", "to" => shop.as_str())
                    .increment(1);
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, room = %room.key, "waiting room: slot not moved");
            }
        }
    }

    /// The account's shopping trip on `event_id` ended at `at_ms`: frees its slot (in the
    /// room where it shops, see [`Self::trip_room`]).
    pub async fn end(
        &self,
        event_id: &str,
        account_id: &str,
        at_ms: i64,
    ) -> Result<bool, StateError> {
        let Some(room) = self.trip_room(event_id, account_id, self.now_ms()).await? else {
            return Ok(false);
        };
        self.end_in(&room, account_id, at_ms).await
    }

    /// The account's shopping trip in `room` ended at `at_ms`: frees its slot.
    pub async fn end_in(
        &self,
        room: &RoomHandle,
        account_id: &str,
        at_ms: i64,
    ) -> Result<bool, StateError> {
        let ended = self.store.end(&room.key, account_id, at_ms).await?;
        if ended {
            self.meter.completed.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("boxoffice_waitroom_slots_returned_total").increment(1);
        }
        Ok(ended)
    }

    /// A hold of the account on `event_id` ended without a sale at `at_ms`: its slot goes
    /// back (`Shop::Ended`), the admission stays.
    pub async fn slot_back(
        &self,
        event_id: &str,
        account_id: &str,
        at_ms: i64,
    ) -> Result<bool, StateError> {
        let Some(room) = self.trip_room(event_id, account_id, self.now_ms()).await? else {
            return Ok(false);
        };
        let freed = self
            .store
            .shop(&room.key, account_id, Shop::Ended, at_ms)
            .await?;
        if freed {
            self.meter.completed.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("boxoffice_waitroom_slots_returned_total").increment(1);
        }
        Ok(freed)
    }

    /// The admin view of a room.
    pub async fn admin_view(&self, room: &RoomHandle) -> Result<AdminView, StateError> {
        let stats = self.store.stats(&room.key).await?;
        let control = room.control.lock().unwrap_or_else(|e| e.into_inner());
        Ok(AdminView {
            stats,
            // The cached view (at most one tick old): the whole view is not worth a read.
            opened: room.view().opened,
            config: room.config,
            controller: control.controller.config(),
            rate_per_s: control.controller.rate_per_s(),
            decision: control.decision.clone(),
            decisions: control.decisions.iter().cloned().collect(),
            leader: control.leader,
            polls: room.polls(),
            ticks: room.ticks(),
            sold_out: room.sold_out(),
        })
    }

    /// Sets the operator's controls and applies them to this node's controller at once.
    pub async fn set_controls(
        &self,
        room: &RoomHandle,
        controls: Controls,
    ) -> Result<Controls, StateError> {
        let controls = self.store.set_controls(&room.key, controls).await?;
        let mut control = room.control.lock().unwrap_or_else(|e| e.into_inner());
        apply_controls(
            &mut control.controller,
            controls,
            self.controller_config(&room.config),
        );
        Ok(controls)
    }

    /// Runs the rooms' ticks forever. `maps` tells whether anything is left to sell.
    pub async fn run(self, store: Arc<dyn Store>, maps: crate::runtime::seatmap::SeatMaps) {
        if let Err(error) = self.resume().await {
            tracing::warn!(%error, "could not load the waiting rooms; they load on first use");
        }
        let mut interval = tokio::time::interval(Duration::from_millis(TICK_MS));
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ticks: u64 = 0;
        let mut store_down = false;
        loop {
            interval.tick().await;
            let decide = ticks.is_multiple_of(u64::from(TICKS_PER_DECISION));
            if decide {
                store_down = !probe(store.as_ref()).await;
            }
            let signals = decide.then(|| self.meter.take());
            let rooms: Vec<Arc<RoomHandle>> = self
                .rooms
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .cloned()
                .collect();
            for room in rooms {
                if decide && !room.cancelled() {
                    self.mark_cancelled_from(&room, store.as_ref()).await;
                }
                self.mark_sold_out(&room, store.as_ref(), &maps).await;
                if let Some(event) = room.event.get()
                    && let Ok(map) = maps.get(event).await
                {
                    let (free, held) = map.left_at(self.now_ms());
                    room.left_held.store(held, Ordering::Relaxed);
                    room.left_free.store(free, Ordering::Relaxed);
                    let largest = map.largest_blocks().into_iter().map(|(_, n)| n).max();
                    room.largest_block
                        .store(largest.map_or(u64::MAX, u64::from), Ordering::Relaxed);
                }
                if let Err(error) = self.tick_room(&room, decide, signals, store_down).await {
                    tracing::warn!(room = %room.key, %error, "waiting-room tick failed");
                }
                room.ticks.fetch_add(1, Ordering::Relaxed);
            }
            ticks += 1;
        }
    }

    async fn tick_room(
        &self,
        room: &RoomHandle,
        decide: bool,
        signals: Option<Measured>,
        store_down: bool,
    ) -> Result<(), StateError> {
        let now_ms = self.now_ms();
        if decide {
            let leader = self
                .store
                .lead(&room.key, &self.node_id, LEAD_LEASE_MS)
                .await?;
            room.control
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .leader = leader;
        }
        let leader = room
            .control
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .leader;
        // One read of the counters per tick serves both the release plan (leader) and, once
        // a second, the metrics.
        let stats = if leader || decide {
            Some(self.store.stats(&room.key).await?)
        } else {
            None
        };
        if let Some(stats) = &stats {
            self.meter.set_queue_waiting(&room.key, stats.waiting > 0);
        }
        if let (true, Some(stats)) = (leader, &stats) {
            let release = {
                let mut control = room.control.lock().unwrap_or_else(|e| e.into_inner());
                apply_controls(
                    &mut control.controller,
                    stats.controls,
                    self.controller_config(&room.config),
                );
                control
                    .history
                    .push_back((stats.serving, stats.admitted_total));
                if control.history.len() > UNCLAIMED_WINDOW_TICKS {
                    control.history.pop_front();
                }
                let unclaimed = unclaimed(&control.history, stats);
                if let (true, Some(measured)) = (decide, signals) {
                    let second_ago = control
                        .history
                        .len()
                        .checked_sub(usize::try_from(TICKS_PER_DECISION).unwrap_or(10) + 1)
                        .and_then(|i| control.history.get(i).copied());
                    let signals = Signals {
                        hold_p99_ms: measured.hold_p99_ms,
                        writer_group_p99_ms: measured.writer_group_p99_ms,
                        writer_queue_depth: measured.writer_queue_depth,
                        store_errors: measured.store_errors,
                        store_down,
                        payment_error_rate: measured.payment_error_rate,
                        checkout_error_rate: measured.checkout_error_rate,
                        active: stats.active + unclaimed,
                        max_active: stats.max_active_shoppers,
                        admitted_per_s: second_ago.map_or(0, |(_, admitted)| {
                            stats.admitted_total.saturating_sub(admitted)
                        }),
                        completed_per_s: measured.completed,
                        sold_out: room.sold_out(),
                        inventory: room.inventory(),
                        shopping: stats.slots.idle + unclaimed,
                    };
                    let decision = control.controller.tick(&signals);
                    if control.decision.as_ref().map(|d| d.kind) != Some(decision.kind) {
                        tracing::info!(room = %room.key, reason = %decision.reason, "release rate");
                    }
                    room.rate_per_s
                        .store(decision.rate_per_s, Ordering::Relaxed);
                    room.doubling_up_to.store(
                        if decision.kind == DecisionKind::SlowStart {
                            control.controller.config().max_release_per_s
                        } else {
                            0
                        },
                        Ordering::Relaxed,
                    );
                    control.decisions.push_back((now_ms, decision.clone()));
                    if control.decisions.len() > DECISIONS_KEPT {
                        control.decisions.pop_front();
                    }
                    control.decision = Some(decision);
                }
                // Never more fans than the free inventory can serve (every tick, as slots).
                let room_left = room.inventory().map_or(u64::MAX, |inventory| {
                    if inventory.all_held() {
                        0
                    } else {
                        inventory.room_for(stats.slots.idle + unclaimed)
                    }
                });
                let free = stats
                    .max_active_shoppers
                    .saturating_sub(stats.active + unclaimed)
                    .min(room_left);
                if room.sold_out() {
                    control.carry = 0.0;
                    0
                } else {
                    plan_release(&mut control, free)
                }
            };
            let released = self.store.tick(&room.key, now_ms, release).await?;
            if released > 0 {
                metrics::counter!("boxoffice_waitroom_released_total", "event" => room.key.clone())
                    .increment(released);
            }
        }
        let view = self.store.view(&room.key).await?;
        if let (None, Some(opened)) = (room.view().opened, view.opened) {
            tracing::info!(
                room = %room.key,
                policy = ?room.config.queue.policy,
                permutation_seed = ?opened.permutation_seed,
                pre_queue_len = opened.pre_queue_len,
                "queue opened"
            );
        }
        room.note_served(view.serving);
        room.set_view(view);
        if let (true, Some(stats)) = (decide, &stats) {
            publish_metrics(room, stats);
        }
        Ok(())
    }
}

impl WaitingRoom {
    /// Marks the event's rooms (general and lanes) cancelled, on this node (the cancel route
    /// does it at once).
    pub fn mark_cancelled(&self, event_id: &str) {
        for room in self.cached_of_event(event_id) {
            room.cancelled.store(true, Ordering::Relaxed);
        }
    }

    /// Looks at the store for the room's event's cancellation (a failed look changes nothing).
    async fn mark_cancelled_from(&self, room: &RoomHandle, store: &dyn Store) {
        match store.event_cancelled(&room.event_id).await {
            Ok(true) => {
                tracing::info!(event_id = %room.event_id, "cancelled: queued fans are told");
                room.cancelled.store(true, Ordering::Relaxed);
            }
            Ok(false) => {}
            Err(error) => {
                tracing::debug!(event_id = %room.event_id, %error, "cancellation check failed");
            }
        }
    }

    /// Updates the room's sold-out flag; a failed check keeps the last one.
    async fn mark_sold_out(
        &self,
        room: &RoomHandle,
        store: &dyn Store,
        maps: &crate::runtime::seatmap::SeatMaps,
    ) {
        match self.sold_out_now(room, store, maps).await {
            Ok(sold_out) => {
                if room.sold_out.swap(sold_out, Ordering::Relaxed) != sold_out {
                    if sold_out {
                        tracing::info!(event_id = %room.event_id, "sold out: queued fans are told, release stops");
                    } else {
                        tracing::info!(event_id = %room.event_id, "seats are back on sale: release resumes");
                    }
                    metrics::gauge!("boxoffice_waitroom_sold_out", "event" => room.event_id.clone())
                        .set(if sold_out { 1.0 } else { 0.0 });
                }
            }
            Err(error) => {
                tracing::debug!(event_id = %room.event_id, %error, "sold-out check failed");
            }
        }
    }

    /// Whether nothing is left to sell: every seat sold on this node's live map (a seat held,
    /// even past its deadline, may come back), no tier unit available, and, when the event
    /// has tiers, no tier unit held by a live hold (asked of the store at most once every
    /// [`TIER_CHECK_INTERVAL_MS`], and only once the map shows nothing free).
    pub async fn sold_out_now(
        &self,
        room: &RoomHandle,
        store: &dyn Store,
        maps: &crate::runtime::seatmap::SeatMaps,
    ) -> Result<bool, boxoffice_store::StoreError> {
        let event = match room.event.get() {
            Some(event) => event.clone(),
            None => {
                let Some(event) = store.get_event(&room.event_id).await? else {
                    return Ok(false);
                };
                room.event.get_or_init(|| Arc::new(event)).clone()
            }
        };
        let map = maps.get(&event).await?;
        if !map.nothing_free() {
            room.tiers_checked_ms.store(0, Ordering::Relaxed);
            return Ok(false);
        }
        if event.tiers.is_empty() {
            return Ok(true);
        }
        let now_ms = self.now_ms();
        let checked = room.tiers_checked_ms.load(Ordering::Relaxed);
        if now_ms - checked < TIER_CHECK_INTERVAL_MS {
            return Ok(room.sold_out());
        }
        let counts = store.event_counts(&event).await?;
        room.tiers_checked_ms.store(now_ms, Ordering::Relaxed);
        Ok(counts
            .tiers
            .iter()
            .all(|(_, counts)| counts.available <= 0 && counts.held <= 0))
    }
}

/// Released accounts that have not claimed yet, over the last ten seconds: released minus
/// newly admitted. They will want slots soon, so release does not hand their slots to others.
fn unclaimed(history: &VecDeque<(u64, u64)>, stats: &RoomStats) -> u64 {
    let Some(&(serving_then, admitted_then)) = history.front() else {
        return 0;
    };
    let released = stats.serving.saturating_sub(serving_then);
    let admitted = stats.admitted_total.saturating_sub(admitted_then);
    released.saturating_sub(admitted)
}

/// How many positions this tick releases: a tenth of the decided rate (fractions carried),
/// never more than the shopper slots free right now. Checking free slots every tick, not
/// once a second, lets short shopping trips turn slots over quickly. A pause is read every
/// tick too: the decision is once a second, and a release between the operator's pause and
/// the next decision would let in someone the operator meant to hold back.
fn plan_release(control: &mut Control, free: u64) -> u64 {
    let Some(decision) = &control.decision else {
        return 0;
    };
    if control.controller.paused()
        || matches!(
            decision.kind,
            DecisionKind::Paused | DecisionKind::StoppedStoreDown
        )
    {
        control.carry = 0.0;
        return 0;
    }
    let slice = decision.rate_per_s as f64 / f64::from(TICKS_PER_DECISION);
    control.carry = (control.carry + slice).min(slice.max(1.0) * 2.0);
    let n = (control.carry.floor() as u64).min(free);
    control.carry -= n as f64;
    n
}

fn apply_controls(
    controller: &mut ReleaseController,
    controls: Controls,
    defaults: ControllerConfig,
) {
    controller.set_paused(controls.paused);
    let cap = controls
        .max_release_per_s
        .unwrap_or(defaults.max_release_per_s);
    if controller.config().max_release_per_s != cap {
        controller.set_max_release_per_s(cap);
    }
}

async fn probe(store: &dyn Store) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_millis(STORE_PROBE_TIMEOUT_MS), store.ping()).await,
        Ok(Ok(()))
    )
}

fn waiting(room: &RoomHandle, position: u64, ahead_of_you: u64) -> PollAnswer {
    let released = room.released_per_s.load(Ordering::Relaxed);
    // Poll often near the head, rarely far back: about four polls before the turn comes.
    let (estimated_wait_s, retry_after_s) = pace(
        ahead_of_you,
        room.rate_per_s.load(Ordering::Relaxed),
        (released != u64::MAX).then_some(released),
        Some(room.doubling_up_to.load(Ordering::Relaxed)).filter(|&cap| cap > 0),
        POLL_INTERVAL_MAX_S,
    );
    // Near the head while release follows the seats that come back: poll often enough that
    // a returned seat finds its fan at once.
    let retry_after_s = match room.inventory() {
        Some(inventory) if inventory.returns_reach(ahead_of_you) => {
            retry_after_s.min(boxoffice_waitroom::controller::RETURNS_POLL_S)
        }
        _ => retry_after_s,
    };
    PollAnswer::Waiting {
        position,
        ahead_of_you,
        retry_after_s,
        estimated_wait_s,
        reason: room.all_held().then_some(ALL_HELD),
        largest_block: room.largest_block(),
    }
}

fn publish_metrics(room: &RoomHandle, stats: &RoomStats) {
    let event = room.key.clone();
    let rate = room
        .control
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .controller
        .rate_per_s();
    metrics::gauge!("boxoffice_waitroom_waiting", "event" => event.clone())
        .set(stats.waiting as f64);
    metrics::gauge!("boxoffice_waitroom_serving", "event" => event.clone())
        .set(stats.serving as f64);
    metrics::gauge!("boxoffice_waitroom_active_shoppers", "event" => event.clone())
        .set(stats.active as f64);
    metrics::gauge!("boxoffice_waitroom_max_active_shoppers", "event" => event.clone())
        .set(stats.max_active_shoppers as f64);
    metrics::counter!("boxoffice_waitroom_admitted_total", "event" => event.clone())
        .absolute(stats.admitted_total);
    metrics::gauge!("boxoffice_waitroom_release_rate_per_second", "event" => event.clone())
        .set(rate as f64);
    metrics::counter!("boxoffice_waitroom_polls_total", "event" => event).absolute(room.polls());
}

/// What `GET /v1/admin/events/{eventId}/queue` shows.
#[derive(Debug, Clone)]
pub struct AdminView {
    pub stats: RoomStats,
    pub opened: Option<boxoffice_waitroom::queue::Opened>,
    pub config: RoomConfig,
    /// The settings the controller runs with (the event's, or the options').
    pub controller: ControllerConfig,
    pub rate_per_s: u64,
    pub decision: Option<Decision>,
    /// The last decisions with their time (unix ms), oldest first.
    pub decisions: Vec<(i64, Decision)>,
    pub leader: bool,
    pub polls: u64,
    pub ticks: u64,
    pub sold_out: bool,
}

/// Frees shopper slots when the outbox relay delivers the end of a shopping trip.
#[derive(Debug, Clone)]
pub struct SlotReturner {
    pub waitroom: WaitingRoom,
    pub store: Arc<dyn Store>,
}

#[async_trait::async_trait]
impl OutboxListener for SlotReturner {
    async fn delivered(&self, message: &OutboxMessage) -> Result<(), String> {
        if self.waitroom.cached_of_event(&message.event_id).is_empty() {
            return Ok(());
        }
        let payload: serde_json::Value = serde_json::from_str(&message.payload).unwrap_or_default();
        // A hold that ended without a sale gives the slot back (the admission stays for
        // another try); a confirmed order ends the trip, admission and all.
        let (account_id, trip_over) = match message.topic.as_str() {
            topic::HOLD_RELEASED | topic::HOLD_EXPIRED => {
                let hold_id = payload["holdId"].as_str().unwrap_or_default();
                let account = self
                    .store
                    .get_hold(hold_id)
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|hold| hold.account_id);
                (account, false)
            }
            topic::ORDER_CONFIRMED | topic::ORDER_CANCELLED => {
                let order_id = payload["orderId"].as_str().unwrap_or_default();
                let account = self
                    .store
                    .get_order(order_id)
                    .await
                    .map_err(|e| e.to_string())?
                    .map(|order| order.account_id);
                (account, message.topic == topic::ORDER_CONFIRMED)
            }
            _ => (None, false),
        };
        let Some(account_id) = account_id else {
            return Ok(());
        };
        let at_ms = unix_ms_of(message.created_at);
        if trip_over {
            self.waitroom
                .end(&message.event_id, &account_id, at_ms)
                .await
                .map_err(|e| e.to_string())?;
        } else {
            self.waitroom
                .slot_back(&message.event_id, &account_id, at_ms)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running_control() -> Control {
        Control {
            controller: ReleaseController::new(ControllerConfig::default()),
            decision: Some(Decision {
                kind: DecisionKind::Increased,
                rate_per_s: 100,
                release_count: 100,
                reason: "test".to_owned(),
            }),
            carry: 0.0,
            history: VecDeque::new(),
            leader: true,
            decisions: VecDeque::new(),
        }
    }

    #[test]
    fn a_running_decision_releases_a_tenth_of_its_rate_per_tick() {
        let mut control = running_control();
        assert_eq!(plan_release(&mut control, 1_000), 10);
        assert_eq!(
            plan_release(&mut control, 3),
            3,
            "never more than the free slots"
        );
    }

    /// The operator pauses between two decisions: the next tick releases nobody, though the
    /// last decision (a second old at most) still says "running".
    #[test]
    fn a_pause_stops_release_at_the_next_tick_not_the_next_decision() {
        let mut control = running_control();
        control.controller.set_paused(true);
        assert_eq!(plan_release(&mut control, 1_000), 0);
        assert_eq!(control.carry, 0.0);
        control.controller.set_paused(false);
        assert_eq!(plan_release(&mut control, 1_000), 10);
    }
}
