//! Moving the store's clock, for tests.
//!
//! Deadlines (holds, the payment grace, exchanges, leases) are judged by the store's clock.
//! A test that needs one to pass moves that clock forward (`PgStore::advance_clock`,
//! `SqliteStore::advance_clock`) instead of sleeping past it. The backends call [`moved`]
//! once the store's clock has moved, and whatever in this process keeps its own estimate of
//! that clock (the event writers: their engine's clock and their expiry timers) listens with
//! [`subscribe`] and measures it again. Nothing moves it in production, so nothing is sent.

use std::sync::LazyLock;

use tokio::sync::watch;

/// How many times a store's clock was moved in this process.
static MOVES: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::Sender::new(0));

/// Tells every listener in this process that a store's clock has moved forward.
pub fn moved() {
    MOVES.send_modify(|moves| *moves += 1);
}

/// A receiver that changes whenever a store's clock is moved.
pub fn subscribe() -> watch::Receiver<u64> {
    MOVES.subscribe()
}
