//! The discrete-event loop: one binary heap of events keyed by (simulated microsecond,
//! sequence number), so two events at the same instant run in the order they were scheduled
//! and a seed always gives the same run. Every event processed adds one canonical line to the
//! trace hash.
//!
//! This file owns time, the loop, the waiting room's 100 ms tick and the release controller's
//! once-a-second decision (mirroring `server/src/runtime/waitroom.rs`: `tick_room`,
//! `plan_release`, `unclaimed`, `waiting`). The fans are in `fans.rs`, the event writer in `writer.rs`.

use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::SaleRules;
use boxoffice_waitroom::controller::{
    Decision, DecisionKind, Inventory, ReleaseController, Signals,
};
use boxoffice_waitroom::queue::{QueueConfig, QueuePolicy};
use boxoffice_waitroom::room::{Op, Room, RoomConfig, RoomStats};
use sha2::{Digest, Sha256};
use time::Duration;

use crate::config::{FaultPlan, SeatLayout, SimConfig};
use crate::fans::{Fan, FanStep, Stage};
use crate::ledger::Ledger;
use crate::report::{
    Ending, LastSeats, Report, SecondSample, Violation, ViolationKind, WaitlistFigures,
};
use crate::rng::SplitMix64;
use crate::store::SimStore;
use crate::writer::Writer;

/// The simulation's epoch: simulated time 0, when the doors (the pre-queue) open.
pub(crate) const EPOCH: OffsetDateTime = time::macros::datetime!(2026-12-01 10:00 UTC);
/// How often the room ticks (`server/src/runtime/waitroom.rs` `TICK_MS`), in microseconds.
pub(crate) const TICK_US: u64 = 100_000;
/// Ticks per controller decision: one a second.
pub(crate) const TICKS_PER_DECISION: u64 = 10;
/// Ticks of history used to count released accounts that have not claimed yet (10 s).
pub(crate) const UNCLAIMED_WINDOW_TICKS: usize = 100;
/// Longest poll interval `Retry-After` suggests, in seconds.
pub(crate) const POLL_INTERVAL_MAX_S: u64 = 20;
/// Violations kept in the report (all are counted).
pub(crate) const VIOLATIONS_KEPT_MAX: usize = 200;

/// Milliseconds of `at` after [`EPOCH`].
pub(crate) fn epoch_ms(at: OffsetDateTime) -> i64 {
    i64::try_from((at - EPOCH).whole_milliseconds()).unwrap_or(i64::MAX)
}

/// The store's clock at simulated microsecond `at_us`, in whole milliseconds like the real
/// store's.
pub(crate) fn store_clock(at_us: u64) -> OffsetDateTime {
    EPOCH + Duration::milliseconds(i64::try_from(at_us / 1_000).unwrap_or(i64::MAX))
}

/// Something that happens at one simulated instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    Fan {
        fan: u32,
        step: FanStep,
    },
    RoomTick,
    /// The group's commit finished (committed or failed: decided when it was sent).
    CommitDone {
        group: u64,
    },
    /// An engine load finished.
    LoadDone {
        load: u64,
        ok: bool,
    },
    /// The earliest hold deadline of the engine may have passed.
    WriterTimer,
    WriterCrash,
    WriterRestart,
}

/// An event in the heap; the smallest (time, sequence) pops first.
#[derive(Debug)]
struct Scheduled {
    at_us: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at_us, self.seq) == (other.at_us, other.seq)
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Reversed: `BinaryHeap` is a max-heap.
        (other.at_us, other.seq).cmp(&(self.at_us, self.seq))
    }
}

/// The release side of the room, as `server/src/runtime/waitroom.rs` keeps it per room.
#[derive(Debug)]
pub(crate) struct Release {
    pub(crate) controller: ReleaseController,
    pub(crate) decision: Option<Decision>,
    /// Fraction of a position carried to the next tick.
    carry: f64,
    /// (serving, admitted_total) once per tick, newest last.
    history: VecDeque<(u64, u64)>,
    /// The rate polls are paced by (`Retry-After`).
    pub(crate) rate_per_s: u64,
    /// While slow start doubles the rate: the cap it doubles towards.
    doubling_up_to: Option<u64>,
}

