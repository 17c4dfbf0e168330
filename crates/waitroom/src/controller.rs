//! The release-rate controller: how many queue positions to release in the next second.
//!
//! Recomputed once per second from [`Signals`] the server measures, like TCP's congestion
//! control finds a path's capacity:
//!
//! - **Slow start.** From the event's start rate, the rate doubles every healthy second until
//!   the first sign of trouble (or the operator's cap): 10/s reaches 2,560/s in 8 seconds.
//! - **Multiplicative decrease.** On trouble (hold p99 above the event's target, the event
//!   writer's group p99 above it or its queue deep, store errors, checkout or payment errors)
//!   the rate halves (never below [`ControllerConfig::min_release_per_s`]), and the halved
//!   rate becomes the threshold where slow start stops. The next second only holds: a
//!   decrease shows in the measurements a second later, and halving again before it shows
//!   would throw away capacity the sale has.
//! - **Additive increase.** Past the threshold, a healthy second adds a tenth of it (at least
//!   [`ControllerConfig::increase_per_s`]): back to the rate that caused trouble in ten
//!   seconds, probing for more.
//! - **Hold** while release is limited by free active-shopper slots: the sale behind the door
//!   is full, and a rate that nothing tests would only grow (RFC 7661's lesson for TCP).
//! - **Stop** while the store is down (the next start is a slow start from the start rate,
//!   with the threshold at half the rate before) or the house is sold out (release resumes
//!   where it was when seats come back).
//!
//! - **Release sees the inventory** ([`Inventory`]): never more fans than what is free can
//!   serve — free seats and units over the party size measured so far, minus the fans
//!   already admitted with no hold yet and those released who have not claimed — so that a
//!   fan admitted at the end of a sale finds seats instead of a refusal. While everything
//!   left is held but not sold ([`DecisionKind::AllHeld`]) nothing is released: admissions
//!   follow the lapses, as the seats come back.
//!
//! Never more than the free active-shopper slots are released. Every [`Decision`] carries a
//! `reason` the admin endpoint shows. The server measures the signals and ticks it once a
//! second (`server/src/runtime/waitroom.rs`); `boxoffice-sim` ticks it in simulated time.

/// Default hold latency above which the controller backs off, p99 in milliseconds.
pub const HOLD_P99_TARGET_MS: u64 = 300;
/// Payment error rate (0.0-1.0) above which the controller backs off (provider or store
/// trouble; a card decline is not an error).
pub const PAYMENT_ERROR_RATE_MAX: f64 = 0.05;
/// Checkout error rate (0.0-1.0: answers 5xx of all checkouts) above which it backs off.
pub const CHECKOUT_ERROR_RATE_MAX: f64 = 0.05;
/// Store errors in one second tolerated before backing off.
pub const STORE_ERRORS_PER_TICK_MAX: u32 = 0;
/// Commands waiting in the event writers' queues above which the controller backs off:
/// about a second of work at the seed's 2,000 holds/s.
pub const WRITER_QUEUE_DEPTH_MAX: u64 = 2_000;
/// The factor applied to the rate on back-off.
pub const DECREASE_FACTOR: f64 = 0.5;
/// Highest cap an operator may set, in releases per second.
pub const RELEASE_PER_S_MAX: u64 = 100_000;
/// Highest hold p99 target an event may set, in milliseconds.
pub const TARGET_HOLD_P99_MS_MAX: u64 = 60_000;
/// Share of the slow-start threshold added per healthy second past it.
const INCREASE_SHARE_OF_THRESHOLD: u64 = 10;

use serde::{Deserialize, Serialize};

/// Shortest window of release history that [`pace`] trusts, in seconds.
pub const PACE_WINDOW_MIN_S: f64 = 5.0;

/// How long a fan `ahead_of_you` places from its turn may expect to wait (seconds), and when
/// to poll again (`Retry-After`, about four polls before the turn, 1 to `poll_max_s`). The
/// rate is the controller's, or what was really released over the last seconds
/// (`released_per_s`, `None` before there is a window of [`PACE_WINDOW_MIN_S`]) when that is
/// lower: while free shopper slots limit release, a fan told the controller's rate would
/// poll many times too often. During slow start (`doubling_up_to`: the cap the rate doubles
/// towards each second) the wait counts the doubling: a fan paced by the first seconds'
/// small rate would sleep past its turn and keep its released slot unclaimed while the
/// rate grows (the one-tenth sale showed release stalled on such slots).
pub fn pace(
    ahead_of_you: u64,
    rate_per_s: u64,
    released_per_s: Option<u64>,
    doubling_up_to: Option<u64>,
    poll_max_s: u64,
) -> (u64, u64) {
    let estimated_wait_s = match doubling_up_to {
        Some(cap) => seconds_to_release(ahead_of_you, rate_per_s, cap),
        None => {
            let rate = released_per_s
                .map_or(rate_per_s, |released| released.min(rate_per_s))
                .max(1);
            ahead_of_you.div_ceil(rate)
        }
    };
    (
        estimated_wait_s,
        (estimated_wait_s / 4).clamp(1, poll_max_s.max(1)),
    )
}

