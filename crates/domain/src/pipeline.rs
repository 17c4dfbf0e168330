//! The event writer's pipeline as a state machine that does no IO: what to decide, when to
//! hand a group to the store, when to answer, what to decide again. The server's writer
//! thread (`server/src/runtime/writer.rs`) and the simulation (`sim/src/writer.rs`) both
//! drive it; each does the IO it asks for (a load, a commit, a catch-up, a timer) and reports
//! back.
//! Start reading at [`Pipeline::poll`].
//!
//! What it owns:
//! - two lanes: what completes a sale (releases, checkouts, payment verdicts, exchanges, ...)
//!   is taken before new holds, so a crowd asking for seats never delays a sale;
//! - the engine, loaded or not: a group is decided on it in arrival order, up to
//!   [`GROUP_COMMANDS_MAX`] commands, while up to [`GROUPS_IN_FLIGHT_MAX`] groups commit
//!   (the next is decided on top of the one committing);
//! - the redo queue: when the store refuses a group the engine is thrown away, every group
//!   after it comes back refused too, and once nothing is in flight the engine is loaded
//!   again and their commands are decided anew, before anything newer. A command whose own
//!   group was refused [`GROUP_ATTEMPTS_MAX`] times gets the store's error; from the
//!   [`GROUP_ATTEMPTS_ALONE`]th attempt it is decided alone, so a command the store keeps
//!   refusing fails without hostages. Refusals that are not the commands' fault (the group
//!   before failed; another writer committed, bounded by [`SEQUENCE_MOVES_MAX`]) do not count;
//! - the expiry timer: when the engine's earliest hold deadline passes and nothing is in
//!   flight or queued, a group without commands ends the lapsed holds;
//! - the catch-up: a group decided with nothing in flight (new commands after a pause, an
//!   expiry, a waiting-list match) starts from an engine that has read the change feed, so a
//!   request sees every commit answered before it, and an expiry sees a checkout made
//!   elsewhere; a decision about a hold the engine does not keep (made elsewhere) asks for
//!   the feed before the next group too.
//!
//! Architecture invariant: no answer before its group committed, and no group decided after
//! a refused one is answered as decided: a refusal empties the pipeline before the reload.
//!
//! Inputs: [`Pipeline::submit`], [`Pipeline::loaded`], [`Pipeline::committed`],
//! [`Pipeline::refused`], [`Pipeline::caught_up`], [`Pipeline::tick`], [`Pipeline::stop`].
//! Outputs: [`Action`]s from [`Pipeline::poll`], in the order they must be carried out.

use std::collections::VecDeque;

use time::OffsetDateTime;

use crate::engine::{
    CheckoutDecision, Command, CompensationDecision, Decision, Effects, EventEngine,
    ExchangeDecision, RefundDecision, ReleaseDecision, TransferDecision,
};

/// Most commands decided in one group.
pub const GROUP_COMMANDS_MAX: usize = 256;
/// Groups committing at once: one commits while the next is decided and sent.
pub const GROUPS_IN_FLIGHT_MAX: usize = 2;
/// Times a command is decided again after its own group was refused, before its request
/// gets the store's error.
pub const GROUP_ATTEMPTS_MAX: u32 = 5;
/// From this attempt on, a refused group's commands are decided in groups of one.
pub const GROUP_ATTEMPTS_ALONE: u32 = 2;
/// Times a command's group is refused because another writer committed since the engine
/// was loaded (another node, a one-shot group), before its request gets the store's error.
/// Not the command's fault, so not counted in [`GROUP_ATTEMPTS_MAX`]; bounded all the same.
pub const SEQUENCE_MOVES_MAX: u32 = 50;

/// One command waiting for its answer, with what its driver keeps for it (`context`: the
/// request's reply channel, the fan who sent it, ...).
#[derive(Debug)]
pub struct Job<T> {
    pub command: Command,
    pub context: T,
    /// Groups of this command the store refused for their own writes.
    attempts: u32,
    /// Groups of this command refused because another writer committed.
    moved: u32,
}

impl<T> Job<T> {
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn moved(&self) -> u32 {
        self.moved
    }
}

