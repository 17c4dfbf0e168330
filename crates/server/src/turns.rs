//! Checkouts take turns, first come first served ([`CheckoutTurns`]).
//!
//! A fan at the checkout already holds seats on a deadline. Refused with 429 and asked to
//! come back, the fans retry in no order: in the on-sale some were refused again and again
//! until their hold lapsed (1,952 of 14,323 checkouts answered `HOLD_EXPIRED` in one run)
//! while later fans got through. Here a checkout waits for its turn in arrival order
//! (tokio's semaphore is fair), costing nothing while it waits; only a checkout that cannot
//! get a turn within [`TURN_WAIT_MAX`], or finds [`TURNS_WAITING_MAX`] ahead of it, is
//! refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::ApiError;

/// Checkout starts in progress at once (a start is a few reads and one writer group; the
/// provider's authorization comes after the turn).
pub const TURNS_MAX: usize = 64;
/// Longest a checkout waits for its turn (well under a client's usual 60 s time-out).
pub const TURN_WAIT_MAX: Duration = Duration::from_secs(20);
/// Checkouts waiting at most; one more is refused at once.
pub const TURNS_WAITING_MAX: usize = 20_000;

#[derive(Debug)]
pub struct CheckoutTurns {
    turns: Semaphore,
    waiting: AtomicUsize,
    wait_max: Duration,
    waiting_max: usize,
}

impl Default for CheckoutTurns {
    fn default() -> Self {
        Self::new(TURNS_MAX, TURN_WAIT_MAX, TURNS_WAITING_MAX)
    }
}

/// A waiter's place in the count; given back however the wait ends.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CheckoutTurns {
    pub fn new(turns: usize, wait_max: Duration, waiting_max: usize) -> Self {
        Self {
            turns: Semaphore::new(turns.max(1)),
            waiting: AtomicUsize::new(0),
            wait_max,
            waiting_max,
        }
    }

    /// Waits for a turn in arrival order; 429 `RATE_LIMITED` when too many wait or the
    /// wait is too long.
    pub async fn take(&self) -> Result<SemaphorePermit<'_>, ApiError> {
        if let Ok(turn) = self.turns.try_acquire() {
            return Ok(turn);
        }
        let before = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiting);
        if before >= self.waiting_max {
            return Err(busy());
        }
        match tokio::time::timeout(self.wait_max, self.turns.acquire()).await {
            Ok(Ok(turn)) => Ok(turn),
            _ => Err(busy()),
        }
    }

    /// Checkouts waiting for a turn now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

fn busy() -> ApiError {
    metrics::counter!("boxoffice_refused_busy_total", "why" => "checkouts").increment(1);
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "RATE_LIMITED",
        "too many checkouts in progress; retry shortly",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_go_in_arrival_order_and_a_line_too_long_or_a_wait_too_long_is_refused() {
        let turns = std::sync::Arc::new(CheckoutTurns::new(1, Duration::from_secs(30), 2));
        let first = turns.take().await.expect("a free turn");
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for i in 0..2 {
            let (turns2, order) = (turns.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let turn = turns2.take().await;
                order.lock().unwrap().push(i);
                turn.is_ok()
            }));
            // Waiter i is in line before the next one comes.
            while turns.waiting() < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        match turns.take().await {
            Err(refused) => assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS),
            Ok(_) => panic!("a third in a line of two must be refused at once"),
        }
        drop(first);
        for waiter in waiters {
            assert!(waiter.await.unwrap(), "each waiter gets its turn");
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1], "in arrival order");
        assert_eq!(turns.waiting(), 0, "every place in line is given back");

        let short = CheckoutTurns::new(1, Duration::from_millis(10), 10);
        let held = short.take().await.expect("free");
        assert!(
            short.take().await.is_err(),
            "no turn within the wait: refused"
        );
        assert_eq!(short.waiting(), 0);
        drop(held);
    }
}
