//! The event writer under simulated time, as `server/src/writer.rs` runs it: two lanes (what
//! completes a sale first, then new holds), groups of up to [`GROUP_COMMANDS_MAX`] decided by
//! the real [`EventEngine`], up to [`GROUPS_IN_FLIGHT_MAX`] committing at once (the next is
//! decided while one commits), answers only after the commit. A failed commit throws the
//! engine away: the failed group's commands and its successors' are decided again, after a
//! load from the store, before anything newer (a command whose own group failed
//! [`GROUP_ATTEMPTS_MAX`] times gets the store's error; from [`GROUP_ATTEMPTS_ALONE`] it is
//! decided alone). When the earliest hold deadline passes and nothing is in flight, a group
//! without commands expires it.
//!
//! The IO latency model (stated in the report):
//! - a group commit takes a lognormal time, median [`COMMIT_MEDIAN_MS`] ms, shape
//!   [`COMMIT_SIGMA`], plus [`COMMIT_US_PER_COMMAND`] µs per command; it finishes no earlier
//!   than [`RECORD_STEP_US`] µs after the group before it (the last step waits for the
//!   predecessor's commit);
//! - an engine load takes a lognormal time, median [`LOAD_MEDIAN_MS`] ms, shape
//!   [`LOAD_SIGMA`], plus
//!   [`LOAD_US_PER_SEAT`] µs per seat;
//! - while the store is down, a commit or a load fails after [`STORE_TIMEOUT_US`] µs;
//! - deciding takes no simulated time (the engine is in memory).

use std::collections::VecDeque;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::SeatRow;
use boxoffice_domain::engine::{Command, Decision, Effects, EngineRows, EventEngine};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};

use crate::store::Recorded;
use crate::world::{Event, Sim, epoch_ms, store_clock};

/// Most commands decided in one group (the server's `GROUP_COMMANDS_MAX`).
pub const GROUP_COMMANDS_MAX: usize = 256;
/// Groups committing at once.
pub const GROUPS_IN_FLIGHT_MAX: usize = 2;
/// Times a command is decided again after its own group was refused, before its request
/// gets the store's error.
pub const GROUP_ATTEMPTS_MAX: u32 = 5;
/// From this attempt on, a refused group's commands are decided one at a time.
pub const GROUP_ATTEMPTS_ALONE: u32 = 2;
/// Median group commit, milliseconds. Calibrated on the one-tenth sale through the room
/// (`ONLY=door bash bench/speed.sh 10 3`, 2026-12-04): the writer's group commits
/// (`boxoffice_hold_batch_seconds`, median group one command) had a median p50 of 3.3 ms and
/// a median p99 of 27.9 ms over 16 one-minute windows of two runs.
pub const COMMIT_MEDIAN_MS: f64 = 3.3;
/// Shape of the commit time's lognormal (the spread of its logarithm): `ln(p99 / p50) /
/// 2.326` of the same measurement, so that the model's p99 is the measured 27.9 ms.
pub const COMMIT_SIGMA: f64 = 0.92;
/// Commit time added per command of the group, microseconds.
pub const COMMIT_US_PER_COMMAND: u64 = 20;
/// A group's last step after its predecessor committed, microseconds.
pub const RECORD_STEP_US: u64 = 200;
/// Median engine load, milliseconds.
pub const LOAD_MEDIAN_MS: f64 = 30.0;
/// Shape of the load time's lognormal.
pub const LOAD_SIGMA: f64 = 0.5;
/// Load time added per seat, microseconds.
pub const LOAD_US_PER_SEAT: f64 = 1.0;
/// How long a commit or load waits for a store that is down before it fails, microseconds.
pub const STORE_TIMEOUT_US: u64 = 1_000_000;
/// Groups in flight at a crash that committed before the writer died: each does with this
/// probability, in order (one that did not stops the rest).
pub const CRASH_COMMITTED_SHARE: f64 = 0.5;
/// The planted lie is told no earlier than this many seconds after on-sale, once a hold of
/// two seats or more is sold.
pub const PLANT_AFTER_ON_SALE_S: u64 = 20;

