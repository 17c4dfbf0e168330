//! The seat-map change feed as the stores keep it.
//!
//! Every transaction that changes a seat's status or deadline, or a tier's count, collects
//! those changes in a [`MapChanges`] and, as its last statement before commit, bumps the
//! event's map version and writes one change row with that version. The version row is
//! locked last and held only until commit, so versions are contiguous per event and in commit
//! order: a reader that has version `v` needs exactly the rows after `v`, and a row it has not
//! seen yet can only have a higher version. Nothing is lost if no reader is listening.

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::hold::SeatStatus;
use serde::{Deserialize, Serialize};

use crate::{StoreError, StoreResult};

/// A seat as the map shows it: status and, while held, the hold's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapSeat {
    pub status: SeatStatus,
    /// Unix milliseconds; only for a held seat.
    pub held_until_ms: Option<i64>,
}

impl MapSeat {
    pub fn new(status: SeatStatus, held_until: Option<OffsetDateTime>) -> Self {
        let held_until_ms = match status {
            SeatStatus::Held => held_until.map(unix_ms),
            _ => None,
        };
        Self {
            status,
            held_until_ms,
        }
    }
}

/// Unix milliseconds of a store time.
pub fn unix_ms(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The seat and tier changes of one event in one transaction (the last write of a seat wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventChanges {
    pub seats: BTreeMap<String, MapSeat>,
    pub tiers: BTreeMap<String, i64>,
}

impl EventChanges {
    pub fn is_empty(&self) -> bool {
        self.seats.is_empty() && self.tiers.is_empty()
    }

    /// The stored form: compact JSON `{"s": [[seatId, status, heldUntilMs|null]], "t":
    /// [[tierId, available]]}`.
    pub fn encode(&self) -> String {
        let wire = Wire {
            s: self
                .seats
                .iter()
                .map(|(id, seat)| {
                    (
                        id.clone(),
                        seat.status.as_str().to_owned(),
                        seat.held_until_ms,
                    )
                })
                .collect(),
            t: self
                .tiers
                .iter()
                .map(|(id, available)| (id.clone(), *available))
                .collect(),
        };
        serde_json::to_string(&wire).unwrap_or_default()
    }

    pub fn decode(raw: &str) -> StoreResult<Self> {
        let wire: Wire = serde_json::from_str(raw)
            .map_err(|e| StoreError::Internal(format!("seat-map change row: {e}")))?;
        let mut changes = Self::default();
        for (seat_id, status, held_until_ms) in wire.s {
            let status = SeatStatus::parse(&status).ok_or_else(|| {
                StoreError::Internal(format!("seat-map change row: status {status:?}"))
            })?;
            changes.seats.insert(
                seat_id,
                MapSeat {
                    status,
                    held_until_ms,
                },
            );
        }
        changes.tiers.extend(wire.t);
        Ok(changes)
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(default)]
    s: Vec<(String, String, Option<i64>)>,
    #[serde(default)]
    t: Vec<(String, i64)>,
}

/// What one transaction changed on the seat maps, per event. Backends thread one through
/// every function that writes a seat or a tier count and record it just before commit.
#[derive(Debug, Clone, Default)]
pub struct MapChanges {
    pub by_event: BTreeMap<String, EventChanges>,
}

impl MapChanges {
    pub fn seat(
        &mut self,
        event_id: &str,
        seat_id: &str,
        status: SeatStatus,
        held_until: Option<OffsetDateTime>,
    ) {
        self.event(event_id)
            .seats
            .insert(seat_id.to_owned(), MapSeat::new(status, held_until));
    }

    /// [`Self::seat`] unless the seat is already named: a writer group's map starts from the
    /// engine's final state of the seats it changed, and a seat an expiry frees that a later
    /// command of the group takes again ends held, not free.
    pub fn seat_unless_named(
        &mut self,
        event_id: &str,
        seat_id: &str,
        status: SeatStatus,
        held_until: Option<OffsetDateTime>,
    ) {
        self.event(event_id)
            .seats
            .entry(seat_id.to_owned())
            .or_insert_with(|| MapSeat::new(status, held_until));
    }

    pub fn tier(&mut self, event_id: &str, tier_id: &str, available: i64) {
        self.event(event_id)
            .tiers
            .insert(tier_id.to_owned(), available);
    }

    fn event(&mut self, event_id: &str) -> &mut EventChanges {
        if !self.by_event.contains_key(event_id) {
            self.by_event
                .insert(event_id.to_owned(), EventChanges::default());
        }
        self.by_event.get_mut(event_id).expect("inserted above")
    }

    /// The changes of the events other than `event_id` whose ids sort before it (`before`)
    /// or after it: what a writer's group changed in other events (the old seats of an
    /// exchange out of them), recorded around its own event's row so that every transaction
    /// locks version rows in event-id order.
    pub fn elsewhere(&self, event_id: &str, before: bool) -> MapChanges {
        MapChanges {
            by_event: self
                .by_event
                .iter()
                .filter(|(id, _)| id.as_str() != event_id && (id.as_str() < event_id) == before)
                .map(|(id, changes)| (id.clone(), changes.clone()))
                .collect(),
        }
    }

    /// Events with changes, in event-id order (the order their version rows are locked).
    pub fn non_empty(&self) -> impl Iterator<Item = (&str, &EventChanges)> {
        self.by_event
            .iter()
            .filter(|(_, changes)| !changes.is_empty())
            .map(|(id, changes)| (id.as_str(), changes))
    }
}

/// One committed change row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBatch {
    pub version: u64,
    pub changes: EventChanges,
}

/// Every seat and tier of an event at one version, read in one consistent snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSnapshot {
    pub version: u64,
    /// Seat id and state, in no particular order.
    pub seats: Vec<(String, MapSeat)>,
    /// Tier id and available units.
    pub tiers: Vec<(String, i64)>,
}

