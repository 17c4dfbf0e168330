//! The batched write path. Hold requests for one event that arrive together are decided
//! together: one task per event takes whatever is queued (up to
//! [`HOLD_BATCH_REQUESTS_MAX`]), hands it to [`Store::hold_batch`] as one transaction, and
//! answers each request after the commit. At most one batch per event is in flight in this
//! process; at low load a batch has one request and costs what a plain transaction costs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use boxoffice_domain::decide::{HoldOutcome, HoldRequest};
use boxoffice_domain::idempotency::{Idempotent, StoredResponse};
use boxoffice_store::exchange::{ExchangeBegun, ExchangeStart};
use boxoffice_store::{EventRecord, Store, StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

/// Most hold requests decided in one transaction.
pub const HOLD_BATCH_REQUESTS_MAX: usize = 256;
/// Requests queued per event before new ones are refused with 429.
pub const HOLD_QUEUE_REQUESTS_MAX: usize = 10_000;

/// Renders the stored response of a decided request (the HTTP layer's choice of bytes).
pub type HoldRenderer = Arc<dyn Fn(&EventRecord, &HoldOutcome) -> StoredResponse + Send + Sync>;

struct Job {
    request: HoldRequest,
    reply: oneshot::Sender<StoreResult<Idempotent>>,
}

/// Why a request was not decided.
#[derive(Debug)]
pub enum SubmitError {
    /// The event's queue is full: shed load (429).
    Overloaded,
    Store(StoreError),
}

/// One queue and one deciding task per event.
#[derive(Clone)]
pub struct HoldBatcher {
    store: Arc<dyn Store>,
    render: HoldRenderer,
    queues: Arc<Mutex<HashMap<String, mpsc::Sender<Job>>>>,
}

impl std::fmt::Debug for HoldBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldBatcher").finish_non_exhaustive()
    }
}

impl HoldBatcher {
    pub fn new(store: Arc<dyn Store>, render: HoldRenderer) -> Self {
        Self {
            store,
            render,
            queues: Arc::default(),
        }
    }

    /// Queues `request` for `event` and waits for its answer, which comes after the commit.
    pub async fn submit(
        &self,
        event: Arc<EventRecord>,
        endpoint: String,
        request: HoldRequest,
    ) -> Result<Idempotent, SubmitError> {
        let (reply, answer) = oneshot::channel();
        let job = Job { request, reply };
        let sender = self.queue_for(&event, endpoint);
        match sender.try_send(job) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => return Err(SubmitError::Overloaded),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                return Err(SubmitError::Store(StoreError::Internal(
                    "hold batcher stopped".into(),
                )));
            }
        }
        match answer.await {
            Ok(result) => result.map_err(SubmitError::Store),
            Err(_) => Err(SubmitError::Store(StoreError::Internal(
                "hold batcher dropped a request".into(),
            ))),
        }
    }

    fn queue_for(&self, event: &Arc<EventRecord>, endpoint: String) -> mpsc::Sender<Job> {
        let mut queues = self
            .queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(sender) = queues.get(&event.event_id)
            && !sender.is_closed()
        {
            return sender.clone();
        }
        let (sender, receiver) = mpsc::channel(HOLD_QUEUE_REQUESTS_MAX);
        queues.insert(event.event_id.clone(), sender.clone());
        tokio::spawn(run_event_queue(
            self.store.clone(),
            self.render.clone(),
            event.clone(),
            endpoint,
            receiver,
        ));
        sender
    }
}

async fn run_event_queue(
    store: Arc<dyn Store>,
    render: HoldRenderer,
    event: Arc<EventRecord>,
    endpoint: String,
    mut receiver: mpsc::Receiver<Job>,
) {
    let render_event = event.clone();
    let render_one = move |outcome: &HoldOutcome| render(&render_event, outcome);
    let mut jobs = Vec::with_capacity(HOLD_BATCH_REQUESTS_MAX);
    while receiver.recv_many(&mut jobs, HOLD_BATCH_REQUESTS_MAX).await > 0 {
        let requests: Vec<HoldRequest> = jobs.iter().map(|job| job.request.clone()).collect();
        let started = Instant::now();
        let result = store
            .hold_batch(&event, &endpoint, &requests, &render_one)
            .await;
        metrics::histogram!("boxoffice_hold_batch_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("boxoffice_hold_batch_requests").record(requests.len() as f64);
        match result {
            Ok(answers) => {
                boxoffice_workers::crash::point("hold_committed");
                for (job, answer) in jobs.drain(..).zip(answers) {
                    // A client that went away no longer listens; its answer is stored anyway.
                    let _ = job.reply.send(Ok(answer));
                }
            }
            Err(error) => {
                metrics::counter!("boxoffice_hold_batch_failures_total").increment(1);
                for job in jobs.drain(..) {
                    let _ = job.reply.send(Err(copy_of(&error)));
                }
            }
        }
    }
}

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
    queues: Arc<Mutex<HashMap<String, mpsc::Sender<ExchangeJob>>>>,
}

impl std::fmt::Debug for ExchangeBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeBatcher").finish_non_exhaustive()
    }
}

impl ExchangeBatcher {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self {
            store,
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
        tokio::spawn(run_exchange_queue(self.store.clone(), receiver));
        sender
    }
}

async fn run_exchange_queue(store: Arc<dyn Store>, mut receiver: mpsc::Receiver<ExchangeJob>) {
    let mut jobs = Vec::with_capacity(EXCHANGE_BATCH_MAX);
    while receiver.recv_many(&mut jobs, EXCHANGE_BATCH_MAX).await > 0 {
        let (starts, replies): (Vec<ExchangeStart>, Vec<_>) =
            jobs.drain(..).map(|job| (job.start, job.reply)).unzip();
        let started = Instant::now();
        let result = store
            .exchange_batch(&starts, &crate::routes::exchanges::render_exchange)
            .await;
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

/// The same error again, for each request of a batch that failed as a whole.
fn copy_of(error: &StoreError) -> StoreError {
    let message = error.to_string();
    match error {
        StoreError::Unavailable(_) => StoreError::Unavailable(message),
        StoreError::Conflict(_) => StoreError::Conflict(message),
        StoreError::Internal(_) => StoreError::Internal(message),
    }
}