/// One request waiting for its answer.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) fan: u32,
    pub(crate) command: Command,
    /// When the request reached the writer (its latency runs from here).
    pub(crate) submitted_us: u64,
    /// Groups of this command the store refused for their own writes.
    pub(crate) attempts: u32,
}

/// A decided group on its way to the store.
#[derive(Debug)]
pub(crate) struct Group {
    id: u64,
    jobs: Vec<Job>,
    decisions: Vec<Decision>,
    effects: Effects,
    /// The group's clock.
    now: OffsetDateTime,
    started_us: u64,
    /// Why the commit fails, when it does (drawn when the group is sent).
    fails: Option<&'static str>,
}

/// The writer's state. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pub(crate) engine: Option<EventEngine>,
    sale: VecDeque<Job>,
    holds: VecDeque<Job>,
    /// Commands of failed groups, decided again before anything newer.
    redo: VecDeque<Job>,
    in_flight: VecDeque<Group>,
    /// The load in progress, by number (a crash makes its answer stale).
    loading: Option<u64>,
    loads_started: u64,
    crashed: bool,
    next_group: u64,
    /// When the last group sent finishes.
    last_done_us: u64,
    /// The earliest `WriterTimer` scheduled and not yet run.
    timer_at_us: Option<u64>,
}

impl Writer {
    fn depth(&self) -> u64 {
        (self.sale.len() + self.holds.len() + self.redo.len()) as u64
    }

    /// How long each hold request not answered yet has waited, microseconds.
    pub(crate) fn hold_ages(&self, now_us: u64) -> Vec<u64> {
        let queued = self.sale.iter().chain(&self.holds).chain(&self.redo);
        let in_flight = self.in_flight.iter().flat_map(|group| &group.jobs);
        queued
            .chain(in_flight)
            .filter(|job| matches!(job.command, Command::Hold(_)))
            .map(|job| now_us.saturating_sub(job.submitted_us))
            .collect()
    }
}

impl Sim {
    /// A fan's request reaches the writer (or finds it dead: refused a millisecond later).
    pub(crate) fn submit(&mut self, fan: u32, command: Command) {
        if self.writer.crashed {
            self.schedule_in(
                1_000,
                Event::Fan {
                    fan,
                    step: crate::fans::FanStep::Refused,
                },
            );
            return;
        }
        let job = Job {
            fan,
            command,
            submitted_us: self.now_us,
            attempts: 0,
        };
        if matches!(job.command, Command::Hold(_)) {
            self.writer.holds.push_back(job);
        } else {
            self.writer.sale.push_back(job);
        }
        self.meter.queue_depth_max = self.meter.queue_depth_max.max(self.writer.depth());
        self.kick_writer();
    }

    /// Does whatever the writer can do now: load an engine it lacks, decide groups while the
    /// pipeline has room, expire lapsed holds when idle.
    pub(crate) fn kick_writer(&mut self) {
        loop {
            let writer = &self.writer;
            if writer.crashed || writer.loading.is_some() {
                break;
            }
            let Some(engine) = &writer.engine else {
                if writer.in_flight.is_empty() {
                    self.start_load();
                }
                break;
            };
            if writer.in_flight.len() >= GROUPS_IN_FLIGHT_MAX {
                break;
            }
            let jobs: Vec<Job> = if !writer.redo.is_empty() {
                let isolate = writer
                    .redo
                    .front()
                    .is_some_and(|job| job.attempts >= GROUP_ATTEMPTS_ALONE);
                let n = if isolate {
                    1
                } else {
                    writer.redo.len().min(GROUP_COMMANDS_MAX)
                };
                self.writer.redo.drain(..n).collect()
            } else if !writer.sale.is_empty() || !writer.holds.is_empty() {
                let from_sale = writer.sale.len().min(GROUP_COMMANDS_MAX);
                let mut jobs: Vec<Job> = self.writer.sale.drain(..from_sale).collect();
                let from_holds = self.writer.holds.len().min(GROUP_COMMANDS_MAX - jobs.len());
                jobs.extend(self.writer.holds.drain(..from_holds));
                jobs
            } else {
                let expiry_due = engine
                    .next_deadline()
                    .is_some_and(|deadline| deadline <= store_clock(self.now_us));
                if !(expiry_due && writer.in_flight.is_empty()) {
                    break;
                }
                self.totals.expiry_groups += 1;
                Vec::new()
            };
            self.decide_group(jobs);
        }
        self.arm_writer_timer();
    }

