//! The event engine: the live inventory of one event, kept in memory by the event's writer,
//! and the one function that decides a group of commands on it.
//!
//! The writer (`server/src/runtime/writer.rs`) loads an [`EngineSnapshot`] from the store,
//! then feeds the engine groups of commands in arrival order: [`EventEngine::decide`] returns one
//! [`Decision`] per command and the group's [`Effects`] — the rows the store must write, each
//! with the condition it must find, as one list in the order decided (`engine/effects.rs`).
//! The store writes a group in one transaction and verifies every row count; the writer
//! answers a command only after its group committed. While one group commits, the next is
//! decided on top of it; if a commit fails, the writer throws the engine away and loads it
//! again (nothing here is ever rolled back).
//!
//! Changes the engine did not make (the store's own settlement of an exchange's payment, the
//! sweeper, an exchange out of the event decided by another event's writer, a writer on
//! another node) reach it through [`EventEngine::refresh`] with the rows the seat-map
//! change feed names. Until then the engine may refuse a seat that was just freed — a stale
//! refusal, never a double sale: the store refuses any write whose condition no longer holds.
//!
//! Time is the store's: the caller passes its estimate of the store clock, never ahead of it
//! (the store checks), so a hold the engine treats as expired has expired by the store's
//! clock too. The engine keeps every deadline and frees seats in its index as they pass.
//!
//! The rules of a hold are those of [`crate::decide`] (the same function the batch path
//! used); the engine adds what a long-lived state needs: holds by account for the purchase
//! limit, the keys already used, the best-available index kept current, deadlines, releases.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use time::OffsetDateTime;

use crate::decide::{
    BatchState, HoldOutcome, HoldRequest, RowIndex, SeatRow, TierRow, decide_holds_indexed,
};
use crate::event::SaleRules;
use crate::hold::{HoldStatus, SeatStatus, seat_is_free};
use crate::hold_ttl::{HoldToPay, HoldTtlPolicy};
use crate::settlement;

mod access;
mod allocation;
mod cancel;
mod effects;
mod exchange;
mod free_seats;
mod refund;
mod transfer;
mod waitlist;

pub use access::{AccessDecision, AccessRedeem, AccessRedeemed};
pub use cancel::{CancelDecision, CancelRequest, EventCancelled};
pub use effects::{
    CheckoutCancelled, Effect, Effects, HoldCreated, HoldReleased, MapSeatChange, SeatTaken,
};
pub use exchange::{
    ExchangeDecision, ExchangeGivesUp, ExchangeRequest, ExchangeTaken, ExchangeTakes,
};
use free_seats::FreeSeats;
pub use refund::{RefundDecision, RefundRequest, RefundTaken};
pub use transfer::{TransferDecision, TransferRequest, TransferTaken};
pub use waitlist::{
    WAITLIST_ENTRIES_MAX, WAITLIST_LOOKS_PER_GROUP_MAX, WAITLIST_OFFER_TTL_DEFAULT_S,
    WAITLIST_OFFERS_PER_GROUP_MAX, WaitEntry, WaitlistDecision, WaitlistJoin, WaitlistOffer,
    offer_hold_id, offer_waitlist_id,
};

/// Holds one group ends at most; a lapse of thousands at once spreads over several groups,
/// so that no group holds its locks for long.
pub const EXPIRIES_PER_GROUP_MAX: usize = 500;

/// How long past the event's hold TTL (the longest a hold it grants lives unless a checkout
/// extends it) the engine remembers a hold request's key and digest. A client retries a hold
/// within seconds; a retry later than this is decided as new, and the store, whose
/// idempotency records are unique by key, refuses its group (a conflict): the writer loads
/// the event again, which reads every key back, and decides it as the replay it is. Without
/// a bound the keys of every hold ever made on the event stayed in memory.
pub const HOLD_KEYS_KEPT_PAST_TTL_S: u32 = 300;

/// A hold the engine keeps: live (`HELD`, `PAYMENT_PENDING`) or `CONFIRMED` (it counts
/// against the account's purchase limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineHold {
    pub hold_id: String,
    pub account_id: String,
    pub status: HoldStatus,
    pub tier_id: Option<String>,
    /// Seats or units that count against the limit: the hold's quantity less what an
    /// exchange gave up.
    pub quantity: u32,
    pub seat_ids: Vec<String>,
    pub expires_at: OffsetDateTime,
    /// The new hold of an exchange: its payment also completes the exchange, which the
    /// store's own settlement does (the engine leaves its verdicts alone).
    pub exchange: bool,
    /// The sale phase the hold was granted in: it counts against that phase's limit too.
    pub phase_id: Option<String>,
}

impl EngineHold {
    /// Whether the hold counts against its account's purchase limit at `now`.
    pub fn counts_at(&self, now: OffsetDateTime) -> bool {
        match self.status {
            HoldStatus::Confirmed => true,
            HoldStatus::Held | HoldStatus::PaymentPending => self.expires_at > now,
            HoldStatus::Released | HoldStatus::Expired => false,
        }
    }

    fn is_kept(status: HoldStatus) -> bool {
        matches!(
            status,
            HoldStatus::Held | HoldStatus::PaymentPending | HoldStatus::Confirmed
        )
    }
}

/// Everything the engine starts from, read by the store in one consistent snapshot.
#[derive(Debug, Clone, Default)]
pub struct EngineSnapshot {
    /// The event's seat-map version the snapshot is at.
    pub version: u64,
    /// The writer sequence stored with the version: the next group must follow it.
    pub writer_seq: u64,
    pub seats: Vec<SeatRow>,
    pub tiers: Vec<TierRow>,
    /// Holds in `HELD`, `PAYMENT_PENDING` or `CONFIRMED`.
    pub holds: Vec<EngineHold>,
    /// Request digests of the event's hold keys, by (account, key). A hold whose record was
    /// purged still owns its key, with an empty digest (which matches no request).
    pub keys: Vec<((String, String), String)>,
    /// The waiting list's live entries: waiting, and offered whose hold may still be live.
    pub waitlist: Vec<WaitEntry>,
    /// The event's waiting-list offer TTL (0: the default).
    pub waitlist_offer_ttl_s: u32,
    /// The event is cancelled (`engine::cancel`): nothing sells.
    pub cancelled: bool,
    /// The event's sale phases and the access codes redeemed for them (`crate::phase`).
    pub lanes: crate::phase::Lanes,
}

