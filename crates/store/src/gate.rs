//! A bound on the store calls in flight at once ([`CallBound`], which the store's
//! [`Front`](crate::front::Front) applies), so that overload is refused at once instead of
//! queueing for a pooled connection until the pool's acquire timeout.
//!
//! Why: a pool serves its waiters first come, first served, each with a deadline. When more
//! wait than the pool can serve before that deadline, nearly every caller waits the whole
//! timeout and many still fail; worse, a waiter whose deadline strikes while its connection
//! is being opened or checked drops that connection. Measured in the on-sale on PostgreSQL:
//! 3,762 of 3,819 sessions in three minutes ended abandoned by the client, while the
//! database sat idle between reconnects (`pg_stat_database.sessions_abandoned`). A bounded
//! number of calls in flight keeps the queue shorter than the pool can drain well before the
//! deadline; the call past the bound fails at once with [`StoreError::Busy`] (answered 429
//! with `Retry-After`).
//!
//! Only calls that start work or look at it are bounded, never one that finishes work
//! already started: a settlement, a webhook's reads, a release, ticket issue, the outbox and
//! the writer's groups always pass. Refusing those would strand an order its fan already
//! paid for (it waits for the reconciler while its fan polls, and the polls crowd the pool
//! further). Looks that a client repeats (an order's status, a seat map) may take only half
//! the places, so they are refused before a checkout's first read is.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{StoreError, StoreResult};

/// Store calls in flight per pooled connection that
/// [`Front::bounded_for_pool`](crate::front::Front::bounded_for_pool) allows: enough that
/// every connection has its next call waiting, few enough that a call waits for about one
/// call ahead of it. Calls past what the connections serve add only waiting (Little's law):
/// with 16 per connection (768 on PostgreSQL) the on-sale's checkouts and webhooks waited
/// seconds in the pool's queue for calls that could have been refused at once.
pub const CALLS_PER_CONNECTION: usize = 2;
/// The bound of [`Front::bounded_for_pool`](crate::front::Front::bounded_for_pool) is never
/// below this (SQLite's small pool reads in-process, fast).
pub const CALLS_MIN: usize = 64;

/// The words of the [`StoreError::Busy`] a call past the bound gets (the server counts its
/// refusals by them).
pub const CALLS_BUSY: &str = "too many store calls in flight";

/// What a bounded call is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// The first read or write of a request that starts work (a checkout's look at its hold,
    /// an idempotency look-up, an exchange).
    Start,
    /// A look a client repeats (an order's status, a list, a seat map): refused first.
    Look,
    /// A call that finishes work already started (a settlement, the outbox, a writer's
    /// group, a release): never refused, and it takes no place.
    Pass,
}

/// At most `limit` holders of a [`Slot`] at once.
#[derive(Debug)]
pub struct CallBound {
    in_flight: AtomicUsize,
    limit: usize,
}

impl CallBound {
    /// At least one.
    pub fn new(limit: usize) -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            limit: limit.max(1),
        }
    }

    /// A place for one call, or [`StoreError::Busy`] at once when all are taken (for a
    /// [`Call::Look`], when half are).
    pub fn enter(&self, call: Call) -> StoreResult<Slot<'_>> {
        let limit = match call {
            Call::Start => self.limit,
            Call::Look => self.limit.div_ceil(2),
            Call::Pass => usize::MAX,
        };
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(&self.in_flight);
        if before >= limit {
            return Err(StoreError::Busy(format!(
                "{CALLS_BUSY} (limit {})",
                self.limit
            )));
        }
        Ok(slot)
    }

    /// Places taken now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// One call's place; gives it back when dropped (also when the call is cancelled).
#[derive(Debug)]
pub struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_past_the_bound_is_refused_at_once_and_every_place_is_given_back() {
        let bound = CallBound::new(2);
        let a = bound
            .enter(Call::Look)
            .expect("a look takes the first half");
        assert!(
            matches!(bound.enter(Call::Look), Err(StoreError::Busy(_))),
            "looks take at most half the places"
        );
        let b = bound.enter(Call::Start).expect("a start takes the rest");
        match bound.enter(Call::Start) {
            Err(StoreError::Busy(why)) => assert!(why.contains(CALLS_BUSY), "{why}"),
            other => panic!("a third call must be refused as busy, got {other:?}"),
        }
        assert_eq!(bound.in_flight(), 2, "a refused call holds no place");
        drop(a);
        let c = bound
            .enter(Call::Start)
            .expect("a place given back is taken again");
        drop((b, c));
        assert_eq!(bound.in_flight(), 0);
        assert_eq!(
            CallBound::new(0).limit(),
            1,
            "a bound of 0 would refuse everything"
        );
    }
}