/// Measurements of the current simulated second, read by the controller's next decision.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    pub(crate) hold_latencies_us: Vec<u64>,
    pub(crate) group_latencies_us: Vec<u64>,
    pub(crate) queue_depth_max: u64,
    pub(crate) store_errors: u32,
    pub(crate) payment_attempts: u64,
    pub(crate) payment_errors: u64,
    pub(crate) checkouts: u64,
    pub(crate) checkout_errors: u64,
    pub(crate) completed: u64,
}

/// Whole-run counters and latency samples (microseconds).
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) hold_latencies_us: Vec<u64>,
    pub(crate) checkout_latencies_us: Vec<u64>,
    pub(crate) payment_latencies_us: Vec<u64>,
    pub(crate) group_latencies_us: Vec<u64>,
    pub(crate) groups_committed: u64,
    pub(crate) groups_failed: u64,
    pub(crate) expiry_groups: u64,
    pub(crate) commands: u64,
    pub(crate) loads: u64,
    pub(crate) load_failures: u64,
    pub(crate) store_errors: u64,
    pub(crate) joins: u64,
    pub(crate) polls: u64,
    /// Polls of sleeping fans, counted without an event each.
    pub(crate) polls_aggregated: u64,
    pub(crate) holds_granted: u64,
    /// Seats of the holds granted (the party size release assumes is their mean).
    pub(crate) seats_granted: u64,
    pub(crate) payment_attempts: u64,
    pub(crate) payment_errors: u64,
    pub(crate) answers_lost: u64,
    /// Slots taken again by admitted fans whose slot had gone back (a second try).
    pub(crate) slots_retaken: u64,
    pub(crate) engine_checks: u64,
    pub(crate) room_checks: u64,
    pub(crate) endings: [u64; Ending::ALL.len()],
    /// The waiting list's figures, from the committed effects and the fans.
    pub(crate) waitlist: WaitlistFigures,
}

/// One run. See the module docs.
#[derive(Debug)]
pub(crate) struct Sim {
    pub(crate) config: SimConfig,
    pub(crate) rules: SaleRules,
    pub(crate) rng: SplitMix64,
    pub(crate) faults: FaultPlan,
    pub(crate) now_us: u64,
    heap: BinaryHeap<Scheduled>,
    seq: u64,
    events: u64,
    trace: Sha256,
    trace_line: String,
    trace_lines: u64,
    pub(crate) fans: Vec<Fan>,
    pub(crate) fans_ended: u32,
    /// Fans on the waiting list, waiting for an offer.
    pub(crate) fans_listed: u32,
    pub(crate) room: Room,
    pub(crate) release: Release,
    pub(crate) writer: Writer,
    pub(crate) store: SimStore,
    pub(crate) ledger: Ledger,
    pub(crate) meter: Meter,
    /// What is left to sell as of the last tick (a scan of the seats once a tick, not per
    /// poll).
    pub(crate) left: Inventory,
    pub(crate) totals: Totals,
    series: Vec<SecondSample>,
    /// Door requests (joins and polls) by simulated second; sleeping fans' polls are added
    /// ahead of time.
    door_by_second: Vec<u64>,
    /// When the engine's invariants last ran.
    last_engine_check_us: Option<u64>,
    violations: Vec<Violation>,
    violations_total: u64,
    pub(crate) sold_out_at_us: Option<u64>,
    /// Fans waiting in the queue when the last seat sold.
    pub(crate) waiting_at_sold_out: u64,
    /// Admissions started after the last seat sold (release must stop).
    admitted_at_sold_out: Option<u64>,
    pub(crate) planted: Option<String>,
    ticks: u64,
    /// The last event that did something (a sleeper's wake-up after an earlier wake does not).
    last_activity_us: u64,
    peak_queue: u64,
    /// Admissions started before the current second (for admitted/s).
    admitted_before: u64,
}