/// Current rows of what changed elsewhere, for [`EventEngine::refresh`].
#[derive(Debug, Clone, Default)]
pub struct EngineRows {
    pub seats: Vec<SeatRow>,
    pub tiers: Vec<TierRow>,
    /// Holds in any status; an ended one leaves the engine.
    pub holds: Vec<EngineHold>,
}

/// One command for the event, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Hold(HoldRequest),
    Release {
        account_id: String,
        hold_id: String,
    },
    Checkout(CheckoutRequest),
    Payment(PaymentRequest),
    Compensate(CompensationRequest),
    Exchange(ExchangeRequest),
    Transfer(TransferRequest),
    Refund(RefundRequest),
    WaitlistJoin(WaitlistJoin),
    WaitlistLeave {
        account_id: String,
        waitlist_id: String,
    },
    /// The organiser cancels the event (`engine::cancel`).
    Cancel(CancelRequest),
    /// A fan redeems an access code for a presale lane (`engine::access`).
    RedeemAccess(AccessRedeem),
}

/// A capture refused for good: the confirmed order is cancelled and its sale given back
/// (its seats and units back on sale, its hold ended). The store refuses it alone, without
/// the rest of the group, when a ticket of the order was used at the door.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompensationRequest {
    pub order_id: String,
    /// The order's hold, `CONFIRMED` while the order is.
    pub hold_id: String,
}

/// What the engine decided for a compensation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompensationDecision {
    /// Given back with the group: the hold ends, the seats still sold by it are free again
    /// and its units back on sale.
    Compensated,
    /// The hold is not confirmed (still in checkout, or ended): nothing was sold to give back.
    NotConfirmed,
    /// The engine does not keep the hold (ended, or confirmed elsewhere since the last
    /// catch-up): the writer asks again after a catch-up; an engine that has caught up keeps
    /// every confirmed hold.
    NotKept,
}

/// What a payment verdict means for the inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaymentOutcome {
    /// The provider took the money (authorized or captured): sell, if the hold still can be.
    Paid,
    /// Declined or failed.
    Failed,
    /// The authorization was voided.
    Voided,
}

/// A payment verdict for a hold in checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymentRequest {
    pub account_id: String,
    pub hold_id: String,
    pub outcome: PaymentOutcome,
}

/// What the engine decided for a payment verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentDecision {
    /// Sold with the group: the hold `CONFIRMED`, its seats `SOLD`, its units sold.
    Confirmed,
    /// The order is cancelled for `reason` and the hold ends: its seats and units go back on
    /// sale (those still its own).
    Cancelled { reason: &'static str },
    /// The engine does not keep the hold in checkout (settled already, an exchange's, made
    /// or changed elsewhere): the store's own settlement decides.
    NotKept,
}

/// A hold the group sells: the store confirms it only if it is still `PAYMENT_PENDING` and
/// live by the group's clock, and sells exactly these seats, which must still be held by it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldConfirmed {
    /// The command's place in the group.
    pub index: usize,
    pub hold_id: String,
    /// The buyer, whose purchase limit the store checks after the writes.
    pub account_id: String,
    pub seat_ids: Vec<String>,
    pub tier: Option<(String, u32)>,
}

/// The start of a checkout: the account's `HELD` hold moves to `PAYMENT_PENDING` with an
/// order, and its deadline moves once, by the event's payment grace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutRequest {
    pub account_id: String,
    pub hold_id: String,
    pub order_id: String,
    /// The event's payment grace: how far the deadline moves.
    pub grace_s: u32,
}

/// What the engine decided for a checkout start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckoutDecision {
    /// The order starts with the group; the hold's new deadline.
    Started { expires_at: OffsetDateTime },
    /// The hold is in checkout or confirmed already (under another request).
    InCheckout,
    /// The hold expired or was released.
    Expired,
    /// Another account's hold: the same answer as no hold at all.
    NotFound,
    /// The engine does not keep the hold (ended before the engine loaded, made elsewhere
    /// since the last catch-up, or no such hold): the writer asks again after a catch-up; an
    /// engine that has caught up keeps every live hold.
    NotKept,
}

impl CheckoutDecision {
    /// What a checkout of a hold that is not `HELD` and live is told, by the hold's status:
    /// one in checkout or sold is in checkout (under another request), any other has ended.
    pub fn refused_for(status: HoldStatus) -> Self {
        match status {
            HoldStatus::PaymentPending | HoldStatus::Confirmed => Self::InCheckout,
            HoldStatus::Held | HoldStatus::Released | HoldStatus::Expired => Self::Expired,
        }
    }
}

/// A checkout the group starts. The store moves the hold only if it is still `HELD`, the
/// account's and live by the group's clock, and extends exactly these seats, which must still
/// point to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckoutStarted {
    /// The command's place in the group.
    pub index: usize,
    pub account_id: String,
    pub hold_id: String,
    pub order_id: String,
    pub seat_ids: Vec<String>,
    pub expires_at: OffsetDateTime,
}

/// What the engine decided for a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseDecision {
    /// Released now: the seats and units go back on sale with the group.
    Released { hold_id: String },
    /// The hold is in checkout; only the payment flow may end it.
    InCheckout,
    /// The hold has ended (its deadline passed, or it was confirmed); nothing to do.
    AlreadyEnded,
    /// Another account's hold: the same answer as no hold at all.
    NotFound,
    /// The engine does not keep the hold (ended before the engine loaded, or no such hold):
    /// the writer asks the store which.
    NotKept,
}

/// The decision for one command. Exhaustive, like the outcomes it wraps. A
/// `HoldOutcome::ReplayOfEarlierInBatch { index }` names a command of the same group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Hold(HoldOutcome),
    Release(ReleaseDecision),
    Checkout(CheckoutDecision),
    Payment(PaymentDecision),
    Compensate(CompensationDecision),
    Exchange(ExchangeDecision),
    Transfer(TransferDecision),
    Refund(RefundDecision),
    Waitlist(WaitlistDecision),
    Cancel(CancelDecision),
    Access(AccessDecision),
}

/// An order the group gives back: the store cancels it only if it is still `CONFIRMED` and
/// none of its tickets was checked in (else it leaves this one alone and says so), ends
/// the hold only if still `CONFIRMED`, frees exactly these seats (each still `SOLD` by the
/// hold) and returns its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderCompensated {
    /// The command's place in the group.
    pub index: usize,
    pub order_id: String,
    pub hold: HoldReleased,
}

