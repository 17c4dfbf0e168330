//! An event created on a venue chart (issue 41, part 2): the chart copied into the event with
//! the price of each of its categories, and what the event's inventory takes from it.
//!
//! The engine's seat model is unchanged: a chart's reserved section becomes an event
//! [`Section`] whose `rows` × `seats_per_row` is only its bounding box and whose
//! `row_lengths` say how many seats each row really has (rows differ in length); a seat's id
//! is `<section>-<row>-<number>` by places, never labels ([`VenueChart::seat_refs`], see
//! docs/VENUES.md), and its price is its category's. A standing area becomes a [`Tier`]
//! (capacity, its category's price). Labels, positions, categories and kinds are read from
//! the copy ([`EventChart::seat`]); the copy never changes and the event never reads the
//! stored chart again. Start at [`EventChart::new`].
//!
//! Ticket types (issue 40) stay keyed by place, a section name or a tier id: the sections and
//! tiers a chart produces are places like any other, so a type priced in `L01` sells there at
//! that one price whatever the seat's category. Only the standard ticket follows categories.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{PRICE_MINOR_MAX, Section, SpecError, Tier, spec_error};
use crate::ids::SeatRef;
use crate::venue::{ChartRow, ChartSeat, ChartSection, Point, SectionKind, VenueChart};

/// The chart an event was created on, as the event keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventChart {
    /// The stored chart it was copied from (for the record: the event reads only its copy).
    pub chart_id: String,
    pub chart: VenueChart,
    /// The standard ticket's face price per category key, in minor units.
    pub category_prices: BTreeMap<String, i64>,
    /// Until this instant (the store's clock) the chart's wheelchair spaces and companion
    /// seats are kept for holds that ask for accessible places (`crate::accessibility`);
    /// `None`: they sell to everyone from the start.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub accessible_release_at: Option<time::OffsetDateTime>,
}

// A validated chart's numbers are finite (no NaN), so its `==` is an equivalence.
impl Eq for EventChart {}

impl EventChart {
    /// The chart with its prices: every category the chart uses must be priced (a category
    /// no seat or area uses may be left out), no key may be unknown, each price 0 to
    /// [`PRICE_MINOR_MAX`]. `field` is the prices' path in the request (`chart.categoryPrices`).
    pub fn new(
        chart_id: String,
        chart: VenueChart,
        category_prices: BTreeMap<String, i64>,
        field: &str,
    ) -> Result<Self, SpecError> {
        for (key, price) in &category_prices {
            if !chart.categories.iter().any(|c| &c.key == key) {
                return Err(spec_error(
                    format!("{field}.{key}"),
                    format!("the chart has no category {key}"),
                ));
            }
            if !(0..=PRICE_MINOR_MAX).contains(price) {
                return Err(spec_error(
                    format!("{field}.{key}"),
                    format!("must be between 0 and {PRICE_MINOR_MAX}"),
                ));
            }
        }
        for category in &chart.categories {
            let used = chart.sections.iter().any(|s| {
                s.category.as_deref() == Some(category.key.as_str())
                    || s.rows
                        .iter()
                        .any(|r| r.seats.iter().any(|seat| seat.category == category.key))
            });
            if used && !category_prices.contains_key(&category.key) {
                return Err(spec_error(
                    format!("{field}.{}", category.key),
                    format!(
                        "category {} is used by the chart and has no price",
                        category.key
                    ),
                ));
            }
        }
        Ok(Self {
            chart_id,
            chart,
            category_prices,
            accessible_release_at: None,
        })
    }

    /// The price of a category (0 for one no seat uses and the request left out).
    pub fn price_of(&self, category: &str) -> i64 {
        self.category_prices.get(category).copied().unwrap_or(0)
    }

    /// The event's sections: one per reserved section of the chart, in the chart's order,
    /// `rows` its rows, `seats_per_row` its longest row, `row_lengths` each row's seats, and
    /// `price_minor` its cheapest seat's price (what "from" shows, and what a waiting-list
    /// price cap is compared with).
    pub fn sections(&self) -> Vec<Section> {
        self.chart
            .sections
            .iter()
            .filter(|s| s.kind == SectionKind::Reserved)
            .map(|s| {
                let row_lengths: Vec<u32> = s.rows.iter().map(|r| count(r.seats.len())).collect();
                Section {
                    name: s.name.clone(),
                    rows: count(s.rows.len()),
                    seats_per_row: row_lengths.iter().copied().max().unwrap_or(0),
                    price_minor: s
                        .rows
                        .iter()
                        .flat_map(|r| &r.seats)
                        .map(|seat| self.price_of(&seat.category))
                        .min()
                        .unwrap_or(0),
                    row_lengths,
                }
            })
            .collect()
    }

    /// The event's tiers: one per standing area, its name the area's title (or name).
    pub fn tiers(&self) -> Vec<Tier> {
        self.chart
            .sections
            .iter()
            .filter(|s| s.kind == SectionKind::Standing)
            .map(|s| Tier {
                tier_id: s.name.clone(),
                name: s.title.clone().unwrap_or_else(|| s.name.clone()),
                capacity: s.capacity.unwrap_or(0),
                price_minor: self.price_of(s.category.as_deref().unwrap_or_default()),
            })
            .collect()
    }