/// Change rows read per query by [`violations`].
const CHECK_ROWS_PAGE: u32 = 5_000;

/// The seat map's invariant on one event, read through the store: the kept change rows up to
/// the snapshot's version are contiguous and end at it, and every seat or tier they mention
/// is, at that version, as its last mention says (a change that was not recorded, or recorded
/// wrong, shows here). Rows after the snapshot are not read, so it runs beside live traffic.
pub async fn violations(store: &dyn crate::Store, event_id: &str) -> StoreResult<Vec<String>> {
    let Some(snapshot) = store.seat_map(event_id).await? else {
        return Ok(vec![format!("event {event_id} has no seat-map version")]);
    };
    let mut out = Vec::new();
    let mut last_seat: BTreeMap<String, (u64, MapSeat)> = BTreeMap::new();
    let mut last_tier: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    let mut previous: Option<u64> = None;
    let mut after = 0;
    'pages: loop {
        let rows = store
            .seat_map_changes(event_id, after, CHECK_ROWS_PAGE)
            .await?;
        let full = rows.len() == CHECK_ROWS_PAGE as usize;
        for row in rows {
            if row.version > snapshot.version {
                break 'pages;
            }
            if let Some(previous) = previous
                && row.version != previous + 1
            {
                out.push(format!(
                    "seat-map change rows jump from version {previous} to {}",
                    row.version
                ));
            }
            previous = Some(row.version);
            after = row.version;
            for (seat_id, seat) in row.changes.seats {
                last_seat.insert(seat_id, (row.version, seat));
            }
            for (tier_id, available) in row.changes.tiers {
                last_tier.insert(tier_id, (row.version, available));
            }
        }
        if !full {
            break;
        }
    }
    if let Some(last) = previous
        && last != snapshot.version
    {
        out.push(format!(
            "the last seat-map change row is version {last}, the map is at {}",
            snapshot.version
        ));
    }
    if previous.is_none() && snapshot.version > 0 {
        // Everything was pruned: only the version itself can be checked (it exists).
        return Ok(out);
    }
    let seats: BTreeMap<&str, &MapSeat> = snapshot
        .seats
        .iter()
        .map(|(id, seat)| (id.as_str(), seat))
        .collect();
    for (seat_id, (version, recorded)) in &last_seat {
        match seats.get(seat_id.as_str()) {
            None => out.push(format!(
                "seat-map change v{version} names unknown seat {seat_id}"
            )),
            Some(actual) if *actual != recorded => out.push(format!(
                "seat {seat_id} is {:?} but its last seat-map change (v{version}) says {:?}",
                actual, recorded
            )),
            Some(_) => {}
        }
    }
    let tiers: BTreeMap<&str, i64> = snapshot
        .tiers
        .iter()
        .map(|(id, available)| (id.as_str(), *available))
        .collect();
    for (tier_id, (version, recorded)) in &last_tier {
        match tiers.get(tier_id.as_str()) {
            None => out.push(format!("seat-map change v{version} names unknown tier {tier_id}")),
            Some(actual) if actual != recorded => out.push(format!(
                "tier {tier_id} has {actual} available but its last seat-map change (v{version}) says {recorded}"
            )),
            Some(_) => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_round_trip_through_their_stored_form() {
        let mut all = MapChanges::default();
        let until = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        all.seat("e1", "A-1-1", SeatStatus::Held, Some(until));
        all.seat("e1", "A-1-2", SeatStatus::Sold, Some(until));
        all.seat("e1", "A-1-1", SeatStatus::Available, None);
        all.tier("e1", "FLOOR", 41);
        all.by_event.insert("e2".into(), EventChanges::default());
        let events: Vec<_> = all.non_empty().collect();
        assert_eq!(events.len(), 1);
        let (event_id, changes) = events[0];
        assert_eq!(event_id, "e1");
        assert_eq!(
            changes.seats["A-1-1"],
            MapSeat {
                status: SeatStatus::Available,
                held_until_ms: None
            }
        );
        // A sold seat carries no deadline.
        assert_eq!(changes.seats["A-1-2"].held_until_ms, None);
        let decoded = EventChanges::decode(&changes.encode()).unwrap();
        assert_eq!(&decoded, changes);
        assert!(EventChanges::decode("{\"s\":[[\"A\",\"LOST\",null]]}").is_err());
    }
}
