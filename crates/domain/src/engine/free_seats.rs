//! The engine's free seats by section and price, kept current with every seat the engine
//! takes or frees: what the waiting list asks ("are there `n` free seats in this section
//! under this cap, and which come first?") costs the classes it looks at and the seats it
//! returns, never a walk over every seat of the event.
//!
//! Best available keeps its own index of free seats per row (`decide::RowIndex`): it needs
//! adjacency, this one needs counts. The engine updates both in the same places and checks
//! both against its seats in `invariants`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::decide::BatchState;
use crate::event::SaleRules;
use crate::hold::seat_is_free;
use crate::ids::SeatRef;

/// Where a seat sits: its section's place in the event's order, its price, row and number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    rank: usize,
    price_minor: i64,
    row: u32,
    number: u32,
}

/// Free seats per (section rank, price), each class in (row, number) order: best rows first.
#[derive(Debug, Clone, Default)]
pub(crate) struct FreeSeats {
    /// The event's sections, in the event's order (a seat's rank is its place here).
    sections: Vec<String>,
    by_class: BTreeMap<(usize, i64), BTreeSet<(u32, u32)>>,
    /// Every seat of the event's sections (seats of no listed section are not indexed).
    places: HashMap<String, Place>,
}

impl FreeSeats {
    pub(crate) fn build(rules: &SaleRules, state: &BatchState) -> Self {
        let ranks: HashMap<&str, usize> = rules
            .section_order
            .iter()
            .enumerate()
            .map(|(rank, section)| (section.as_str(), rank))
            .collect();
        let mut index = Self {
            sections: rules.section_order.clone(),
            ..Self::default()
        };
        for (seat_id, seat) in &state.seats {
            // Wheelchair spaces and companion seats are not offered to the waiting list (as
            // best available never seats a party in them): a fan who needs them names them.
            if rules.accessibility.is_accessible(seat_id) {
                continue;
            }
            let Ok(parsed) = SeatRef::parse(seat_id) else {
                continue;
            };
            let Some(&rank) = ranks.get(parsed.section.as_str()) else {
                continue;
            };
            let place = Place {
                rank,
                price_minor: seat.price_minor,
                row: parsed.row,
                number: parsed.number,
            };
            index.places.insert(seat_id.clone(), place);
            let class = index.by_class.entry((rank, seat.price_minor)).or_default();
            if seat_is_free(seat.status, seat.hold_expires_at, state.now) {
                class.insert((place.row, place.number));
            }
        }
        index
    }

    /// Records whether one seat is free (a seat outside the event's sections is ignored).
    pub(crate) fn set_free(&mut self, seat_id: &str, is_free: bool) {
        // The planted-fault build sees every seat free (as `RowIndex` and `seat_is_free` do).
        let is_free = is_free || cfg!(feature = "planted-fault-skip-hold-condition");
        let Some(place) = self.places.get(seat_id) else {
            return;
        };
        let class = self
            .by_class
            .entry((place.rank, place.price_minor))
            .or_default();
        if is_free {
            class.insert((place.row, place.number));
        } else {
            class.remove(&(place.row, place.number));
        }
    }

    /// Whether the index says the seat is free (`None`: not indexed).
    pub(crate) fn is_free(&self, seat_id: &str) -> Option<bool> {
        let place = self.places.get(seat_id)?;
        Some(
            self.by_class
                .get(&(place.rank, place.price_minor))
                .is_some_and(|class| class.contains(&(place.row, place.number))),
        )
    }

    /// The rank of a section of the event.
    pub(crate) fn rank_of(&self, section: &str) -> Option<usize> {
        self.sections.iter().position(|s| s == section)
    }

    /// The classes a request may take seats from: its section (or every one) at most its cap.
    fn allowed(
        &self,
        section: Option<usize>,
        max_price_minor: Option<i64>,
    ) -> impl Iterator<Item = (&(usize, i64), &BTreeSet<(u32, u32)>)> {
        self.by_class.iter().filter(move |((rank, price), _)| {
            section.is_none_or(|s| s == *rank) && max_price_minor.is_none_or(|cap| *price <= cap)
        })
    }

    /// Free seats in `section` (every section: `None`) at most `max_price_minor`.
    pub(crate) fn count(&self, section: Option<usize>, max_price_minor: Option<i64>) -> usize {
        self.allowed(section, max_price_minor)
            .map(|(_, free)| free.len())
            .sum()
    }