    /// Schedules a `WriterTimer` at the engine's earliest hold deadline, unless one is due
    /// sooner.
    fn arm_writer_timer(&mut self) {
        let Some(deadline) = self
            .writer
            .engine
            .as_ref()
            .and_then(EventEngine::next_deadline)
        else {
            return;
        };
        let at_us = u64::try_from(epoch_ms(deadline)).unwrap_or(0) * 1_000;
        if at_us <= self.now_us || self.writer.timer_at_us.is_some_and(|t| t <= at_us) {
            return;
        }
        self.writer.timer_at_us = Some(at_us);
        self.schedule_at(at_us, Event::WriterTimer);
    }

    pub(crate) fn writer_timer(&mut self) {
        if self.writer.timer_at_us.is_some_and(|t| t <= self.now_us) {
            self.writer.timer_at_us = None;
        }
        self.trace(format_args!("writer timer"));
        self.kick_writer();
    }

    /// Decides `jobs` on the engine now and sends the group to the store.
    fn decide_group(&mut self, jobs: Vec<Job>) {
        let now = store_clock(self.now_us);
        let commands: Vec<Command> = jobs.iter().map(|job| job.command.clone()).collect();
        let waiting = self.room.stats().waiting > 0;
        let Some(engine) = self.writer.engine.as_mut() else {
            return;
        };
        engine.set_demand_waiting(waiting);
        let (decisions, effects) = engine.decide(now, &commands);
        let started_us = self.now_us;
        let commit_us = (self.rng.lognormal(COMMIT_MEDIAN_MS, COMMIT_SIGMA) * 1_000.0) as u64
            + COMMIT_US_PER_COMMAND * jobs.len() as u64;
        let mut done_us = (started_us + commit_us).max(self.writer.last_done_us + RECORD_STEP_US);
        let mut fails = None;
        if self.store_down(started_us) || self.store_down(done_us) {
            fails = Some("store down");
            done_us = done_us.max(started_us + STORE_TIMEOUT_US);
        } else if let Some((window, share)) = self.faults.commit_failures
            && window.contains(started_us / 1_000)
            && self.rng.chance(share)
        {
            fails = Some("commit failed");
        }
        self.writer.last_done_us = done_us;
        let id = self.writer.next_group;
        self.writer.next_group += 1;
        self.totals.commands += jobs.len() as u64;
        self.trace(format_args!(
            "group {id} decided {} commands, commits at {done_us}{}",
            jobs.len(),
            if fails.is_some() { " (fails)" } else { "" }
        ));
        self.writer.in_flight.push_back(Group {
            id,
            jobs,
            decisions,
            effects,
            now,
            started_us,
            fails,
        });
        self.schedule_at(done_us, Event::CommitDone { group: id });
    }

    pub(crate) fn commit_done(&mut self, id: u64) {
        // A group dropped by a failure before it or by a crash has no commit to finish.
        if self
            .writer
            .in_flight
            .front()
            .is_none_or(|group| group.id != id)
        {
            return;
        }
        let Some(group) = self.writer.in_flight.pop_front() else {
            return;
        };
        let elapsed_us = self.now_us - group.started_us;
        self.meter.group_latencies_us.push(elapsed_us);
        self.totals.group_latencies_us.push(elapsed_us);
        if let Some(reason) = group.fails {
            self.group_failed(group, reason);
        } else {
            self.commit(group, false);
        }
        self.kick_writer();
    }

