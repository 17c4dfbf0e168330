//! What one run simulates: the crowd, the house, the room's and the engine's settings, the
//! faults, and how often the full invariant checks run. [`SimConfig::scale`] derives all of it
//! from one number (scale 1 is the issue's on-sale: 2,000,000 fans over 300 s for 50,000
//! seats, 10,000 shoppers at once).

use boxoffice_waitroom::controller::ControllerConfig;
use serde::Serialize;

use crate::rng::SplitMix64;

/// Fans at scale 1.
pub const FANS_AT_SCALE_1: f64 = 2_000_000.0;
/// Seats at scale 1.
pub const SEATS_AT_SCALE_1: f64 = 50_000.0;
/// Active shoppers at once at scale 1.
pub const ACTIVE_SHOPPERS_AT_SCALE_1: f64 = 10_000.0;
/// Fewest seats of any scale: below a few hundred the sale is over before it is interesting.
pub const SEATS_MIN: u64 = 400;
/// Seats per active-shopper slot at every scale (50,000 seats, 10,000 shoppers at scale 1).
pub const SEATS_PER_ACTIVE_SHOPPER: u64 = 5;
/// Seats per row of the simulated house.
pub const SEATS_PER_ROW: u32 = 20;
/// Largest scale: 200 sections of 1,000 seats is the domain's `SEATS_PER_EVENT_MAX`.
pub const SCALE_MAX: f64 = 4.0;
/// Houses above this many seats check the engine's invariants (which read every seat) at
/// most once a simulated second, and after every load, rather than after every group (the
/// ledger checks every group at any size).
pub const ENGINE_CHECK_EVERY_GROUP_SEATS_MAX: u64 = 2_000;
/// Accounts per tick of full room checks: the queue's check reads every account, so a large
/// room checks every few ticks rather than after each.
pub const ROOM_CHECK_ACCOUNTS_PER_TICK: u64 = 20_000;

/// How arrivals spread over the arrival window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalShape {
    /// Evenly over the window.
    Uniform,
    /// Half the fans in the first tenth of the window (before on-sale: the pre-queue), evenly,
    /// and half evenly over the rest.
    FrontLoaded,
}

/// The house: `sections` sections of `rows_per_section` rows of `seats_per_row` seats, all
/// sold best-available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SeatLayout {
    pub sections: u32,
    pub rows_per_section: u32,
    pub seats_per_row: u32,
}

impl SeatLayout {
    pub fn seats(&self) -> u64 {
        u64::from(self.sections) * u64::from(self.rows_per_section) * u64::from(self.seats_per_row)
    }

    /// The section's name: `S001`, `S002`, ... (best first).
    pub fn section_name(section: u32) -> String {
        format!("S{:03}", section + 1)
    }
}

/// One run's settings. See the module docs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Fixes every choice of the run.
    pub seed: u64,
    /// The scale this config was derived from (reported only).
    pub scale: f64,
    pub fans: u32,
    /// Fans arrive from time 0 to this many seconds.
    pub arrival_window_s: u32,
    /// The sale (and the queue's order) opens at this second; earlier arrivals wait in the
    /// pre-queue, shuffled at on-sale.
    pub on_sale_at_s: u32,
    pub arrival: ArrivalShape,
    pub layout: SeatLayout,
    pub max_active_shoppers: u64,
    pub admission_ttl_s: u32,
    pub claim_window_s: u32,
    /// How long an admitted fan's slot stays idle before it goes back (the event's
    /// `waitingRoom.holdWindowSeconds`).
    pub hold_window_s: u32,
    pub controller: ControllerConfig,
    pub hold_ttl_s: u32,
    /// The event's `waitlistOfferTtlSeconds`: how long a waiting-list offer (a hold of the
    /// waiting fan's account) lasts. [`SimConfig::scale`] sets the hold TTL, so that an offer
    /// to a fan who walked away lapses like a hold and its seats go to the next entry. The
    /// engine's offer TTL is the event's setting: it does not follow the sale.
    pub waitlist_offer_ttl_s: u32,
    /// The hold TTL follows the sale (`boxoffice_domain::hold_ttl`), `hold_ttl_s` the ceiling.
    pub hold_ttl_follows_sale: bool,
    pub payment_grace_s: u32,
    /// Faults drawn from the seed (see [`FaultPlan::draw`]).
    pub faults: bool,
    /// Once during the run, feed the engine a lying change (a sold seat shown available):
    /// the ledger must catch the double grant that follows.
    pub plant_double_grant: bool,
    /// Full engine invariants after every this many group commits (1: after each)...
    pub engine_checks_every_groups: u64,
    /// ...and no more often than this (0: no limit). Loads and the end always check.
    pub engine_checks_min_interval_ms: u64,
    /// Full room invariants after every this many ticks (1: after each 100 ms tick).
    pub room_checks_every_ticks: u64,
    /// A run still going at this simulated second stops and reports a violation.
    pub time_limit_s: u64,
}

