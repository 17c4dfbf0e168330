//! Access codes of presale lanes, as stored (see `boxoffice_domain::phase` for the rules and
//! `boxoffice_domain::engine`'s `access` module for redemptions). Codes are inserted in
//! batches, each under the organiser's idempotency key, and never rewritten; their uses
//! grow only through the event's writer (a group's counted conditional update), so the
//! writer's count of redemptions and the stored `uses` agree.

use crate::StoreResult;

/// One code of a phase with its uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessCodeRow {
    pub code: String,
    pub max_uses: u32,
    pub uses: u32,
}

/// Codes to insert for a phase under one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBatch {
    pub event_id: String,
    pub phase_id: String,
    /// `"<account>:<idempotency key>"` of the request.
    pub batch_key: String,
    pub batch_digest: String,
    /// (code, max uses), normalised and distinct.
    pub codes: Vec<(String, u32)>,
    /// Codes the phase may hold at most with these.
    pub phase_codes_max: u64,
}

/// What a batch insert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodesInserted {
    /// Inserted: the batch's codes.
    Inserted(Vec<AccessCodeRow>),
    /// The same request was made before: the codes it made, as they are now.
    Replayed(Vec<AccessCodeRow>),
    /// The key was used before for another request.
    KeyReused,
    /// The phase has this code already: nothing was inserted.
    Duplicate(String),
    /// The phase would hold more than its maximum: nothing was inserted.
    TooMany { held: u64 },
}

#[async_trait::async_trait]
pub trait PhaseStore: Send + Sync {
    /// Inserts a batch of codes, all or none.
    async fn insert_access_codes(&self, batch: &CodeBatch) -> StoreResult<CodesInserted>;

    /// A phase's codes in code order, at most `limit`.
    async fn access_codes(
        &self,
        event_id: &str,
        phase_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<AccessCodeRow>>;

    /// One code of a phase.
    async fn access_code(
        &self,
        event_id: &str,
        phase_id: &str,
        code: &str,
    ) -> StoreResult<Option<AccessCodeRow>>;

    /// Whether the account redeemed a code for the phase.
    async fn access_redeemed(
        &self,
        event_id: &str,
        phase_id: &str,
        account_id: &str,
    ) -> StoreResult<bool>;
}
