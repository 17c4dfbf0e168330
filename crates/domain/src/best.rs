//! Best available: which `n` adjacent seats of one row to offer when a fan asks for "the
//! best n seats" instead of naming them.
//!
//! The rules (API.md, Holds): `n` adjacent seats in one row; best rows first; never leave a
//! single empty seat stranded — between taken seats or at a row end — when another choice
//! exists anywhere in the candidate rows. The caller gives the candidate rows best first
//! (sections in the event's order, then row 1 before row 2: closest to the stage first) with
//! which seats are free right now; [`choose`] is pure, so the store can call it inside the
//! hold transaction on the rows it has locked, and the decision is all or nothing there.
//!
//! Within a row, the placement whose middle is nearest the row's middle wins (the centre of
//! a row sees best); ties go to the lower seat number.
//!
//! The hold decision (`decide::decide_holds`) calls [`choose`] for a `bestAvailable`
//! request on the rows of the candidate sections, which the store locks whole (every seat of
//! the named section, or of every section when none is named) in the batch's transaction.

/// The free seats of one row, as the caller locked them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSeats {
    pub section: String,
    /// 1-based.
    pub row: u32,
    pub price_minor: i64,
    /// `free[i]` is seat number `i + 1`.
    pub free: Vec<bool>,
}

/// What the fan asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BestRequest {
    pub quantity: u32,
    pub section: Option<String>,
    pub max_price_minor: Option<i64>,
}

/// The chosen seats: `quantity` seats from `first_seat` in one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub section: String,
    pub row: u32,
    /// 1-based number of the first seat.
    pub first_seat: u32,
    pub quantity: u32,
    /// Whether the choice leaves a single seat stranded (only when no other choice exists).
    pub strands_a_seat: bool,
}

impl Choice {
    /// Seat ids in the API's `"<section>-<row>-<number>"` form.
    pub fn seat_ids(&self) -> Vec<String> {
        (self.first_seat..self.first_seat + self.quantity)
            .map(|number| format!("{}-{}-{number}", self.section, self.row))
            .collect()
    }
}

/// A placement of `n` seats at 0-based `start` in a row, and whether it strands a seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Placement {
    start: usize,
    strands: bool,
}

/// Every placement of `n` adjacent free seats in `free`, with its stranding flag.
fn placements(free: &[bool], n: usize) -> Vec<Placement> {
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    let mut i = 0;
    while i < free.len() {
        if !free[i] {
            i += 1;
            continue;
        }
        // A maximal run of free seats [a, b).
        let a = i;
        while i < free.len() && free[i] {
            i += 1;
        }
        let b = i;
        if b - a < n {
            continue;
        }
        for start in a..=b - n {
            let left = start - a;
            let right = b - (start + n);
            out.push(Placement {
                start,
                strands: left == 1 || right == 1,
            });
        }
    }
    out
}

/// The placement nearest the middle of a row of `len` seats (ties: lower seat number).
fn most_central(
    candidates: impl Iterator<Item = Placement>,
    n: usize,
    len: usize,
) -> Option<Placement> {
    // Compare doubled distances to stay in integers: the middle of the row is len / 2, the
    // middle of a placement start + n / 2.
    candidates.min_by_key(|p| ((2 * p.start + n) as i64 - len as i64).unsigned_abs())
}

/// Chooses the seats for `request` from `rows` (best first). `None`: no row of the allowed
/// sections and prices has `quantity` adjacent free seats.
pub fn choose(rows: &[RowSeats], request: &BestRequest) -> Option<Choice> {
    let n = usize::try_from(request.quantity).ok()?;
    if n == 0 {
        return None;
    }
    let allowed = rows.iter().filter(|row| {
        request
            .section
            .as_ref()
            .is_none_or(|section| *section == row.section)
            && request
                .max_price_minor
                .is_none_or(|max| row.price_minor <= max)
    });
    let mut fallback: Option<(&RowSeats, Placement)> = None;
    for row in allowed {
        let all = placements(&row.free, n);
        if let Some(clean) = most_central(
            all.iter().copied().filter(|p| !p.strands),
            n,
            row.free.len(),
        ) {
            return Some(choice(row, clean, request.quantity));
        }
        if fallback.is_none()
            && let Some(any) = most_central(all.into_iter(), n, row.free.len())
        {
            fallback = Some((row, any));
        }
    }
    fallback.map(|(row, placement)| choice(row, placement, request.quantity))
}