/// Why a group was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// Commands were waiting.
    Commands,
    /// Nothing was waiting and a hold's deadline passed: the group only ends lapsed holds.
    Expiry,
    /// Nothing was waiting and the waiting list has a match to make that no command asked
    /// for (seats freed elsewhere, or a match that stopped at its bound).
    Waitlist,
}

/// A decided group on its way to the store, and back with its verdict.
#[derive(Debug)]
pub struct Group<T> {
    /// Numbered from 0 in the order decided; groups finish in this order.
    pub id: u64,
    pub kind: GroupKind,
    pub jobs: Vec<Job<T>>,
    /// One per job, in order.
    pub decisions: Vec<Decision>,
    pub effects: Effects,
    /// The clock the group was decided at: the `created_at` of what it writes.
    pub now: OffsetDateTime,
}

/// The store's clock as the driver knows it when the pipeline may decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// The store's clock from below: holds are taken and expired against it.
    pub now: OffsetDateTime,
    /// The latest the store's clock can read: a checkout or a sale is decided against it.
    pub latest: OffsetDateTime,
}

impl Clock {
    /// A clock known exactly (simulated time).
    pub fn exact(now: OffsetDateTime) -> Self {
        Self { now, latest: now }
    }
}

/// Why the store refused a group; it says whether its commands are at fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The store refused the group's own writes: each command counts an attempt.
    Own,
    /// The group gave up because the group before it failed: not its commands' fault.
    Predecessor,
    /// Another writer committed since the engine was loaded (the sequence moved, or the
    /// lease went to another node): counted apart, up to [`SEQUENCE_MOVES_MAX`].
    Moved,
    /// An error deciding again will not mend: every command gets it now.
    Final,
}

/// The two lanes of a writer: what completes a sale (a checkout, a payment verdict, a
/// release, ...) is taken before new holds, so a crowd asking for seats never sheds or delays
/// the fans paying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Sale,
    Holds,
}

impl Lane {
    /// The lane of `command`, for the pipeline and for the queues in front of it.
    pub fn of(command: &Command) -> Self {
        match command {
            Command::Hold(_) => Self::Holds,
            Command::Release { .. }
            | Command::Checkout(_)
            | Command::Payment(_)
            | Command::Compensate(_)
            | Command::Exchange(_)
            | Command::Transfer(_)
            | Command::Refund(_)
            | Command::WaitlistJoin(_)
            | Command::WaitlistLeave { .. }
            | Command::Cancel(_)
            | Command::RedeemAccess(_) => Self::Sale,
        }
    }
}

/// What the driver must do, in order.
#[derive(Debug)]
pub enum Action<T, E> {
    /// Load the engine from the store; answer with [`Pipeline::loaded`].
    Load,
    /// Read the change feed into the engine (nothing is in flight); answer with
    /// [`Pipeline::caught_up`].
    CatchUp,
    /// Write the group in one transaction, after the groups before it; answer with
    /// [`Pipeline::committed`] or [`Pipeline::refused`], in the order of the groups' ids.
    Commit(Group<T>),
    /// The group committed: answer each job with its decision.
    Answer(Group<T>),
    /// The job gets this error.
    Fail(Job<T>, E),
    /// Call [`Pipeline::tick`] (and [`Pipeline::poll`]) no earlier than this store time:
    /// the engine's earliest hold deadline.
    ArmTimer(OffsetDateTime),
}

/// The pipeline of one event's writer. See the module docs.
#[derive(Debug)]
pub struct Pipeline<T, E> {
    engine: Option<EventEngine>,
    /// What the engine thrown away had measured (times from grant to checkout start, which
    /// the hold TTL follows): measurements, not state, so the next engine starts with them
    /// instead of with none (a reload mid-sale would otherwise put new holds back on the
    /// event's full TTL until 50 more fans paid).
    measured: Option<crate::hold_ttl::HoldToPay>,
    /// A load was asked for and not answered yet.
    loading: bool,
    /// Releases, checkouts, payment verdicts, ...: taken first.
    sale: VecDeque<Job<T>>,
    /// New holds.
    holds: VecDeque<Job<T>>,
    /// Commands of refused groups, decided again before anything newer.
    redo: VecDeque<Job<T>>,
    /// Commands of refused groups while later groups are still in flight: they go to the
    /// front of `redo`, in the order decided, once the last of them came back.
    returned: Vec<Job<T>>,
    /// Ids of the groups sent and not finished, oldest first.
    in_flight: VecDeque<u64>,
    /// A group was refused or showed the engine wrong: no new group until the pipeline is
    /// empty and the engine loaded again.
    broken: bool,
    /// The engine may miss changes made elsewhere: no new group until a catch-up.
    stale: bool,
    /// A catch-up was asked for and not answered yet.
    catching_up: bool,
    /// The engine has read every change made elsewhere (loaded or caught up) and decided
    /// nothing since.
    fresh: bool,
    next_group: u64,
    /// The earliest timer asked for that has not run yet.
    timer_at: Option<OffsetDateTime>,
    actions: VecDeque<Action<T, E>>,
}