/// The live inventory of one event and the decision over it.
#[derive(Debug, Clone)]
pub struct EventEngine {
    rules: SaleRules,
    /// Every seat and tier of the event, and the event's used keys; `usage_by_account` is
    /// filled per group for the accounts the group names.
    state: BatchState,
    holds: BTreeMap<String, EngineHold>,
    holds_by_account: BTreeMap<String, BTreeSet<String>>,
    /// Held seats by deadline: when one passes, the seat becomes free in the index.
    seat_deadlines: BTreeSet<(OffsetDateTime, String)>,
    /// Holds in `HELD` by deadline: the next group after one passes expires it.
    hold_deadlines: BTreeSet<(OffsetDateTime, String)>,
    /// Free seats per row, best rows first, kept current: best available is decided from it.
    rows: Option<RowIndex>,
    /// Free seats by section and price, kept current with `rows`: the waiting list asks it
    /// how many seats a class of entries could take, and which.
    free: FreeSeats,
    /// The keys of `state.prior_digests` in the order they were remembered (by the engine's
    /// clock, which never goes back): the oldest are forgotten first
    /// ([`HOLD_KEYS_KEPT_PAST_TTL_S`]).
    key_times: VecDeque<(OffsetDateTime, (String, String))>,
    /// Tickets given up by exchanges this engine granted, with the exchange's new hold: while
    /// that hold is kept, another exchange of the ticket is refused here.
    exchanged_tickets: BTreeMap<String, String>,
    version: u64,
    writer_seq: u64,
    /// Waiting entries by place, and the accounts' live entries (see `engine::waitlist`).
    waitlist: BTreeMap<u64, WaitEntry>,
    /// The waiting entries' places by what they ask for: entries of one class are satisfied
    /// or not together (but for an account's purchase limit).
    waitlist_classes: BTreeMap<waitlist::WaitClass, BTreeSet<u64>>,
    /// Classes of entries joined since the list was last matched (when nothing was freed
    /// since, only these can have become satisfiable).
    waitlist_joined_classes: BTreeSet<waitlist::WaitClass>,
    /// The event's seat prices (fixed at load): a class's price cap is the highest of them
    /// under the entry's cap, so that the classes are few.
    seat_prices: BTreeSet<i64>,
    waiting_by_account: BTreeMap<String, u64>,
    /// Offered entries by account: (entry, its hold); live while the hold is.
    offered_by_account: BTreeMap<String, (String, String)>,
    /// The holds of offers out (forgotten once they end or sell).
    offer_holds: BTreeSet<String>,
    waitlist_next_seq: u64,
    waitlist_offer_ttl_s: u32,
    /// Every class must be matched again: the engine was loaded, seats were freed by a
    /// catch-up, or the last match stopped at its bound.
    waitlist_dirty: bool,
    /// The latest the store's clock can read while the current group is decided (see
    /// [`EventEngine::decide_within`]); a deadline is extended or a hold sold only if it is
    /// still ahead of it.
    latest: OffsetDateTime,
    /// The hold TTL rule (`crate::hold_ttl`): the event's TTL, or one that follows the sale.
    ttl_policy: HoldTtlPolicy,
    /// Times from grant to checkout start of this engine's holds.
    hold_to_pay: HoldToPay,
    /// When each live hold this engine granted was granted (kept only while the TTL follows
    /// the sale).
    granted_at: BTreeMap<String, OffsetDateTime>,
    /// Whether fans wait for seats (the waiting room's queue is not empty), as the writer's
    /// driver last said; without a room to ask, assumed.
    demand_waiting: bool,
    /// The event is cancelled: holds are refused, payments cancel their checkouts, the
    /// waiting list offers nothing (`engine::cancel`).
    cancelled: bool,
    /// The sale phases, the redemptions of their codes, and per group the accounts' usage
    /// per phase (`crate::phase`, `engine::access`).
    lanes: crate::phase::Lanes,
}

impl EventEngine {
    /// An engine at `now` (the store's clock) over a snapshot.
    pub fn load(rules: SaleRules, snapshot: EngineSnapshot, now: OffsetDateTime) -> Self {
        let seats: BTreeMap<String, SeatRow> = snapshot
            .seats
            .into_iter()
            .map(|seat| (seat.seat_id.clone(), seat))
            .collect();
        let tiers: BTreeMap<String, TierRow> = snapshot
            .tiers
            .into_iter()
            .map(|tier| (tier.tier_id.clone(), tier))
            .collect();
        let mut state = BatchState {
            now,
            seats,
            tiers,
            usage_by_account: BTreeMap::new(),
            prior_digests: BTreeMap::new(),
        };
        // The keys read at load are remembered from the load on, like the ones decided after.
        let mut key_times = VecDeque::with_capacity(snapshot.keys.len());
        for (key, digest) in snapshot.keys {
            key_times.push_back((now, key.clone()));
            state.prior_digests.insert(key, digest);
        }
        let ceiling_s = rules.hold_ttl_s;
        let mut engine = Self {
            rules,
            state,
            holds: BTreeMap::new(),
            holds_by_account: BTreeMap::new(),
            seat_deadlines: BTreeSet::new(),
            hold_deadlines: BTreeSet::new(),
            rows: None,
            free: FreeSeats::default(),
            key_times,
            exchanged_tickets: BTreeMap::new(),
            version: snapshot.version,
            writer_seq: snapshot.writer_seq,
            waitlist: BTreeMap::new(),
            waitlist_classes: BTreeMap::new(),
            waitlist_joined_classes: BTreeSet::new(),
            seat_prices: BTreeSet::new(),
            waiting_by_account: BTreeMap::new(),
            offered_by_account: BTreeMap::new(),
            offer_holds: BTreeSet::new(),
            waitlist_next_seq: 1,
            waitlist_offer_ttl_s: snapshot.waitlist_offer_ttl_s,
            waitlist_dirty: true,
            latest: now,
            ttl_policy: HoldTtlPolicy {
                ceiling_s,
                follow_sale: false,
            },
            hold_to_pay: HoldToPay::default(),
            granted_at: BTreeMap::new(),
            demand_waiting: true,
            cancelled: snapshot.cancelled,
            lanes: snapshot.lanes,
        };
        for hold in snapshot.holds {
            engine.keep_hold(hold);
        }
        engine.free = FreeSeats::build(&engine.rules, &engine.state);
        engine.seat_prices = engine.free.prices();
        for entry in snapshot.waitlist {
            engine.keep_entry(entry);
        }
        let held: Vec<(OffsetDateTime, String)> = engine
            .state
            .seats
            .values()
            .filter(|seat| seat.status == SeatStatus::Held)
            .filter_map(|seat| Some((seat.hold_expires_at?, seat.seat_id.clone())))
            .collect();
        engine.seat_deadlines.extend(held);
        engine.rows = Some(RowIndex::build(&engine.rules, &engine.state));
        engine.advance(now);
        engine
    }

