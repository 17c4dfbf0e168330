//! One load per key at a time, shared by every caller that asks while it is in flight, each
//! waiting at most a deadline ([`Coalesced`]).
//!
//! Why: the opening second of a sale is hundreds of requests for one event that no node has
//! seen yet. Each used to read the event itself, so a burst of 256 on one node spent 256
//! store calls on one row and 160 of them were refused by the store's call bound
//! (`boxoffice_store::gate`, "the inventory store is busy"): 429s for a seat race that
//! should answer one 201 and 409s. Now the first caller starts the read and the others await
//! its answer; the read runs on its own task, so a caller that gives up (its client went
//! away, or its deadline passed) never cancels it for the others. A caller whose deadline
//! passes is told [`StoreError::Unavailable`] (503 with `Retry-After`), never a bare 5xx.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use boxoffice_store::{StoreError, StoreResult};
use tokio::sync::watch;

/// What a load ended with, shared by its waiters (an error is copied for each).
type Shared<T> = Option<Result<T, Arc<StoreError>>>;

/// Loads by key, one in flight per key.
pub struct Coalesced<T> {
    in_flight: Arc<Mutex<HashMap<String, watch::Receiver<Shared<T>>>>>,
    /// How long a caller waits for the load in flight before it is told to retry.
    wait: Duration,
    /// What the caller is told then (in a 503's log line).
    what: &'static str,
}

impl<T> std::fmt::Debug for Coalesced<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalesced")
            .field("what", &self.what)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl<T> Clone for Coalesced<T> {
    fn clone(&self) -> Self {
        Self {
            in_flight: self.in_flight.clone(),
            wait: self.wait,
            what: self.what,
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Coalesced<T> {
    /// Callers wait at most `wait` for a load in flight; `what` names it in errors.
    pub fn new(what: &'static str, wait: Duration) -> Self {
        Self {
            in_flight: Arc::default(),
            wait,
            what,
        }
    }

    /// Loads currently in flight.
    pub fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// The result of `load` for `key`: started here if no load of `key` is in flight, else the
    /// one in flight's. `load` is called only when this caller starts the load.
    pub async fn load<F, Fut>(&self, key: &str, load: F) -> StoreResult<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = StoreResult<T>> + Send + 'static,
    {
        let mut answer = {
            let mut in_flight = lock(&self.in_flight);
            match in_flight.get(key) {
                Some(answer) => {
                    metrics::counter!("boxoffice_coalesced_waits_total", "what" => self.what)
                        .increment(1);
                    answer.clone()
                }
                None => {
                    let (tell, answer) = watch::channel(None);
                    in_flight.insert(key.to_owned(), answer.clone());
                    let loading = load();
                    let in_flight = self.in_flight.clone();
                    let key = key.to_owned();
                    tokio::spawn(async move {
                        let result = loading.await.map_err(Arc::new);
                        // Told before it is forgotten: a caller that finds the channel after
                        // this sees the value at once.
                        let _ = tell.send(Some(result));
                        lock(&in_flight).remove(&key);
                    });
                    answer
                }
            }
        };
        match tokio::time::timeout(self.wait, answer.wait_for(Option::is_some)).await {
            Ok(Ok(result)) => match result.as_ref() {
                Some(Ok(value)) => Ok(value.clone()),
                Some(Err(error)) => Err(crate::runtime::writer::copy_of(error)),
                None => Err(StoreError::Internal(format!("{} ended unread", self.what))),
            },
            Ok(Err(_)) => Err(StoreError::Internal(format!(
                "{} ended without an answer",
                self.what
            ))),
            Err(_) => {
                metrics::counter!("boxoffice_coalesced_timeouts_total", "what" => self.what)
                    .increment(1);
                Err(StoreError::Unavailable(format!(
                    "{} took longer than {} ms",
                    self.what,
                    self.wait.as_millis()
                )))
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn callers_during_a_load_share_it_and_a_later_one_loads_again() {
        let loads = Arc::new(AtomicUsize::new(0));
        let coalesced: Coalesced<u32> = Coalesced::new("test load", Duration::from_secs(5));
        let (open, gate) = watch::channel(false);
        let entered = Arc::new(AtomicUsize::new(0));
        let callers: Vec<_> = (0..100)
            .map(|_| {
                let (coalesced, loads, gate) = (coalesced.clone(), loads.clone(), gate.clone());
                let entered = entered.clone();
                tokio::spawn(async move {
                    // Counted in the same poll that joins or starts the load.
                    entered.fetch_add(1, Ordering::SeqCst);
                    coalesced
                        .load("event-1", move || async move {
                            loads.fetch_add(1, Ordering::SeqCst);
                            let mut gate = gate;
                            let _ = gate.wait_for(|open| *open).await;
                            Ok(7)
                        })
                        .await
                })
            })
            .collect();
        // Every caller is waiting on the one load before it may finish.
        while entered.load(Ordering::SeqCst) < 100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(coalesced.in_flight(), 1);
        open.send(true).unwrap();
        for caller in callers {
            assert_eq!(caller.await.unwrap().unwrap(), 7);
        }
        assert_eq!(loads.load(Ordering::SeqCst), 1);
        // Done: the next caller loads afresh.
        let again = coalesced
            .load("event-1", || async { Ok::<u32, StoreError>(8) })
            .await;
        assert_eq!(again.unwrap(), 8);
    }

    #[tokio::test]
    async fn a_caller_past_its_deadline_is_told_to_retry_and_errors_are_shared() {
        let coalesced: Coalesced<u32> = Coalesced::new("slow load", Duration::from_millis(50));
        let slow = coalesced
            .load("e", || async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(1)
            })
            .await;
        assert!(
            matches!(&slow, Err(StoreError::Unavailable(why)) if why.contains("slow load")),
            "{slow:?}"
        );
        let failing: Coalesced<u32> = Coalesced::new("failing load", Duration::from_secs(1));
        let (first, second) = tokio::join!(
            failing.load("e", || async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Err(StoreError::Busy("pool".into()))
            }),
            failing.load("e", || async { Ok(2) }),
        );
        assert!(matches!(first, Err(StoreError::Busy(_))), "{first:?}");
        assert!(matches!(second, Err(StoreError::Busy(_))), "{second:?}");
    }
}
