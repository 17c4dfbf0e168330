//! The exchanges' batched write path: exchanges into one event that arrive together are
//! decided together, one batch in flight per target event ([`Store::exchange_batch`]).
//! Holds and releases go through the event writer instead (`crate::writer`); exchanges
//! reach the writer's engine through the seat-map change feed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use boxoffice_store::exchange::{ExchangeBegun, ExchangeStart, RenderExchange};
use boxoffice_store::{Store, StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

use crate::writer::{SubmitError, copy_of};

/// Most exchanges decided in one transaction.
pub const EXCHANGE_BATCH_MAX: usize = 128;
/// Exchanges queued per target event before new ones are refused with 429.
pub const EXCHANGE_QUEUE_MAX: usize = 10_000;

struct ExchangeJob {
    start: ExchangeStart,
    reply: oneshot::Sender<StoreResult<ExchangeBegun>>,
}

/// The exchanges' batched write path: one queue and one deciding task per target event, as
/// for holds ([`Store::exchange_batch`] decides a batch in arrival order in one transaction).
#[derive(Clone)]
pub struct ExchangeBatcher {
    store: Arc<dyn Store>,
    /// Renders an exchange's answer (the route's), stored with it in its transaction.
    render: Arc<RenderExchange>,
    queues: Arc<Mutex<HashMap<String, mpsc::Sender<ExchangeJob>>>>,
}

impl std::fmt::Debug for ExchangeBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeBatcher").finish_non_exhaustive()
    }
}

impl ExchangeBatcher {
    pub fn new(store: Arc<dyn Store>, render: Arc<RenderExchange>) -> Self {
        Self {
            store,
            render,
            queues: Arc::default(),
        }
    }

    /// Queues `start` behind the other exchanges into its target event and waits for its
    /// answer, which comes after the commit.
    pub async fn submit(&self, start: ExchangeStart) -> Result<ExchangeBegun, SubmitError> {
        let (reply, answer) = oneshot::channel();
        let sender = self.queue_for(&start.to_event.event_id);
        match sender.try_send(ExchangeJob { start, reply }) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Err(SubmitError::Overloaded),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(SubmitError::Store(StoreError::Internal(
                    "exchange batcher stopped".into(),
                )));
            }
        }
        match answer.await {
            Ok(result) => result.map_err(SubmitError::Store),
            Err(_) => Err(SubmitError::Store(StoreError::Internal(
                "exchange batcher dropped a request".into(),
            ))),
        }
    }

    fn queue_for(&self, event_id: &str) -> mpsc::Sender<ExchangeJob> {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(sender) = queues.get(event_id)
            && !sender.is_closed()
        {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::channel(EXCHANGE_QUEUE_MAX);
        queues.insert(event_id.to_owned(), sender.clone());
        tokio::spawn(run_exchange_queue(
            self.store.clone(),
            self.render.clone(),
            receiver,
        ));
        sender
    }
}

async fn run_exchange_queue(
    store: Arc<dyn Store>,
    render: Arc<RenderExchange>,
    mut receiver: mpsc::Receiver<ExchangeJob>,
) {
    let mut jobs = Vec::with_capacity(EXCHANGE_BATCH_MAX);
    while receiver.recv_many(&mut jobs, EXCHANGE_BATCH_MAX).await > 0 {
        let (starts, replies): (Vec<ExchangeStart>, Vec<_>) =
            jobs.drain(..).map(|job| (job.start, job.reply)).unzip();
        let started = Instant::now();
        let result = store.exchange_batch(&starts, render.as_ref()).await;
        metrics::histogram!("boxoffice_exchange_batch_seconds")
            .record(started.elapsed().as_secs_f64());
        metrics::histogram!("boxoffice_exchange_batch_requests").record(starts.len() as f64);
        match result {
            Ok(answers) => {
                for (reply, answer) in replies.into_iter().zip(answers) {
                    let _ = reply.send(Ok(answer));
                }
            }
            Err(error) => {
                metrics::counter!("boxoffice_exchange_batch_failures_total").increment(1);
                for reply in replies {
                    let _ = reply.send(Err(copy_of(&error)));
                }
            }
        }
    }
}