    /// The first `quantity` free seats in `section` (every section: `None`) at most
    /// `max_price_minor`: sections in the event's order, then rows, then seat numbers. `None`
    /// when there are fewer. Costs the classes and `quantity` seats per class, not the event.
    pub(crate) fn first(
        &self,
        section: Option<usize>,
        max_price_minor: Option<i64>,
        quantity: usize,
    ) -> Option<Vec<String>> {
        // Classes are ordered by rank, then price: within one section the cheapest seats are
        // not preferred over better rows, so each section's candidates are merged by place.
        let mut chosen: Vec<(usize, u32, u32)> = Vec::with_capacity(quantity);
        let mut section_seats: Vec<(usize, u32, u32)> = Vec::new();
        let mut current_rank = None;
        for (&(rank, _), free) in self.allowed(section, max_price_minor) {
            if current_rank != Some(rank) {
                section_seats.sort_unstable();
                chosen.extend(section_seats.drain(..).take(quantity - chosen.len()));
                if chosen.len() == quantity {
                    break;
                }
                current_rank = Some(rank);
            }
            let wanted = quantity - chosen.len();
            section_seats.extend(free.iter().take(wanted).map(|&(row, n)| (rank, row, n)));
        }
        section_seats.sort_unstable();
        chosen.extend(section_seats.drain(..).take(quantity - chosen.len()));
        (chosen.len() == quantity).then(|| {
            chosen
                .into_iter()
                .map(|(rank, row, number)| format!("{}-{row}-{number}", self.sections[rank]))
                .collect()
        })
    }

    /// The event's seat prices, lowest first.
    pub(crate) fn prices(&self) -> BTreeSet<i64> {
        self.by_class.keys().map(|(_, price)| *price).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use time::macros::datetime;

    use super::*;
    use crate::decide::SeatRow;
    use crate::hold::SeatStatus;

    /// Sections A (rows 1-2: row 1 at 3000, row 2 at 1000) and B (1000), three seats a row,
    /// `taken` seats held.
    fn index(taken: &[&str]) -> FreeSeats {
        let now = datetime!(2026-12-01 10:00 UTC);
        let mut seats = BTreeMap::new();
        for (section, row, price_minor) in [("A", 1, 3000), ("A", 2, 1000), ("B", 1, 1000)] {
            for number in 1..=3 {
                let seat_id = format!("{section}-{row}-{number}");
                let held = taken.contains(&seat_id.as_str());
                seats.insert(
                    seat_id.clone(),
                    SeatRow {
                        seat_id,
                        status: if held {
                            SeatStatus::Held
                        } else {
                            SeatStatus::Available
                        },
                        hold_id: held.then(|| "h".to_owned()),
                        hold_expires_at: held.then_some(now + time::Duration::hours(1)),
                        price_minor,
                    },
                );
            }
        }
        let rules = SaleRules {
            on_sale_at: now,
            section_order: vec!["A".into(), "B".into()],
            hold_ttl_s: 300,
            max_seats_per_hold: 6,
            max_tickets_per_account: 6,
            currency: "EUR".into(),
            prices: Default::default(),
            accessibility: Default::default(),
        };
        let state = BatchState {
            now,
            seats,
            tiers: BTreeMap::new(),
            usage_by_account: BTreeMap::new(),
            prior_digests: BTreeMap::new(),
        };
        FreeSeats::build(&rules, &state)
    }

    #[test]
    fn counts_and_first_seats_keep_to_section_and_cap_best_rows_first() {
        let mut free = index(&["A-1-2"]);
        assert_eq!(free.count(None, None), 8);
        assert_eq!(free.count(Some(0), None), 5);
        assert_eq!(free.count(None, Some(1000)), 6);
        assert_eq!(free.count(Some(0), Some(999)), 0);
        // Row 1 before row 2 within a section, whatever their prices; A before B.
        assert_eq!(
            free.first(None, None, 4),
            Some(vec![
                "A-1-1".into(),
                "A-1-3".into(),
                "A-2-1".into(),
                "A-2-2".into()
            ])
        );
        // Under the cap only row 2 of A, then B.
        assert_eq!(
            free.first(None, Some(1000), 4),
            Some(vec![
                "A-2-1".into(),
                "A-2-2".into(),
                "A-2-3".into(),
                "B-1-1".into()
            ])
        );
        assert_eq!(free.first(Some(1), None, 4), None, "B has three");
        // Taking and freeing follow.
        free.set_free("A-1-1", false);
        free.set_free("A-1-2", true);
        assert_eq!(free.is_free("A-1-1"), Some(false));
        assert_eq!(free.is_free("A-1-2"), Some(true));
        assert_eq!(free.is_free("C-1-1"), None);
        assert_eq!(
            free.first(Some(0), None, 2),
            Some(vec!["A-1-2".into(), "A-1-3".into()])
        );
        assert_eq!(free.prices(), [1000, 3000].into());
    }
}