impl<T, E> Default for Pipeline<T, E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, E> Pipeline<T, E> {
    /// A pipeline without an engine: the first command asks for a load.
    pub fn new() -> Self {
        Self {
            engine: None,
            measured: None,
            loading: false,
            sale: VecDeque::new(),
            holds: VecDeque::new(),
            redo: VecDeque::new(),
            returned: Vec::new(),
            in_flight: VecDeque::new(),
            broken: false,
            stale: false,
            catching_up: false,
            fresh: false,
            next_group: 0,
            timer_at: None,
            actions: VecDeque::new(),
        }
    }

    /// Throws the engine away, keeping what it measured for the next one.
    fn discard_engine(&mut self) {
        if let Some(engine) = self.engine.take() {
            self.measured = Some(engine.hold_to_pay().clone());
        }
    }

    /// The engine, when loaded and not thrown away.
    pub fn engine(&self) -> Option<&EventEngine> {
        self.engine.as_ref()
    }

    /// The engine, to tell it of a commit (`committed`), a catch-up (`refresh`), ...
    pub fn engine_mut(&mut self) -> Option<&mut EventEngine> {
        self.engine.as_mut()
    }

    /// Commands waiting to be decided (not in flight).
    pub fn queued_len(&self) -> usize {
        self.returned.len() + self.redo.len() + self.sale.len() + self.holds.len()
    }

    /// Commands waiting to be decided, in no particular order.
    pub fn queued(&self) -> impl Iterator<Item = &Job<T>> {
        self.returned
            .iter()
            .chain(&self.redo)
            .chain(&self.sale)
            .chain(&self.holds)
    }

    /// Groups sent and not finished.
    pub fn in_flight_len(&self) -> usize {
        self.in_flight.len()
    }

    /// A command arrives: queued in its lane.
    pub fn submit(&mut self, command: Command, context: T) {
        let job = Job {
            command,
            context,
            attempts: 0,
            moved: 0,
        };
        match Lane::of(&job.command) {
            Lane::Holds => self.holds.push_back(job),
            Lane::Sale => self.sale.push_back(job),
        }
    }

    /// The load asked for by [`Action::Load`] finished. On failure every waiting command
    /// gets the error (they waited for that one load), and the next command loads again.
    pub fn loaded(&mut self, result: Result<EventEngine, E>)
    where
        E: Clone,
    {
        if !self.loading {
            return;
        }
        self.loading = false;
        self.broken = false;
        self.stale = false;
        match result {
            Ok(mut engine) => {
                if let Some(measured) = self.measured.take() {
                    engine.keep_measured(measured);
                }
                self.engine = Some(engine);
                self.fresh = true;
                // The new engine's deadlines are armed afresh.
                self.timer_at = None;
            }
            Err(error) => {
                self.engine = None;
                self.fail_queued(&error);
            }
        }
    }

    /// The catch-up asked for by [`Action::CatchUp`] finished (`ok`: the engine has every
    /// change up to now; otherwise it is loaded again).
    pub fn caught_up(&mut self, ok: bool) {
        if !self.catching_up {
            return;
        }
        self.catching_up = false;
        if ok {
            self.stale = false;
            self.fresh = true;
        } else {
            self.broken = true;
        }
    }