    /// Lets the hold TTL follow the sale (`crate::hold_ttl`), the event's TTL the ceiling.
    pub fn set_hold_ttl_follows_sale(&mut self, follow_sale: bool) {
        self.ttl_policy.follow_sale = follow_sale;
        if !follow_sale {
            self.granted_at.clear();
        }
    }

    /// Whether fans wait for seats now (the waiting room's queue): the TTL follows the sale
    /// only while they do.
    pub fn set_demand_waiting(&mut self, waiting: bool) {
        self.demand_waiting = waiting;
    }

    /// The TTL a hold granted now gets, seconds.
    pub fn hold_ttl_s(&self) -> u32 {
        self.ttl_policy
            .ttl_s(&self.hold_to_pay, self.demand_waiting)
    }

    /// Times from grant to checkout start measured so far (kept while the TTL follows).
    pub fn hold_to_pay(&self) -> &HoldToPay {
        &self.hold_to_pay
    }

    /// Starts from what an engine before this one measured (the pipeline carries it over a
    /// reload: a measurement of the sale, not state of the inventory).
    pub fn keep_measured(&mut self, measured: HoldToPay) {
        self.hold_to_pay = measured;
    }

    pub fn rules(&self) -> &SaleRules {
        &self.rules
    }

    /// The seat-map version of the last committed group the engine knows of.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The writer sequence of the last committed group.
    pub fn writer_seq(&self) -> u64 {
        self.writer_seq
    }

    /// Records that a group committed at `version` with writer sequence `writer_seq`.
    pub fn committed(&mut self, version: u64, writer_seq: u64) {
        self.version = self.version.max(version);
        self.writer_seq = self.writer_seq.max(writer_seq);
    }

    /// Records that the changes up to `version` made elsewhere are in the engine.
    pub fn caught_up_to(&mut self, version: u64) {
        self.version = self.version.max(version);
    }

    pub fn seat(&self, seat_id: &str) -> Option<&SeatRow> {
        self.state.seats.get(seat_id)
    }

    pub fn tier(&self, tier_id: &str) -> Option<&TierRow> {
        self.state.tiers.get(tier_id)
    }

    pub fn hold(&self, hold_id: &str) -> Option<&EngineHold> {
        self.holds.get(hold_id)
    }

    /// Seats or units the account holds live or owns at `now`.
    pub fn usage(&self, account_id: &str, now: OffsetDateTime) -> u32 {
        self.holds_by_account
            .get(account_id)
            .into_iter()
            .flatten()
            .filter_map(|hold_id| self.holds.get(hold_id))
            .filter(|hold| hold.counts_at(now))
            .map(|hold| hold.quantity)
            .fold(0u32, u32::saturating_add)
    }

    /// Seats or units each of `accounts` holds live or owns at `now`, per sale phase.
    fn phase_usage(
        &self,
        accounts: &BTreeSet<&str>,
        now: OffsetDateTime,
    ) -> BTreeMap<(String, String), u32> {
        let mut usage: BTreeMap<(String, String), u32> = BTreeMap::new();
        if self.lanes.phases.is_empty() {
            return usage;
        }
        for account in accounts {
            let holds = self
                .holds_by_account
                .get(*account)
                .into_iter()
                .flatten()
                .filter_map(|hold_id| self.holds.get(hold_id))
                .filter(|hold| hold.counts_at(now));
            for hold in holds {
                if let Some(phase_id) = &hold.phase_id {
                    let n = usage
                        .entry(((*account).to_owned(), phase_id.clone()))
                        .or_default();
                    *n = n.saturating_add(hold.quantity);
                }
            }
        }
        usage
    }

    /// The holds the engine connects with these seats and tiers: what a refresh must read
    /// again besides the rows themselves (a hold that ended elsewhere leaves no trace on its
    /// seats).
    pub fn holds_touching(&self, seat_ids: &[String], tier_ids: &[String]) -> Vec<String> {
        let mut hold_ids = BTreeSet::new();
        for seat_id in seat_ids {
            if let Some(hold_id) = self
                .state
                .seats
                .get(seat_id)
                .and_then(|s| s.hold_id.clone())
            {
                hold_ids.insert(hold_id);
            }
        }
        for hold in self.holds.values() {
            if hold.tier_id.as_ref().is_some_and(|t| tier_ids.contains(t)) {
                hold_ids.insert(hold.hold_id.clone());
            }
        }
        hold_ids.into_iter().collect()
    }

    /// Moves the engine's clock to `now`: seats whose holds passed their deadline become free
    /// in the best-available index (the holds themselves end in the next group).
    pub fn advance(&mut self, now: OffsetDateTime) {
        if now > self.state.now {
            self.state.now = now;
        }
        let now = self.state.now;
        while let Some((deadline, seat_id)) = self.seat_deadlines.first().cloned() {
            if deadline > now {
                break;
            }
            self.seat_deadlines.pop_first();
            let lapsed = self.state.seats.get(&seat_id).is_some_and(|seat| {
                seat.status == SeatStatus::Held && seat.hold_expires_at == Some(deadline)
            });
            if lapsed {
                self.index_free(&seat_id, true);
            }
        }
    }

    /// The most seats together free per section (in the event's section order), from the
    /// best-available index: what a party can still get without being split.
    pub fn largest_blocks(&self) -> Vec<(String, u32)> {
        match &self.rows {
            Some(rows) => rows.largest_blocks(),
            None => RowIndex::build(&self.rules, &self.state).largest_blocks(),
        }
    }

    /// The earliest deadline of a `HELD` hold: when the writer must run a group to expire it.
    pub fn next_deadline(&self) -> Option<OffsetDateTime> {
        self.hold_deadlines.first().map(|(deadline, _)| *deadline)
    }

