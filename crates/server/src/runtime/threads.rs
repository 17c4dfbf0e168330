//! The threads of their own that `boxoffice serve` gives the work that must not wait behind
//! the requests. Among thousands of request tasks on two cores, a task that holds a
//! database connection waits for a turn at every round trip of its transaction: event
//! writer groups took ~150 ms in the on-sale while PostgreSQL sat idle (28–37 ms on a thread
//! of their own). The runtime has one worker thread and its own I/O driver, and the pool its
//! tasks use opens its connections lazily, on it; they share nothing else with the
//! requests' runtime that does I/O. (The outbox relay was tried on such a thread too and
//! taken back: it shares the payment provider's HTTP client with the checkout route, and a
//! pooled connection is driven by the runtime that opened it, so each side's calls would
//! have waited on the other's thread; the run with it showed no gain.) Built on first use,
//! kept for the life of the process (a runtime cannot be dropped inside another).

use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// The event writers' runtime (`boxoffice-writer`).
pub fn writers() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| one_thread("boxoffice-writer"))
}

fn one_thread(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(name)
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("the {name} runtime cannot start: {error}"))
}
