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