impl Sim {
    pub(crate) fn new(config: SimConfig) -> Self {
        let mut rng = SplitMix64::new(config.seed);
        let on_sale_ms = u64::from(config.on_sale_at_s) * 1_000;
        // The fault plan has its own stream, so turning faults on or off changes nothing else
        // about the crowd's first draws.
        let mut fault_rng = rng.fork();
        let faults = if config.faults {
            FaultPlan::draw(&mut fault_rng, on_sale_ms)
        } else {
            FaultPlan::default()
        };
        let mut queue = QueueConfig::new(
            QueuePolicy::Random,
            i64::try_from(on_sale_ms).unwrap_or(i64::MAX),
            rng.next_u64(),
        );
        queue.claim_window_ms = i64::from(config.claim_window_s) * 1_000;
        let room = Room::new(RoomConfig {
            queue,
            max_active_shoppers: config.max_active_shoppers,
            admission_ttl_ms: i64::from(config.admission_ttl_s) * 1_000,
            hold_window_ms: i64::from(config.hold_window_s) * 1_000,
            release: config.controller,
        });
        let rules = SaleRules {
            on_sale_at: EPOCH + Duration::seconds(i64::from(config.on_sale_at_s)),
            section_order: (0..config.layout.sections)
                .map(SeatLayout::section_name)
                .collect(),
            hold_ttl_s: config.hold_ttl_s,
            max_seats_per_hold: 4,
            max_tickets_per_account: 4,
            currency: "EUR".to_owned(),
            prices: Default::default(),
            accessibility: Default::default(),
        };
        let store = SimStore::new(&config.layout, config.waitlist_offer_ttl_s);
        let ledger = Ledger::new(&config.layout);
        let release = Release {
            controller: ReleaseController::new(config.controller),
            decision: None,
            carry: 0.0,
            history: VecDeque::new(),
            rate_per_s: config.controller.start_release_per_s,
            doubling_up_to: None,
        };
        Self {
            fans: vec![Fan::default(); config.fans as usize],
            rules,
            rng,
            faults,
            now_us: 0,
            heap: BinaryHeap::new(),
            seq: 0,
            events: 0,
            trace: Sha256::new(),
            trace_line: String::new(),
            trace_lines: 0,
            fans_ended: 0,
            fans_listed: 0,
            room,
            release,
            writer: Writer::default(),
            store,
            ledger,
            meter: Meter::default(),
            totals: Totals::default(),
            series: Vec::new(),
            door_by_second: Vec::new(),
            last_engine_check_us: None,
            violations: Vec::new(),
            violations_total: 0,
            sold_out_at_us: None,
            waiting_at_sold_out: 0,
            admitted_at_sold_out: None,
            planted: None,
            ticks: 0,
            last_activity_us: 0,
            peak_queue: 0,
            left: Inventory {
                free: 0,
                held: 0,
                party_size: 0.0,
            },
            admitted_before: 0,
            config,
        }
    }

    pub(crate) fn run(mut self) -> Report {
        let start = format!(
            "start seed {} fans {} seats {} faults {:?}",
            self.config.seed,
            self.config.fans,
            self.config.layout.seats(),
            self.faults
        );
        self.trace(format_args!("{start}"));
        if self.config.fans > 0 {
            let first = self.arrival_us(0);
            self.schedule_at(
                first,
                Event::Fan {
                    fan: 0,
                    step: FanStep::Arrive,
                },
            );
        }
        self.schedule_at(0, Event::RoomTick);
        self.schedule_at(0, Event::WriterTimer);
        if let Some((at_ms, _)) = self.faults.writer_crash {
            self.schedule_at(at_ms * 1_000, Event::WriterCrash);
        }
        let limit_us = self.config.time_limit_s * 1_000_000;
        while let Some(next) = self.heap.pop() {
            if next.at_us > limit_us {
                self.violation(
                    ViolationKind::Unfinished,
                    format!(
                        "still running at the time limit ({} s)",
                        self.config.time_limit_s
                    ),
                );
                break;
            }
            self.now_us = next.at_us;
            self.events += 1;
            self.handle(next.event);
        }
        self.finish()
    }

    fn handle(&mut self, event: Event) {
        if let Event::Fan { fan, step } = event {
            self.trace(format_args!("fan {fan} {}", step.as_str()));
            if step == FanStep::Wake && self.fans[fan as usize].stage != Stage::Sleeping {
                // Woken earlier by the sell-out: nothing happens.
                return;
            }
        }
        self.last_activity_us = self.now_us;
        match event {
            Event::Fan { fan, step } => self.fan_step(fan, step),
            Event::RoomTick => self.room_tick(),
            Event::CommitDone { group } => self.commit_done(group),
            Event::LoadDone { load, ok } => self.load_done(load, ok),
            Event::WriterTimer => self.writer_timer(),
            Event::WriterCrash => self.writer_crash(),
            Event::WriterRestart => self.writer_restart(),
        }
    }