    /// Whether something of the event waits on this engine alone: a hold in `HELD` (its
    /// deadline ends it in the writer's next group) or a waiting-list entry (a seat freed is
    /// offered to it in the group that frees it). The writer of an idle event unloads its
    /// engine only when nothing does (`server/src/runtime/writer.rs`). It looks at every hold
    /// the engine keeps: the writer asks once its idle time is up, not per group.
    pub fn has_timers_or_waiters(&self) -> bool {
        !self.waitlist.is_empty()
            || !self.offered_by_account.is_empty()
            || self.holds.values().any(|hold| {
                // What an allocation keeps lapses at its `releaseAt`, maybe months away: the
                // sweeper ends it if no writer is loaded then.
                hold.status == HoldStatus::Held
                    && !crate::allocation::is_allocation_account(&hold.account_id)
            })
    }

    /// How many hold keys the engine remembers (at most those of the last
    /// hold TTL + [`HOLD_KEYS_KEPT_PAST_TTL_S`], and those it was loaded with until then).
    pub fn keys_remembered(&self) -> usize {
        self.state.prior_digests.len()
    }

    /// Forgets the hold keys remembered longer than the event's hold TTL +
    /// [`HOLD_KEYS_KEPT_PAST_TTL_S`] ago (the TTL as the event sets it: the longest a hold
    /// gets, also when the TTL follows the sale).
    fn forget_old_keys(&mut self) {
        let kept_s = i64::from(self.rules.hold_ttl_s) + i64::from(HOLD_KEYS_KEPT_PAST_TTL_S);
        let Some(cutoff) = self.state.now.checked_sub(time::Duration::seconds(kept_s)) else {
            return;
        };
        while self.key_times.front().is_some_and(|(at, _)| *at <= cutoff) {
            if let Some((_, key)) = self.key_times.pop_front() {
                self.state.prior_digests.remove(&key);
            }
        }
    }

    /// Decides `commands` in arrival order at `now` (the store's clock, as the writer
    /// estimates it from below) and applies the result to the engine.
    pub fn decide(
        &mut self,
        now: OffsetDateTime,
        commands: &[Command],
    ) -> (Vec<Decision>, Effects) {
        self.decide_within(now, now, commands)
    }

    /// [`Self::decide`] with the store's clock known only within `[now, latest]` (the writer
    /// measures it from below, and a round trip later). Seats are freed and taken by `now`
    /// (the store checks that by the group's clock); a checkout extends a hold, and a
    /// payment sells one, only if its deadline is ahead of `latest`, so a hold that anyone
    /// may already have seen expired by the store's clock is never brought back.
    pub fn decide_within(
        &mut self,
        now: OffsetDateTime,
        latest: OffsetDateTime,
        commands: &[Command],
    ) -> (Vec<Decision>, Effects) {
        self.advance(now);
        self.forget_old_keys();
        self.latest = latest.max(self.state.now);
        // The group's holds get the TTL the rule gives now; the event's is restored after.
        let ttl_s = self.hold_ttl_s();
        let ceiling_s = std::mem::replace(&mut self.rules.hold_ttl_s, ttl_s);
        let mut effects = Effects::default();
        self.expire_due(&mut effects);
        let mut decisions: Vec<Decision> = Vec::with_capacity(commands.len());
        let mut index = 0;
        while index < commands.len() {
            match &commands[index] {
                // A comp ends the allocation's holds it gives first (`engine::allocation`).
                Command::Hold(request) if allocation::is_comp(request) => {
                    let outcome = self.decide_comp(index, request, &mut effects);
                    decisions.push(Decision::Hold(outcome));
                    index += 1;
                }
                Command::Hold(_) => {
                    let run_end = commands[index..]
                        .iter()
                        .position(|c| match c {
                            Command::Hold(request) => allocation::is_comp(request),
                            _ => true,
                        })
                        .map_or(commands.len(), |n| index + n);
                    let run: Vec<HoldRequest> = commands[index..run_end]
                        .iter()
                        .filter_map(|c| match c {
                            Command::Hold(request) => Some(request.clone()),
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
                            | Command::RedeemAccess(_) => None,
                        })
                        .collect();
                    let outcomes = self.decide_holds(&run, index);
                    for (offset, (request, outcome)) in run.iter().zip(&outcomes).enumerate() {
                        if let HoldOutcome::Held(hold) = outcome {
                            effects.push(Effect::HoldCreated(HoldCreated {
                                index: index + offset,
                                key: request.idempotency_key.clone(),
                                hold: hold.clone(),
                            }));
                        }
                    }
                    decisions.extend(outcomes.into_iter().map(Decision::Hold));
                    index = run_end;
                }
                Command::Release {
                    account_id,
                    hold_id,
                } => {
                    let decision = self.decide_release(account_id, hold_id, &mut effects);
                    decisions.push(Decision::Release(decision));
                    index += 1;
                }
                Command::Checkout(request) => {
                    let decision = self.decide_checkout(index, request, &mut effects);
                    decisions.push(Decision::Checkout(decision));
                    index += 1;
                }
                Command::Payment(request) => {
                    let decision = self.decide_payment(index, request, &mut effects);
                    decisions.push(Decision::Payment(decision));
                    index += 1;
                }
                Command::Compensate(request) => {
                    let decision = self.decide_compensation(index, request, &mut effects);
                    decisions.push(Decision::Compensate(decision));
                    index += 1;
                }
                Command::Exchange(request) => {
                    let decision = self.decide_exchange(index, request, &mut effects);
                    decisions.push(Decision::Exchange(decision));
                    index += 1;
                }
                Command::Transfer(request) => {
                    let decision = self.decide_transfer(index, request, &mut effects);
                    decisions.push(Decision::Transfer(decision));
                    index += 1;
                }
                Command::Refund(request) => {
                    let decision = self.decide_refund(index, request, &mut effects);
                    decisions.push(Decision::Refund(decision));
                    index += 1;
                }
                Command::WaitlistJoin(request) => {
                    let decision = self.decide_join(request, &mut effects);
                    decisions.push(Decision::Waitlist(decision));
                    index += 1;
                }
                Command::WaitlistLeave {
                    account_id,
                    waitlist_id,
                } => {
                    let decision = self.decide_leave(account_id, waitlist_id, &mut effects);
                    decisions.push(Decision::Waitlist(decision));
                    index += 1;
                }
                Command::Cancel(request) => {
                    let decision = self.decide_cancel(index, request, &mut effects);
                    decisions.push(Decision::Cancel(decision));
                    index += 1;
                }
                Command::RedeemAccess(request) => {
                    let decision = self.decide_redeem(index, request, &mut effects);
                    decisions.push(Decision::Access(decision));
                    index += 1;
                }
            }
        }
        self.offers_moved_on(&mut effects);
        self.offer_to_waitlist(&mut effects);
        self.rules.hold_ttl_s = ceiling_s;
        (decisions, effects)
    }

