//! How long a refused client should wait: the `Retry-After` of a 429, from the last second's
//! refusals against the answers the server gave in that second.
//!
//! A fixed `Retry-After: 1` under a crowd ten times the server's capacity brings every
//! refused client back a second later: in the on-sale, 20,000 fans retried about once a
//! second, the server spent its CPU refusing them, and the requests that held pooled
//! connections waited for a core while the database sat idle. Asking each to wait about as
//! many seconds as there were refusals per answer spreads the retries over the time the
//! server needs for them, so the refusals cost little and the answers keep their pace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The longest wait a 429 asks for.
pub const RETRY_AFTER_MAX_S: u64 = 30;

/// Refusals and answers, per second: the second being counted and the one before it.
#[derive(Debug)]
pub struct Pressure {
    started: Instant,
    /// Seconds since `started` of the window being counted.
    second: AtomicU64,
    refused: AtomicU64,
    answered: AtomicU64,
    refused_before: AtomicU64,
    answered_before: AtomicU64,
}

impl Default for Pressure {
    fn default() -> Self {
        Self::new()
    }
}

impl Pressure {
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            second: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            refused_before: AtomicU64::new(0),
            answered_before: AtomicU64::new(0),
        }
    }

    /// Starts a new window when the second changed (whoever sees it first moves the counts).
    fn roll(&self, now_s: u64) {
        let second = self.second.load(Ordering::Acquire);
        if now_s == second
            || self
                .second
                .compare_exchange(second, now_s, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let (refused, answered) = if now_s == second + 1 {
            (
                self.refused.swap(0, Ordering::AcqRel),
                self.answered.swap(0, Ordering::AcqRel),
            )
        } else {
            // A quiet second or more in between: nothing carries over.
            self.refused.store(0, Ordering::Release);
            self.answered.store(0, Ordering::Release);
            (0, 0)
        };
        self.refused_before.store(refused, Ordering::Release);
        self.answered_before.store(answered, Ordering::Release);
    }

    fn now_s(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// A request refused with 429.
    pub fn refused(&self) {
        self.refused_at(self.now_s());
    }

    /// A request answered otherwise.
    pub fn answered(&self) {
        self.answered_at(self.now_s());
    }

    fn refused_at(&self, now_s: u64) {
        self.roll(now_s);
        self.refused.fetch_add(1, Ordering::AcqRel);
    }

    fn answered_at(&self, now_s: u64) {
        self.roll(now_s);
        self.answered.fetch_add(1, Ordering::AcqRel);
    }

    /// Seconds a client refused now should wait: the last full second's refusals per answer
    /// (rounded up), at least 1, at most [`RETRY_AFTER_MAX_S`].
    pub fn retry_after_s(&self) -> u64 {
        self.retry_after_s_at(self.now_s())
    }

    fn retry_after_s_at(&self, now_s: u64) -> u64 {
        self.roll(now_s);
        let refused = self.refused_before.load(Ordering::Acquire);
        let answered = self.answered_before.load(Ordering::Acquire).max(1);
        refused.div_ceil(answered).clamp(1, RETRY_AFTER_MAX_S)
    }
}

/// The server's one [`Pressure`] (a 429 is rendered where no state is at hand).
pub fn global() -> &'static Pressure {
    static PRESSURE: std::sync::OnceLock<Pressure> = std::sync::OnceLock::new();
    PRESSURE.get_or_init(Pressure::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_grows_with_refusals_per_answer_and_falls_back_when_they_stop() {
        let p = Pressure::new();
        assert_eq!(p.retry_after_s_at(0), 1, "no history: the shortest wait");
        for _ in 0..100 {
            p.answered_at(0);
        }
        for _ in 0..450 {
            p.refused_at(0);
        }
        assert_eq!(
            p.retry_after_s_at(0),
            1,
            "the second being counted does not count yet"
        );
        assert_eq!(
            p.retry_after_s_at(1),
            5,
            "450 refusals for 100 answers: 4.5 s, rounded up"
        );
        for _ in 0..10 {
            p.answered_at(1);
        }
        assert_eq!(
            p.retry_after_s_at(2),
            1,
            "a calm second brings it back to 1"
        );
        for _ in 0..100_000 {
            p.refused_at(2);
        }
        assert_eq!(
            p.retry_after_s_at(3),
            RETRY_AFTER_MAX_S,
            "refusals with no answer: capped"
        );
        assert_eq!(
            p.retry_after_s_at(9),
            1,
            "quiet seconds in between carry nothing over"
        );
    }
}
