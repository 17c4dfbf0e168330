//! The event writer under simulated IO and time. The pipeline itself is the server's:
//! [`boxoffice_domain::pipeline::Pipeline`] decides what to group, when to load, what to
//! answer and what to decide again; this file only carries out what it asks for, with the
//! latency and faults of a simulated store, and feeds the results back (as TigerBeetle's
//! simulator runs the real replica code under simulated IO).
//!
//! The IO latency model (stated in the report):
//! - a group commit takes a lognormal time, median [`COMMIT_MEDIAN_MS`] ms, shape
//!   [`COMMIT_SIGMA`], plus [`COMMIT_US_PER_COMMAND`] µs per command; it finishes no earlier
//!   than [`RECORD_STEP_US`] µs after the group before it (the last step waits for the
//!   predecessor's commit); a failed commit makes the groups sent after it give up at once
//!   (their turn sees it failed, as `GroupTurn` tells the server's);
//! - an engine load takes a lognormal time, median [`LOAD_MEDIAN_MS`] ms, shape
//!   [`LOAD_SIGMA`], plus
//!   [`LOAD_US_PER_SEAT`] µs per seat;
//! - while the store is down, a commit or a load fails after [`STORE_TIMEOUT_US`] µs;
//! - deciding and catching up take no simulated time (the engine is in memory, and nothing
//!   but this writer changes the simulated store, so a catch-up finds nothing).

use std::collections::VecDeque;

use boxoffice_domain::decide::SeatRow;
use boxoffice_domain::engine::{Command, EngineRows, EventEngine};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::pipeline::{Action, Clock, Group, GroupKind, Pipeline, Refusal};

use crate::report::ViolationKind;
use crate::store::Recorded;
use crate::world::{Event, Sim, epoch_ms, store_clock};

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

/// What the simulation keeps for a request at the writer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request {
    fan: u32,
    /// When the request reached the writer (its latency runs from here).
    submitted_us: u64,
}

/// Why a request got no decision.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure {
    /// The store's error (its latency counts).
    Store,
    /// The writer died: a broken connection.
    Lost,
}

/// An answered request, as a fan hears it.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) fan: u32,
    /// When the request reached the writer (its latency runs from here).
    pub(crate) submitted_us: u64,
}

/// A group at the simulated store.
#[derive(Debug)]
struct Sent {
    group: Group<Request>,
    started_us: u64,
    /// Why the commit fails, when it does (drawn when the group is sent).
    fails: Option<&'static str>,
}

/// The writer: the real pipeline, and the IO it asked for that has not finished.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    pipeline: Pipeline<Request, Failure>,
    /// Groups at the store, oldest first.
    in_flight: VecDeque<Sent>,
    /// The load in progress, by number (a crash makes its answer stale).
    loading: Option<u64>,
    loads_started: u64,
    crashed: bool,
    /// When the last group sent finishes.
    last_done_us: u64,
}

impl Writer {
    /// The pipeline's engine, when loaded.
    pub(crate) fn engine(&self) -> Option<&EventEngine> {
        self.pipeline.engine()
    }

    /// Nothing to do: no command queued, no group at the store, no load, not crashed.
    pub(crate) fn idle(&self) -> bool {
        self.pipeline.queued_len() == 0
            && self.in_flight.is_empty()
            && self.loading.is_none()
            && !self.crashed
    }

    /// How long each hold request not answered yet has waited, microseconds.
    pub(crate) fn hold_ages(&self, now_us: u64) -> Vec<u64> {
        let queued = self
            .pipeline
            .queued()
            .map(|job| (&job.command, job.context.submitted_us));
        let in_flight = self
            .in_flight
            .iter()
            .flat_map(|sent| &sent.group.jobs)
            .map(|job| (&job.command, job.context.submitted_us));
        queued
            .chain(in_flight)
            .filter(|(command, _)| matches!(command, Command::Hold(_)))
            .map(|(_, submitted_us)| now_us.saturating_sub(submitted_us))
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
        let request = Request {
            fan,
            submitted_us: self.now_us,
        };
        self.writer.pipeline.submit(command, request);
        let depth = self.writer.pipeline.queued_len() as u64;
        self.meter.queue_depth_max = self.meter.queue_depth_max.max(depth);
        self.kick_writer();
    }