    /// The chart's section of that name.
    pub fn section(&self, name: &str) -> Option<&ChartSection> {
        self.chart.sections.iter().find(|s| s.name == name)
    }

    /// The seat an id names, by places: its row and the seat itself.
    pub fn seat(&self, seat: &SeatRef) -> Option<(&ChartRow, &ChartSeat)> {
        let section = self.section(&seat.section)?;
        let row = section.rows.get(seat.row.checked_sub(1)? as usize)?;
        let chart_seat = row.seats.get(seat.number.checked_sub(1)? as usize)?;
        Some((row, chart_seat))
    }

    /// The seat's face price (its category's).
    pub fn seat_price(&self, seat: &SeatRef) -> Option<i64> {
        self.seat(seat).map(|(_, s)| self.price_of(&s.category))
    }

    /// A standing area's outline: its corners, or its box's four corners clockwise from the
    /// top left.
    pub fn outline(section: &ChartSection) -> Vec<Point> {
        match section.area {
            Some(b) => vec![
                Point { x: b.x, y: b.y },
                Point {
                    x: b.x + b.width,
                    y: b.y,
                },
                Point {
                    x: b.x + b.width,
                    y: b.y + b.height,
                },
                Point {
                    x: b.x,
                    y: b.y + b.height,
                },
            ],
            None => section.outline.clone(),
        }
    }
}

/// A chart's count (at most 1,000 by its validation) as the event's `u32`.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::venue::demo_stadium;

    fn hall() -> VenueChart {
        serde_json::from_value(crate::venue::tests::hall_json()).expect("the hall parses")
    }

    fn prices(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn a_hall_becomes_sections_and_tiers() {
        let chart = EventChart::new(
            "c1".into(),
            hall(),
            prices(&[("A", 5000), ("B", 3000), ("STAND", 2000)]),
            "chart.categoryPrices",
        )
        .unwrap();
        let sections = chart.sections();
        assert_eq!(sections.len(), 1);
        let stalls = &sections[0];
        assert_eq!(stalls.name, "STALLS");
        assert_eq!((stalls.rows, stalls.seats_per_row), (2, 6));
        assert_eq!(stalls.row_lengths, [6, 3]);
        assert_eq!(stalls.price_minor, 3000, "the cheapest seat");
        assert_eq!(stalls.seat_count(), 9);
        let short_row_end = SeatRef::parse("STALLS-2-3").unwrap();
        let beyond = SeatRef::parse("STALLS-2-4").unwrap();
        assert!(stalls.contains(&short_row_end));
        assert!(!stalls.contains(&beyond), "a place beyond a short row");
        let tiers = chart.tiers();
        assert_eq!(tiers.len(), 1);
        assert_eq!(
            (tiers[0].tier_id.as_str(), tiers[0].capacity),
            ("BACK", 120)
        );
        assert_eq!(tiers[0].price_minor, 2000);
        let a5 = SeatRef::parse("STALLS-1-4").unwrap();
        let (row, seat) = chart.seat(&a5).unwrap();
        assert_eq!((row.label.as_str(), seat.label.as_str()), ("A", "5"));
        assert_eq!(chart.seat_price(&a5), Some(5000));
        assert_eq!(chart.seat(&beyond), None);
    }

    #[test]
    fn every_used_category_is_priced() {
        let err = EventChart::new(
            "c1".into(),
            hall(),
            prices(&[("A", 5000), ("STAND", 2000)]),
            "chart.categoryPrices",
        )
        .unwrap_err();
        assert_eq!(err.field, "chart.categoryPrices.B");
        let err = EventChart::new(
            "c1".into(),
            hall(),
            prices(&[("A", 1), ("B", 1), ("STAND", 1), ("VIP", 1)]),
            "chart.categoryPrices",
        )
        .unwrap_err();
        assert_eq!(err.field, "chart.categoryPrices.VIP");
        let err = EventChart::new(
            "c1".into(),
            hall(),
            prices(&[("A", -1), ("B", 1), ("STAND", 1)]),
            "chart.categoryPrices",
        )
        .unwrap_err();
        assert_eq!(err.field, "chart.categoryPrices.A");
    }

    #[test]
    fn the_demo_stadium_is_an_event_of_50000_seats() {
        let chart = EventChart::new(
            "stadium".into(),
            demo_stadium(),
            prices(&[
                ("CAT1", 9000),
                ("CAT2", 7000),
                ("CAT3", 5000),
                ("FLOOR", 6000),
            ]),
            "chart.categoryPrices",
        )
        .unwrap();
        let seats: u64 = chart.sections().iter().map(Section::seat_count).sum();
        assert_eq!(seats, crate::venue::STADIUM_SEATS as u64);
        let floor = &chart.tiers()[0];
        assert_eq!(floor.capacity, crate::venue::STADIUM_STANDING_CAPACITY);
        let area = chart.section("FLOOR").unwrap();
        assert_eq!(EventChart::outline(area).len(), 4);
    }
}
