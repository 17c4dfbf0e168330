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
//! The hold decision (`decide::decide_holds`) calls [`seat_counted`] (what [`seat`] does,
//! with the counts its index keeps) for a `bestAvailable` request on the engine's rows:
//! [`choose`] first, whatever the request's [`Together`] says. Only when no row has a block
//! of the size left (the end game) does [`Together`] matter: `Required` refuses; `Prefer`
//! seats the party as close as the house allows inside one section — the rows spanning the
//! fewest row numbers that hold the party between them (one row, then adjacent rows, then
//! further apart), each piece a whole free run where possible, largest runs first, never
//! stranding a single seat when a piece can avoid it; among the first few windows of rows
//! as few, the one in the fewest pieces, then the narrowest, then the best; `No` does the
//! same and, when no section has room, takes the best free seats anywhere asked.
//! [`longest_run`] is "the largest block together" a refusal and the seat map report.

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
    choose_in(rows.iter(), request)
}

/// [`choose`] over rows given best first by an iterator (a caller that knows which rows
/// cannot hold the block leaves them out: the choice is the same).
fn choose_in<'a>(
    rows: impl Iterator<Item = &'a RowSeats>,
    request: &BestRequest,
) -> Option<Choice> {
    let n = usize::try_from(request.quantity).ok()?;
    if n == 0 {
        return None;
    }
    let allowed = rows.filter(|row| {
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

/// How together a party must sit (the API's `bestAvailable.together`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Together {
    /// One row block if any is left, else as close as the house allows in one section.
    #[default]
    Prefer,
    /// One row block or nothing.
    Required,
    /// Any free seats: as `Prefer`, and else the best free seats of every asked section.
    No,
}

impl Together {
    /// Every value, as the API spells it.
    pub const ALL: [Self; 3] = [Self::Prefer, Self::Required, Self::No];

    /// The API's spelling: `prefer`, `required`, `no`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prefer => "prefer",
            Self::Required => "required",
            Self::No => "no",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == raw)
    }
}

/// The seats given to a party: one block, or split when no block was left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seating {
    /// Seat ids, best row first, then by seat number.
    pub seat_ids: Vec<String>,
    /// Whether the party does not sit as one block of one row.
    pub split: bool,
}