    pub(crate) fn schedule_at(&mut self, at_us: u64, event: Event) {
        self.seq += 1;
        self.heap.push(Scheduled {
            at_us: at_us.max(self.now_us),
            seq: self.seq,
            event,
        });
    }

    pub(crate) fn schedule_in(&mut self, delay_us: u64, event: Event) {
        self.schedule_at(self.now_us + delay_us, event);
    }

    pub(crate) fn now_ms(&self) -> i64 {
        i64::try_from(self.now_us / 1_000).unwrap_or(i64::MAX)
    }

    /// Adds one canonical line, prefixed with the simulated microsecond, to the trace hash.
    pub(crate) fn trace(&mut self, line: std::fmt::Arguments<'_>) {
        self.trace_line.clear();
        let _ = write!(self.trace_line, "{} ", self.now_us);
        let _ = self.trace_line.write_fmt(line);
        self.trace_line.push('\n');
        self.trace.update(self.trace_line.as_bytes());
        self.trace_lines += 1;
    }

    pub(crate) fn violation(&mut self, kind: ViolationKind, detail: String) {
        self.trace(format_args!("violation {} {detail}", kind.as_str()));
        self.violations_total += 1;
        if self.violations.len() < VIOLATIONS_KEPT_MAX {
            self.violations.push(Violation {
                at_s: self.now_us as f64 / 1e6,
                kind,
                detail,
            });
        }
    }

    pub(crate) fn store_down(&self, at_us: u64) -> bool {
        self.faults
            .store_down
            .is_some_and(|window| window.contains(at_us / 1_000))
    }

    /// When fan `fan` arrives: fan `i` of `n` at the window's quantile `(i + u) / n` (`u`
    /// uniform), so arrivals come in fan order and only the next one is ever scheduled.
    pub(crate) fn arrival_us(&mut self, fan: u32) -> u64 {
        let n = f64::from(self.config.fans.max(1));
        let u = (f64::from(fan) + self.rng.unit()) / n;
        let share = match self.config.arrival {
            crate::config::ArrivalShape::Uniform => u,
            crate::config::ArrivalShape::FrontLoaded if u < 0.5 => u / 0.5 * 0.1,
            crate::config::ArrivalShape::FrontLoaded => 0.1 + (u - 0.5) / 0.5 * 0.9,
        };
        (share * f64::from(self.config.arrival_window_s) * 1e6) as u64
    }

    /// Counts a door request made at `at_us`.
    pub(crate) fn door_request_at(&mut self, at_us: u64) {
        let second = (at_us / 1_000_000) as usize;
        if self.door_by_second.len() <= second {
            self.door_by_second.resize(second + 1, 0);
        }
        self.door_by_second[second] += 1;
    }

    /// Takes back a door request counted ahead of time at `at_us`.
    pub(crate) fn door_request_uncounted(&mut self, at_us: u64) {
        if let Some(count) = self.door_by_second.get_mut((at_us / 1_000_000) as usize) {
            *count = count.saturating_sub(1);
        }
    }

    /// `Retry-After` for a fan `ahead_of_you` positions from its turn (`waiting()` in
    /// `server/src/runtime/waitroom.rs`): about four polls before the turn comes, 1-20 s.
    /// The server's pacing (`controller::pace`): the controller's rate, or what the last
    /// ticks really released when lower.
    pub(crate) fn retry_after_s(&self, ahead_of_you: u64) -> u64 {
        let history = &self.release.history;
        let window_s = history.len().saturating_sub(1) as f64 / 10.0;
        let released_per_s = match (history.front(), history.back()) {
            (Some((oldest, _)), Some((newest, _)))
                if window_s >= boxoffice_waitroom::controller::PACE_WINDOW_MIN_S =>
            {
                Some((newest.saturating_sub(*oldest) as f64 / window_s) as u64)
            }
            _ => None,
        };
        let retry_s = boxoffice_waitroom::controller::pace(
            ahead_of_you,
            self.release.rate_per_s,
            released_per_s,
            self.release.doubling_up_to,
            POLL_INTERVAL_MAX_S,
        )
        .1;
        if self.left.returns_reach(ahead_of_you) {
            retry_s.min(boxoffice_waitroom::controller::RETURNS_POLL_S)
        } else {
            retry_s
        }
    }

