//! The seat map as fans see it: a versioned snapshot of every seat's status and a bounded log
//! of the committed changes since, so a client holding version `v` catches up with only the
//! changes after `v` (or learns that `v` is too old and refetches the snapshot).
//!
//! The read model is advanced only by committed changes, in commit order: each
//! [`ChangeBatch`] is one committed transaction's seat changes with the next version number.
//! A gap (a batch whose version is not the next one) is refused, so the caller rebuilds from
//! the store rather than silently missing a change. The map is never consulted to grant a
//! hold; a hold past its deadline shows as available ([`SeatMap::status_at`]) even before the
//! sweeper has written it.
//!
//! Pure core only: the stores write the change rows (`boxoffice_store::seatmap`), the server
//! feeds them to this map and serves it (`boxoffice_server::runtime::seatmap`).

use std::collections::VecDeque;

/// A seat's status on the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapStatus {
    Available,
    /// Held until this time (unix ms); after it the seat shows as available.
    Held {
        until_ms: i64,
    },
    Sold,
}

/// One seat's new status; `seat` indexes the event's seats in layout order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatChange {
    pub seat: u32,
    pub status: MapStatus,
}

/// A tier's new count of available units; `tier` indexes the event's tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierChange {
    pub tier: u32,
    pub available: i64,
}

/// The seat and tier changes of one committed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeBatch {
    pub version: u64,
    pub changes: Vec<SeatChange>,
    pub tiers: Vec<TierChange>,
}

/// Why a batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    #[error("change feed gap: the map is at version {at}, the batch is version {got}")]
    Gap { at: u64, got: u64 },
    #[error("seat index {0} is outside the map")]
    UnknownSeat(u32),
    #[error("tier index {0} is outside the map")]
    UnknownTier(u32),
}

/// Why changes since a version cannot be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SinceError {
    /// The log no longer reaches back to that version: refetch the snapshot.
    #[error("version {asked} is older than the oldest kept change ({oldest_kept})")]
    TooOld { asked: u64, oldest_kept: u64 },
    /// A version the map has not reached (a client from the future, or another map).
    #[error("version {asked} is newer than the map ({at})")]
    Ahead { asked: u64, at: u64 },
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct SeatMap {
    version: u64,
    status: Vec<MapStatus>,
    tiers: Vec<i64>,
    log: VecDeque<ChangeBatch>,
    /// Most seat changes kept in the log; older batches are dropped first.
    log_changes_max: usize,
    log_changes: usize,
    /// Seats whose status is `Sold`.
    sold: usize,
}

impl SeatMap {
    /// A map at `version` with these seat statuses and tier counts, keeping up to
    /// `log_changes_max` changes in its log.
    pub fn new(
        status: Vec<MapStatus>,
        tiers: Vec<i64>,
        version: u64,
        log_changes_max: usize,
    ) -> Self {
        let sold = status.iter().filter(|s| **s == MapStatus::Sold).count();
        Self {
            version,
            status,
            tiers,
            log: VecDeque::new(),
            log_changes_max,
            log_changes: 0,
            sold,
        }
    }

    /// Whether every seat is sold (an event without seats is never sold out).
    pub fn sold_out(&self) -> bool {
        !self.status.is_empty() && self.sold == self.status.len()
    }

    /// Whether nothing is free: every seat sold and no tier unit available. Held seats and
    /// units are not free, but they may come back; tier units held are not on the map.
    pub fn nothing_free(&self) -> bool {
        self.sold == self.status.len() && self.tiers.iter().all(|available| *available <= 0)
    }

