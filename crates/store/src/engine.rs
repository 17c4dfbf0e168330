//! What the event writer asks of a store: load an event's live inventory, read again the rows
//! that changed elsewhere, and persist a decided group ([`EngineStore`]).
//!
//! The rules live in `boxoffice_domain::engine`; a backend only loads and persists. Every
//! write of a group is conditional and counted, and any difference refuses the whole group
//! ([`StoreError::Conflict`]): a seat is taken only if it is still free by the group's clock,
//! a tier gives units only where that many are available, a hold is released only if it is
//! still `HELD` and live, the accounts that got holds are within their limit after the writes,
//! and the group's clock is not ahead of the store's.
//!
//! Architecture invariant: a group decided on stale state cannot commit. Each group carries
//! its writer sequence; the event's `seatmap` row must hold the one before it, checked and
//! set in the group's last statement. A group whose predecessor failed, or that follows
//! another node's writer, changes nothing.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::engine::{Effects, EngineRows, EngineSnapshot};
use boxoffice_domain::hold::SeatStatus;

use crate::seatmap::{EventChanges, MapSeat};
use crate::{EventRecord, NewRecord, StoreError, StoreResult};

/// One decided group, ready to persist.
#[derive(Debug, Clone)]
pub struct GroupWrite<'a> {
    pub event: &'a EventRecord,
    /// The endpoint the group's idempotency records are stored under.
    pub endpoint: &'a str,
    /// The engine's clock for this group: never ahead of the store's (checked), it is the
    /// `created_at` of what the group writes and the clock its conditions are judged by.
    pub now: OffsetDateTime,
    /// This group's place in its writer's sequence: the stored sequence must be one less.
    pub writer_seq: u64,
    pub effects: &'a Effects,
    /// The idempotency key of each new hold, in `effects.holds_created` order.
    pub hold_keys: Vec<String>,
    pub records: Vec<NewRecord>,
}

impl GroupWrite<'_> {
    /// The seat-map changes the group's seat writes make (tier counts come from the store's
    /// answer, after the writes).
    pub fn map_seats(&self) -> EventChanges {
        let mut changes = EventChanges::default();
        for change in &self.effects.map_seats {
            changes.seats.insert(
                change.seat_id.clone(),
                MapSeat::new(change.status, change.hold_expires_at),
            );
        }
        changes
    }

    /// The seats released holds must free, as the engine counted them.
    pub fn seats_freed(&self) -> usize {
        self.effects
            .holds_released
            .iter()
            .map(|hold| hold.seat_ids.len())
            .sum()
    }

    /// Units released holds give back, per tier.
    pub fn tier_units_returned(&self) -> std::collections::BTreeMap<String, u32> {
        let mut returned = std::collections::BTreeMap::new();
        for hold in &self.effects.holds_released {
            if let Some((tier_id, units)) = &hold.tier {
                *returned.entry(tier_id.clone()).or_default() += *units;
            }
        }
        returned
    }

    /// Tiers the group touches, in lock order.
    pub fn tiers_touched(&self) -> Vec<String> {
        let mut tiers: std::collections::BTreeSet<String> =
            self.effects.tiers_reclaimed.iter().cloned().collect();
        tiers.extend(self.effects.tier_units_taken.keys().cloned());
        tiers.extend(self.tier_units_returned().into_keys());
        tiers.into_iter().collect()
    }
}

/// A committed group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupCommitted {
    /// The event's map version before the group (the group wrote `version` when it changed
    /// the map, else nothing).
    pub previous_version: u64,
    pub version: u64,
    /// The store's clock during the group.
    pub store_now: OffsetDateTime,
}

/// The refusal of a group whose row counts differ from what the engine decided.
pub fn mismatch(what: &str, expected: usize, written: u64) -> StoreError {
    StoreError::Conflict(format!(
        "group refused: {what}: expected {expected}, the store wrote {written}"
    ))
}

/// A seat status as a backend stores it.
pub fn parse_seat_status(seat_id: &str, raw: &str) -> StoreResult<SeatStatus> {
    SeatStatus::parse(raw)
        .ok_or_else(|| StoreError::Internal(format!("seat {seat_id} has status {raw:?}")))
}

/// The event writer's side of a store.
#[async_trait]
pub trait EngineStore: Send + Sync {
    /// The event's live inventory in one consistent snapshot, and the store's clock then:
    /// every seat and tier, the holds in `HELD`, `PAYMENT_PENDING` or `CONFIRMED`, and the
    /// digests of the keys used at `endpoint` (a hold whose record was purged still owns its
    /// key).
    async fn engine_load(
        &self,
        event: &EventRecord,
        endpoint: &str,
    ) -> StoreResult<(EngineSnapshot, OffsetDateTime)>;

    /// The current rows of these seats and tiers; the holds named, the holds on those seats,
    /// and the kept holds of those tiers, each in its current status.
    async fn engine_rows(
        &self,
        event_id: &str,
        seat_ids: &[String],
        tier_ids: &[String],
        hold_ids: &[String],
    ) -> StoreResult<EngineRows>;

    /// Writes one group in one transaction, every write conditional and counted, the writer
    /// sequence checked last. Any difference: [`StoreError::Conflict`] and nothing written.
    async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted>;
}