    /// Carries out whatever the pipeline asks for now, until it waits for an input.
    pub(crate) fn kick_writer(&mut self) {
        if !self.writer.crashed {
            self.carry_out();
        }
    }

    fn carry_out(&mut self) {
        let clock = Clock::exact(store_clock(self.now_us));
        loop {
            // The room's demand, as the engine decides with it (hold TTL that follows the
            // sale): read before each poll, which may decide a group.
            let waiting = self.room.stats().waiting > 0;
            if let Some(engine) = self.writer.pipeline.engine_mut() {
                engine.set_demand_waiting(waiting);
            }
            let Some(action) = self.writer.pipeline.poll(clock) else {
                break;
            };
            match action {
                Action::Load => self.start_load(),
                Action::CatchUp => {
                    // Only this writer changes the simulated store: the feed is empty, so
                    // the catch-up is not traced (nor timed).
                    self.writer.pipeline.caught_up(true);
                }
                Action::Commit(group) => self.send_group(group),
                Action::Answer(group) => self.commit(group, false),
                Action::Fail(job, failure) => {
                    let fan = job.context.fan;
                    match failure {
                        Failure::Store => {
                            self.request_failed(fan, Some(job.context.submitted_us));
                        }
                        Failure::Lost => {
                            self.totals.answers_lost += 1;
                            self.request_failed(fan, None);
                        }
                    }
                }
                Action::ArmTimer(at) => {
                    let at_us = u64::try_from(epoch_ms(at)).unwrap_or(0) * 1_000;
                    self.schedule_at(at_us, Event::WriterTimer);
                }
            }
        }
    }

    pub(crate) fn writer_timer(&mut self) {
        self.writer.pipeline.tick(store_clock(self.now_us));
        self.trace(format_args!("writer timer"));
        self.kick_writer();
    }

