//! Read-only idempotency lookups, coalesced. A request refused before its transaction (its
//! seats shown sold, its admission ended) must still replay the answer its key already has,
//! so it asks the store first. After a sell-out that is every attempt, thousands a second:
//! one task takes whatever lookups are queued (up to [`LOOKUP_BATCH_MAX`]) and answers them
//! from one query, so a flood costs a query per batch rather than a round trip per request.
//! Up to [`LOOKUP_BATCHES_IN_FLIGHT`] batches run at once: one at a time, a batch waited
//! for its connection and its turn behind the crowd and the queue filled (every lookup past
//! it refused 429) while the database sat idle.

use std::sync::{Arc, Mutex};

use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
use boxoffice_store::{Store, StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

/// Most lookups answered by one query.
pub const LOOKUP_BATCH_MAX: usize = 256;
/// Lookups queued before new ones are refused as busy (the caller then answers 429).
pub const LOOKUP_QUEUE_MAX: usize = 20_000;
/// Batches whose query runs at once.
pub const LOOKUP_BATCHES_IN_FLIGHT: usize = 4;

struct Job {
    asked: (IdempotencyScope, String),
    reply: oneshot::Sender<StoreResult<Option<Idempotent>>>,
}

/// The lookup queue; its task starts with the first lookup.
#[derive(Clone)]
pub struct AnswerLookup {
    store: Arc<dyn Store>,
    sender: mpsc::Sender<Job>,
    receiver: Arc<Mutex<Option<mpsc::Receiver<Job>>>>,
}

impl std::fmt::Debug for AnswerLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerLookup").finish_non_exhaustive()
    }
}

impl AnswerLookup {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let (sender, receiver) = mpsc::channel(LOOKUP_QUEUE_MAX);
        Self {
            store,
            sender,
            receiver: Arc::new(Mutex::new(Some(receiver))),
        }
    }

    /// The answer stored for `scope` (see [`boxoffice_store::ReadStore::stored_answers`]).
    pub async fn stored_answer(
        &self,
        scope: &IdempotencyScope,
        digest: &str,
    ) -> StoreResult<Option<Idempotent>> {
        let taken = self
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(receiver) = taken {
            tokio::spawn(run(self.store.clone(), receiver));
        }
        let (reply, answer) = oneshot::channel();
        let job = Job {
            asked: (scope.clone(), digest.to_owned()),
            reply,
        };
        if self.sender.try_send(job).is_err() {
            return Err(StoreError::Busy(
                "too many idempotency lookups queued".into(),
            ));
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Internal("idempotency lookup dropped".into())))
    }
}

async fn run(store: Arc<dyn Store>, mut receiver: mpsc::Receiver<Job>) {
    let batches = Arc::new(tokio::sync::Semaphore::new(LOOKUP_BATCHES_IN_FLIGHT));
    let mut jobs = Vec::with_capacity(LOOKUP_BATCH_MAX);
    while receiver.recv_many(&mut jobs, LOOKUP_BATCH_MAX).await > 0 {
        let Ok(permit) = batches.clone().acquire_owned().await else {
            return;
        };
        // Whatever came meanwhile joins this batch.
        while jobs.len() < LOOKUP_BATCH_MAX {
            match receiver.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let batch = std::mem::replace(&mut jobs, Vec::with_capacity(LOOKUP_BATCH_MAX));
        let store = store.clone();
        tokio::spawn(async move {
            answer_batch(store.as_ref(), batch).await;
            drop(permit);
        });
    }
}

/// Answers one batch of lookups from one query.
async fn answer_batch(store: &dyn Store, jobs: Vec<Job>) {
    let asked: Vec<(IdempotencyScope, String)> = jobs.iter().map(|job| job.asked.clone()).collect();
    match store.stored_answers(&asked).await {
        Ok(answers) if answers.len() == jobs.len() => {
            for (job, answer) in jobs.into_iter().zip(answers) {
                let _ = job.reply.send(Ok(answer));
            }
        }
        Ok(_) => {
            for job in jobs {
                let _ = job.reply.send(Err(StoreError::Internal(
                    "idempotency lookup answered the wrong number of rows".into(),
                )));
            }
        }
        Err(error) => {
            for job in jobs {
                let _ = job.reply.send(Err(crate::runtime::writer::copy_of(&error)));
            }
        }
    }
}