    /// The engine may miss changes made elsewhere (a commit showed versions this writer did
    /// not write, or it is time to look): catch up before the next group.
    pub fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// The group committed. `engine_was_right`: the store took every write as decided (it
    /// refused no command alone and skipped no expiry); when not, the engine is loaded again
    /// before the next group. The group is answered ([`Action::Answer`]).
    pub fn committed(&mut self, group: Group<T>, engine_was_right: bool) {
        self.finished(group.id);
        if !engine_was_right {
            self.broken = true;
            self.discard_engine();
        }
        self.actions.push_back(Action::Answer(group));
        self.return_refused();
    }

    /// The store refused the group: the engine is thrown away, and the group's commands are
    /// decided again after a load, before anything newer (unless `refusal` or their attempts
    /// say they get `error`).
    pub fn refused(&mut self, group: Group<T>, refusal: Refusal, error: E)
    where
        E: Clone,
    {
        self.finished(group.id);
        self.broken = true;
        self.discard_engine();
        for mut job in group.jobs {
            match refusal {
                Refusal::Own => job.attempts += 1,
                Refusal::Moved => job.moved += 1,
                Refusal::Predecessor | Refusal::Final => {}
            }
            if refusal == Refusal::Final
                || job.attempts >= GROUP_ATTEMPTS_MAX
                || job.moved >= SEQUENCE_MOVES_MAX
            {
                self.actions.push_back(Action::Fail(job, error.clone()));
            } else {
                self.returned.push(job);
            }
        }
        self.return_refused();
    }

    /// The timer armed by [`Action::ArmTimer`] ran (or the clock moved): a lapsed deadline
    /// is acted on at the next [`Pipeline::poll`].
    pub fn tick(&mut self, now: OffsetDateTime) {
        if self.timer_at.is_some_and(|at| at <= now) {
            self.timer_at = None;
        }
    }

    /// The writer stops (it crashed, or another node owns the event): the engine is gone,
    /// the groups in flight are the driver's to settle, and every queued command gets
    /// `error`. Commands submitted afterwards load a new engine.
    pub fn stop(&mut self, error: &E)
    where
        E: Clone,
    {
        self.discard_engine();
        self.loading = false;
        self.broken = false;
        self.stale = false;
        self.catching_up = false;
        self.fresh = false;
        self.in_flight.clear();
        self.fail_queued(error);
    }

    /// The next thing to do, deciding groups as the pipeline has room; `None` when there is
    /// nothing until an input arrives. Call it until `None` after every input.
    pub fn poll(&mut self, clock: Clock) -> Option<Action<T, E>> {
        if self.actions.is_empty() {
            self.step(clock);
        }
        self.actions.pop_front()
    }

    /// Queues what can be done now: a load, a catch-up, groups while there is room, and
    /// finally the timer for the engine's earliest deadline.
    fn step(&mut self, clock: Clock) {
        while let Some((jobs, kind)) = self.next_group(clock) {
            self.decide(jobs, kind, clock);
        }
        if !self.actions.is_empty() {
            return;
        }
        let Some(deadline) = self.engine.as_ref().and_then(EventEngine::next_deadline) else {
            return;
        };
        if deadline > clock.now && self.timer_at.is_none_or(|at| at > deadline) {
            self.timer_at = Some(deadline);
            self.actions.push_back(Action::ArmTimer(deadline));
        }
    }