    /// The store refused a group: the engine is thrown away; the group's commands and its
    /// successors' are decided again after a load, the group's own counting an attempt.
    fn group_failed(&mut self, group: Group, reason: &'static str) {
        self.trace(format_args!("group {} failed: {reason}", group.id));
        self.totals.groups_failed += 1;
        self.totals.store_errors += 1;
        self.meter.store_errors += 1;
        self.writer.engine = None;
        let mut again: Vec<Job> = group
            .jobs
            .into_iter()
            .map(|job| Job {
                attempts: job.attempts + 1,
                ..job
            })
            .collect();
        for successor in self.writer.in_flight.drain(..) {
            again.extend(successor.jobs);
        }
        let mut kept = VecDeque::with_capacity(again.len() + self.writer.redo.len());
        for job in again {
            if job.attempts >= GROUP_ATTEMPTS_MAX {
                self.request_failed(job.fan, Some(job.submitted_us));
            } else {
                kept.push_back(job);
            }
        }
        kept.extend(self.writer.redo.drain(..));
        self.writer.redo = kept;
    }

    /// A group committed: the ledger checks it, the store writes it, the room returns the
    /// slots of trips it ended, and (unless the writer died before answering) each request
    /// gets its answer.
    fn commit(&mut self, group: Group, answers_lost: bool) {
        let now_ms = epoch_ms(group.now);
        let mut findings = Vec::new();
        self.ledger.apply(&group.effects, now_ms, &mut findings);
        for (kind, detail) in findings {
            self.violation(kind, detail);
        }
        let mut records = Vec::new();
        for (job, decision) in group.jobs.iter().zip(&group.decisions) {
            if let (Command::Hold(request), Decision::Hold(outcome)) = (&job.command, decision)
                && let Some(answer) = Recorded::of(outcome)
            {
                records.push((
                    (request.account_id.clone(), request.idempotency_key.clone()),
                    request.request_digest.clone(),
                    answer,
                ));
            }
        }
        let ended = self.store.apply(&group.effects, records, group.now);
        if let Some(engine) = &mut self.writer.engine {
            engine.committed(self.store.version, self.store.writer_seq);
        }
        self.totals.groups_committed += 1;
        self.totals.holds_granted += group.effects.holds_created.len() as u64;
        self.totals.seats_granted += group.effects.seats_taken.len() as u64;
        let version = self.store.version;
        self.trace(format_args!(
            "group {} committed v{version}: {} taken, {} released, {} expired, {} checkouts, {} sold, {} cancelled",
            group.id,
            group.effects.seats_taken.len(),
            group.effects.holds_released.len(),
            group.effects.holds_expired.len(),
            group.effects.checkouts_started.len(),
            group.effects.holds_confirmed.len(),
            group.effects.checkouts_cancelled.len()
        ));
        for account_id in ended {
            let ended = self.room.apply(&boxoffice_waitroom::room::Op::End {
                account_id,
                at_ms: now_ms,
            });
            if ended == boxoffice_waitroom::room::OpResult::Ended(true) {
                self.meter.completed += 1;
            }
        }
        if self.store.sold_out() {
            self.sold_out_now();
        }
        for (job, decision) in group.jobs.into_iter().zip(group.decisions) {
            if answers_lost {
                self.totals.answers_lost += 1;
                self.request_failed(job.fan, None);
            } else {
                self.answer(job, decision);
            }
        }
        self.check_engine_after_commit();
        if self.config.plant_double_grant && self.planted.is_none() {
            self.plant_double_grant();
        }
    }

    /// Starts loading the engine from the store (the writer has none).
    fn start_load(&mut self) {
        let load = self.writer.loads_started;
        self.writer.loads_started += 1;
        self.writer.loading = Some(load);
        let seats = self.store.seats.len() as f64;
        let mut load_us = (self.rng.lognormal(LOAD_MEDIAN_MS, LOAD_SIGMA) * 1_000.0
            + LOAD_US_PER_SEAT * seats) as u64;
        let ok = !self.store_down(self.now_us) && !self.store_down(self.now_us + load_us);
        if !ok {
            load_us = load_us.max(STORE_TIMEOUT_US);
        }
        self.trace(format_args!("load {load} started"));
        self.schedule_in(load_us, Event::LoadDone { load, ok });
    }

