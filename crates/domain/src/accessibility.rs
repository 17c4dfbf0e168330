//! Accessibility in the engine (issue 41, item 3): which seats of an event on a chart are
//! wheelchair spaces and companion seats, the companion rule, and the time until which those
//! seats are kept for fans who ask for accessible places.
//!
//! - **The companion rule.** A hold that names a `companion` seat must name a `wheelchair`
//!   space of the same section in the same hold (409 `COMPANION_SEAT_ALONE`). The chart does
//!   not pair spaces and companion seats one to one, so "of the same section" is the pairing;
//!   a space the account holds in another hold does not count (one hold, one decision).
//! - **Kept until a time.** An event created on a chart with `accessibleReleaseAt` keeps its
//!   wheelchair spaces and companion seats, until that instant by the store's clock, for holds
//!   that say `accessible: true`; any other hold naming one is refused (409
//!   `SEAT_KEPT_ACCESSIBLE`). From that instant they sell to everyone.
//! - **Best available** never seats a party in a wheelchair space or a companion seat (its
//!   `accessible: n` is not built): its row index counts them as taken.
//!
//! An event without a chart has none of these seats, and nothing here changes its decisions.

use std::collections::BTreeMap;
use std::sync::Arc;

use time::OffsetDateTime;

use crate::event_chart::EventChart;
use crate::ids::SeatRef;
use crate::venue::SeatKind;

/// What a seat is for the accessibility rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    Wheelchair,
    Companion,
}

/// An event's wheelchair spaces and companion seats, by seat id, and the time they are kept
/// until. The default (an event without a chart) has none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accessibility {
    kinds: Arc<BTreeMap<String, AccessKind>>,
    /// Until this instant (the store's clock) only holds with `accessible: true` take them.
    pub release_at: Option<OffsetDateTime>,
}

impl Accessibility {
    /// The accessible seats of an event's chart, and its `accessibleReleaseAt`.
    pub fn of(chart: &EventChart) -> Self {
        let kinds = chart
            .chart
            .seat_refs()
            .filter_map(|(seat, _, s)| {
                let kind = match s.kind {
                    SeatKind::Wheelchair => AccessKind::Wheelchair,
                    SeatKind::Companion => AccessKind::Companion,
                    SeatKind::Standard | SeatKind::RestrictedView | SeatKind::Aisle => {
                        return None;
                    }
                };
                Some((seat.to_string(), kind))
            })
            .collect();
        Self {
            kinds: Arc::new(kinds),
            release_at: chart.accessible_release_at,
        }
    }

    /// Built from seat ids and kinds directly (tests, simulations).
    pub fn from_kinds(
        kinds: impl IntoIterator<Item = (String, AccessKind)>,
        release_at: Option<OffsetDateTime>,
    ) -> Self {
        Self {
            kinds: Arc::new(kinds.into_iter().collect()),
            release_at,
        }
    }

    /// Whether the event has any accessible seat (an event without a chart has none).
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    pub fn kind(&self, seat_id: &str) -> Option<AccessKind> {
        self.kinds.get(seat_id).copied()
    }

    /// Whether the seat is a wheelchair space or a companion seat.
    pub fn is_accessible(&self, seat_id: &str) -> bool {
        self.kinds.contains_key(seat_id)
    }

    /// The first companion seat of `seat_ids` with no wheelchair space of its section among
    /// `seat_ids`, if any: what the companion rule refuses.
    pub fn companion_alone<'a>(&self, seat_ids: &'a [String]) -> Option<&'a String> {
        if self.kinds.is_empty() {
            return None;
        }
        let section = |id: &str| SeatRef::parse(id).ok().map(|seat| seat.section);
        seat_ids.iter().find(|id| {
            self.kind(id) == Some(AccessKind::Companion)
                && !seat_ids.iter().any(|other| {
                    self.kind(other) == Some(AccessKind::Wheelchair)
                        && section(other) == section(id)
                })
        })
    }

    /// Whether accessible seats are still kept at `now` (the store's clock).
    pub fn kept_at(&self, now: OffsetDateTime) -> bool {
        self.release_at.is_some_and(|release_at| now < release_at)
    }

    /// The accessible seats of `seat_ids` that a hold not asking for accessible places may not
    /// take at `now`: all of them before the release time, none after.
    pub fn kept_seats(&self, seat_ids: &[String], now: OffsetDateTime) -> Vec<String> {
        if !self.kept_at(now) {
            return Vec::new();
        }
        seat_ids
            .iter()
            .filter(|id| self.is_accessible(id))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn hall() -> Accessibility {
        Accessibility::from_kinds(
            [
                ("S-2-1".to_owned(), AccessKind::Wheelchair),
                ("S-2-2".to_owned(), AccessKind::Companion),
                ("T-1-2".to_owned(), AccessKind::Companion),
            ],
            Some(OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1)),
        )
    }

    #[test]
    fn a_companion_seat_needs_a_space_of_its_section_in_the_hold() {
        let a = hall();
        assert_eq!(
            a.companion_alone(&ids(&["S-2-2"])).map(String::as_str),
            Some("S-2-2")
        );
        assert_eq!(a.companion_alone(&ids(&["S-2-2", "S-2-1"])), None);
        assert_eq!(a.companion_alone(&ids(&["S-2-1"])), None, "a space alone");
        assert_eq!(
            a.companion_alone(&ids(&["T-1-2", "S-2-1"]))
                .map(String::as_str),
            Some("T-1-2"),
            "a space of another section does not pair"
        );
        assert_eq!(a.companion_alone(&ids(&["S-1-1", "S-1-2"])), None);
        let none = Accessibility::default();
        assert_eq!(none.companion_alone(&ids(&["S-2-2"])), None);
    }

    #[test]
    fn accessible_seats_are_kept_until_the_release_time() {
        let a = hall();
        let before = OffsetDateTime::UNIX_EPOCH;
        let at = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        assert_eq!(
            a.kept_seats(&ids(&["S-1-1", "S-2-1", "S-2-2"]), before),
            ids(&["S-2-1", "S-2-2"])
        );
        assert!(a.kept_seats(&ids(&["S-2-1"]), at).is_empty(), "released at");
        let never = Accessibility::from_kinds([("S-2-1".to_owned(), AccessKind::Wheelchair)], None);
        assert!(never.kept_seats(&ids(&["S-2-1"]), before).is_empty());
    }
}