impl SimConfig {
    /// The issue's on-sale scaled: fans, seats and shopper slots by `scale` (seats at least
    /// [`SEATS_MIN`]), the same 300 s arrival window. Seed 0, no faults.
    pub fn scale(scale: f64) -> Self {
        let scale = scale.clamp(1e-6, SCALE_MAX);
        let fans = (FANS_AT_SCALE_1 * scale).round().max(100.0) as u32;
        let seats_wanted = ((SEATS_AT_SCALE_1 * scale).round() as u64).max(SEATS_MIN);
        // Big houses in sections of 1,000 (50 rows), small ones in sections of 200 (10 rows)
        // so best-available still has sections to move through.
        let rows_per_section = if seats_wanted >= 20_000 { 50 } else { 10 };
        let per_section = u64::from(rows_per_section * SEATS_PER_ROW);
        let sections = seats_wanted.div_ceil(per_section) as u32;
        let layout = SeatLayout {
            sections,
            rows_per_section,
            seats_per_row: SEATS_PER_ROW,
        };
        // One shopper slot per five seats, as at scale 1.
        let max_active_shoppers = (ACTIVE_SHOPPERS_AT_SCALE_1 * scale)
            .round()
            .max((layout.seats() / SEATS_PER_ACTIVE_SHOPPER) as f64)
            as u64;
        let controller = ControllerConfig {
            start_release_per_s: (10.0 * scale).round().clamp(2.0, 10.0) as u64,
            max_release_per_s: (1_000.0 * scale).round().max(20.0) as u64,
            min_release_per_s: (5.0 * scale).round().max(1.0) as u64,
            increase_per_s: (10.0 * scale).round().max(1.0) as u64,
            ..ControllerConfig::default()
        };
        let hold_ttl_s = 300;
        Self {
            seed: 0,
            scale,
            fans,
            arrival_window_s: 300,
            on_sale_at_s: 30,
            arrival: ArrivalShape::FrontLoaded,
            layout,
            max_active_shoppers,
            admission_ttl_s: 900,
            claim_window_s: 600,
            hold_window_s: 60,
            controller,
            hold_ttl_s,
            waitlist_offer_ttl_s: hold_ttl_s,
            hold_ttl_follows_sale: false,
            payment_grace_s: 120,
            faults: false,
            plant_double_grant: false,
            engine_checks_every_groups: 1,
            engine_checks_min_interval_ms: if layout.seats() > ENGINE_CHECK_EVERY_GROUP_SEATS_MAX {
                1_000
            } else {
                0
            },
            room_checks_every_ticks: (u64::from(fans) / ROOM_CHECK_ACCOUNTS_PER_TICK).max(1),
            time_limit_s: 4 * 3_600,
        }
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn with_hold_ttl_following_the_sale(mut self, follow: bool) -> Self {
        self.hold_ttl_follows_sale = follow;
        self
    }

    pub fn with_faults(mut self, faults: bool) -> Self {
        self.faults = faults;
        self
    }

    pub fn with_planted_double_grant(mut self, plant: bool) -> Self {
        self.plant_double_grant = plant;
        self
    }
}

/// A stretch of simulated time, in milliseconds from the run's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub from_ms: u64,
    pub to_ms: u64,
}

impl Window {
    pub fn contains(&self, at_ms: u64) -> bool {
        (self.from_ms..self.to_ms).contains(&at_ms)
    }
}

/// The faults of one run, drawn from its seed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FaultPlan {
    /// The payment provider answers `slow_extra_ms` later (uniform in the range).
    pub provider_slow: Option<(Window, (u64, u64))>,
    /// The payment provider fails this share of payments (an error, not a decline).
    pub provider_failing: Option<(Window, f64)>,
    /// The event writer dies at `at_ms` and is back `restart_ms` later: its engine, queued
    /// commands and unanswered requests are lost; each group in flight has committed or not.
    pub writer_crash: Option<(u64, u64)>,
    /// Group commits fail with this probability (the engine is thrown away and reloaded).
    pub commit_failures: Option<(Window, f64)>,
    /// The store answers nothing: commits and loads fail after the store timeout, the
    /// controller sees the store down.
    pub store_down: Option<Window>,
}