/// The length of the longest run of free seats in a row.
pub fn longest_run(free: &[bool]) -> u32 {
    let mut longest = 0u32;
    let mut current = 0u32;
    for is_free in free {
        current = if *is_free { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

/// Whether a row may serve `request` (its section and price cap).
fn allows(request: &BestRequest, row: &RowSeats) -> bool {
    request
        .section
        .as_ref()
        .is_none_or(|section| *section == row.section)
        && request
            .max_price_minor
            .is_none_or(|max| row.price_minor <= max)
}

/// The largest number of seats together still free in the rows `request` may take.
pub fn largest_block(rows: &[RowSeats], request: &BestRequest) -> u32 {
    rows.iter()
        .filter(|row| allows(request, row))
        .map(|row| longest_run(&row.free))
        .max()
        .unwrap_or(0)
}

/// What a caller that keeps its rows current already knows of each of them, in the order of
/// its rows: how many seats are free, and the longest free run.
#[derive(Debug, Clone, Copy)]
pub struct RowCounts<'a> {
    pub free: &'a [u32],
    pub longest: &'a [u32],
}

/// The number of free seats of a row.
pub fn free_count(free: &[bool]) -> u32 {
    u32::try_from(free.iter().filter(|f| **f).count()).unwrap_or(u32::MAX)
}

/// Seats `request.quantity` seats from `rows` (best first) as `together` allows. `None`:
/// nothing the mode accepts is left (see the module docs).
pub fn seat(rows: &[RowSeats], request: &BestRequest, together: Together) -> Option<Seating> {
    let free: Vec<u32> = rows.iter().map(|row| free_count(&row.free)).collect();
    let longest: Vec<u32> = rows.iter().map(|row| longest_run(&row.free)).collect();
    let counts = RowCounts {
        free: &free,
        longest: &longest,
    };
    seat_counted(rows, counts, request, together)
}

/// [`seat`] with the rows' counts kept by the caller (the engine's index): a row whose
/// longest run is shorter than the party is never searched for a block, and the split looks
/// at the seats of the rows it takes from only.
pub fn seat_counted(
    rows: &[RowSeats],
    counts: RowCounts<'_>,
    request: &BestRequest,
    together: Together,
) -> Option<Seating> {
    let n = usize::try_from(request.quantity).ok().filter(|n| *n > 0)?;
    let can_hold_the_block = rows
        .iter()
        .zip(counts.longest)
        .filter(|(_, longest)| **longest as usize >= n)
        .map(|(row, _)| row);
    if let Some(block) = choose_in(can_hold_the_block, request) {
        return Some(Seating {
            seat_ids: block.seat_ids(),
            split: false,
        });
    }
    let (allowed, free): (Vec<&RowSeats>, Vec<usize>) = rows
        .iter()
        .zip(counts.free)
        .filter(|(row, _)| allows(request, row))
        .map(|(row, free)| (row, *free as usize))
        .unzip();
    let picked = match together {
        Together::Required => None,
        Together::Prefer => in_one_section(&allowed, &free, n),
        Together::No => in_one_section(&allowed, &free, n).or_else(|| anywhere(&allowed, &free, n)),
    }?;
    let mut seats: Vec<(usize, usize)> = picked;
    seats.sort_unstable();
    let one_block = seats
        .windows(2)
        .all(|pair| pair[0].0 == pair[1].0 && pair[0].1 + 1 == pair[1].1);
    let seat_ids = seats
        .iter()
        .map(|&(r, i)| {
            let row = allowed[r];
            format!("{}-{}-{}", row.section, row.row, i + 1)
        })
        .collect();
    Some(Seating {
        seat_ids,
        split: !one_block,
    })
}

/// A maximal run of free seats: (row, 0-based start, length), rows by their index in the
/// caller's slice.
type Run = (usize, usize, usize);

fn runs_of(row_index: usize, free: &[bool], out: &mut Vec<Run>) {
    let mut i = 0;
    while i < free.len() {
        if !free[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < free.len() && free[i] {
            i += 1;
        }
        out.push((row_index, start, i - start));
    }
}

/// Windows of rows [`in_one_section`] compares seat by seat once it knows the fewest rows a
/// split party needs: enough to find a closer arrangement among the best rows, few enough that
/// a split never reads the whole house.
pub const SPLIT_WINDOWS_COMPARED_MAX: usize = 8;

/// `n` seats inside one section, in the rows spanning the fewest row numbers that hold `n`
/// free seats between them. Among the first [`SPLIT_WINDOWS_COMPARED_MAX`] such windows (best
/// rows first) the one whose seats come in the fewest pieces wins, then the one spread over
/// the fewest seat numbers, then the better rows. `rows` are best first, so a section's rows
/// are consecutive and in row order; `counts[i]` is the free seats of `rows[i]`.
fn in_one_section(rows: &[&RowSeats], counts: &[usize], n: usize) -> Option<Vec<(usize, usize)>> {
    // (row numbers spanned, first row, end row exclusive), best rows first.
    let mut windows: Vec<(u32, usize, usize)> = Vec::new();
    let mut start = 0;
    while start < rows.len() {
        let section = &rows[start].section;
        let end = start
            + rows[start..]
                .iter()
                .take_while(|row| row.section == *section)
                .count();
        let mut j = start;
        let mut sum = 0;
        for i in start..end {
            while j < end && sum < n {
                sum += counts[j];
                j += 1;
            }
            if sum < n {
                break;
            }
            windows.push((rows[j - 1].row.saturating_sub(rows[i].row), i, j));
            sum -= counts[i];
        }
        start = end;
    }
    let fewest = windows.iter().map(|w| w.0).min()?;
    windows
        .into_iter()
        .filter(|w| w.0 == fewest)
        .take(SPLIT_WINDOWS_COMPARED_MAX)
        .map(|(_, first, end)| {
            let mut runs = Vec::new();
            for (r, row) in rows.iter().enumerate().take(end).skip(first) {
                runs_of(r, &row.free, &mut runs);
            }
            let mut seats = pieces(rows, runs, n);
            seats.sort_unstable();
            seats
        })
        .min_by_key(|seats| (pieces_in(seats), spread(seats)))
}

/// How many runs of adjacent seats sorted `seats` make.
fn pieces_in(seats: &[(usize, usize)]) -> usize {
    1 + seats
        .windows(2)
        .filter(|pair| pair[0].0 != pair[1].0 || pair[0].1 + 1 != pair[1].1)
        .count()
}

/// How many seat numbers `seats` stretch over, whatever their rows.
fn spread(seats: &[(usize, usize)]) -> usize {
    let low = seats.iter().map(|s| s.1).min().unwrap_or(0);
    let high = seats.iter().map(|s| s.1).max().unwrap_or(0);
    high - low
}

/// `n` seats from the best rows down, each row's seats as [`pieces`] picks them.
fn anywhere(rows: &[&RowSeats], counts: &[usize], n: usize) -> Option<Vec<(usize, usize)>> {
    if counts.iter().sum::<usize>() < n {
        return None;
    }
    let mut remaining = n;
    let mut seats = Vec::with_capacity(n);
    for (r, row) in rows.iter().enumerate() {
        if remaining == 0 {
            break;
        }
        if counts[r] == 0 {
            continue;
        }
        let mut runs = Vec::new();
        runs_of(r, &row.free, &mut runs);
        let free: usize = runs.iter().map(|run| run.2).sum();
        let take = free.min(remaining);
        if take > 0 {
            seats.extend(pieces(rows, runs, take));
            remaining -= take;
        }
    }
    (remaining == 0).then_some(seats)
}

/// Picks `n` seats from `runs` (which hold at least `n`) in as few pieces as it can: a run
/// that fits exactly what is left ends it; else part of a longer run ends it (the shortest
/// that can give it without stranding a seat, else the shortest longer run); else the
/// largest run is taken whole and the rest picked again. Ties go to the better row, then
/// the run nearer the row's middle.
fn pieces(rows: &[&RowSeats], mut runs: Vec<Run>, n: usize) -> Vec<(usize, usize)> {
    let centre = |&(r, start, len): &Run| {
        ((2 * start + len) as i64 - rows[r].free.len() as i64).unsigned_abs()
    };
    runs.sort_by_key(|run| (std::cmp::Reverse(run.2), run.0, centre(run)));
    let mut remaining = n;
    let mut seats = Vec::with_capacity(n);
    while remaining > 0 && !runs.is_empty() {
        if let Some(i) = runs.iter().position(|run| run.2 == remaining) {
            let (r, start, len) = runs.remove(i);
            seats.extend((start..start + len).map(|k| (r, k)));
            break;
        }
        let longer = || runs.iter().enumerate().filter(|(_, run)| run.2 > remaining);
        let partial = longer()
            .filter(|(_, run)| run.2 >= remaining + 2)
            .min_by_key(|(_, run)| run.2)
            .or_else(|| longer().min_by_key(|(_, run)| run.2))
            .map(|(i, _)| i);
        if let Some(i) = partial {
            let (r, start, len) = runs.remove(i);
            let row_len = rows[r].free.len() as i64;
            let offset = (0..=len - remaining)
                .min_by_key(|&offset| {
                    let left = offset;
                    let right = len - remaining - offset;
                    let strands = left == 1 || right == 1;
                    let centre =
                        ((2 * (start + offset) + remaining) as i64 - row_len).unsigned_abs();
                    (strands, centre)
                })
                .unwrap_or(0);
            seats.extend((0..remaining).map(|k| (r, start + offset + k)));
            break;
        }
        // Every run is shorter than what is left: the largest goes whole.
        let (r, start, len) = runs.remove(0);
        seats.extend((start..start + len).map(|k| (r, k)));
        remaining -= len;
    }
    seats
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

    fn seating(rows: &[RowSeats], n: u32, together: Together) -> Option<Vec<String>> {
        seat(rows, &ask(n), together).map(|seating| {
            assert!(seating.split, "a block would have come from choose");
            seating.seat_ids
        })
    }

    #[test]
    fn a_block_that_fits_is_taken_whatever_the_mode() {
        let rows = [row("A", 1, 100, "..x....x")];
        for together in Together::ALL {
            let seating = seat(&rows, &ask(4), together).unwrap();
            assert_eq!(seating.seat_ids, ["A-1-4", "A-1-5", "A-1-6", "A-1-7"]);
            assert!(!seating.split);
        }
    }

    #[test]
    fn prefer_splits_in_one_row_before_adjacent_rows() {
        // Only pairs are left: row 2 has two, rows 1 and 3 one each.
        let rows = [
            row("A", 1, 100, "xx..xxxx"),
            row("A", 2, 100, "..xxxx.."),
            row("A", 3, 100, "xx..xxxx"),
        ];
        assert_eq!(
            seating(&rows, 4, Together::Prefer).unwrap(),
            ["A-2-1", "A-2-2", "A-2-7", "A-2-8"]
        );
        assert_eq!(seat(&rows, &ask(4), Together::Required), None);
        assert_eq!(largest_block(&rows, &ask(4)), 2);
    }

    #[test]
    fn among_rows_as_few_the_closest_arrangement_wins() {
        // Both rows seat four only split. Row 1's pairs are at its two ends; row 2's are one
        // seat apart: row 2 wins although it is the worse row.
        let rows = [row("A", 1, 100, "..xxxx.."), row("A", 2, 100, "x..x..xx")];
        assert_eq!(
            seating(&rows, 4, Together::Prefer).unwrap(),
            ["A-2-2", "A-2-3", "A-2-5", "A-2-6"]
        );
        // Fewer pieces before a narrower spread: row 2's three and one (spread over seven
        // numbers) beat row 1's two, one and one (over six).
        let rows = [row("A", 1, 100, ".x.x.x.."), row("A", 2, 100, "...xxx.x")];
        assert_eq!(
            seating(&rows, 4, Together::Prefer).unwrap(),
            ["A-2-1", "A-2-2", "A-2-3", "A-2-7"]
        );
        // A tie stays with the better row.
        let rows = [row("A", 1, 100, "..x..x.."), row("A", 2, 100, "..x..x..")];
        assert_eq!(
            seating(&rows, 4, Together::Prefer).unwrap(),
            ["A-1-1", "A-1-2", "A-1-4", "A-1-5"]
        );
    }

    #[test]
    fn prefer_takes_adjacent_rows_before_rows_further_apart() {
        // Section A: pairs in rows 1 and 3 (row 2 full); section B: pairs in rows 4 and 5.
        let rows = [
            row("A", 1, 100, "xx..xx"),
            row("A", 2, 100, "xxxxxx"),
            row("A", 3, 100, "xx..xx"),
            row("B", 4, 100, "..xxxx"),
            row("B", 5, 100, "xxxx.."),
        ];
        assert_eq!(
            seating(&rows, 4, Together::Prefer).unwrap(),
            ["B-4-1", "B-4-2", "B-5-5", "B-5-6"]
        );
        // Without section B, the same section further apart.
        assert_eq!(
            seating(&rows[..3], 4, Together::Prefer).unwrap(),
            ["A-1-3", "A-1-4", "A-3-3", "A-3-4"]
        );
    }

    #[test]
    fn prefer_stays_in_one_section_and_no_does_not() {
        let rows = [row("A", 1, 100, "x.x"), row("B", 1, 100, "x.x")];
        assert_eq!(seat(&rows, &ask(2), Together::Prefer), None);
        assert_eq!(seating(&rows, 2, Together::No).unwrap(), ["A-1-2", "B-1-2"]);
        assert_eq!(seat(&rows, &ask(3), Together::No), None);
    }

    #[test]
    fn a_split_takes_fewest_pieces_and_strands_no_seat_when_it_can() {
        // Party of 5, longest run 4: four together and one more. The one comes from the
        // run of 3 at its end (seat 8 or 10 leaves a pair), not from its middle.
        let rows = [row("A", 1, 100, "....x..x...x")];
        let seats = seating(&rows, 5, Together::Prefer).unwrap();
        assert_eq!(&seats[..4], ["A-1-1", "A-1-2", "A-1-3", "A-1-4"]);
        assert!(seats[4] == "A-1-9" || seats[4] == "A-1-11", "{seats:?}");
        // A run that fits what is left exactly ends the party.
        let rows = [row("A", 1, 100, "...x..x.")];
        assert_eq!(
            seating(&rows, 5, Together::Prefer).unwrap(),
            ["A-1-1", "A-1-2", "A-1-3", "A-1-5", "A-1-6"]
        );
    }

    #[test]
    fn together_reads_as_the_api_spells_it() {
        for together in Together::ALL {
            assert_eq!(Together::parse(together.as_str()), Some(together));
        }
        assert_eq!(Together::parse("yes"), None);
        assert_eq!(Together::default(), Together::Prefer);
    }

    fn sections_strategy() -> impl Strategy<Value = Vec<RowSeats>> {
        proptest::collection::vec(
            (
                0usize..2,
                proptest::collection::vec(proptest::bool::weighted(0.35), 1..9),
            ),
            1..7,
        )
        .prop_map(|rows| {
            // Rows best first: section A's rows, then B's, each section's in row order.
            let mut rows: Vec<(usize, Vec<bool>)> = rows;
            rows.sort_by_key(|(section, _)| *section);
            let mut next_row = [1u32, 1u32];
            rows.into_iter()
                .map(|(section, free)| {
                    let number = next_row[section];
                    // Leave a gap of a row now and then, as a full row would.
                    next_row[section] += 1 + u32::from(free.len() % 3 == 0);
                    RowSeats {
                        section: ["A", "B"][section].into(),
                        row: number,
                        price_minor: [300, 100][section],
                        free,
                    }
                })
                .collect()
        })
    }

    /// Seat ids parsed back: (section, row, 0-based seat).
    fn parsed(seat_ids: &[String]) -> Vec<(String, u32, usize)> {
        seat_ids
            .iter()
            .map(|id| {
                let parts: Vec<&str> = id.split('-').collect();
                (
                    parts[0].to_string(),
                    parts[1].parse().unwrap(),
                    parts[2].parse::<usize>().unwrap() - 1,
                )
            })
            .collect()
    }

    /// Brute force: the fewest row numbers spanned by rows of one section holding `n` free
    /// seats between them.
    fn fewest_rows_spanned(rows: &[RowSeats], n: usize) -> Option<u32> {
        let mut best = None;
        for first in rows {
            for last in rows {
                if first.section != last.section || last.row < first.row {
                    continue;
                }
                let free: usize = rows
                    .iter()
                    .filter(|r| {
                        r.section == first.section && r.row >= first.row && r.row <= last.row
                    })
                    .map(|r| r.free.iter().filter(|f| **f).count())
                    .sum();
                if free >= n {
                    let span = last.row - first.row;
                    best = Some(best.map_or(span, |b: u32| b.min(span)));
                }
            }
        }
        best
    }

    proptest! {
        /// Never more or fewer seats than asked, every one free and allowed; never split when
        /// a block fits (the block is `choose`'s); `Required` never splits; `Prefer` seats
        /// the party whenever one section has room, in one section, spanning the fewest rows;
        /// `No` whenever the asked sections have room; `largest_block` is the longest free
        /// run.
        #[test]
        fn seats_a_party_by_the_rules(
            rows in sections_strategy(),
            n in 1u32..7,
            section in proptest::option::of(0usize..2),
            cheap in any::<bool>(),
            together in proptest::sample::select(Together::ALL.to_vec()),
        ) {
            let request = BestRequest {
                quantity: n,
                section: section.map(|s| ["A", "B"][s].to_string()),
                max_price_minor: cheap.then_some(100),
            };
            let allowed: Vec<RowSeats> =
                rows.iter().filter(|r| allows(&request, r)).cloned().collect();
            let brute_largest = allowed
                .iter()
                .flat_map(|r| (0..r.free.len()).map(move |start| {
                    r.free[start..].iter().take_while(|f| **f).count()
                }))
                .max()
                .unwrap_or(0);
            prop_assert_eq!(largest_block(&rows, &request) as usize, brute_largest);
            let block = choose(&rows, &request);
            let seating = seat(&rows, &request, together);
            if let Some(block) = &block {
                prop_assert_eq!(
                    seating.clone(),
                    Some(Seating { seat_ids: block.seat_ids(), split: false })
                );
                prop_assert!(brute_largest >= n as usize);
                return Ok(());
            }
            prop_assert!(brute_largest < n as usize);
            let n = n as usize;
            let free_total: usize =
                allowed.iter().map(|r| r.free.iter().filter(|f| **f).count()).sum();
            let spanned = fewest_rows_spanned(&allowed, n);
            match together {
                Together::Required => prop_assert_eq!(&seating, &None),
                Together::Prefer => prop_assert_eq!(seating.is_some(), spanned.is_some()),
                Together::No => prop_assert_eq!(seating.is_some(), free_total >= n),
            }
            let Some(seating) = seating else { return Ok(()) };
            prop_assert!(seating.split);
            let seats = parsed(&seating.seat_ids);
            prop_assert_eq!(seats.len(), n);
            let mut distinct = seats.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), n);
            for (section, row_number, i) in &seats {
                let row = allowed
                    .iter()
                    .find(|r| r.section == *section && r.row == *row_number);
                prop_assert!(row.is_some_and(|r| r.free[*i]), "{:?} is not free", (section, row_number, i));
            }
            if let Some(spanned) = spanned {
                let section = &seats[0].0;
                prop_assert!(seats.iter().all(|s| s.0 == *section));
                let low = seats.iter().map(|s| s.1).min().unwrap();
                let high = seats.iter().map(|s| s.1).max().unwrap();
                prop_assert_eq!(high - low, spanned);
            }
        }
    }
}