/// Longest `Retry-After` for a fan near enough the head to be served by seats that come back
/// (see [`Inventory::returns_reach`]), seconds: a seat released by a lapse or a declined card
/// is sold in seconds only if the fan it is released to notices at once.
pub const RETURNS_POLL_S: u64 = 2;

/// Seconds to release `positions` at `rate_per_s` doubling each second up to `cap`.
fn seconds_to_release(positions: u64, rate_per_s: u64, cap: u64) -> u64 {
    let cap = cap.max(1);
    let mut rate = rate_per_s.clamp(1, cap);
    let mut left = positions;
    let mut seconds = 0;
    while rate < cap && left > rate {
        left -= rate;
        rate = rate.saturating_mul(2).min(cap);
        seconds += 1;
    }
    seconds + left.div_ceil(rate)
}

/// The party size release assumes before any hold was granted (seats per hold).
pub const PARTY_SIZE_DEFAULT: f64 = 2.0;

/// What is left to sell, as the server's live seat map shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Inventory {
    /// Seats and tier units free now (seats of holds past their deadline included).
    pub free: u64,
    /// Seats held by holds not past their deadline: not for sale now, they may come back.
    pub held: u64,
    /// Mean seats per granted hold so far; below 1 (none yet) reads [`PARTY_SIZE_DEFAULT`].
    pub party_size: f64,
}

impl Inventory {
    /// How many more fans the free inventory can serve beyond `shopping` (admitted with no
    /// hold yet, or released and not claimed): free seats over the party size, rounded up
    /// so that the last seats always have a fan.
    pub fn room_for(&self, shopping: u64) -> u64 {
        let parties = (self.free as f64 / self.party()).ceil() as u64;
        parties.saturating_sub(shopping)
    }

    /// Whether a fan `ahead_of_you` places from its turn could be served by the held seats if
    /// they all came back: such fans poll every [`RETURNS_POLL_S`] at most while release
    /// follows the returns, so that returned seats find a fan at once.
    pub fn returns_reach(&self, ahead_of_you: u64) -> bool {
        ahead_of_you < (self.held as f64 / self.party()).ceil() as u64
    }

    /// The party size measured, or [`PARTY_SIZE_DEFAULT`] before any.
    fn party(&self) -> f64 {
        if self.party_size >= 1.0 {
            self.party_size
        } else {
            PARTY_SIZE_DEFAULT
        }
    }

    /// Nothing free now, but held seats may come back.
    pub fn all_held(&self) -> bool {
        self.free == 0 && self.held > 0
    }
}

/// What the server measured over the last second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    /// Hold answers (and holds still unanswered), p99 in milliseconds.
    pub hold_p99_ms: f64,
    /// The event writers' group commits, p99 in milliseconds (0 when none committed).
    pub writer_group_p99_ms: f64,
    /// Commands waiting in the event writers' queues, the deepest seen this second.
    pub writer_queue_depth: u64,
    pub store_errors: u32,
    pub store_down: bool,
    /// Failed payment attempts over all attempts, 0.0-1.0.
    pub payment_error_rate: f64,
    /// Checkouts answered 5xx over all checkouts, 0.0-1.0.
    pub checkout_error_rate: f64,
    /// Active shoppers now (and released accounts that have not claimed yet).
    pub active: u64,
    /// The active-shopper cap.
    pub max_active: u64,
    /// Admissions started over the last second (shown in the reason).
    pub admitted_per_s: u64,
    /// Shopping trips that ended over the last second: paid, released, expired or left.
    pub completed_per_s: u64,
    /// Nothing is left to sell: no free seat or unit, and no live hold that could lapse.
    pub sold_out: bool,
    /// What is left to sell (`None`: not known, release ignores it).
    pub inventory: Option<Inventory>,
    /// Fans who will want seats soon: admitted with no hold yet (idle slots) and released
    /// who have not claimed.
    pub shopping: u64,
}