    pub(crate) fn load_done(&mut self, load: u64, ok: bool) {
        if self.writer.loading != Some(load) {
            return;
        }
        self.writer.loading = None;
        if ok {
            let mut engine = EventEngine::load(
                self.rules.clone(),
                self.store.snapshot(),
                store_clock(self.now_us),
            );
            engine.set_hold_ttl_follows_sale(self.config.hold_ttl_follows_sale);
            self.writer.engine = Some(engine);
            self.writer.timer_at_us = None;
            self.totals.loads += 1;
            let version = self.store.version;
            self.trace(format_args!("load {load} done at v{version}"));
            self.check_engine();
        } else {
            self.totals.load_failures += 1;
            self.totals.store_errors += 1;
            self.meter.store_errors += 1;
            self.trace(format_args!("load {load} failed: store down"));
            // Every command waiting for the engine gets the store's error.
            let waiting: Vec<Job> = self
                .writer
                .redo
                .drain(..)
                .chain(self.writer.sale.drain(..))
                .chain(self.writer.holds.drain(..))
                .collect();
            for job in waiting {
                self.request_failed(job.fan, Some(job.submitted_us));
            }
        }
        self.kick_writer();
    }

    /// The writer dies: each group in flight committed or not (in order), every request it
    /// had is answered by a broken connection, and it comes back later to load the engine.
    pub(crate) fn writer_crash(&mut self) {
        let restart_us = self.faults.writer_crash.map_or(1_000, |(_, ms)| ms) * 1_000;
        self.trace(format_args!("writer crash"));
        self.writer.crashed = true;
        self.writer.engine = None;
        self.writer.loading = None;
        let mut committing = true;
        let groups: Vec<Group> = self.writer.in_flight.drain(..).collect();
        for group in groups {
            committing = committing && self.rng.chance(CRASH_COMMITTED_SHARE);
            if committing {
                self.commit(group, true);
            } else {
                for job in group.jobs {
                    self.totals.answers_lost += 1;
                    self.request_failed(job.fan, None);
                }
            }
        }
        let queued: Vec<Job> = self
            .writer
            .redo
            .drain(..)
            .chain(self.writer.sale.drain(..))
            .chain(self.writer.holds.drain(..))
            .collect();
        for job in queued {
            self.totals.answers_lost += 1;
            self.request_failed(job.fan, None);
        }
        self.schedule_in(restart_us, Event::WriterRestart);
    }

    pub(crate) fn writer_restart(&mut self) {
        self.trace(format_args!("writer restart"));
        self.writer.crashed = false;
        self.kick_writer();
    }

    /// The planted bug: a change feed that lies. The seats of a sold hold reach the engine
    /// as `AVAILABLE` (as a buggy `refresh` input would), so the real engine grants them
    /// again; the ledger must report it.
    fn plant_double_grant(&mut self) {
        let on_sale_us = u64::from(self.config.on_sale_at_s) * 1_000_000;
        if self.now_us < on_sale_us + PLANT_AFTER_ON_SALE_S * 1_000_000 {
            return;
        }
        let Some(engine) = self.writer.engine.as_mut() else {
            return;
        };
        let Some(victim) = self
            .store
            .holds
            .values()
            .filter(|hold| hold.status == HoldStatus::Confirmed && hold.seat_ids.len() >= 2)
            .max_by_key(|hold| hold.seat_ids.len())
        else {
            return;
        };
        let seats: Vec<SeatRow> = victim
            .seat_ids
            .iter()
            .map(|seat_id| SeatRow {
                seat_id: seat_id.clone(),
                status: SeatStatus::Available,
                hold_id: None,
                hold_expires_at: None,
                price_minor: engine.seat(seat_id).map_or(0, |seat| seat.price_minor),
            })
            .collect();
        let planted = format!(
            "at {:.1} s the engine was told seats {} of sold hold {} are AVAILABLE",
            self.now_us as f64 / 1e6,
            victim.seat_ids.join(", "),
            victim.hold_id
        );
        engine.refresh(EngineRows {
            seats,
            tiers: Vec::new(),
            holds: Vec::new(),
        });
        self.trace(format_args!("planted: {planted}"));
        self.planted = Some(planted);
    }
}