    /// Whether `seat` is sold on the map.
    pub fn is_sold(&self, seat: usize) -> bool {
        self.status.get(seat) == Some(&MapStatus::Sold)
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn len(&self) -> usize {
        self.status.len()
    }

    pub fn is_empty(&self) -> bool {
        self.status.is_empty()
    }

    /// The stored status of every seat (holds past their deadline included as held).
    pub fn statuses(&self) -> &[MapStatus] {
        &self.status
    }

    /// Available units of every tier.
    pub fn tiers(&self) -> &[i64] {
        &self.tiers
    }

    /// Fills the log with the batches that led to the current version (after a restart, so
    /// clients that were a little behind still catch up). Refused unless they are contiguous
    /// and end at the current version; keeps the newest that fit.
    pub fn seed_log(&mut self, batches: Vec<ChangeBatch>) -> bool {
        let contiguous = batches
            .windows(2)
            .all(|pair| pair[1].version == pair[0].version + 1);
        let ends_here = batches.last().is_none_or(|b| b.version == self.version);
        if !self.log.is_empty() || !contiguous || !ends_here {
            return false;
        }
        for batch in batches.into_iter().rev() {
            let size = batch_size(&batch);
            if self.log_changes + size > self.log_changes_max && !self.log.is_empty() {
                break;
            }
            self.log_changes += size;
            self.log.push_front(batch);
        }
        true
    }

    /// What a fan sees for `seat` at `now_ms`: a hold past its deadline is available.
    pub fn status_at(&self, seat: usize, now_ms: i64) -> Option<MapStatus> {
        self.status.get(seat).map(|status| match *status {
            MapStatus::Held { until_ms } if until_ms <= now_ms => MapStatus::Available,
            other => other,
        })
    }

    /// Seats and tier units free at `now_ms` (a hold past its deadline frees its seats) and
    /// seats held by a hold not past it: what is left to sell, for the waiting room's release.
    /// Tier units held are not on the map.
    pub fn left_at(&self, now_ms: i64) -> (u64, u64) {
        let mut free = 0u64;
        let mut held = 0u64;
        for status in &self.status {
            match *status {
                MapStatus::Available => free += 1,
                MapStatus::Held { until_ms } if until_ms <= now_ms => free += 1,
                MapStatus::Held { .. } => held += 1,
                MapStatus::Sold => {}
            }
        }
        let units: i64 = self.tiers.iter().map(|available| (*available).max(0)).sum();
        (free + u64::try_from(units).unwrap_or(0), held)
    }

    /// The most seats side by side free at `now_ms` in the rows `rows` (each a range of seat
    /// indexes, a row's seats in number order): the largest block a fan sees left.
    pub fn largest_block(
        &self,
        rows: impl IntoIterator<Item = std::ops::Range<usize>>,
        now_ms: i64,
    ) -> u32 {
        largest_block(&self.status, rows, now_ms)
    }

    /// Applies the next committed batch; refuses a gap or an unknown seat (all or nothing).
    pub fn apply(&mut self, batch: ChangeBatch) -> Result<(), ApplyError> {
        if batch.version != self.version + 1 {
            return Err(ApplyError::Gap {
                at: self.version,
                got: batch.version,
            });
        }
        if let Some(bad) = batch
            .changes
            .iter()
            .find(|change| change.seat as usize >= self.status.len())
        {
            return Err(ApplyError::UnknownSeat(bad.seat));
        }
        if let Some(bad) = batch
            .tiers
            .iter()
            .find(|change| change.tier as usize >= self.tiers.len())
        {
            return Err(ApplyError::UnknownTier(bad.tier));
        }
        for change in &batch.changes {
            let status = &mut self.status[change.seat as usize];
            match (*status == MapStatus::Sold, change.status == MapStatus::Sold) {
                (false, true) => self.sold += 1,
                (true, false) => self.sold -= 1,
                _ => {}
            }
            *status = change.status;
        }
        for change in &batch.tiers {
            self.tiers[change.tier as usize] = change.available;
        }
        self.version = batch.version;
        self.log_changes += batch_size(&batch);
        self.log.push_back(batch);
        while self.log_changes > self.log_changes_max && self.log.len() > 1 {
            if let Some(dropped) = self.log.pop_front() {
                self.log_changes -= batch_size(&dropped);
            }
        }
        Ok(())
    }

    /// The batches after `version`, oldest first.
    pub fn changes_since(&self, version: u64) -> Result<Vec<&ChangeBatch>, SinceError> {
        if version > self.version {
            return Err(SinceError::Ahead {
                asked: version,
                at: self.version,
            });
        }
        if version == self.version {
            return Ok(Vec::new());
        }
        // An empty log (a map loaded without its batches) keeps nothing before the next
        // version: only a client at the current version is caught up.
        let oldest_kept = self
            .log
            .front()
            .map_or(self.version.saturating_add(1), |b| b.version);
        if version + 1 < oldest_kept {
            return Err(SinceError::TooOld {
                asked: version,
                oldest_kept,
            });
        }
        Ok(self.log.iter().filter(|b| b.version > version).collect())
    }
}

/// What a batch costs in the log: its changes, at least one.
fn batch_size(batch: &ChangeBatch) -> usize {
    (batch.changes.len() + batch.tiers.len()).max(1)
}

/// [`SeatMap::largest_block`] over a copy of a map's statuses (a render works on one).
pub fn largest_block(
    statuses: &[MapStatus],
    rows: impl IntoIterator<Item = std::ops::Range<usize>>,
    now_ms: i64,
) -> u32 {
    let mut largest = 0u32;
    for row in rows {
        let mut run = 0u32;
        for status in statuses.get(row).unwrap_or_default() {
            let free = match *status {
                MapStatus::Available => true,
                MapStatus::Held { until_ms } => until_ms <= now_ms,
                MapStatus::Sold => false,
            };
            run = if free { run + 1 } else { 0 };
            largest = largest.max(run);
        }
    }
    largest
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn held(until_ms: i64) -> MapStatus {
        MapStatus::Held { until_ms }
    }

    #[test]
    fn the_largest_block_counts_free_seats_side_by_side_in_one_row() {
        // Two rows of four: row 1's seat 2 held until 1000, row 2's seat 3 sold.
        let mut statuses = vec![MapStatus::Available; 8];
        statuses[1] = held(1_000);
        statuses[6] = MapStatus::Sold;
        let map = SeatMap::new(statuses, Vec::new(), 1, 100);
        assert_eq!(map.largest_block([0..4, 4..8], 999), 2);
        assert_eq!(map.largest_block(std::iter::once(4..8), 999), 2);
        // The hold runs out: row 1 is whole again.
        assert_eq!(map.largest_block([0..4, 4..8], 1_000), 4);
        assert_eq!(map.largest_block(std::iter::empty(), 0), 0);
    }

    #[test]
    fn an_expired_hold_shows_available_and_gaps_are_refused() {
        let mut map = SeatMap::new(vec![MapStatus::Available; 3], vec![7], 10, 100);
        map.apply(ChangeBatch {
            version: 11,
            changes: vec![SeatChange {
                seat: 1,
                status: held(1_000),
            }],
            tiers: vec![TierChange {
                tier: 0,
                available: 5,
            }],
        })
        .unwrap();
        assert_eq!(map.tiers(), &[5]);
        assert_eq!(map.status_at(1, 999), Some(held(1_000)));
        assert_eq!(map.status_at(1, 1_000), Some(MapStatus::Available));
        assert_eq!(
            map.apply(ChangeBatch {
                version: 13,
                changes: vec![],
                tiers: vec![],
            }),
            Err(ApplyError::Gap { at: 11, got: 13 })
        );
        assert_eq!(
            map.apply(ChangeBatch {
                version: 12,
                changes: vec![
                    SeatChange {
                        seat: 0,
                        status: MapStatus::Sold
                    },
                    SeatChange {
                        seat: 3,
                        status: MapStatus::Sold
                    },
                ],
                tiers: vec![],
            }),
            Err(ApplyError::UnknownSeat(3))
        );
        assert_eq!(
            map.apply(ChangeBatch {
                version: 12,
                changes: vec![],
                tiers: vec![TierChange {
                    tier: 1,
                    available: 0
                }],
            }),
            Err(ApplyError::UnknownTier(1))
        );
        assert_eq!(map.statuses()[0], MapStatus::Available, "all or nothing");
        assert_eq!(map.version(), 11);
        assert_eq!(
            map.changes_since(12),
            Err(SinceError::Ahead { asked: 12, at: 11 })
        );
    }

    #[test]
    fn sold_count_follows_every_change() {
        let sold = |seat: u32| SeatChange {
            seat,
            status: MapStatus::Sold,
        };
        let mut map = SeatMap::new(vec![MapStatus::Sold, held(5)], vec![], 1, 100);
        assert!(!map.sold_out());
        assert!(map.is_sold(0) && !map.is_sold(1) && !map.is_sold(7));
        map.apply(ChangeBatch {
            version: 2,
            changes: vec![sold(1), sold(1)],
            tiers: vec![],
        })
        .unwrap();
        assert!(map.sold_out(), "a seat sold twice in a batch counts once");
        map.apply(ChangeBatch {
            version: 3,
            changes: vec![SeatChange {
                seat: 0,
                status: MapStatus::Available,
            }],
            tiers: vec![],
        })
        .unwrap();
        assert!(!map.sold_out(), "a seat back on sale");
        assert!(!SeatMap::new(vec![], vec![0], 0, 1).sold_out());
    }

    #[test]
    fn a_seeded_log_serves_clients_from_before_a_restart() {
        let batch = |version: u64| ChangeBatch {
            version,
            changes: vec![SeatChange {
                seat: 0,
                status: MapStatus::Sold,
            }],
            tiers: vec![],
        };
        let mut map = SeatMap::new(vec![MapStatus::Sold; 1], vec![], 12, 2);
        assert!(!map.seed_log(vec![batch(10), batch(12)]), "gap");
        assert!(
            !map.seed_log(vec![batch(10), batch(11)]),
            "does not end here"
        );
        assert!(map.seed_log(vec![batch(9), batch(10), batch(11), batch(12)]));
        // Two changes fit: versions 11 and 12 are kept, so a client at 10 catches up.
        assert_eq!(map.changes_since(10).unwrap().len(), 2);
        assert!(matches!(
            map.changes_since(9),
            Err(SinceError::TooOld {
                oldest_kept: 11,
                ..
            })
        ));
    }

    /// Found by the `seatmap_since` fuzz target: a map with nothing in its log answered a
    /// client one version behind with no changes, so the client took itself for current and
    /// never saw the change it missed.
    #[test]
    fn a_map_without_a_log_sends_clients_behind_to_the_snapshot() {
        let map = SeatMap::new(vec![MapStatus::Available; 1], vec![], 1, 8);
        assert_eq!(
            map.changes_since(0),
            Err(SinceError::TooOld {
                asked: 0,
                oldest_kept: 2
            })
        );
        assert_eq!(map.changes_since(1), Ok(Vec::new()));
        assert_eq!(
            map.changes_since(2),
            Err(SinceError::Ahead { asked: 2, at: 1 })
        );
    }

    fn status_strategy() -> impl Strategy<Value = MapStatus> {
        prop_oneof![
            Just(MapStatus::Available),
            (0i64..100).prop_map(|until_ms| MapStatus::Held { until_ms }),
            Just(MapStatus::Sold),
        ]
    }

    proptest! {
        /// The largest block is the longest run of seats a fan sees available, row by row.
        #[test]
        fn the_largest_block_is_the_longest_available_run(
            statuses in proptest::collection::vec(status_strategy(), 0..40),
            per_row in 1usize..8,
            now_ms in 0i64..3_000,
        ) {
            let map = SeatMap::new(statuses.clone(), Vec::new(), 0, 10);
            let rows: Vec<std::ops::Range<usize>> = (0..statuses.len())
                .step_by(per_row)
                .map(|first| first..(first + per_row).min(statuses.len()))
                .collect();
            let expected = rows
                .iter()
                .map(|row| {
                    let free: Vec<bool> = row
                        .clone()
                        .map(|i| map.status_at(i, now_ms) == Some(MapStatus::Available))
                        .collect();
                    crate::best::longest_run(&free)
                })
                .max()
                .unwrap_or(0);
            prop_assert_eq!(map.largest_block(rows, now_ms), expected);
        }

        /// A client that took the snapshot at any version and replays the changes since
        /// equals the truth; a version the log no longer reaches is refused as too old.
        #[test]
        fn snapshot_plus_replayed_changes_equals_the_truth(
            batches in proptest::collection::vec(
                proptest::collection::vec((0u32..20, status_strategy()), 0..6), 1..60),
            log_changes_max in 1usize..40,
            client_at in 0usize..60,
        ) {
            let mut map = SeatMap::new(vec![MapStatus::Available; 20], vec![], 0, log_changes_max);
            let mut truth = vec![MapStatus::Available; 20];
            let mut snapshots = vec![(0u64, truth.clone())];
            for (i, changes) in batches.iter().enumerate() {
                let batch = ChangeBatch {
                    version: i as u64 + 1,
                    changes: changes.iter().map(|&(seat, status)| SeatChange { seat, status }).collect(),
                    tiers: vec![],
                };
                for change in &batch.changes {
                    truth[change.seat as usize] = change.status;
                }
                map.apply(batch).unwrap();
                snapshots.push((map.version(), map.statuses().to_vec()));
                prop_assert_eq!(map.statuses(), &truth[..]);
            }
            let (version, mut client) = snapshots[client_at.min(snapshots.len() - 1)].clone();
            match map.changes_since(version) {
                Ok(batches) => {
                    let mut expected_version = version;
                    for batch in batches {
                        prop_assert_eq!(batch.version, expected_version + 1);
                        expected_version = batch.version;
                        for change in &batch.changes {
                            client[change.seat as usize] = change.status;
                        }
                    }
                    prop_assert_eq!(expected_version, map.version());
                    prop_assert_eq!(client, truth);
                }
                Err(SinceError::TooOld { oldest_kept, .. }) => {
                    prop_assert!(version + 1 < oldest_kept);
                }
                Err(other) => prop_assert!(false, "{other}"),
            }
        }
    }
}