impl Signals {
    /// A healthy second with `active` of `max_active` slots taken.
    pub fn healthy(active: u64, max_active: u64) -> Self {
        Self {
            hold_p99_ms: 50.0,
            writer_group_p99_ms: 5.0,
            writer_queue_depth: 0,
            store_errors: 0,
            store_down: false,
            payment_error_rate: 0.0,
            checkout_error_rate: 0.0,
            active,
            max_active,
            admitted_per_s: 0,
            completed_per_s: 0,
            sold_out: false,
            inventory: None,
            shopping: 0,
        }
    }
}

/// Tuning of one controller (per event: `waitingRoom` in the event body; kept with the
/// room's config, so every node runs the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ControllerConfig {
    /// The rate of the first second: slow start doubles it from here.
    pub start_release_per_s: u64,
    /// The operator's cap (`maxReleasePerSecond`).
    pub max_release_per_s: u64,
    /// Floor of a multiplicative decrease, so a struggling sale still moves.
    pub min_release_per_s: u64,
    /// Least added per healthy second past the slow-start threshold.
    pub increase_per_s: u64,
    /// Hold p99 (and writer group p99) above which the controller backs off.
    pub target_hold_p99_ms: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            start_release_per_s: 10,
            max_release_per_s: 500,
            min_release_per_s: 5,
            increase_per_s: 10,
            target_hold_p99_ms: HOLD_P99_TARGET_MS,
        }
    }
}

/// Which branch decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// The operator paused release.
    Paused,
    /// The store is down: nothing is released until it is back.
    StoppedStoreDown,
    /// Nothing is left to sell: nothing is released until seats come back.
    SoldOut,
    /// Everything left is held but not sold: nothing is released until seats come back
    /// (waiting fans are told `ALL_HELD`).
    AllHeld,
    /// Healthy, before the first trouble: the rate doubled.
    SlowStart,
    /// Back-off: the rate was halved.
    Decreased,
    /// Kept: just after a decrease, or release limited by free slots.
    Held,
    /// Healthy past the threshold: the rate grew by a step (or stayed at the cap).
    Increased,
}

impl DecisionKind {
    /// The name the admin view shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Paused => "paused",
            Self::StoppedStoreDown => "store_down",
            Self::SoldOut => "sold_out",
            Self::AllHeld => "all_held",
            Self::SlowStart => "slow_start",
            Self::Decreased => "decrease",
            Self::Held => "hold",
            Self::Increased => "increase",
        }
    }
}

/// One second's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub kind: DecisionKind,
    /// The controller's rate after this decision, releases per second.
    pub rate_per_s: u64,
    /// Positions to release now: the rate, limited by free active slots; 0 when paused,
    /// stopped or sold out.
    pub release_count: u64,
    /// Why, for humans (shown by `GET /v1/admin/events/{eventId}/queue`).
    pub reason: String,
}

/// The controller of one event's queue. See the module docs.
#[derive(Debug, Clone)]
pub struct ReleaseController {
    config: ControllerConfig,
    rate_per_s: u64,
    /// Where slow start stops: `None` until the first trouble.
    threshold: Option<u64>,
    /// The last decision decreased: the next trouble only holds.
    just_decreased: bool,
    paused: bool,
}

impl ReleaseController {
    pub fn new(config: ControllerConfig) -> Self {
        let config = ControllerConfig {
            max_release_per_s: config.max_release_per_s.min(RELEASE_PER_S_MAX),
            ..config
        };
        Self {
            rate_per_s: config.start_release_per_s.min(config.max_release_per_s),
            config,
            threshold: None,
            just_decreased: false,
            paused: false,
        }
    }

    pub fn rate_per_s(&self) -> u64 {
        self.rate_per_s
    }

