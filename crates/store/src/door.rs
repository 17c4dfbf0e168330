//! What a door app downloads for an event before it goes offline: the tickets it must refuse
//! although their codes verify (voided by an exchange, a transfer or a cancellation) and the
//! tickets already checked in.

use crate::StoreResult;

/// The most ticket ids one list may hold (an event's capacity is at most 200,000 seats plus
/// its tiers; the door bundle is read once per device and sync).
pub const DOOR_LIST_MAX: u32 = 500_000;

/// An event's door lists, ticket ids in id order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DoorLists {
    pub revoked: Vec<String>,
    pub checked_in: Vec<String>,
    /// (ticket id, holder's name) of the valid tickets that name a holder (issue 39): the
    /// door shows whom a ticket is for.
    pub holders: Vec<(String, String)>,
}

#[async_trait::async_trait]
pub trait DoorStore: Send + Sync {
    async fn door_lists(&self, event_id: &str) -> StoreResult<DoorLists>;
}
