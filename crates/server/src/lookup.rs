//! Read-only idempotency lookups, coalesced. A request refused before its transaction (its
//! seats shown sold, its admission ended) must still replay the answer its key already has,
//! so it asks the store first. After a sell-out that is every attempt, thousands a second:
//! one task takes whatever lookups are queued (up to [`LOOKUP_BATCH_MAX`]) and answers them
//! from one query, so a flood costs a query per batch rather than a round trip per request.

use std::sync::{Arc, Mutex};

use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
use boxoffice_store::{Store, StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

/// Most lookups answered by one query.
pub const LOOKUP_BATCH_MAX: usize = 256;
/// Lookups queued before new ones are answered "unavailable" (the caller then answers 503).
pub const LOOKUP_QUEUE_MAX: usize = 20_000;

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

    /// The answer stored for `scope` (see [`Store::stored_answers`]).
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
    let mut jobs = Vec::with_capacity(LOOKUP_BATCH_MAX);
    while receiver.recv_many(&mut jobs, LOOKUP_BATCH_MAX).await > 0 {
        let asked: Vec<(IdempotencyScope, String)> =
            jobs.iter().map(|job| job.asked.clone()).collect();
        match store.stored_answers(&asked).await {
            Ok(answers) if answers.len() == jobs.len() => {
                for (job, answer) in jobs.drain(..).zip(answers) {
                    let _ = job.reply.send(Ok(answer));
                }
            }
            Ok(_) => {
                for job in jobs.drain(..) {
                    let _ = job.reply.send(Err(StoreError::Internal(
                        "idempotency lookup answered the wrong number of rows".into(),
                    )));
                }
            }
            Err(error) => {
                for job in jobs.drain(..) {
                    let _ = job.reply.send(Err(crate::writer::copy_of(&error)));
                }
            }
        }
    }
}