    /// The room's 100 ms tick: once a second the controller decides from the second's
    /// signals; every tick releases a tenth of the rate, never more than the free slots, and
    /// nothing while sold out.
    fn room_tick(&mut self) {
        self.ticks += 1;
        let now_ms = self.now_ms();
        let stats = self.room.stats();
        self.release
            .history
            .push_back((stats.serving, stats.admitted_total));
        if self.release.history.len() > UNCLAIMED_WINDOW_TICKS {
            self.release.history.pop_front();
        }
        let unclaimed = unclaimed(&self.release.history, &stats);
        let sold_out = self.store.sold_out();
        let inventory = self.inventory();
        self.left = inventory;
        let shopping = stats.slots.idle + unclaimed;
        if self.now_us > 0 && self.now_us.is_multiple_of(TICKS_PER_DECISION * TICK_US) {
            self.close_second(&stats, unclaimed, sold_out, inventory, shopping);
        }
        // Never more fans than the free inventory can serve (checked every tick, as slots).
        let room = if inventory.all_held() {
            0
        } else {
            inventory.room_for(shopping)
        };
        let free = stats
            .max_active_shoppers
            .saturating_sub(stats.active + unclaimed)
            .min(room);
        let release = if sold_out {
            self.release.carry = 0.0;
            0
        } else {
            plan_release(&mut self.release, free)
        };
        let released = match self.room.apply(&Op::Tick { now_ms, release }) {
            boxoffice_waitroom::room::OpResult::Ticked { released } => released,
            other => {
                self.violation(
                    ViolationKind::Unexpected,
                    format!("a tick answered {other:?}"),
                );
                0
            }
        };
        self.trace(format_args!("tick release {release} released {released}"));
        self.peak_queue = self.peak_queue.max(self.room.stats().waiting);
        if self
            .ticks
            .is_multiple_of(self.config.room_checks_every_ticks)
        {
            self.check_room();
        }
        self.end_the_list_if_nothing_can_come_back(sold_out);
        if self.fans_ended < self.config.fans {
            self.schedule_in(TICK_US, Event::RoomTick);
        }
    }

    /// The sale ended unsold: every fan's story is over but the waiting list's, nothing is
    /// held (so nothing can come back) and the writer has nothing to do. Seats are left that
    /// no entry can take; the fans still on the list end [`Ending::StillWaiting`].
    fn end_the_list_if_nothing_can_come_back(&mut self, sold_out: bool) {
        if sold_out
            || self.fans_listed == 0
            || self.fans_ended + self.fans_listed < self.config.fans
            || !self.writer.idle()
            || self.store.held() > 0
        {
            return;
        }
        let ended = self.end_listed(Ending::StillWaiting);
        self.totals.waitlist.waiting_at_end += ended;
        self.trace(format_args!(
            "sale over unsold, {ended} on the waiting list"
        ));
    }

    /// Ends a simulated second: the controller decides (once the sale is open) and the
    /// second's sample is kept.
    /// What is left to sell, as the server's seat map would show it now.
    fn inventory(&self) -> Inventory {
        let (free, held) = self.store.inventory_at(store_clock(self.now_us));
        Inventory {
            free,
            held,
            party_size: if self.totals.holds_granted == 0 {
                0.0
            } else {
                self.totals.seats_granted as f64 / self.totals.holds_granted as f64
            },
        }
    }