    /// Decides a run of hold requests (the first at `first_index` in the group) and takes
    /// in the holds granted; the caller records each in the group's effects.
    fn decide_holds(&mut self, run: &[HoldRequest], first_index: usize) -> Vec<HoldOutcome> {
        if self.cancelled {
            return vec![HoldOutcome::EventCancelled; run.len()];
        }
        let now = self.state.now;
        let accounts: BTreeSet<&str> = run.iter().map(|r| r.account_id.as_str()).collect();
        self.state.usage_by_account = accounts
            .iter()
            .map(|account| ((*account).to_owned(), self.usage(account, now)))
            .collect();
        self.lanes.usage = self.phase_usage(&accounts, now);
        // An expired hold whose seats a new hold takes stays kept (it no longer counts
        // against its account, and a release finds it ended) until a refresh drops it.
        let mut outcomes = decide_holds_indexed(
            &self.rules,
            &mut self.state,
            run,
            &mut self.rows,
            &mut self.lanes,
        );
        // A replay of an earlier request of the run names it by its place in the group.
        for outcome in &mut outcomes {
            if let HoldOutcome::ReplayOfEarlierInBatch { index } = outcome {
                *index += first_index;
            }
        }
        for (request, outcome) in run.iter().zip(&outcomes) {
            if outcome.is_recorded() {
                let key = (request.account_id.clone(), request.idempotency_key.clone());
                self.key_times.push_back((now, key.clone()));
                self.state
                    .prior_digests
                    .insert(key, request.request_digest.clone());
            }
            let HoldOutcome::Held(hold) = outcome else {
                continue;
            };
            for (seat_id, _) in &hold.seats {
                // `decide_holds_indexed` kept the row index; the class index follows here.
                self.free.set_free(seat_id, false);
                self.seat_deadlines
                    .insert((hold.expires_at, seat_id.clone()));
            }
            if self.ttl_policy.follow_sale {
                self.granted_at.insert(hold.hold_id.clone(), now);
            }
            self.keep_hold(EngineHold {
                hold_id: hold.hold_id.clone(),
                account_id: hold.account_id.clone(),
                status: HoldStatus::Held,
                tier_id: hold.tier_id.clone(),
                quantity: hold.quantity,
                seat_ids: hold.seats.iter().map(|(id, _)| id.clone()).collect(),
                expires_at: hold.expires_at,
                exchange: false,
                phase_id: hold.phase_id.clone(),
            });
        }
        outcomes
    }

    fn decide_release(
        &mut self,
        account_id: &str,
        hold_id: &str,
        effects: &mut Effects,
    ) -> ReleaseDecision {
        let now = self.state.now;
        let Some(hold) = self.holds.get(hold_id) else {
            return ReleaseDecision::NotKept;
        };
        if hold.account_id != account_id {
            return ReleaseDecision::NotFound;
        }
        match hold.status {
            HoldStatus::PaymentPending => return ReleaseDecision::InCheckout,
            HoldStatus::Held if hold.expires_at > now => {}
            _ => return ReleaseDecision::AlreadyEnded,
        }
        if let Some(ended) = self.end_hold(hold_id) {
            effects.push(Effect::HoldReleased(ended));
        }
        ReleaseDecision::Released {
            hold_id: hold_id.to_owned(),
        }
    }

    fn decide_checkout(
        &mut self,
        index: usize,
        request: &CheckoutRequest,
        effects: &mut Effects,
    ) -> CheckoutDecision {
        // The cancellation ended every live hold but those granted earlier in its own group,
        // which nothing may sell: they wait out their deadline.
        if self.cancelled {
            return CheckoutDecision::Expired;
        }
        let now = self.latest;
        let Some(hold) = self.holds.get_mut(&request.hold_id) else {
            return CheckoutDecision::NotKept;
        };
        if hold.account_id != request.account_id {
            return CheckoutDecision::NotFound;
        }
        if hold.status != HoldStatus::Held || hold.expires_at <= now {
            return CheckoutDecision::refused_for(hold.status);
        }
        // One bounded extension: the deadline moves once, by the event's grace, here.
        let expires_at = hold.expires_at + time::Duration::seconds(i64::from(request.grace_s));
        let held_until = (hold.expires_at, hold.hold_id.clone());
        hold.status = HoldStatus::PaymentPending;
        hold.expires_at = expires_at;
        let seat_ids = hold.seat_ids.clone();
        self.hold_deadlines.remove(&held_until);
        let mut extended = Vec::with_capacity(seat_ids.len());
        for seat_id in seat_ids {
            let Some(seat) = self.state.seats.get_mut(&seat_id) else {
                continue;
            };
            if seat.status != SeatStatus::Held
                || seat.hold_id.as_deref() != Some(request.hold_id.as_str())
            {
                continue;
            }
            seat.hold_expires_at = Some(expires_at);
            self.seat_deadlines.insert((expires_at, seat_id.clone()));
            extended.push(seat_id);
        }
        if let Some(granted_at) = self.granted_at.remove(&request.hold_id) {
            let ms = (self.state.now - granted_at).whole_milliseconds();
            self.hold_to_pay
                .record(u32::try_from(ms.max(0)).unwrap_or(u32::MAX));
        }
        effects.push(Effect::CheckoutStarted(CheckoutStarted {
            index,
            account_id: request.account_id.clone(),
            hold_id: request.hold_id.clone(),
            order_id: request.order_id.clone(),
            seat_ids: extended,
            expires_at,
        }));
        CheckoutDecision::Started { expires_at }
    }