fn choice(row: &RowSeats, placement: Placement, quantity: u32) -> Choice {
    Choice {
        section: row.section.clone(),
        row: row.row,
        first_seat: u32::try_from(placement.start).unwrap_or(u32::MAX) + 1,
        quantity,
        strands_a_seat: placement.strands,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn row(section: &str, row: u32, price_minor: i64, pattern: &str) -> RowSeats {
        RowSeats {
            section: section.into(),
            row,
            price_minor,
            free: pattern.chars().map(|c| c == '.').collect(),
        }
    }

    fn ask(quantity: u32) -> BestRequest {
        BestRequest {
            quantity,
            section: None,
            max_price_minor: None,
        }
    }

    #[test]
    fn takes_the_centre_of_the_best_row() {
        let rows = [
            row("A", 1, 100, ".........."),
            row("A", 2, 100, ".........."),
        ];
        let chosen = choose(&rows, &ask(4)).unwrap();
        assert_eq!(chosen.seat_ids(), ["A-1-4", "A-1-5", "A-1-6", "A-1-7"]);
        assert!(!chosen.strands_a_seat);
    }

    #[test]
    fn never_strands_a_seat_when_another_choice_exists() {
        // Row 1: a free run of 3 between taken seats: taking 2 would strand one.
        // Row 2 has room for 2 without stranding, so row 2 wins although it is worse.
        let rows = [row("A", 1, 100, "x...x"), row("A", 2, 100, "x..xx")];
        let chosen = choose(&rows, &ask(2)).unwrap();
        assert_eq!(chosen.seat_ids(), ["A-2-2", "A-2-3"]);
        // At a row end too: "..x" — taking seat 2 alone strands seat 1.
        let rows = [row("A", 1, 100, "..x.")];
        assert_eq!(choose(&rows, &ask(1)).unwrap().seat_ids(), ["A-1-4"]);
    }

    #[test]
    fn strands_only_when_nothing_else_fits() {
        let rows = [row("A", 1, 100, "x...x")];
        let chosen = choose(&rows, &ask(2)).unwrap();
        assert!(chosen.strands_a_seat);
        assert_eq!(chosen.quantity, 2);
    }

    #[test]
    fn honours_section_and_price_and_says_none_when_nothing_fits() {
        let rows = [row("A", 1, 9_900, "......"), row("B", 1, 4_900, "......")];
        let cheap = BestRequest {
            quantity: 2,
            section: None,
            max_price_minor: Some(5_000),
        };
        assert_eq!(choose(&rows, &cheap).unwrap().section, "B");
        let in_a = BestRequest {
            quantity: 2,
            section: Some("A".into()),
            max_price_minor: None,
        };
        assert_eq!(choose(&rows, &in_a).unwrap().section, "A");
        assert_eq!(choose(&rows, &ask(7)), None);
        assert_eq!(choose(&[row("A", 1, 1, "x.x.x.")], &ask(2)), None);
        assert_eq!(choose(&rows, &ask(0)), None);
    }

    fn rows_strategy() -> impl Strategy<Value = Vec<RowSeats>> {
        proptest::collection::vec(
            proptest::collection::vec(proptest::bool::weighted(0.6), 1..16),
            1..6,
        )
        .prop_map(|rows| {
            rows.into_iter()
                .enumerate()
                .map(|(i, free)| RowSeats {
                    section: "A".into(),
                    row: i as u32 + 1,
                    price_minor: 100,
                    free,
                })
                .collect()
        })
    }

    /// Brute force: every n-seat window of every row, free or not, stranding or not.
    fn windows(rows: &[RowSeats], n: usize) -> Vec<(usize, usize, bool)> {
        let mut out = Vec::new();
        for (r, row) in rows.iter().enumerate() {
            for start in 0..row.free.len().saturating_sub(n - 1) {
                if !row.free[start..start + n].iter().all(|f| *f) {
                    continue;
                }
                let left_single =
                    start >= 1 && row.free[start - 1] && (start == 1 || !row.free[start - 2]);
                let end = start + n;
                let right_single = end < row.free.len()
                    && row.free[end]
                    && (end + 1 == row.free.len() || !row.free[end + 1]);
                out.push((r, start, left_single || right_single));
            }
        }
        out
    }

    proptest! {
        /// The choice is n free adjacent seats of one row; it exists whenever any window
        /// does; it strands a seat only when every window would; it is in the best row that
        /// has a window of the same kind.
        #[test]
        fn chooses_well_or_reports_none(rows in rows_strategy(), n in 1usize..7) {
            let all = windows(&rows, n);
            let chosen = choose(&rows, &ask(n as u32));
            let Some(chosen) = chosen else {
                prop_assert!(all.is_empty());
                return Ok(());
            };
            let r = (chosen.row - 1) as usize;
            let start = (chosen.first_seat - 1) as usize;
            prop_assert!(rows[r].free[start..start + n].iter().all(|f| *f));
            let kind = all.iter().find(|w| w.0 == r && w.1 == start).copied();
            prop_assert_eq!(kind.map(|w| w.2), Some(chosen.strands_a_seat));
            let clean_exists = all.iter().any(|w| !w.2);
            prop_assert_eq!(chosen.strands_a_seat, !clean_exists);
            let best_row = all.iter().filter(|w| w.2 == chosen.strands_a_seat).map(|w| w.0).min();
            prop_assert_eq!(best_row, Some(r));
        }
    }
}
