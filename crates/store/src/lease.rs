//! The event lease: one owner node per event at a time, fenced by the store.
//!
//! A node writes an event only while it holds the event's lease (owner node id, epoch,
//! expiry). It takes a lease that is free or expired (or its own, after a restart), and the
//! epoch goes up by one each time the lease changes hands; it renews what it holds every
//! third of the lease's TTL; a graceful stop hands the lease back at once (expired, epoch
//! kept). Every group the owner's writer commits carries its [`Fence`] (node and epoch) and
//! the store checks it inside the group's own transaction, under a shared lock on the lease
//! row (PostgreSQL: `FOR KEY SHARE`): the owner's pipelined groups and its renewals (which
//! change the expiry alone) never wait for each other, while a takeover (which locks the row
//! `FOR UPDATE`) waits for the groups in flight and then makes every later group of the
//! former owner fail with [`StoreError::Fenced`]. (The migration's comment says `FOR SHARE`
//! and that the takeover updates the row: it was written first, and a migration applied
//! somewhere is never edited.) This is Kleppmann's fencing token, checked by the
//! storage, not trusted to the clock: a paused owner that wakes up after its lease was taken
//! writes nothing.
//!
//! Nodes register their internal address here too (with a heartbeat), so a node that gets a
//! request for an event owned elsewhere can forward it to the owner.
//!
//! A lease is good only on the database server it was taken on: the row keeps that server's
//! generation (PostgreSQL's postmaster start time), and a group or a renewal that runs on
//! another server finds no lease. After a failover (whoever promoted the standby: the
//! shard's pg_auto_failover monitor, or an operator) every lease of the shard is stale at
//! once, so every writer of its events takes its lease again (epoch + 1) and reloads its
//! event from the new primary, which may lack what the old one committed without the
//! standby's acknowledgement. Nothing has to bump the epochs at the promotion.
//!
//! Architecture invariant: a group that names a fence commits only if the event's lease row
//! still has that node and epoch, taken on the same server generation, when the group
//! commits; the epoch of an event never goes down.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;

use crate::{StoreError, StoreResult};

/// The lease's lifetime unless configured (`boxoffice serve --lease-ttl-ms`): a dead owner's
/// events are taken over this long after its last renewal.
pub const LEASE_TTL_MS_DEFAULT: u64 = 3_000;
/// Shortest lease accepted: renewals run every third of it.
pub const LEASE_TTL_MS_MIN: u64 = 300;
/// Longest lease accepted.
pub const LEASE_TTL_MS_MAX: u64 = 60_000;

/// What a writer's group proves: the node it runs on and the epoch of the lease it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub node_id: String,
    pub epoch: u64,
}

/// An event's lease as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub event_id: String,
    pub node_id: String,
    pub epoch: u64,
    /// When this epoch began (the lease last changed hands).
    pub since: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    /// The store's clock when the lease was read.
    pub read_at: OffsetDateTime,
    /// The owner's registered internal address, if it registered one.
    pub owner_url: Option<String>,
}

impl Lease {
    /// Whether the owner still holds it (by the store's clock when read).
    pub fn live(&self) -> bool {
        self.expires_at > self.read_at
    }

    pub fn fence(&self) -> Fence {
        Fence {
            node_id: self.node_id.clone(),
            epoch: self.epoch,
        }
    }

    /// How long it stays live after it was read (zero once expired).
    pub fn remaining(&self) -> std::time::Duration {
        std::time::Duration::try_from(self.expires_at - self.read_at).unwrap_or_default()
    }
}

/// The result of trying to take a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// Taken (or taken again): write with its fence.
    Mine(Lease),
    /// Another node holds it, live.
    Elsewhere(Lease),
}

/// A node as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    pub node_id: String,
    pub advertise_url: String,
    pub heartbeat_at: OffsetDateTime,
}

/// Checks a lease TTL against [`LEASE_TTL_MS_MIN`]..=[`LEASE_TTL_MS_MAX`].
pub fn check_ttl(ttl_ms: u64) -> Result<u64, String> {
    if (LEASE_TTL_MS_MIN..=LEASE_TTL_MS_MAX).contains(&ttl_ms) {
        Ok(ttl_ms)
    } else {
        Err(format!(
            "the lease TTL must be {LEASE_TTL_MS_MIN}..={LEASE_TTL_MS_MAX} ms, not {ttl_ms}"
        ))
    }
}

/// The refusal of a group (or a renewal) whose fence no longer matches the event's lease.
pub fn fenced(event_id: &str, fence: &Fence) -> StoreError {
    StoreError::Fenced(format!(
        "event {event_id}: the lease of node {} at epoch {} was taken over",
        fence.node_id, fence.epoch
    ))
}

/// The lease side of a store.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Registers (or refreshes) a node's internal address and heartbeat.
    async fn register_node(&self, node_id: &str, advertise_url: &str) -> StoreResult<()>;

    /// The registered nodes, most recent heartbeat first.
    async fn nodes(&self) -> StoreResult<Vec<NodeRecord>>;

    /// Takes `event_id`'s lease for `node_id` for `ttl_ms` if it is free, expired or this
    /// node's own (epoch + 1 in each case); else says who holds it. Waits for the groups of
    /// the current epoch in flight.
    async fn take_lease(&self, event_id: &str, node_id: &str, ttl_ms: u64) -> StoreResult<Taken>;

    /// Extends the leases `held` (event id and epoch) of `node_id` by `ttl_ms` from now; the
    /// event ids whose lease is still this node's at that epoch (the others were taken over).
    async fn renew_leases(
        &self,
        node_id: &str,
        held: &[(String, u64)],
        ttl_ms: u64,
    ) -> StoreResult<Vec<String>>;

    /// Hands a lease back at once (expired now, epoch kept); `false` if it was not this
    /// fence's any more.
    async fn release_lease(&self, event_id: &str, fence: &Fence) -> StoreResult<bool>;

    /// The event's lease with its owner's address, if it ever had one.
    async fn lease(&self, event_id: &str) -> StoreResult<Option<Lease>>;
}