    fn decide_payment(
        &mut self,
        index: usize,
        request: &PaymentRequest,
        effects: &mut Effects,
    ) -> PaymentDecision {
        let now = self.state.now;
        let latest = self.latest;
        let Some(hold) = self.holds.get(&request.hold_id) else {
            return PaymentDecision::NotKept;
        };
        if hold.account_id != request.account_id
            || hold.status != HoldStatus::PaymentPending
            || hold.exchange
        {
            return PaymentDecision::NotKept;
        }
        // The settlement's rules (`settlement`), on the engine's own rows: the hold is kept
        // only while it is no exchange's, and its usage counts it, being live.
        let reason = match request.outcome {
            PaymentOutcome::Failed => Some(settlement::reason::PAYMENT_FAILED),
            PaymentOutcome::Voided => Some(settlement::reason::PAYMENT_VOIDED),
            PaymentOutcome::Paid if self.cancelled => Some(settlement::reason::EVENT_CANCELLED),
            PaymentOutcome::Paid => settlement::refusal(
                &settlement::Confirmation {
                    hold_status: hold.status,
                    hold_expires_at: hold.expires_at,
                    exchange_open: true,
                    account_total: u64::from(self.usage(&request.account_id, now)),
                    max_tickets_per_account: u64::from(self.rules.max_tickets_per_account),
                },
                latest,
            ),
        };
        if let Some(reason) = reason {
            if let Some(hold) = self.end_hold(&request.hold_id) {
                effects.push(Effect::CheckoutCancelled(CheckoutCancelled { index, hold }));
            }
            return PaymentDecision::Cancelled { reason };
        }
        let Some(hold) = self.holds.get_mut(&request.hold_id) else {
            return PaymentDecision::NotKept;
        };
        hold.status = HoldStatus::Confirmed;
        let seat_ids = hold.seat_ids.clone();
        let tier = hold.tier_id.clone().map(|tier_id| (tier_id, hold.quantity));
        let mut sold = Vec::with_capacity(seat_ids.len());
        for seat_id in seat_ids {
            let Some(seat) = self.state.seats.get_mut(&seat_id) else {
                continue;
            };
            if seat.status != SeatStatus::Held
                || seat.hold_id.as_deref() != Some(request.hold_id.as_str())
            {
                continue;
            }
            seat.status = SeatStatus::Sold;
            seat.hold_expires_at = None;
            self.index_free(&seat_id, false);
            sold.push(seat_id);
        }
        if let Some((tier_id, units)) = &tier
            && let Some(row) = self.state.tiers.get_mut(tier_id)
        {
            row.held -= i64::from(*units);
            row.sold += i64::from(*units);
        }
        effects.push(Effect::HoldConfirmed(HoldConfirmed {
            index,
            hold_id: request.hold_id.clone(),
            account_id: request.account_id.clone(),
            seat_ids: sold,
            tier,
        }));
        PaymentDecision::Confirmed
    }

    /// A sale given back: the confirmed hold ends, the seats it still sells are free again and
    /// its units (less what an exchange took out) back on sale.
    fn decide_compensation(
        &mut self,
        index: usize,
        request: &CompensationRequest,
        effects: &mut Effects,
    ) -> CompensationDecision {
        let Some(hold) = self.holds.get(&request.hold_id) else {
            return CompensationDecision::NotKept;
        };
        if hold.status != HoldStatus::Confirmed {
            return CompensationDecision::NotConfirmed;
        }
        let Some(hold) = self.end_hold_from(&request.hold_id, SeatStatus::Sold) else {
            return CompensationDecision::NotKept;
        };
        effects.push(Effect::OrderCompensated(OrderCompensated {
            index,
            order_id: request.order_id.clone(),
            hold,
        }));
        CompensationDecision::Compensated
    }

    /// Ends the `HELD` holds past their deadline, earliest first and at most
    /// [`EXPIRIES_PER_GROUP_MAX`] (the rest in the next groups): their seats and units back on
    /// sale, in the group's effects.
    fn expire_due(&mut self, effects: &mut Effects) {
        let now = self.state.now;
        let mut n_expired = 0;
        while let Some((deadline, hold_id)) = self.hold_deadlines.first().cloned() {
            if deadline > now || n_expired >= EXPIRIES_PER_GROUP_MAX {
                break;
            }
            self.hold_deadlines.pop_first();
            let due = self
                .holds
                .get(&hold_id)
                .is_some_and(|h| h.status == HoldStatus::Held && h.expires_at == deadline);
            // (The map shows what the store actually ended, the sweeper or a checkout may
            // have got there first: `Effects::map_seats` leaves the engine's guess out.)
            if due && let Some(ended) = self.end_hold(&hold_id) {
                effects.push(Effect::HoldExpired(ended));
                n_expired += 1;
            }
        }
    }

    /// Forgets a live hold that ends now, freeing the seats it still holds and returning its
    /// units.
    fn end_hold(&mut self, hold_id: &str) -> Option<HoldReleased> {
        self.end_hold_from(hold_id, SeatStatus::Held)
    }

    /// Forgets a hold that ends now, freeing the seats that still point to it in `status`
    /// (`Held` for a live hold, `Sold` for a confirmed one given back) and returning its units
    /// from the tier's held or sold count.
    fn end_hold_from(&mut self, hold_id: &str, status: SeatStatus) -> Option<HoldReleased> {
        let hold = self.forget_hold(hold_id)?;
        let mut freed = Vec::new();
        for seat_id in &hold.seat_ids {
            let Some(seat) = self.state.seats.get_mut(seat_id) else {
                continue;
            };
            if seat.status != status || seat.hold_id.as_deref() != Some(hold_id) {
                continue;
            }
            self.free_seat(seat_id);
            freed.push(seat_id.clone());
        }
        let tier = hold.tier_id.as_ref().map(|tier_id| {
            if let Some(tier) = self.state.tiers.get_mut(tier_id) {
                match status {
                    SeatStatus::Sold => tier.sold -= i64::from(hold.quantity),
                    SeatStatus::Held | SeatStatus::Available => {
                        tier.held -= i64::from(hold.quantity);
                    }
                }
                tier.available += i64::from(hold.quantity);
            }
            (tier_id.clone(), hold.quantity)
        });
        Some(HoldReleased {
            hold_id: hold_id.to_owned(),
            account_id: hold.account_id.clone(),
            seat_ids: freed,
            tier,
        })
    }

    /// Records in both free-seat indexes whether a seat is free.
    fn index_free(&mut self, seat_id: &str, is_free: bool) {
        if let Some(rows) = &mut self.rows {
            rows.set_free(seat_id, is_free);
        }
        self.free.set_free(seat_id, is_free);
    }

