//! Where the waiting rooms live. [`RoomStore`] is the one interface; the server keeps a
//! cached [`QueueView`] per event for status polls and calls the store for everything that
//! changes a room.
//!
//! - [`memory::MemoryRooms`]: in process, for the embedded and single-node default. Each
//!   room is the pure [`Room`] model; every op is appended to a journal file and fsynced
//!   (group commit) before it is answered, and replayed at start, so a restart keeps places,
//!   the serving counter, admissions and the operator's controls.
//! - [`redis::RedisRooms`]: in Redis, so several API nodes share one queue per event. Each
//!   op is one Lua script, atomic in Redis, answering exactly as the model does.
//!
//! [`conformance`] holds the tests both must pass; each backend's test file runs them.
//!
//! Architecture invariant: the model in `boxoffice-waitroom` decides; a backend only stores
//! and must answer every op as [`Room::apply`] would.

pub mod conformance;
pub mod memory;
pub mod redis;

use async_trait::async_trait;
use boxoffice_waitroom::admission::{Admission, Shop};
use boxoffice_waitroom::queue::{JoinError, Place, QueueView};
use boxoffice_waitroom::room::{ClaimOutcome, Controls, RoomConfig, RoomStats};

#[cfg(doc)]
use boxoffice_waitroom::room::Room;

/// A failure of the backend itself (not a refusal by the model).
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("waiting-room state unavailable: {0}")]
    Unavailable(String),
    #[error("no waiting room for event {0}")]
    NoRoom(String),
    #[error("waiting-room state corrupt: {0}")]
    Corrupt(String),
}

pub type StateResult<T> = Result<T, StateError>;

/// The rooms of one deployment. Every method is atomic per event.
#[async_trait]
pub trait RoomStore: Send + Sync + std::fmt::Debug {
    /// `memory` or `redis`.
    fn backend(&self) -> &'static str;

    /// Creates the room of `event_id` if it does not exist; an existing room keeps its
    /// config. Returns the config in force.
    async fn ensure_room(&self, event_id: &str, config: RoomConfig) -> StateResult<RoomConfig>;

    /// Every room with its config (a restarted server resumes their controllers).
    async fn rooms(&self) -> StateResult<Vec<(String, RoomConfig)>>;

    /// `Op::Join`.
    async fn join(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Result<Place, JoinError>>;

    /// The account's join index, if it joined.
    async fn index_of(&self, event_id: &str, account_id: &str) -> StateResult<Option<u64>>;

    /// What status polls answer from (the server caches it and refreshes it often).
    async fn view(&self, event_id: &str) -> StateResult<QueueView>;

    /// `Op::Claim`.
    async fn claim(
        &self,
        event_id: &str,
        account_id: &str,
        session_id: &str,
        now_ms: i64,
    ) -> StateResult<ClaimOutcome>;

    /// The live admission of `account_id`, checked by holds and checkout.
    async fn admission(
        &self,
        event_id: &str,
        account_id: &str,
        now_ms: i64,
    ) -> StateResult<Option<Admission>>;

    /// `Op::End`: frees the account's slot if it was taken at or before `at_ms` (the
    /// admission stays until its TTL).
    async fn end(&self, event_id: &str, account_id: &str, at_ms: i64) -> StateResult<bool>;

    /// `Op::Shop`: a hold granted, a checkout started or a hold refused moves the account's
    /// slot (see `boxoffice_waitroom::admission::Shop`). Returns whether the slot changed.
    async fn shop(
        &self,
        event_id: &str,
        account_id: &str,
        shop: Shop,
        at_ms: i64,
    ) -> StateResult<bool>;

    /// `Op::Tick`: opens the queue if due, expires admissions, releases up to `release`.
    /// Returns how many positions were released.
    async fn tick(&self, event_id: &str, now_ms: i64, release: u64) -> StateResult<u64>;

    /// `Op::Control`.
    async fn set_controls(&self, event_id: &str, controls: Controls) -> StateResult<Controls>;

    async fn stats(&self, event_id: &str) -> StateResult<RoomStats>;

    /// Whether this node should run the release controller of `event_id` for the next
    /// `lease_ms` (several nodes share a Redis room; exactly one of them releases).
    async fn lead(&self, event_id: &str, node_id: &str, lease_ms: u64) -> StateResult<bool>;
}