    fn close_second(
        &mut self,
        stats: &RoomStats,
        unclaimed: u64,
        sold_out: bool,
        inventory: Inventory,
        shopping: u64,
    ) {
        let now_ms = self.now_ms();
        let meter = std::mem::take(&mut self.meter);
        let mut holds = meter.hold_latencies_us;
        holds.extend(self.writer.hold_ages(self.now_us));
        let hold_p99_ms = p99_ms(&mut holds);
        let mut groups = meter.group_latencies_us;
        let writer_group_p99_ms = p99_ms(&mut groups);
        let store_down = self.store_down(self.now_us);
        let admitted = stats.admitted_total - self.admitted_before;
        self.admitted_before = stats.admitted_total;
        let open = now_ms >= i64::from(self.config.on_sale_at_s) * 1_000;
        if open {
            let signals = Signals {
                hold_p99_ms,
                writer_group_p99_ms,
                writer_queue_depth: meter.queue_depth_max,
                store_errors: meter.store_errors,
                store_down,
                payment_error_rate: share(meter.payment_errors, meter.payment_attempts),
                checkout_error_rate: share(meter.checkout_errors, meter.checkouts),
                active: stats.active + unclaimed,
                max_active: stats.max_active_shoppers,
                admitted_per_s: admitted,
                completed_per_s: meter.completed,
                sold_out,
                inventory: Some(inventory),
                shopping,
            };
            let decision = self.release.controller.tick(&signals);
            self.trace(format_args!(
                "decide {} rate {} release {}",
                decision.kind.as_str(),
                decision.rate_per_s,
                decision.release_count
            ));
            self.release.rate_per_s = decision.rate_per_s;
            self.release.doubling_up_to = (decision.kind == DecisionKind::SlowStart)
                .then(|| self.release.controller.config().max_release_per_s);
            self.release.decision = Some(decision);
        }
        let decision = self.release.decision.as_ref();
        self.series.push(SecondSample {
            t_s: u32::try_from(now_ms / 1_000).unwrap_or(u32::MAX),
            waiting: stats.waiting,
            active: stats.active,
            admitted,
            door_requests: self
                .door_by_second
                .get(usize::try_from(now_ms / 1_000 - 1).unwrap_or(0))
                .copied()
                .unwrap_or(0),
            hold_p99_ms,
            writer_group_p99_ms,
            queue_depth: meter.queue_depth_max,
            rate_per_s: self.release.rate_per_s,
            release_count: decision.map_or(0, |d| d.release_count),
            decision: decision.map_or("closed", |d| d.kind.as_str()).to_owned(),
            reason: decision.map_or_else(
                || "the sale has not opened".to_owned(),
                |d| d.reason.clone(),
            ),
            seats_sold: self.store.sold,
            seats_held: self.store.held(),
            store_down,
        });
    }