    /// Sends a decided group to the simulated store: when its commit finishes, and whether
    /// it fails, are drawn now.
    fn send_group(&mut self, group: Group<Request>) {
        if group.kind == GroupKind::Expiry {
            self.totals.expiry_groups += 1;
        }
        let started_us = self.now_us;
        let commit_us = (self.rng.lognormal(COMMIT_MEDIAN_MS, COMMIT_SIGMA) * 1_000.0) as u64
            + COMMIT_US_PER_COMMAND * group.jobs.len() as u64;
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
        self.totals.commands += group.jobs.len() as u64;
        let id = group.id;
        self.trace(format_args!(
            "group {id} decided {} commands, commits at {done_us}{}",
            group.jobs.len(),
            if fails.is_some() { " (fails)" } else { "" }
        ));
        self.writer.in_flight.push_back(Sent {
            group,
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
            .is_none_or(|sent| sent.group.id != id)
        {
            return;
        }
        let Some(sent) = self.writer.in_flight.pop_front() else {
            return;
        };
        let elapsed_us = self.now_us - sent.started_us;
        self.meter.group_latencies_us.push(elapsed_us);
        self.totals.group_latencies_us.push(elapsed_us);
        match sent.fails {
            Some(reason) => {
                self.trace(format_args!("group {id} failed: {reason}"));
                self.totals.groups_failed += 1;
                self.totals.store_errors += 1;
                self.meter.store_errors += 1;
                let pipeline = &mut self.writer.pipeline;
                pipeline.refused(sent.group, Refusal::Own, Failure::Store);
                // The groups sent after it give up at once: their turn sees it failed.
                for successor in self.writer.in_flight.drain(..) {
                    pipeline.refused(successor.group, Refusal::Predecessor, Failure::Store);
                }
            }
            None => self.writer.pipeline.committed(sent.group, true),
        }
        self.kick_writer();
    }

    /// A group committed: the ledger checks it, the store writes it, the room returns the
    /// slots of trips it ended, and (unless the writer died before answering) each request
    /// gets its answer.
    fn commit(&mut self, group: Group<Request>, answers_lost: bool) {
        let now_ms = epoch_ms(group.now);
        let mut findings = Vec::new();
        self.ledger.apply(&group.effects, now_ms, &mut findings);
        for (kind, detail) in findings {
            self.violation(kind, detail);
        }
        let mut records = Vec::new();
        for (job, decision) in group.jobs.iter().zip(&group.decisions) {
            if let (Command::Hold(request), boxoffice_domain::engine::Decision::Hold(outcome)) =
                (&job.command, decision)
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
        if let Some(engine) = self.writer.pipeline.engine_mut() {
            engine.committed(self.store.version, self.store.writer_seq);
        }
        self.totals.groups_committed += 1;
        // The holds the hold route grants (the server's `WaitingRoom::granted`: the party
        // size release assumes); offers are not granted by it.
        let effects = &group.effects;
        self.totals.holds_granted += effects.holds_created().count() as u64;
        self.totals.seats_granted += effects
            .holds_created()
            .map(|created| created.hold.seats.len() as u64)
            .sum::<u64>();
        let waitlist = &mut self.totals.waitlist;
        waitlist.joined += effects.waitlist_joined().count() as u64;
        waitlist.offered += effects.waitlist_offers().count() as u64;
        waitlist.purchased += effects.waitlist_purchased().count() as u64;
        waitlist.lapsed += effects.waitlist_lapsed().count() as u64;
        let offered: Vec<Option<u32>> = effects
            .waitlist_offers()
            .map(|offer| crate::fans::fan_of(&offer.hold.account_id))
            .collect();
        let version = self.store.version;
        self.trace(format_args!(
            "group {} committed v{version}: {} taken, {} released, {} expired, {} checkouts, {} sold, {} cancelled, {} listed, {} offered",
            group.id,
            group.effects.seats_taken().count(),
            group.effects.holds_released().count(),
            group.effects.holds_expired().count(),
            group.effects.checkouts_started().count(),
            group.effects.holds_confirmed().count(),
            group.effects.checkouts_cancelled().count(),
            group.effects.waitlist_joined().count(),
            offered.len()
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
                self.request_failed(job.context.fan, None);
            } else {
                let answered = Job {
                    fan: job.context.fan,
                    submitted_us: job.context.submitted_us,
                };
                self.answer(answered, decision);
            }
        }
        // The offers are told apart from the answers (the server's `waitlist.offered`
        // message), after them: a fan offered seats at its join is on the list by then.
        for fan in offered {
            match fan {
                Some(fan) => self.offer_made(fan),
                None => self.violation(
                    ViolationKind::Unexpected,
                    "an offer to an account that is no fan".to_owned(),
                ),
            }
        }
        self.check_engine_after_commit();
        if self.config.plant_double_grant && self.planted.is_none() {
            self.plant_double_grant();
        }
    }

    /// Starts loading the engine from the store (the pipeline asked for it).
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
            self.writer.pipeline.loaded(Ok(engine));
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
            self.writer.pipeline.loaded(Err(Failure::Store));
        }
        self.kick_writer();
    }

    /// The writer dies: each group in flight committed or not (in order), every request it
    /// had is answered by a broken connection, and it comes back later (its first command
    /// loads the engine).
    pub(crate) fn writer_crash(&mut self) {
        let restart_us = self.faults.writer_crash.map_or(1_000, |(_, ms)| ms) * 1_000;
        self.trace(format_args!("writer crash"));
        self.writer.crashed = true;
        self.writer.loading = None;
        // The engine goes first: a group that committed before the death tells it nothing.
        self.writer.pipeline.stop(&Failure::Lost);
        let mut committing = true;
        let sent: Vec<Sent> = self.writer.in_flight.drain(..).collect();
        for sent in sent {
            committing = committing && self.rng.chance(CRASH_COMMITTED_SHARE);
            if committing {
                self.commit(sent.group, true);
            } else {
                for job in sent.group.jobs {
                    self.totals.answers_lost += 1;
                    self.request_failed(job.context.fan, None);
                }
            }
        }
        // The queued commands' broken connections.
        self.carry_out();
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
        let Some(engine) = self.writer.pipeline.engine_mut() else {
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
