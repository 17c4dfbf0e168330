//! The release-rate controller: how many queue positions to release in the next second.
//!
//! AIMD, recomputed once per second from [`Signals`] the server measures: when the store is
//! down, release nothing; when holds are slow, the store errs or payments fail, halve the
//! rate (never below [`ControllerConfig::min_release_per_s`]); otherwise add
//! [`ControllerConfig::increase_per_s`] up to the operator's cap. Never release more than the
//! free active-shopper slots. Every [`Decision`] carries a `reason` the admin endpoint shows.
//! The server measures the signals and ticks it once a second (`server/src/waitroom.rs`).

/// Hold latency above which the controller backs off, p99 in milliseconds.
pub const HOLD_P99_TARGET_MS: f64 = 300.0;
/// Payment error rate (0.0-1.0) above which the controller backs off.
pub const PAYMENT_ERROR_RATE_MAX: f64 = 0.05;
/// Store errors in one second tolerated before backing off.
pub const STORE_ERRORS_PER_TICK_MAX: u32 = 0;
/// The factor applied to the rate on back-off.
pub const DECREASE_FACTOR: f64 = 0.5;
/// Highest cap an operator may set, in releases per second.
pub const RELEASE_PER_S_MAX: u64 = 100_000;

/// What the server measured over the last second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signals {
    pub hold_p99_ms: f64,
    pub store_errors: u32,
    pub store_down: bool,
    /// Failed payment attempts over all attempts, 0.0-1.0.
    pub payment_error_rate: f64,
    /// Active shoppers now.
    pub active: u64,
    /// The active-shopper cap.
    pub max_active: u64,
}

impl Signals {
    /// A healthy second with `active` of `max_active` slots taken.
    pub fn healthy(active: u64, max_active: u64) -> Self {
        Self {
            hold_p99_ms: 50.0,
            store_errors: 0,
            store_down: false,
            payment_error_rate: 0.0,
            active,
            max_active,
        }
    }
}

/// Tuning of one controller.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControllerConfig {
    /// The operator's cap (`maxReleasePerSecond`).
    pub max_release_per_s: u64,
    /// Floor of a multiplicative decrease, so a struggling sale still moves.
    pub min_release_per_s: u64,
    /// Added per healthy second.
    pub increase_per_s: u64,
    /// The rate of the first second: start slow and probe upwards.
    pub initial_release_per_s: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            max_release_per_s: 500,
            min_release_per_s: 5,
            increase_per_s: 10,
            initial_release_per_s: 10,
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
    /// Back-off: the rate was halved.
    Decreased,
    /// Healthy: the rate grew (or stayed at the cap).
    Increased,
}

/// One second's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub kind: DecisionKind,
    /// The controller's rate after this decision, releases per second.
    pub rate_per_s: u64,
    /// Positions to release now: the rate, limited by free active slots; 0 when paused or
    /// stopped.
    pub release_count: u64,
    /// Why, for humans (shown by `GET /v1/admin/events/{eventId}/queue`).
    pub reason: String,
}

/// The controller of one event's queue. See the module docs.
#[derive(Debug, Clone)]
pub struct ReleaseController {
    config: ControllerConfig,
    rate_per_s: u64,
    paused: bool,
}

impl ReleaseController {
    pub fn new(config: ControllerConfig) -> Self {
        let config = ControllerConfig {
            max_release_per_s: config.max_release_per_s.min(RELEASE_PER_S_MAX),
            ..config
        };
        Self {
            rate_per_s: config.initial_release_per_s.min(config.max_release_per_s),
            config,
            paused: false,
        }
    }

    pub fn rate_per_s(&self) -> u64 {
        self.rate_per_s
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
            return Decision {
                kind: DecisionKind::Paused,
                rate_per_s: self.rate_per_s,
                release_count: 0,
                reason: "paused by operator".to_owned(),
            };
        }
        if signals.store_down {
            self.rate_per_s = 0;
            return Decision {
                kind: DecisionKind::StoppedStoreDown,
                rate_per_s: 0,
                release_count: 0,
                reason: "stopped: store down".to_owned(),
            };
        }
        let free_slots = signals.max_active.saturating_sub(signals.active);
        let (kind, mut reason) = match back_off_reason(signals) {
            Some(why) => {
                let halved = (self.rate_per_s as f64 * DECREASE_FACTOR) as u64;
                self.rate_per_s = halved
                    .max(self.config.min_release_per_s)
                    .min(self.config.max_release_per_s);
                (
                    DecisionKind::Decreased,
                    format!("decrease to {}/s: {why}", self.rate_per_s),
                )
            }
            None => {
                self.rate_per_s = (self.rate_per_s + self.config.increase_per_s)
                    .max(self.config.min_release_per_s)
                    .min(self.config.max_release_per_s);
                let why = if self.rate_per_s == self.config.max_release_per_s {
                    format!("at operator cap {}/s", self.config.max_release_per_s)
                } else {
                    "healthy".to_owned()
                };
                (
                    DecisionKind::Increased,
                    format!("increase to {}/s: {why}", self.rate_per_s),
                )
            }
        };
        let release_count = self.rate_per_s.min(free_slots);
        if release_count < self.rate_per_s {
            reason.push_str(&format!(
                "; releasing {release_count}: limited by free active slots ({} of {} taken)",
                signals.active, signals.max_active
            ));
        }
        Decision {
            kind,
            rate_per_s: self.rate_per_s,
            release_count,
            reason,
        }
    }
}