    /// A seat back on sale: free in the index.
    fn free_seat(&mut self, seat_id: &str) {
        if let Some(seat) = self.state.seats.get_mut(seat_id) {
            seat.status = SeatStatus::Available;
            seat.hold_id = None;
            seat.hold_expires_at = None;
        }
        self.index_free(seat_id, true);
    }

    /// Takes in rows that changed elsewhere (read after the engine's last group committed):
    /// seats and tiers as they are now, and the holds connected with them in any status.
    pub fn refresh(&mut self, rows: EngineRows) {
        for hold in rows.holds {
            if EngineHold::is_kept(hold.status) {
                self.keep_hold(hold);
            } else {
                self.forget_hold(&hold.hold_id);
            }
        }
        let now = self.state.now;
        for seat in rows.seats {
            if seat.status == SeatStatus::Held
                && let Some(deadline) = seat.hold_expires_at
            {
                self.seat_deadlines.insert((deadline, seat.seat_id.clone()));
            }
            let is_free = seat_is_free(seat.status, seat.hold_expires_at, now);
            let was_free = self.free.is_free(&seat.seat_id).unwrap_or(false);
            // A seat freed elsewhere (a release or lapse on another node, the sweeper) is
            // offered to the waiting list like one freed here.
            if is_free && !was_free {
                self.waitlist_dirty = true;
            }
            self.index_free(&seat.seat_id, is_free);
            self.state.seats.insert(seat.seat_id.clone(), seat);
        }
        for tier in rows.tiers {
            self.state.tiers.insert(tier.tier_id.clone(), tier);
        }
    }

    fn keep_hold(&mut self, hold: EngineHold) {
        if hold.status == HoldStatus::Held {
            self.hold_deadlines
                .insert((hold.expires_at, hold.hold_id.clone()));
        }
        self.holds_by_account
            .entry(hold.account_id.clone())
            .or_default()
            .insert(hold.hold_id.clone());
        self.holds.insert(hold.hold_id.clone(), hold);
    }

    fn forget_hold(&mut self, hold_id: &str) -> Option<EngineHold> {
        self.granted_at.remove(hold_id);
        let hold = self.holds.remove(hold_id)?;
        if let Some(ids) = self.holds_by_account.get_mut(&hold.account_id) {
            ids.remove(hold_id);
            if ids.is_empty() {
                self.holds_by_account.remove(&hold.account_id);
            }
        }
        Some(hold)
    }

    /// Single-condition checks of the engine's state at its clock; empty when all hold.
    pub fn invariants(&self) -> Vec<String> {
        let now = self.state.now;
        let mut violations = Vec::new();
        for seat in self.state.seats.values() {
            if seat.status == SeatStatus::Held && seat.hold_id.is_none() {
                violations.push(format!("held seat {} has no hold", seat.seat_id));
            }
            if seat.status == SeatStatus::Held && seat.hold_expires_at.is_none() {
                violations.push(format!("held seat {} has no deadline", seat.seat_id));
            }
            if seat.status == SeatStatus::Available && seat.hold_id.is_some() {
                violations.push(format!("available seat {} has a hold", seat.seat_id));
            }
            let free = seat_is_free(seat.status, seat.hold_expires_at, now);
            let indexed = self.rows.as_ref().and_then(|r| {
                r.is_free(&seat.seat_id)
                    .map(|indexed| (indexed, free && r.may_seat(&seat.seat_id)))
            });
            if indexed.is_some_and(|(indexed, free)| indexed != free) {
                violations.push(format!(
                    "seat {} is {} but the index says {}",
                    seat.seat_id,
                    if free { "free" } else { "taken" },
                    if free { "taken" } else { "free" },
                ));
            }
            let classed = self.free.is_free(&seat.seat_id);
            if classed.is_some_and(|classed| classed != free) {
                violations.push(format!(
                    "seat {} is {} but the class index says {}",
                    seat.seat_id,
                    if free { "free" } else { "taken" },
                    if free { "taken" } else { "free" },
                ));
            }
        }
        if let Some(rows) = &self.rows {
            for (section, row) in rows.stale_rows() {
                violations.push(format!(
                    "row {section}-{row}'s free seats are not what the index counts"
                ));
            }
        }
        for tier in self.state.tiers.values() {
            if tier.available < 0 {
                violations.push(format!("tier {} has negative available", tier.tier_id));
            }
            if tier.held < 0 {
                violations.push(format!("tier {} has negative held", tier.tier_id));
            }
            if tier.available + tier.held + tier.sold != tier.capacity {
                violations.push(format!("tier {} counts do not add up", tier.tier_id));
            }
        }
        for hold in self.holds.values() {
            let live = hold.status == HoldStatus::Held && hold.expires_at > now;
            if live && hold.tier_id.is_none() {
                for seat_id in &hold.seat_ids {
                    let points_here = self.state.seats.get(seat_id).is_some_and(|seat| {
                        seat.status == SeatStatus::Held
                            && seat.hold_id.as_deref() == Some(hold.hold_id.as_str())
                    });
                    if !points_here {
                        violations.push(format!(
                            "live hold {} does not hold its seat {seat_id}",
                            hold.hold_id
                        ));
                    }
                }
            }
            let listed = self
                .holds_by_account
                .get(&hold.account_id)
                .is_some_and(|ids| ids.contains(&hold.hold_id));
            if !listed {
                violations.push(format!("hold {} missing from its account", hold.hold_id));
            }
        }
        for account_id in self.holds_by_account.keys() {
            // An exchange waiting for its difference counts both its sides until it completes
            // or ends (the store counts them so too): the limit was judged without the old.
            let pending_exchanges: u32 = self.holds_by_account[account_id]
                .iter()
                .filter_map(|hold_id| self.holds.get(hold_id))
                .filter(|hold| {
                    hold.exchange && hold.status != HoldStatus::Confirmed && hold.counts_at(now)
                })
                .map(|hold| hold.quantity)
                .sum();
            let usage = self
                .usage(account_id, now)
                .saturating_sub(pending_exchanges);
            // What an allocation keeps is no purchase (`crate::allocation`).
            if usage > self.rules.max_tickets_per_account
                && !crate::allocation::is_allocation_account(account_id)
            {
                violations.push(format!(
                    "account {account_id} holds or owns {usage} > {}",
                    self.rules.max_tickets_per_account
                ));
            }
        }
        violations
    }
}

#[cfg(test)]
mod tests;