    fn check_room(&mut self) {
        self.totals.room_checks += 1;
        let room = &self.room;
        let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| room.invariants()));
        if let Err(panic) = checked {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "room invariant failed".to_owned());
            self.violation(ViolationKind::RoomInvariant, message);
        }
    }

    /// The last seat sold: remember how many wait and how many were admitted by now.
    pub(crate) fn sold_out_now(&mut self) {
        if self.sold_out_at_us.is_some() {
            return;
        }
        let stats = self.room.stats();
        self.sold_out_at_us = Some(self.now_us);
        self.waiting_at_sold_out = stats.waiting;
        self.admitted_at_sold_out = Some(stats.admitted_total);
        self.trace(format_args!("sold out, {} waiting", stats.waiting));
        self.wake_sleepers();
        // Nothing can come back: the waiting list is told so.
        self.totals.waitlist.waiting_at_sold_out += self.end_listed(Ending::SoldOut);
    }

    /// The engine's invariants, after a group commit: every `engine_checks_every_groups`
    /// commits, no more often than `engine_checks_min_interval_ms`.
    pub(crate) fn check_engine_after_commit(&mut self) {
        let due_by_count = self
            .totals
            .groups_committed
            .is_multiple_of(self.config.engine_checks_every_groups);
        let due_by_time = self.last_engine_check_us.is_none_or(|last| {
            self.now_us - last >= self.config.engine_checks_min_interval_ms * 1_000
        });
        if due_by_count && due_by_time {
            self.check_engine();
        }
    }

    pub(crate) fn check_engine(&mut self) {
        let Some(engine) = self.writer.engine() else {
            return;
        };
        self.last_engine_check_us = Some(self.now_us);
        self.totals.engine_checks += 1;
        for finding in engine.invariants() {
            self.violation(ViolationKind::EngineInvariant, finding);
        }
    }

    /// A fan's story ends; a second ending is a violation.
    pub(crate) fn end_fan(&mut self, fan: u32, ending: Ending) {
        let record = &mut self.fans[fan as usize];
        if let Some(first) = record.ending {
            self.violation(
                ViolationKind::FanStory,
                format!(
                    "fan {fan} ended twice: {} then {}",
                    first.as_str(),
                    ending.as_str()
                ),
            );
            return;
        }
        record.ending = Some(ending);
        record.stage = Stage::Done;
        self.fans_ended += 1;
        self.totals.endings[ending as usize] += 1;
        self.trace(format_args!("fan {fan} ends {}", ending.as_str()));
    }

    fn finish(mut self) -> Report {
        let mut findings = Vec::new();
        self.ledger.finish(&self.store, &mut findings);
        for (kind, detail) in findings {
            self.violation(kind, detail);
        }
        let unended: Vec<(u32, Stage)> = self
            .fans
            .iter()
            .enumerate()
            .filter(|(_, fan)| fan.ending.is_none())
            .map(|(i, fan)| (i as u32, fan.stage))
            .collect();
        for (fan, stage) in unended.iter().take(20) {
            self.violation(
                ViolationKind::FanStory,
                format!("fan {fan} has no ending (stage {stage:?})"),
            );
        }
        if unended.len() > 20 {
            self.violation(
                ViolationKind::FanStory,
                format!("{} more fans have no ending", unended.len() - 20),
            );
        }
        let ended: u64 = self.totals.endings.iter().sum();
        if ended != u64::from(self.config.fans) - unended.len() as u64 {
            self.violation(
                ViolationKind::FanStory,
                format!("{ended} endings counted for {} fans", self.config.fans),
            );
        }
        if self.ledger.seats_sold() != self.store.sold {
            self.violation(
                ViolationKind::SoldTwice,
                format!(
                    "the store sold {} seats, the confirmed holds have {}",
                    self.store.sold,
                    self.ledger.seats_sold()
                ),
            );
        }
        self.check_room();
        self.check_engine();
        let admitted_after_sold_out = self
            .admitted_at_sold_out
            .map_or(0, |at| self.room.stats().admitted_total - at);
        self.trace(format_args!("end"));
        let trace_hash = hex::encode(self.trace.clone().finalize());
        crate::report::build(crate::report::Finished {
            config: self.config,
            faults: self.faults,
            trace_hash,
            trace_lines: self.trace_lines,
            events: self.events,
            end_us: self.last_activity_us,
            sold_out_at_us: self.sold_out_at_us,
            waiting_at_sold_out: self.waiting_at_sold_out,
            admitted_after_sold_out,
            seats_sold: self.store.sold,
            peak_queue: self.peak_queue,
            room: self.room.stats(),
            totals: self.totals,
            series: self.series,
            violations: self.violations,
            violations_total: self.violations_total,
            planted: self.planted,
            ledger_checks: self.ledger.checks,
            last_seats: LastSeats::of(
                &self
                    .store
                    .sales
                    .iter()
                    .map(|(sold, returned)| {
                        (
                            epoch_ms(*sold) as f64 / 1e3,
                            returned.map(|at| epoch_ms(at) as f64 / 1e3),
                        )
                    })
                    .collect::<Vec<_>>(),
            ),
        })
    }
}

/// Released accounts that have not claimed yet over the last ten seconds (the server's
/// `unclaimed`): they will want slots soon.
fn unclaimed(history: &VecDeque<(u64, u64)>, stats: &RoomStats) -> u64 {
    let Some(&(serving_then, admitted_then)) = history.front() else {
        return 0;
    };
    let released = stats.serving.saturating_sub(serving_then);
    let admitted = stats.admitted_total.saturating_sub(admitted_then);
    released.saturating_sub(admitted)
}

/// Positions this tick releases (the server's `plan_release`): a tenth of the decided rate,
/// fractions carried, never more than `free` slots, none while stopped.
fn plan_release(release: &mut Release, free: u64) -> u64 {
    let Some(decision) = &release.decision else {
        return 0;
    };
    if release.controller.paused()
        || matches!(
            decision.kind,
            DecisionKind::Paused | DecisionKind::StoppedStoreDown | DecisionKind::SoldOut
        )
    {
        release.carry = 0.0;
        return 0;
    }
    let slice = decision.rate_per_s as f64 / TICKS_PER_DECISION as f64;
    release.carry = (release.carry + slice).min(slice.max(1.0) * 2.0);
    let n = (release.carry.floor() as u64).min(free);
    release.carry -= n as f64;
    n
}

/// The p99 of `samples` (microseconds), in milliseconds; 0 without samples.
pub(crate) fn p99_ms(samples: &mut [u64]) -> f64 {
    if samples.is_empty() {
        return 0.0;
    }
    let rank = (samples.len() * 99).div_ceil(100).saturating_sub(1);
    let (_, p99, _) = samples.select_nth_unstable(rank);
    *p99 as f64 / 1_000.0
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}