    /// The commands of the next group, or `None` (having asked for a load or a catch-up when
    /// one is due).
    fn next_group(&mut self, clock: Clock) -> Option<(Vec<Job<T>>, GroupKind)> {
        if self.loading || self.catching_up {
            return None;
        }
        if self.broken || self.engine.is_none() {
            // Only an empty pipeline loads: every group in flight must come back first.
            if self.in_flight.is_empty() && (self.broken || self.queued_len() > 0) {
                self.broken = false;
                self.discard_engine();
                self.loading = true;
                self.actions.push_back(Action::Load);
            }
            return None;
        }
        if self.in_flight.is_empty() && !self.fresh && self.idle_group_due(clock) {
            // What changed elsewhere first (a release on another node, a checkout that
            // extended a hold about to lapse).
            self.stale = true;
        }
        if self.stale {
            if self.in_flight.is_empty() {
                self.catching_up = true;
                self.actions.push_back(Action::CatchUp);
            }
            return None;
        }
        if self.in_flight.len() >= GROUPS_IN_FLIGHT_MAX {
            return None;
        }
        if let Some(first) = self.redo.front() {
            let n = if first.attempts >= GROUP_ATTEMPTS_ALONE {
                1
            } else {
                self.redo.len().min(GROUP_COMMANDS_MAX)
            };
            return Some((self.redo.drain(..n).collect(), GroupKind::Commands));
        }
        if !self.sale.is_empty() || !self.holds.is_empty() {
            let from_sale = self.sale.len().min(GROUP_COMMANDS_MAX);
            let mut jobs: Vec<Job<T>> = self.sale.drain(..from_sale).collect();
            let from_holds = self.holds.len().min(GROUP_COMMANDS_MAX - jobs.len());
            jobs.extend(self.holds.drain(..from_holds));
            return Some((jobs, GroupKind::Commands));
        }
        if !self.in_flight.is_empty() {
            return None;
        }
        let engine = self.engine.as_ref()?;
        if engine
            .next_deadline()
            .is_some_and(|deadline| deadline <= clock.now)
        {
            return Some((Vec::new(), GroupKind::Expiry));
        }
        if engine.waitlist_wants_group() {
            return Some((Vec::new(), GroupKind::Waitlist));
        }
        None
    }

    /// Whether a group would be decided now if the pipeline were not waiting for anything.
    fn idle_group_due(&self, clock: Clock) -> bool {
        self.queued_len() > 0
            || self.engine.as_ref().is_some_and(|engine| {
                engine
                    .next_deadline()
                    .is_some_and(|deadline| deadline <= clock.now)
                    || engine.waitlist_wants_group()
            })
    }

    fn decide(&mut self, jobs: Vec<Job<T>>, kind: GroupKind, clock: Clock) {
        let Some(engine) = self.engine.as_mut() else {
            return;
        };
        self.fresh = false;
        let commands: Vec<Command> = jobs.iter().map(|job| job.command.clone()).collect();
        let (decisions, effects) = engine.decide_within(clock.now, clock.latest, &commands);
        // A command about a hold the engine does not keep (made or changed elsewhere) is
        // asked again by its caller, after the catch-up this asks for.
        if decisions.iter().any(not_kept) {
            self.stale = true;
        }
        let id = self.next_group;
        self.next_group += 1;
        self.in_flight.push_back(id);
        self.actions.push_back(Action::Commit(Group {
            id,
            kind,
            jobs,
            decisions,
            effects,
            now: clock.now,
        }));
    }

    /// Group `id` finished; groups finish in the order sent, so it is the oldest.
    fn finished(&mut self, id: u64) {
        debug_assert_eq!(self.in_flight.front(), Some(&id), "groups finish in order");
        if let Some(position) = self.in_flight.iter().position(|&sent| sent == id) {
            self.in_flight.remove(position);
        }
    }

    /// Once every group after a refused one came back, their commands go first in `redo`.
    fn return_refused(&mut self) {
        if !self.in_flight.is_empty() || self.returned.is_empty() {
            return;
        }
        let mut redo: VecDeque<Job<T>> = self.returned.drain(..).collect();
        redo.extend(self.redo.drain(..));
        self.redo = redo;
    }

    fn fail_queued(&mut self, error: &E)
    where
        E: Clone,
    {
        let queued: Vec<Job<T>> = self
            .returned
            .drain(..)
            .chain(self.redo.drain(..))
            .chain(self.sale.drain(..))
            .chain(self.holds.drain(..))
            .collect();
        for job in queued {
            self.actions.push_back(Action::Fail(job, error.clone()));
        }
    }
}

/// A decision about a hold the engine does not keep: its command is asked again after a
/// catch-up. (A payment's goes to the store's own settlement instead.)
fn not_kept(decision: &Decision) -> bool {
    matches!(
        decision,
        Decision::Checkout(CheckoutDecision::NotKept)
            | Decision::Release(ReleaseDecision::NotKept)
            | Decision::Compensate(CompensationDecision::NotKept)
            | Decision::Exchange(ExchangeDecision::NotKept)
            | Decision::Transfer(TransferDecision::NotKept)
            | Decision::Refund(RefundDecision::NotKept)
    )
}

#[cfg(test)]
mod tests;