    /// Where slow start stops (`None` before the first trouble).
    pub fn threshold(&self) -> Option<u64> {
        self.threshold
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    pub fn config(&self) -> ControllerConfig {
        self.config
    }

    /// Pauses or resumes release. The rate is kept, so resuming continues where it was.
    pub fn set_paused(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// Sets the operator cap (clamped to [`RELEASE_PER_S_MAX`]); the rate drops to it at once.
    pub fn set_max_release_per_s(&mut self, max_release_per_s: u64) {
        self.config.max_release_per_s = max_release_per_s.min(RELEASE_PER_S_MAX);
        self.rate_per_s = self.rate_per_s.min(self.config.max_release_per_s);
    }

    /// Decides the next second from the last second's `signals`.
    pub fn tick(&mut self, signals: &Signals) -> Decision {
        if self.paused {
            return self.decision(DecisionKind::Paused, 0, "paused by operator".to_owned());
        }
        if signals.store_down {
            if self.rate_per_s > 0 {
                self.threshold = Some(self.halved());
            }
            self.rate_per_s = 0;
            self.just_decreased = false;
            return self.decision(
                DecisionKind::StoppedStoreDown,
                0,
                "stopped: store down".to_owned(),
            );
        }
        if signals.sold_out {
            return self.decision(
                DecisionKind::SoldOut,
                0,
                "stopped: sold out (no free seat or unit, no live hold that could lapse)"
                    .to_owned(),
            );
        }
        if let Some(inventory) = signals.inventory.filter(Inventory::all_held) {
            return self.decision(
                DecisionKind::AllHeld,
                0,
                format!(
                    "waiting: all {} seats left are held, none free; admissions follow the lapses",
                    inventory.held
                ),
            );
        }
        let free_slots = signals.max_active.saturating_sub(signals.active);
        let room = signals
            .inventory
            .map_or(u64::MAX, |inventory| inventory.room_for(signals.shopping));
        let (kind, reason) = match self.back_off_reason(signals) {
            Some(why) if self.just_decreased => {
                self.just_decreased = false;
                (
                    DecisionKind::Held,
                    format!(
                        "hold at {}/s: {why} (the last decrease shows from the next second)",
                        self.rate_per_s
                    ),
                )
            }
            Some(why) => {
                self.rate_per_s = self.halved();
                self.threshold = Some(self.rate_per_s);
                self.just_decreased = true;
                (
                    DecisionKind::Decreased,
                    format!("decrease to {}/s: {why}", self.rate_per_s),
                )
            }
            None => {
                self.just_decreased = false;
                self.grow(free_slots.min(room))
            }
        };
        let release_count = self.rate_per_s.min(free_slots).min(room);
        let mut reason = reason;
        if room < self.rate_per_s.min(free_slots)
            && let Some(inventory) = signals.inventory
        {
            reason.push_str(&format!(
                "; releasing {release_count}: limited by the inventory ({} free, parties of {:.1}, {} shopping without a hold)",
                inventory.free, inventory.party_size, signals.shopping
            ));
        } else if release_count < self.rate_per_s {
            reason.push_str(&format!(
                "; releasing {release_count}: limited by free active slots ({} of {} taken)",
                signals.active, signals.max_active
            ));
        }
        if signals.admitted_per_s > 0 || signals.completed_per_s > 0 {
            reason.push_str(&format!(
                "; last second {} admitted, {} finished",
                signals.admitted_per_s, signals.completed_per_s
            ));
        }
        Decision {
            kind,
            rate_per_s: self.rate_per_s,
            release_count,
            reason,
        }
    }

    fn decision(&self, kind: DecisionKind, release_count: u64, reason: String) -> Decision {
        Decision {
            kind,
            rate_per_s: self.rate_per_s,
            release_count,
            reason,
        }
    }

    fn halved(&self) -> u64 {
        ((self.rate_per_s as f64 * DECREASE_FACTOR) as u64)
            .max(self.config.min_release_per_s)
            .min(self.config.max_release_per_s)
    }

    /// A healthy second: slow start, additive increase, or hold when the slots limit.
    fn grow(&mut self, free_slots: u64) -> (DecisionKind, String) {
        let cap = self.config.max_release_per_s;
        let floor = self
            .config
            .start_release_per_s
            .max(self.config.min_release_per_s)
            .min(cap);
        if self.rate_per_s > 0 && free_slots < self.rate_per_s {
            return (
                DecisionKind::Held,
                format!(
                    "hold at {}/s: the free shopper slots limit release, so a higher rate would go untested",
                    self.rate_per_s
                ),
            );
        }
        let slow_start = self.threshold.is_none_or(|t| self.rate_per_s < t);
        let (kind, next) = if slow_start {
            let doubled = self.rate_per_s.saturating_mul(2).max(floor);
            (
                DecisionKind::SlowStart,
                self.threshold
                    .map_or(doubled, |t| doubled.min(t.max(floor))),
            )
        } else {
            let step = self
                .config
                .increase_per_s
                .max(self.threshold.unwrap_or(0) / INCREASE_SHARE_OF_THRESHOLD);
            (DecisionKind::Increased, self.rate_per_s + step)
        };
        self.rate_per_s = next.min(cap);
        let verb = match kind {
            DecisionKind::SlowStart => "slow start",
            _ => "increase",
        };
        let why = if self.rate_per_s == cap {
            format!("at the cap {cap}/s")
        } else {
            "healthy".to_owned()
        };
        (kind, format!("{verb} to {}/s: {why}", self.rate_per_s))
    }

    /// Why to back off, or `None` when healthy. NaN measurements count as unhealthy: a broken
    /// measurement must not speed release up.
    fn back_off_reason(&self, signals: &Signals) -> Option<String> {
        let target = self.config.target_hold_p99_ms as f64;
        if signals.store_errors > STORE_ERRORS_PER_TICK_MAX {
            return Some(format!("{} store errors", signals.store_errors));
        }
        if signals.hold_p99_ms.is_nan() || signals.hold_p99_ms > target {
            return Some(format!(
                "hold p99 {:.0} ms above target {target:.0} ms",
                signals.hold_p99_ms
            ));
        }
        if signals.writer_group_p99_ms.is_nan() || signals.writer_group_p99_ms > target {
            return Some(format!(
                "writer group p99 {:.0} ms above target {target:.0} ms",
                signals.writer_group_p99_ms
            ));
        }
        if signals.writer_queue_depth > WRITER_QUEUE_DEPTH_MAX {
            return Some(format!(
                "{} commands queued at the writer (most {WRITER_QUEUE_DEPTH_MAX})",
                signals.writer_queue_depth
            ));
        }
        if signals.checkout_error_rate.is_nan()
            || signals.checkout_error_rate > CHECKOUT_ERROR_RATE_MAX
        {
            return Some(format!(
                "checkout error rate {:.1}% above {:.1}%",
                signals.checkout_error_rate * 100.0,
                CHECKOUT_ERROR_RATE_MAX * 100.0
            ));
        }
        if signals.payment_error_rate.is_nan()
            || signals.payment_error_rate > PAYMENT_ERROR_RATE_MAX
        {
            return Some(format!(
                "payment error rate {:.1}% above {:.1}%",
                signals.payment_error_rate * 100.0,
                PAYMENT_ERROR_RATE_MAX * 100.0
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ControllerConfig {
        ControllerConfig {
            start_release_per_s: 10,
            max_release_per_s: 100,
            min_release_per_s: 5,
            increase_per_s: 10,
            target_hold_p99_ms: 300,
        }
    }

    /// A controller at `rate_per_s`, past slow start with its threshold at `threshold`.
    fn controller_at(rate_per_s: u64, threshold: Option<u64>) -> ReleaseController {
        let mut controller = ReleaseController::new(config());
        controller.rate_per_s = rate_per_s;
        controller.threshold = threshold;
        controller
    }

    #[test]
    fn one_tick_per_branch() {
        let healthy = Signals::healthy(0, 1_000);
        let past = Some(40);
        let cases = [
            (
                "paused keeps the rate",
                40,
                past,
                true,
                healthy,
                DecisionKind::Paused,
                40,
                0,
                "paused by operator",
            ),
            (
                "store down stops",
                40,
                past,
                false,
                Signals {
                    store_down: true,
                    ..healthy
                },
                DecisionKind::StoppedStoreDown,
                0,
                0,
                "stopped: store down",
            ),
            (
                "store down wins over slow holds",
                40,
                past,
                false,
                Signals {
                    store_down: true,
                    hold_p99_ms: 900.0,
                    ..healthy
                },
                DecisionKind::StoppedStoreDown,
                0,
                0,
                "stopped: store down",
            ),
            (
                "sold out stops and keeps the rate",
                40,
                past,
                false,
                Signals {
                    sold_out: true,
                    ..healthy
                },
                DecisionKind::SoldOut,
                40,
                0,
                "stopped: sold out (no free seat or unit, no live hold that could lapse)",
            ),
            (
                "store errors halve",
                40,
                past,
                false,
                Signals {
                    store_errors: 3,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: 3 store errors",
            ),
            (
                "slow holds halve",
                40,
                past,
                false,
                Signals {
                    hold_p99_ms: 450.0,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: hold p99 450 ms above target 300 ms",
            ),
            (
                "NaN latency backs off",
                40,
                past,
                false,
                Signals {
                    hold_p99_ms: f64::NAN,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: hold p99 NaN ms above target 300 ms",
            ),
            (
                "slow writer groups halve",
                40,
                past,
                false,
                Signals {
                    writer_group_p99_ms: 301.0,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: writer group p99 301 ms above target 300 ms",
            ),
            (
                "a deep writer queue halves",
                40,
                past,
                false,
                Signals {
                    writer_queue_depth: 2_001,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: 2001 commands queued at the writer (most 2000)",
            ),
            (
                "checkout errors halve",
                40,
                past,
                false,
                Signals {
                    checkout_error_rate: 0.1,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: checkout error rate 10.0% above 5.0%",
            ),
            (
                "payment errors halve",
                40,
                past,
                false,
                Signals {
                    payment_error_rate: 0.2,
                    ..healthy
                },
                DecisionKind::Decreased,
                20,
                20,
                "decrease to 20/s: payment error rate 20.0% above 5.0%",
            ),
            (
                "decrease floors at the minimum",
                6,
                past,
                false,
                Signals {
                    store_errors: 1,
                    ..healthy
                },
                DecisionKind::Decreased,
                5,
                5,
                "decrease to 5/s: 1 store errors",
            ),
            (
                "p99 exactly at target is healthy",
                40,
                past,
                false,
                Signals {
                    hold_p99_ms: 300.0,
                    ..healthy
                },
                DecisionKind::Increased,
                50,
                50,
                "increase to 50/s: healthy",
            ),
            (
                "before any trouble the rate doubles",
                20,
                None,
                false,
                healthy,
                DecisionKind::SlowStart,
                40,
                40,
                "slow start to 40/s: healthy",
            ),
            (
                "slow start stops at the threshold",
                30,
                past,
                false,
                healthy,
                DecisionKind::SlowStart,
                40,
                40,
                "slow start to 40/s: healthy",
            ),
            (
                "past the threshold a step is added",
                40,
                past,
                false,
                healthy,
                DecisionKind::Increased,
                50,
                50,
                "increase to 50/s: healthy",
            ),
            (
                "the step is a tenth of a high threshold",
                90,
                Some(90),
                false,
                healthy,
                DecisionKind::Increased,
                100,
                100,
                "increase to 100/s: at the cap 100/s",
            ),
            (
                "slow start stops at the operator cap",
                80,
                None,
                false,
                healthy,
                DecisionKind::SlowStart,
                100,
                100,
                "slow start to 100/s: at the cap 100/s",
            ),
            (
                "recovery after store down starts from the start rate",
                0,
                Some(20),
                false,
                healthy,
                DecisionKind::SlowStart,
                10,
                10,
                "slow start to 10/s: healthy",
            ),
            (
                "a full sale holds the rate",
                40,
                past,
                false,
                Signals::healthy(990, 1_000),
                DecisionKind::Held,
                40,
                10,
                "hold at 40/s: the free shopper slots limit release, so a higher rate would go untested; releasing 10: limited by free active slots (990 of 1000 taken)",
            ),
            (
                "admissions and completions are shown",
                40,
                past,
                false,
                Signals {
                    admitted_per_s: 40,
                    completed_per_s: 35,
                    ..healthy
                },
                DecisionKind::Increased,
                50,
                50,
                "increase to 50/s: healthy; last second 40 admitted, 35 finished",
            ),
        ];
        for (
            name,
            rate_before,
            threshold,
            paused,
            signals,
            kind,
            rate_after,
            release_count,
            reason,
        ) in cases
        {
            let mut controller = controller_at(rate_before, threshold);
            controller.set_paused(paused);
            let decision = controller.tick(&signals);
            assert_eq!(
                decision,
                Decision {
                    kind,
                    rate_per_s: rate_after,
                    release_count,
                    reason: reason.to_owned()
                },
                "{name}"
            );
            assert_eq!(controller.rate_per_s(), rate_after, "{name}");
        }
    }

    #[test]
    fn polls_are_paced_by_what_is_really_released() {
        // No history yet: the controller's rate.
        assert_eq!(pace(4_000, 1_000, None, None, 20), (4, 1));
        // Slots limit release to 100/s: forty seconds to wait, a poll every ten.
        assert_eq!(pace(4_000, 1_000, Some(100), None, 20), (40, 10));
        // More released than the rate (a burst of freed slots): never faster than the rate.
        assert_eq!(pace(4_000, 1_000, Some(5_000), None, 20), (4, 1));
        // Nothing released (paused, sold out): the longest interval, not a division by zero.
        assert_eq!(pace(4_000, 1_000, Some(0), None, 20), (4_000, 20));
        // At the head: poll every second.
        assert_eq!(pace(0, 1_000, Some(0), None, 20), (0, 1));
    }

    #[test]
    fn polls_during_slow_start_count_the_doubling() {
        // 10/s doubling to 2,000/s: 10+20+...+1,280 = 2,550 in 8 s, then 2,000/s.
        assert_eq!(pace(2_550, 10, None, Some(2_000), 20), (8, 2));
        assert_eq!(pace(12_550, 10, None, Some(2_000), 20), (13, 3));
        // Without the doubling the same fan would be told 1,255 s and poll every 20 s.
        assert_eq!(pace(12_550, 10, None, None, 20), (1_255, 20));
        // The cap bounds the growth: at 10/s doubling to 10/s it is the plain rate.
        assert_eq!(pace(1_000, 10, None, Some(10), 20), (100, 20));
        // A rate of 0 (stopped) or a cap of 0 are no divisions by zero.
        assert_eq!(pace(5, 0, None, Some(0), 20), (5, 1));
        assert_eq!(pace(u64::MAX, 1, None, Some(u64::MAX), 20), (64, 16));
    }

    #[test]
    fn trouble_right_after_a_decrease_holds_once_then_halves_again() {
        let mut controller = controller_at(80, Some(80));
        let slow = Signals {
            hold_p99_ms: 900.0,
            ..Signals::healthy(0, 1_000)
        };
        let kinds: Vec<(DecisionKind, u64)> = (0..4)
            .map(|_| {
                let d = controller.tick(&slow);
                (d.kind, d.rate_per_s)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (DecisionKind::Decreased, 40),
                (DecisionKind::Held, 40),
                (DecisionKind::Decreased, 20),
                (DecisionKind::Held, 20),
            ]
        );
        assert_eq!(controller.threshold(), Some(20));
    }

    #[test]
    fn a_store_outage_sets_the_threshold_at_half_the_rate_before() {
        let mut controller = controller_at(80, None);
        let down = Signals {
            store_down: true,
            ..Signals::healthy(0, 1_000)
        };
        controller.tick(&down);
        controller.tick(&down);
        assert_eq!(
            controller.threshold(),
            Some(40),
            "a second tick at 0 keeps it"
        );
        let rates: Vec<u64> = (0..5)
            .map(|_| controller.tick(&Signals::healthy(0, 1_000)).rate_per_s)
            .collect();
        assert_eq!(rates, [10, 20, 40, 50, 60]);
    }

    #[test]
    fn full_active_set_releases_nothing_even_when_over_full() {
        let mut controller = controller_at(40, Some(40));
        for (active, max_active) in [(1_000, 1_000), (1_200, 1_000), (0, 0)] {
            let decision = controller.tick(&Signals::healthy(active, max_active));
            assert_eq!(decision.release_count, 0, "{active}/{max_active}");
        }
    }

    #[test]
    fn lowering_the_cap_drops_the_rate_at_once() {
        let mut controller = controller_at(80, Some(80));
        controller.set_max_release_per_s(30);
        assert_eq!(controller.rate_per_s(), 30);
        let decision = controller.tick(&Signals::healthy(0, 1_000));
        assert_eq!(decision.rate_per_s, 30);
        controller.set_max_release_per_s(0);
        assert_eq!(
            controller.tick(&Signals::healthy(0, 1_000)).release_count,
            0
        );
    }

    #[test]
    fn resuming_after_pause_continues_from_the_kept_rate() {
        let mut controller = controller_at(60, Some(60));
        controller.set_paused(true);
        assert_eq!(
            controller.tick(&Signals::healthy(0, 1_000)).release_count,
            0
        );
        controller.set_paused(false);
        assert_eq!(controller.tick(&Signals::healthy(0, 1_000)).rate_per_s, 70);
    }

    #[test]
    fn the_first_rate_is_the_start_rate_capped() {
        let controller = ReleaseController::new(ControllerConfig {
            max_release_per_s: 3,
            ..config()
        });
        assert_eq!(controller.rate_per_s(), 3);
    }

    /// A sale behind the door that sustains `capacity` admissions a second: above it, work
    /// queues and the hold p99 of the next second grows with the excess. `slow_from` makes
    /// the store slow (p99 900 ms whatever the rate) from that second on.
    struct Plant {
        capacity: f64,
        backlog: f64,
        slow_from: Option<u32>,
    }

    impl Plant {
        /// The signals measured over second `t`, during which `released` fans came in.
        fn second(&mut self, t: u32, released: u64) -> Signals {
            self.backlog = (self.backlog + released as f64 - self.capacity).max(0.0);
            let mut p99 = 50.0 + 1_000.0 * self.backlog / self.capacity;
            if self.slow_from.is_some_and(|from| t >= from) {
                p99 = 900.0;
            }
            Signals {
                hold_p99_ms: p99,
                admitted_per_s: released,
                ..Signals::healthy(0, 100_000)
            }
        }
    }

    fn seed_scale() -> ControllerConfig {
        ControllerConfig {
            max_release_per_s: 10_000,
            ..ControllerConfig::default()
        }
    }

    #[test]
    fn slow_start_reaches_a_capacity_of_2000_a_second_within_10_seconds() {
        let mut controller = ReleaseController::new(seed_scale());
        let mut plant = Plant {
            capacity: 2_000.0,
            backlog: 0.0,
            slow_from: None,
        };
        let mut signals = Signals::healthy(0, 100_000);
        let mut reached_at = None;
        let mut rates = Vec::new();
        for t in 1..=120 {
            let decision = controller.tick(&signals);
            rates.push(decision.rate_per_s);
            if reached_at.is_none() && decision.rate_per_s >= 2_000 {
                reached_at = Some(t);
            }
            signals = plant.second(t, decision.release_count);
        }
        let reached_at = reached_at.expect("never reached 2,000/s");
        assert!(
            reached_at <= 10,
            "reached 2,000/s at second {reached_at}: {rates:?}"
        );
        // Afterwards it stays around the capacity: over the last minute, the fans released
        // are within a quarter of what the sale sustains, and the rate never collapses.
        let last_minute: u64 = rates[60..].iter().sum();
        let sustained = 2_000 * 60;
        assert!(
            last_minute.abs_diff(sustained) <= sustained / 4,
            "released {last_minute} in the last minute against {sustained}: {rates:?}"
        );
        assert!(rates[60..].iter().all(|r| *r >= 500), "{rates:?}");
    }

    #[test]
    fn an_injected_slow_store_is_backed_off_within_2_seconds() {
        for slow_from in [15, 30, 47] {
            let mut controller = ReleaseController::new(seed_scale());
            let mut plant = Plant {
                capacity: 2_000.0,
                backlog: 0.0,
                slow_from: Some(slow_from),
            };
            let mut signals = Signals::healthy(0, 100_000);
            let mut backed_off_at = None;
            let mut rate_before = 0;
            for t in 1..=slow_from + 10 {
                let decision = controller.tick(&signals);
                if t == slow_from {
                    rate_before = decision.rate_per_s;
                }
                if t > slow_from && decision.kind == DecisionKind::Decreased {
                    backed_off_at.get_or_insert(t);
                }
                signals = plant.second(t, decision.release_count);
            }
            let at = backed_off_at.expect("never backed off");
            // The slow second `slow_from` is measured and decided on at the next tick.
            assert!(
                at - slow_from <= 2,
                "slow from {slow_from}, backed off at {at}"
            );
            assert!(controller.rate_per_s() < rate_before);
        }
    }

    #[test]
    fn release_stops_when_all_is_held_and_follows_the_seats_that_come_back() {
        let mut controller = ReleaseController::new(seed_scale());
        let inventory = |free, held| Inventory {
            free,
            held,
            party_size: 2.5,
        };
        // Plenty free: the slots and the rate decide.
        let plenty = controller.tick(&Signals {
            inventory: Some(inventory(40_000, 5_000)),
            ..Signals::healthy(0, 10_000)
        });
        assert_eq!(plenty.kind, DecisionKind::SlowStart);
        assert_eq!(plenty.release_count, plenty.rate_per_s);
        // 10 free seats serve 4 parties of 2.5; 3 fans already shop without a hold: 1 more.
        let few = controller.tick(&Signals {
            inventory: Some(inventory(10, 5_000)),
            shopping: 3,
            ..Signals::healthy(0, 10_000)
        });
        assert_eq!(few.release_count, 1);
        assert!(
            few.reason.contains("limited by the inventory"),
            "{}",
            few.reason
        );
        // A rate the inventory keeps from being used does not grow.
        assert_eq!(few.kind, DecisionKind::Held);
        // Everything held: nothing released, the rate kept, the reason says why.
        let rate = controller.rate_per_s();
        let held = controller.tick(&Signals {
            inventory: Some(inventory(0, 5_000)),
            ..Signals::healthy(0, 10_000)
        });
        assert_eq!(held.kind, DecisionKind::AllHeld);
        assert_eq!(held.release_count, 0);
        assert_eq!(controller.rate_per_s(), rate);
        // Seats come back: release resumes for them.
        let back = controller.tick(&Signals {
            inventory: Some(inventory(5, 4_990)),
            ..Signals::healthy(0, 10_000)
        });
        assert_eq!(back.release_count, 2);
        // The last seat always gets a fan, whatever the party size.
        assert_eq!(inventory(1, 0).room_for(0), 1);
        assert_eq!(inventory(1, 0).room_for(1), 0);
    }
}