/// Why to back off, or `None` when healthy. NaN measurements count as unhealthy: a broken
/// measurement must not speed release up.
fn back_off_reason(signals: &Signals) -> Option<String> {
    if signals.store_errors > STORE_ERRORS_PER_TICK_MAX {
        return Some(format!("{} store errors", signals.store_errors));
    }
    if signals.hold_p99_ms.is_nan() || signals.hold_p99_ms > HOLD_P99_TARGET_MS {
        return Some(format!(
            "hold p99 {:.0} ms above target {HOLD_P99_TARGET_MS:.0} ms",
            signals.hold_p99_ms
        ));
    }
    if signals.payment_error_rate.is_nan() || signals.payment_error_rate > PAYMENT_ERROR_RATE_MAX {
        return Some(format!(
            "payment error rate {:.1}% above {:.1}%",
            signals.payment_error_rate * 100.0,
            PAYMENT_ERROR_RATE_MAX * 100.0
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ControllerConfig {
        ControllerConfig {
            max_release_per_s: 100,
            min_release_per_s: 5,
            increase_per_s: 10,
            initial_release_per_s: 10,
        }
    }

    fn controller_at(rate_per_s: u64) -> ReleaseController {
        let mut controller = ReleaseController::new(config());
        controller.rate_per_s = rate_per_s;
        controller
    }

    #[test]
    fn one_tick_per_branch() {
        let healthy = Signals::healthy(0, 1_000);
        let cases = [
            (
                "paused keeps the rate",
                40,
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
                "store errors halve",
                40,
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
                "payment errors halve",
                40,
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
                false,
                Signals {
                    hold_p99_ms: HOLD_P99_TARGET_MS,
                    ..healthy
                },
                DecisionKind::Increased,
                50,
                50,
                "increase to 50/s: healthy",
            ),
            (
                "healthy adds",
                40,
                false,
                healthy,
                DecisionKind::Increased,
                50,
                50,
                "increase to 50/s: healthy",
            ),
            (
                "increase stops at the operator cap",
                95,
                false,
                healthy,
                DecisionKind::Increased,
                100,
                100,
                "increase to 100/s: at operator cap 100/s",
            ),
            (
                "recovery after store down starts from the floor",
                0,
                false,
                healthy,
                DecisionKind::Increased,
                10,
                10,
                "increase to 10/s: healthy",
            ),
            (
                "never more than the free slots",
                40,
                false,
                Signals::healthy(990, 1_000),
                DecisionKind::Increased,
                50,
                10,
                "increase to 50/s: healthy; releasing 10: limited by free active slots (990 of 1000 taken)",
            ),
        ];
        for (name, rate_before, paused, signals, kind, rate_after, release_count, reason) in cases {
            let mut controller = controller_at(rate_before);
            controller.set_paused(paused);
            let decision = controller.tick(&signals);
            assert_eq!(
                decision,
                Decision {
                    kind,
                    rate_per_s: rate_after,
                    release_count,
                    reason: reason.to_owned(),
                },
                "{name}"
            );
            assert_eq!(controller.rate_per_s(), rate_after, "{name}");
        }
    }

    #[test]
    fn full_active_set_releases_nothing_even_when_over_full() {
        let mut controller = controller_at(40);
        for (active, max_active) in [(1_000, 1_000), (1_200, 1_000), (0, 0)] {
            let decision = controller.tick(&Signals::healthy(active, max_active));
            assert_eq!(decision.release_count, 0, "{active}/{max_active}");
        }
    }

    #[test]
    fn lowering_the_cap_drops_the_rate_at_once() {
        let mut controller = controller_at(80);
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
        let mut controller = controller_at(60);
        controller.set_paused(true);
        assert_eq!(
            controller.tick(&Signals::healthy(0, 1_000)).release_count,
            0
        );
        controller.set_paused(false);
        assert_eq!(controller.tick(&Signals::healthy(0, 1_000)).rate_per_s, 70);
    }

    #[test]
    fn the_first_rate_is_the_initial_rate_capped() {
        let controller = ReleaseController::new(ControllerConfig {
            max_release_per_s: 3,
            ..config()
        });
        assert_eq!(controller.rate_per_s(), 3);
    }
}