impl FaultPlan {
    /// Each kind of fault with probability 0.7 (at least two kinds), placed within the first
    /// two minutes after on-sale, where small and large runs alike are still selling.
    pub fn draw(rng: &mut SplitMix64, on_sale_ms: u64) -> Self {
        loop {
            let mut plan = Self::default();
            let window = |rng: &mut SplitMix64, min_s: f64, max_s: f64| {
                let from_ms = on_sale_ms + (rng.between(5.0, 90.0) * 1_000.0) as u64;
                let length_ms = (rng.between(min_s, max_s) * 1_000.0) as u64;
                Window {
                    from_ms,
                    to_ms: from_ms + length_ms,
                }
            };
            if rng.chance(0.7) {
                let slow = window(rng, 10.0, 30.0);
                plan.provider_slow = Some((slow, (2_000, 12_000)));
            }
            if rng.chance(0.7) {
                let failing = window(rng, 5.0, 20.0);
                plan.provider_failing = Some((failing, rng.between(0.3, 0.8)));
            }
            if rng.chance(0.7) {
                let at_ms = on_sale_ms + (rng.between(5.0, 90.0) * 1_000.0) as u64;
                let restart_ms = (rng.between(0.5, 3.0) * 1_000.0) as u64;
                plan.writer_crash = Some((at_ms, restart_ms));
            }
            if rng.chance(0.7) {
                let failing = window(rng, 10.0, 30.0);
                plan.commit_failures = Some((failing, rng.between(0.05, 0.2)));
            }
            if rng.chance(0.7) {
                plan.store_down = Some(window(rng, 2.0, 10.0));
            }
            if plan.kinds() >= 2 {
                return plan;
            }
        }
    }

    /// How many kinds of fault the plan has.
    pub fn kinds(&self) -> usize {
        usize::from(self.provider_slow.is_some())
            + usize::from(self.provider_failing.is_some())
            + usize::from(self.writer_crash.is_some())
            + usize::from(self.commit_failures.is_some())
            + usize::from(self.store_down.is_some())
    }

    /// Each fault's name and stretch of simulated time, milliseconds from the run's start (a
    /// crash from its moment to the writer's return).
    pub fn windows(&self) -> Vec<(&'static str, Window)> {
        let mut windows = Vec::new();
        if let Some((window, _)) = self.provider_slow {
            windows.push(("provider slow", window));
        }
        if let Some((window, _)) = self.provider_failing {
            windows.push(("provider failing", window));
        }
        if let Some((at_ms, restart_ms)) = self.writer_crash {
            let window = Window {
                from_ms: at_ms,
                to_ms: at_ms + restart_ms,
            };
            windows.push(("writer crash", window));
        }
        if let Some((window, _)) = self.commit_failures {
            windows.push(("commit failures", window));
        }
        if let Some(window) = self.store_down {
            windows.push(("store down", window));
        }
        windows
    }

    /// One line per fault, times in seconds from the run's start.
    pub fn describe(&self) -> Vec<String> {
        let s = |ms: u64| ms as f64 / 1_000.0;
        let mut lines = Vec::new();
        if let Some((w, (low, high))) = self.provider_slow {
            lines.push(format!(
                "payment provider slow {:.1}-{:.1} s: answers {:.0}-{:.0} s later",
                s(w.from_ms),
                s(w.to_ms),
                s(low),
                s(high)
            ));
        }
        if let Some((w, share)) = self.provider_failing {
            lines.push(format!(
                "payment provider failing {:.1}-{:.1} s: {:.0}% of payments error",
                s(w.from_ms),
                s(w.to_ms),
                share * 100.0
            ));
        }
        if let Some((at_ms, restart_ms)) = self.writer_crash {
            lines.push(format!(
                "event writer crash at {:.1} s, back {:.1} s later, engine reloaded from the store",
                s(at_ms),
                s(restart_ms)
            ));
        }
        if let Some((w, share)) = self.commit_failures {
            lines.push(format!(
                "store commit failures {:.1}-{:.1} s: {:.0}% of group commits fail",
                s(w.from_ms),
                s(w.to_ms),
                share * 100.0
            ));
        }
        if let Some(w) = self.store_down {
            lines.push(format!(
                "store down {:.1}-{:.1} s: commits and loads time out",
                s(w.from_ms),
                s(w.to_ms)
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_one_is_the_issues_on_sale() {
        let config = SimConfig::scale(1.0);
        assert_eq!(config.fans, 2_000_000);
        assert_eq!(config.layout.seats(), 50_000);
        assert_eq!(config.max_active_shoppers, 10_000);
        assert_eq!(config.arrival_window_s, 300);
    }

    #[test]
    fn small_scales_keep_a_few_hundred_seats_within_the_domain_limits() {
        for scale in [0.000_1, 0.002, 0.1, 1.0, SCALE_MAX] {
            let layout = SimConfig::scale(scale).layout;
            assert!(layout.seats() >= SEATS_MIN);
            assert!(layout.sections as usize <= boxoffice_domain::event::SECTIONS_PER_EVENT_MAX);
            assert!(layout.seats() <= boxoffice_domain::event::SEATS_PER_EVENT_MAX);
        }
    }

    #[test]
    fn a_fault_plan_depends_on_the_seed_only() {
        let plan = |seed| FaultPlan::draw(&mut SplitMix64::new(seed), 30_000);
        assert_eq!(plan(5), plan(5));
        for seed in 0..50 {
            assert!(plan(seed).kinds() >= 2);
        }
    }
}
