//! Venue charts (issue 41, part 1): a venue as it is built — sections of seats placed at
//! their positions (rows that curve, skip numbers and differ in length), standing areas,
//! price categories across sections and seat kinds — its validation, its CSV import, and the
//! curved 50,000-seat demo stadium as a chart. docs/VENUES.md is the format's reference.
//!
//! Pure like the rest of the crate: a chart comes in as a value (parsed from JSON by serde,
//! or from CSV text by [`parse_chart_csv`]) and [`VenueChart::validate`] lists every problem
//! with where it is: a JSON path (`sections[2].rows[0].seats[4].label`), or for a CSV the
//! 1-based line a spreadsheet shows and the column. Start at [`VenueChart`].
//!
//! How a chart's seats will become an event's inventory (not done here: the engine is
//! unchanged): a reserved section keeps its `name` as the section, a standing area's `name`
//! becomes a tier id with its `capacity`, and a seat's id stays `<section>-<row>-<number>`
//! with `row` the 1-based place of its row in the section's `rows` and `number` the 1-based
//! place of the seat in its row's `seats` ([`VenueChart::seat_refs`]). Labels are what fans
//! read; the ids never depend on them, so a label may be anything the charset allows, skip
//! numbers or repeat across sections. A stored chart never changes (an edit is a new chart),
//! so the places, and with them the ids, are stable.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::event::{
    EVENT_NAME_LEN_MAX, ROWS_PER_SECTION_MAX, SEATS_PER_EVENT_MAX, SEATS_PER_ROW_MAX,
    SECTIONS_PER_EVENT_MAX, TIER_CAPACITY_MAX, TIERS_PER_EVENT_MAX,
};
use crate::ids::{NAME_ID_LEN_MAX, SeatRef, check_name_id};

/// Reserved sections of one chart: as many as an event may have.
pub const CHART_RESERVED_SECTIONS_MAX: usize = SECTIONS_PER_EVENT_MAX;
/// Standing areas of one chart: each becomes a tier of the event.
pub const CHART_STANDING_AREAS_MAX: usize = TIERS_PER_EVENT_MAX;
/// Rows per reserved section.
pub const CHART_ROWS_PER_SECTION_MAX: usize = ROWS_PER_SECTION_MAX as usize;
/// Seats per row.
pub const CHART_SEATS_PER_ROW_MAX: usize = SEATS_PER_ROW_MAX as usize;
/// Seats per chart, summed over its sections: what one event may hold (200,000).
pub const CHART_SEATS_MAX: usize = SEATS_PER_EVENT_MAX as usize;
/// Price categories per chart.
pub const CHART_CATEGORIES_MAX: usize = 50;
/// Longest chart, category or section title, in characters.
pub const CHART_NAME_LEN_MAX: usize = EVENT_NAME_LEN_MAX;
/// Longest row label, in characters of `[A-Za-z0-9]`.
pub const ROW_LABEL_LEN_MAX: usize = 8;
/// Longest seat label, in characters of `[A-Za-z0-9]`.
pub const SEAT_LABEL_LEN_MAX: usize = 8;
/// Largest absolute coordinate, in chart units (the demo stadium draws one unit per 10 cm
/// and spans ±1,300 units).
pub const COORDINATE_ABS_MAX: f64 = 100_000.0;
/// Two seats of one section closer than this on both axes, in chart units, are at the same
/// position (positions are compared rounded to this step).
pub const POSITION_STEP: f64 = 0.01;
/// Corners of a standing area's outline.
pub const OUTLINE_POINTS_MIN: usize = 3;
pub const OUTLINE_POINTS_MAX: usize = 100;
/// Highest seat quality (higher is better); absent, best available will use the distance to
/// the stage point.
pub const SEAT_QUALITY_MAX: u32 = 1_000;
/// Problems one validation reports at most; the rest are counted.
pub const CHART_PROBLEMS_MAX: usize = 50;
/// Lines of one chart CSV at most: every seat, plus the outline corners of every standing
/// area, plus the header.
pub const CHART_CSV_LINES_MAX: usize =
    CHART_SEATS_MAX + CHART_STANDING_AREAS_MAX * OUTLINE_POINTS_MAX + 1;

/// A venue as it is built: its sections, their seats at their positions, its standing areas,
/// and the price categories across them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VenueChart {
    /// 1-200 characters, not only white space, no control characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
        )
    )]
    pub name: String,
    /// Where the stage (or the pitch's centre) is: best available's default measure of a
    /// seat is its distance to this point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<Point>,
    /// The price zones; an event prices each category (per ticket type).
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 50))]
    pub categories: Vec<Category>,
    /// Reserved sections and standing areas, in the order best available tries them.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 250))]
    pub sections: Vec<ChartSection>,
}

/// A point of the chart's drawing, in chart units: `x` grows to the right, `y` downwards
/// (as a screen draws).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Point {
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub x: f64,
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub y: f64,
}

/// A price zone across sections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Category {
    /// 1-32 characters of `[A-Za-z0-9_]`, unique in the chart; seats name it.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")
    )]
    pub key: String,
    /// What fans read, 1-200 characters, not only white space, no control characters.
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
        )
    )]
    pub name: String,
    /// `#RRGGBB`, for the seat map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(pattern = "^#[0-9A-Fa-f]{6}$"))]
    pub colour: Option<String>,
}

/// Whether a section sells seats or standing places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SectionKind {
    /// Rows of seats, each sold by its id.
    Reserved,
    /// A standing area: a capacity sold by quantity (a tier).
    Standing,
}

/// A section of the chart: a reserved one has `rows`; a standing area has `capacity`,
/// `category` and an `outline` or a `box` to draw it, and no rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartSection {
    /// 1-32 characters of `[A-Za-z0-9_]`, unique in the chart: the section's (or tier's) id.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")
    )]
    pub name: String,
    /// What fans read ("Lower tier, block 12"); absent: the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 200,
            pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
        )
    )]
    pub title: Option<String>,
    pub kind: SectionKind,
    /// Reserved: its rows, front to back as the chart lists them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub rows: Vec<ChartRow>,
    /// Standing: how many it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000))]
    pub capacity: Option<u32>,
    /// Standing: its price category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Standing: its outline, 3-100 corners in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub outline: Vec<Point>,
    /// Standing: a rectangle, when there is no outline.
    #[serde(default, rename = "box", skip_serializing_if = "Option::is_none")]
    pub area: Option<AreaBox>,
}

/// A rectangle of the drawing: its top-left corner and its size, in chart units.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AreaBox {
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub x: f64,
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub y: f64,
    /// Above 0; the far corner stays within ±100,000 too.
    #[cfg_attr(
        feature = "openapi",
        schema(exclusive_minimum = 0.0, maximum = 200_000.0)
    )]
    pub width: f64,
    #[cfg_attr(
        feature = "openapi",
        schema(exclusive_minimum = 0.0, maximum = 200_000.0)
    )]
    pub height: f64,
}

/// A row of seats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartRow {
    /// 1-8 characters of `[A-Za-z0-9]`, unique in its section.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 8, pattern = "^[A-Za-z0-9]{1,8}$")
    )]
    pub label: String,
    /// Its seats, in the order the chart lists them (left to right, by convention).
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 1000))]
    pub seats: Vec<ChartSeat>,
}

/// A seat at its position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartSeat {
    /// 1-8 characters of `[A-Za-z0-9]`, unique in its row.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 8, pattern = "^[A-Za-z0-9]{1,8}$")
    )]
    pub label: String,
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub x: f64,
    #[cfg_attr(feature = "openapi", schema(minimum = -100_000.0, maximum = 100_000.0))]
    pub y: f64,
    /// The key of one of the chart's categories.
    pub category: String,
    /// Absent: `standard`.
    #[serde(default, skip_serializing_if = "SeatKind::is_standard")]
    pub kind: SeatKind,
    /// 0-1000, higher is better; absent: judged by the distance to the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    pub quality: Option<u32>,
}

/// What a seat is. Every kind is sold as a seat; the kinds tell fans (and, later, the
/// engine's rules) what it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum SeatKind {
    #[default]
    Standard,
    /// A space for a wheelchair (no fixed seat).
    Wheelchair,
    /// A companion's seat beside a wheelchair space; its row has one.
    Companion,
    /// A seat whose view of the stage is partly blocked.
    RestrictedView,
    /// A seat on an aisle (the aisle itself is the gap in the positions beside it).
    Aisle,
}

impl SeatKind {
    pub const ALL: [SeatKind; 5] = [
        SeatKind::Standard,
        SeatKind::Wheelchair,
        SeatKind::Companion,
        SeatKind::RestrictedView,
        SeatKind::Aisle,
    ];

    fn is_standard(&self) -> bool {
        *self == SeatKind::Standard
    }

    /// The kind as the JSON and the CSV spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            SeatKind::Standard => "standard",
            SeatKind::Wheelchair => "wheelchair",
            SeatKind::Companion => "companion",
            SeatKind::RestrictedView => "restricted_view",
            SeatKind::Aisle => "aisle",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == raw)
    }
}

/// One problem of a chart and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartProblem {
    /// The 1-based line of the CSV (absent for JSON, and for a CSV's whole-chart rules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// The JSON path of the field (`sections[2].rows[0].seats[4].label`), or for a CSV the
    /// column (`seat`).
    pub field: String,
    pub reason: String,
}

impl std::fmt::Display for ChartProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.field, self.reason),
            None => write!(f, "{}: {}", self.field, self.reason),
        }
    }
}

/// A refused chart: its first [`CHART_PROBLEMS_MAX`] problems and how many there were.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the chart has {total} problems")]
pub struct ChartErrors {
    pub problems: Vec<ChartProblem>,
    pub total: usize,
}

/// Where in a chart a rule failed, by index; turned into a JSON path or a CSV line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loc {
    Chart,
    Category(usize),
    Section(usize),
    Row(usize, usize),
    Seat(usize, usize, usize),
}

/// Problems as they are found, at most [`CHART_PROBLEMS_MAX`] kept.
#[derive(Debug, Default)]
struct Found {
    problems: Vec<(Loc, String, String)>,
    total: usize,
}

impl Found {
    fn add(&mut self, loc: Loc, field: &str, reason: impl Into<String>) {
        self.total += 1;
        if self.problems.len() < CHART_PROBLEMS_MAX {
            self.problems.push((loc, field.to_owned(), reason.into()));
        }
    }
}

/// The lines a CSV gave each part of a chart (by index, as [`Loc`] names them).
#[derive(Debug, Default)]
struct CsvLines {
    /// The first line of each section.
    sections: Vec<u32>,
    /// The first line that named each category.
    categories: Vec<u32>,
    /// `seats[section][row][seat]`; a standing area has one row of its outline's lines.
    seats: Vec<Vec<Vec<u32>>>,
}

impl CsvLines {
    fn line(&self, loc: Loc) -> Option<u32> {
        match loc {
            Loc::Chart => None,
            Loc::Category(c) => self.categories.get(c).copied(),
            Loc::Section(s) => self.sections.get(s).copied(),
            Loc::Row(s, r) => self.seats.get(s)?.get(r)?.first().copied(),
            Loc::Seat(s, r, i) => self.seats.get(s)?.get(r)?.get(i).copied(),
        }
    }
}

/// The CSV column a field of the JSON form is read from (the chart's own fields keep their
/// names: `name` is the import's `?name=`).
fn csv_column(loc: Loc, field: &str) -> &str {
    if loc == Loc::Chart {
        return field;
    }
    if field.starts_with("outline") {
        return "x";
    }
    match field {
        "name" => "section",
        "key" => "category",
        "label" => "seat",
        "rowLabel" => "row",
        "outline" | "box" => "x",
        other => other,
    }
}

fn json_path(loc: Loc, field: &str) -> String {
    let at = match loc {
        Loc::Chart => String::new(),
        Loc::Category(c) => format!("categories[{c}]"),
        Loc::Section(s) => format!("sections[{s}]"),
        Loc::Row(s, r) => format!("sections[{s}].rows[{r}]"),
        Loc::Seat(s, r, i) => format!("sections[{s}].rows[{r}].seats[{i}]"),
    };
    let field = if field == "rowLabel" { "label" } else { field };
    match (at.is_empty(), field.is_empty()) {
        (true, _) => field.to_owned(),
        (false, true) => at,
        (false, false) => format!("{at}.{field}"),
    }
}

fn label_ok(raw: &str, len_max: usize) -> bool {
    !raw.is_empty() && raw.len() <= len_max && raw.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn title_ok(raw: &str) -> bool {
    !raw.trim().is_empty()
        && raw.chars().count() <= CHART_NAME_LEN_MAX
        && !raw.chars().any(char::is_control)
}

fn colour_ok(raw: &str) -> bool {
    raw.len() == 7 && raw.starts_with('#') && raw.bytes().skip(1).all(|b| b.is_ascii_hexdigit())
}

fn coordinate_ok(value: f64) -> bool {
    value.is_finite() && value.abs() <= COORDINATE_ABS_MAX
}

/// A position rounded to [`POSITION_STEP`], comparable exactly (in range: the cast is exact).
fn position_key(x: f64, y: f64) -> (i64, i64) {
    (
        (x / POSITION_STEP).round() as i64,
        (y / POSITION_STEP).round() as i64,
    )
}

fn check_point(found: &mut Found, loc: Loc, field: &str, point: &Point) {
    if !coordinate_ok(point.x) || !coordinate_ok(point.y) {
        found.add(
            loc,
            field,
            format!("coordinates must be finite and within ±{COORDINATE_ABS_MAX}"),
        );
    }
}

impl VenueChart {
    /// Reserved seats of the chart.
    pub fn seat_count(&self) -> usize {
        self.sections
            .iter()
            .map(|s| s.rows.iter().map(|r| r.seats.len()).sum::<usize>())
            .sum()
    }

    /// Standing places of the chart, summed over its standing areas.
    pub fn standing_capacity(&self) -> u64 {
        self.sections
            .iter()
            .filter(|s| s.kind == SectionKind::Standing)
            .map(|s| u64::from(s.capacity.unwrap_or(0)))
            .sum()
    }

    /// Every reserved seat with the id it will have in an event on this chart: its section,
    /// the 1-based place of its row in the section and of the seat in its row (see the
    /// module's documentation). Labels never enter the id.
    pub fn seat_refs(&self) -> impl Iterator<Item = (SeatRef, &ChartRow, &ChartSeat)> + '_ {
        self.sections.iter().flat_map(|section| {
            section.rows.iter().enumerate().flat_map(move |(r, row)| {
                row.seats.iter().enumerate().map(move |(i, seat)| {
                    let seat_ref = SeatRef {
                        section: section.name.clone(),
                        row: u32::try_from(r + 1).unwrap_or(u32::MAX),
                        number: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    };
                    (seat_ref, row, seat)
                })
            })
        })
    }

    /// Checks every rule of docs/VENUES.md; the problems name their JSON paths.
    pub fn validate(&self) -> Result<(), ChartErrors> {
        let found = self.problems();
        if found.total == 0 {
            return Ok(());
        }
        Err(ChartErrors {
            problems: found
                .problems
                .into_iter()
                .map(|(loc, field, reason)| ChartProblem {
                    line: None,
                    field: json_path(loc, &field),
                    reason,
                })
                .collect(),
            total: found.total,
        })
    }

    fn problems(&self) -> Found {
        let mut found = Found::default();
        if !title_ok(&self.name) {
            found.add(
                Loc::Chart,
                "name",
                format!("must be 1-{CHART_NAME_LEN_MAX} characters, not only white space, no control characters"),
            );
        }
        if let Some(stage) = &self.stage {
            check_point(&mut found, Loc::Chart, "stage", stage);
        }
        let categories = self.check_categories(&mut found);
        if self.sections.is_empty() {
            found.add(Loc::Chart, "sections", "a chart needs at least one section");
        }
        let reserved = self
            .sections
            .iter()
            .filter(|s| s.kind == SectionKind::Reserved)
            .count();
        if reserved > CHART_RESERVED_SECTIONS_MAX {
            found.add(
                Loc::Chart,
                "sections",
                format!("at most {CHART_RESERVED_SECTIONS_MAX} reserved sections"),
            );
        }
        if self.sections.len() - reserved > CHART_STANDING_AREAS_MAX {
            found.add(
                Loc::Chart,
                "sections",
                format!("at most {CHART_STANDING_AREAS_MAX} standing areas"),
            );
        }
        let seats = self.seat_count();
        if seats > CHART_SEATS_MAX {
            found.add(
                Loc::Chart,
                "sections",
                format!("at most {CHART_SEATS_MAX} seats per chart; this one has {seats}"),
            );
        }
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        for (s, section) in self.sections.iter().enumerate() {
            let loc = Loc::Section(s);
            if check_name_id(&section.name, "section name").is_err() {
                found.add(
                    loc,
                    "name",
                    format!("section name must be 1-{NAME_ID_LEN_MAX} characters of [A-Za-z0-9_]"),
                );
            } else if let Some(first) = names.insert(&section.name, s) {
                names.insert(&section.name, first);
                found.add(
                    loc,
                    "name",
                    format!(
                        "duplicate section name {} (also sections[{first}])",
                        section.name
                    ),
                );
            }
            if let Some(title) = &section.title
                && !title_ok(title)
            {
                found.add(
                    loc,
                    "title",
                    format!("must be 1-{CHART_NAME_LEN_MAX} characters, not only white space"),
                );
            }
            match section.kind {
                SectionKind::Reserved => {
                    self.check_reserved(&mut found, s, section, &categories);
                }
                SectionKind::Standing => check_standing(&mut found, s, section, &categories),
            }
        }
        found
    }

    /// The category keys, after checking the list.
    fn check_categories(&self, found: &mut Found) -> BTreeSet<&str> {
        let mut keys = BTreeSet::new();
        if self.categories.is_empty() {
            found.add(
                Loc::Chart,
                "categories",
                "a chart needs at least one category",
            );
        }
        if self.categories.len() > CHART_CATEGORIES_MAX {
            found.add(
                Loc::Chart,
                "categories",
                format!("at most {CHART_CATEGORIES_MAX} categories"),
            );
        }
        for (c, category) in self.categories.iter().enumerate() {
            let loc = Loc::Category(c);
            if check_name_id(&category.key, "category key").is_err() {
                found.add(
                    loc,
                    "key",
                    format!("category key must be 1-{NAME_ID_LEN_MAX} characters of [A-Za-z0-9_]"),
                );
            } else if !keys.insert(category.key.as_str()) {
                found.add(
                    loc,
                    "key",
                    format!("duplicate category key {}", category.key),
                );
            }
            if !title_ok(&category.name) {
                found.add(
                    loc,
                    "name",
                    format!("must be 1-{CHART_NAME_LEN_MAX} characters, not only white space"),
                );
            }
            if let Some(colour) = &category.colour
                && !colour_ok(colour)
            {
                found.add(loc, "colour", "must be #RRGGBB");
            }
        }
        keys
    }

    fn check_reserved(
        &self,
        found: &mut Found,
        s: usize,
        section: &ChartSection,
        categories: &BTreeSet<&str>,
    ) {
        let loc = Loc::Section(s);
        let name = &section.name;
        if section.rows.is_empty() {
            found.add(loc, "rows", format!("reserved section {name} has no rows"));
        }
        if section.rows.len() > CHART_ROWS_PER_SECTION_MAX {
            found.add(
                loc,
                "rows",
                format!("at most {CHART_ROWS_PER_SECTION_MAX} rows per section"),
            );
        }
        for (field, given) in [
            ("capacity", section.capacity.is_some()),
            ("category", section.category.is_some()),
            ("outline", !section.outline.is_empty()),
            ("box", section.area.is_some()),
        ] {
            if given {
                found.add(
                    loc,
                    field,
                    format!("belongs to a standing area; reserved section {name} has rows"),
                );
            }
        }
        let mut row_labels: BTreeSet<&str> = BTreeSet::new();
        let mut positions: BTreeMap<(i64, i64), (usize, usize)> = BTreeMap::new();
        for (r, row) in section.rows.iter().enumerate() {
            let row_loc = Loc::Row(s, r);
            let row_label = &row.label;
            if !label_ok(row_label, ROW_LABEL_LEN_MAX) {
                found.add(
                    row_loc,
                    "rowLabel",
                    format!("row label must be 1-{ROW_LABEL_LEN_MAX} characters of [A-Za-z0-9]"),
                );
            } else if !row_labels.insert(row_label) {
                found.add(
                    row_loc,
                    "rowLabel",
                    format!("duplicate row label {row_label} in section {name}"),
                );
            }
            if row.seats.is_empty() {
                found.add(
                    row_loc,
                    "seats",
                    format!("row {row_label} of section {name} has no seats"),
                );
            }
            if row.seats.len() > CHART_SEATS_PER_ROW_MAX {
                found.add(
                    row_loc,
                    "seats",
                    format!("at most {CHART_SEATS_PER_ROW_MAX} seats per row"),
                );
            }
            let mut seat_labels: BTreeSet<&str> = BTreeSet::new();
            let mut wheelchairs = 0usize;
            let mut companions = Vec::new();
            for (i, seat) in row.seats.iter().enumerate() {
                let seat_loc = Loc::Seat(s, r, i);
                let at = format!("seat {} of row {row_label} in section {name}", seat.label);
                if !label_ok(&seat.label, SEAT_LABEL_LEN_MAX) {
                    found.add(
                        seat_loc,
                        "label",
                        format!(
                            "seat label must be 1-{SEAT_LABEL_LEN_MAX} characters of [A-Za-z0-9]"
                        ),
                    );
                } else if !seat_labels.insert(&seat.label) {
                    found.add(
                        seat_loc,
                        "label",
                        format!(
                            "duplicate seat label {} in row {row_label} of section {name}",
                            seat.label
                        ),
                    );
                }
                for (field, value) in [("x", seat.x), ("y", seat.y)] {
                    if !coordinate_ok(value) {
                        found.add(
                            seat_loc,
                            field,
                            format!("{at}: must be finite and within ±{COORDINATE_ABS_MAX}"),
                        );
                    }
                }
                if coordinate_ok(seat.x) && coordinate_ok(seat.y) {
                    let key = position_key(seat.x, seat.y);
                    if let Some(&(other_r, other_i)) = positions.get(&key) {
                        let other = &section.rows[other_r];
                        found.add(
                            seat_loc,
                            "x",
                            format!(
                                "{at} is at the position of seat {} of row {}",
                                other.seats[other_i].label, other.label
                            ),
                        );
                    } else {
                        positions.insert(key, (r, i));
                    }
                }
                if !categories.contains(seat.category.as_str()) {
                    found.add(
                        seat_loc,
                        "category",
                        format!("{at}: unknown category {}", seat.category),
                    );
                }
                if let Some(quality) = seat.quality
                    && quality > SEAT_QUALITY_MAX
                {
                    found.add(
                        seat_loc,
                        "quality",
                        format!("{at}: must be 0-{SEAT_QUALITY_MAX}"),
                    );
                }
                match seat.kind {
                    SeatKind::Wheelchair => wheelchairs += 1,
                    SeatKind::Companion => companions.push(i),
                    SeatKind::Standard | SeatKind::RestrictedView | SeatKind::Aisle => {}
                }
            }
            // The companion rule: a companion seat is in a row with a wheelchair space.
            if wheelchairs == 0 {
                for i in companions {
                    found.add(
                        Loc::Seat(s, r, i),
                        "kind",
                        format!(
                            "companion seat {} needs a wheelchair space in its row {row_label} of section {name}",
                            row.seats[i].label
                        ),
                    );
                }
            }
        }
    }
}

fn check_standing(
    found: &mut Found,
    s: usize,
    section: &ChartSection,
    categories: &BTreeSet<&str>,
) {
    let loc = Loc::Section(s);
    let name = &section.name;
    if !section.rows.is_empty() {
        found.add(
            loc,
            "rows",
            format!("standing area {name} has no rows (give them to a reserved section)"),
        );
    }
    match section.capacity {
        None => found.add(
            loc,
            "capacity",
            format!("standing area {name} needs a capacity"),
        ),
        Some(capacity) if !(1..=TIER_CAPACITY_MAX).contains(&capacity) => {
            found.add(loc, "capacity", format!("must be 1-{TIER_CAPACITY_MAX}"))
        }
        Some(_) => {}
    }
    match &section.category {
        None => found.add(
            loc,
            "category",
            format!("standing area {name} needs a category"),
        ),
        Some(category) if !categories.contains(category.as_str()) => {
            found.add(loc, "category", format!("unknown category {category}"));
        }
        Some(_) => {}
    }
    match (section.outline.is_empty(), &section.area) {
        (true, None) => found.add(
            loc,
            "outline",
            format!("standing area {name} needs an outline or a box"),
        ),
        (false, Some(_)) => found.add(loc, "box", "give an outline or a box, not both"),
        (false, None) => {
            let corners = section.outline.len();
            if !(OUTLINE_POINTS_MIN..=OUTLINE_POINTS_MAX).contains(&corners) {
                found.add(
                    loc,
                    "outline",
                    format!("{OUTLINE_POINTS_MIN}-{OUTLINE_POINTS_MAX} corners; it has {corners}"),
                );
            }
            for (i, point) in section.outline.iter().enumerate() {
                check_point(found, loc, &format!("outline[{i}]"), point);
            }
        }
        (true, Some(area)) => {
            let corner = Point {
                x: area.x,
                y: area.y,
            };
            check_point(found, loc, "box", &corner);
            let far = Point {
                x: area.x + area.width,
                y: area.y + area.height,
            };
            check_point(found, loc, "box", &far);
            if area.width <= 0.0 || area.height <= 0.0 {
                found.add(loc, "box", "width and height must be above 0");
            }
        }
    }
}

/// The columns of a chart CSV: the seven required, then the optional ones.
pub const CSV_COLUMNS: [&str; 9] = [
    "section", "row", "seat", "x", "y", "category", "kind", "quality", "capacity",
];
const CSV_REQUIRED: usize = 7;
/// `kind` of a CSV line that is a corner of a standing area.
pub const CSV_STANDING_KIND: &str = "standing";

/// One line's fields, split at commas; a field in double quotes may hold a comma, and `""`
/// in it is one quote (RFC 4180, one line per record).
fn csv_fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err("a quoted field is not closed".into()),
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => {}
                Some(_) => return Err("text after a quoted field".into()),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field.trim().to_owned());
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some(c) => field.push(c),
                }
            }
            field = field.trim().to_owned();
        }
        fields.push(field);
    }
}

/// Reads a chart from CSV text: a header line naming the columns (`section,row,seat,x,y,
/// category,kind`, then optionally `quality` and `capacity`, in any order), then one seat per
/// line. A standing area is given by lines whose `kind` is `standing`, with `row` and `seat`
/// empty: each line one corner of its outline, in order, and `capacity` on at least one of
/// them (equal wherever given). Sections, rows and categories are made in the order they
/// first appear; a category's name is its key. Every problem names its 1-based line.
pub fn parse_chart_csv(name: &str, text: &str) -> Result<VenueChart, ChartErrors> {
    let mut found: Vec<ChartProblem> = Vec::new();
    let mut total = 0usize;
    let mut problem = |line: usize, field: &str, reason: String| {
        total += 1;
        if found.len() < CHART_PROBLEMS_MAX {
            found.push(ChartProblem {
                line: Some(u32::try_from(line).unwrap_or(u32::MAX)),
                field: field.to_owned(),
                reason,
            });
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let Some((header_line, header)) = lines.by_ref().find(|(_, l)| !l.trim().is_empty()) else {
        return Err(ChartErrors {
            problems: vec![ChartProblem {
                line: Some(1),
                field: "header".into(),
                reason: "the CSV is empty: it needs a header line and seats".into(),
            }],
            total: 1,
        });
    };
    // columns[c] = which field of CSV_COLUMNS column c of the file is.
    let mut columns: Vec<usize> = Vec::new();
    match csv_fields(header) {
        Err(reason) => problem(header_line, "header", reason),
        Ok(names) => {
            for raw in names {
                let lower = raw.to_ascii_lowercase();
                match CSV_COLUMNS.iter().position(|c| *c == lower) {
                    Some(c) if columns.contains(&c) => {
                        problem(header_line, "header", format!("column {raw} appears twice"));
                    }
                    Some(c) => columns.push(c),
                    None => problem(
                        header_line,
                        "header",
                        format!(
                            "unknown column {raw:?}; the columns are {}",
                            CSV_COLUMNS.join(",")
                        ),
                    ),
                }
            }
            for (c, column) in CSV_COLUMNS.iter().enumerate().take(CSV_REQUIRED) {
                if !columns.contains(&c) {
                    problem(
                        header_line,
                        "header",
                        format!("the column {column} is missing"),
                    );
                }
            }
        }
    }
    if total > 0 {
        return Err(ChartErrors {
            problems: found,
            total,
        });
    }
    let mut builder = CsvBuilder::new(name);
    for (line, raw) in lines {
        if raw.trim().is_empty() {
            continue;
        }
        if line > CHART_CSV_LINES_MAX {
            builder.problem(
                line,
                "section",
                format!("at most {CHART_CSV_LINES_MAX} lines per chart"),
            );
            break;
        }
        let fields = match csv_fields(raw) {
            Ok(fields) => fields,
            Err(reason) => {
                builder.problem(line, "section", reason);
                continue;
            }
        };
        if fields.len() != columns.len() {
            builder.problem(
                line,
                "section",
                format!("{} fields; the header has {}", fields.len(), columns.len()),
            );
            continue;
        }
        let mut values: [&str; 9] = [""; 9];
        for (c, field) in columns.iter().zip(&fields) {
            values[*c] = field.as_str();
        }
        builder.line(line, values);
    }
    builder.finish()
}

/// A chart being read from CSV lines, with the line of each part.
struct CsvBuilder {
    chart: VenueChart,
    lines: CsvLines,
    /// Section index by name; row index by (section, label).
    sections: BTreeMap<String, usize>,
    rows: BTreeMap<(usize, String), usize>,
    /// Capacity of each standing section and the line that gave it.
    capacities: BTreeMap<usize, (u32, usize)>,
    problems: Vec<ChartProblem>,
    total: usize,
}

impl CsvBuilder {
    fn new(name: &str) -> Self {
        Self {
            chart: VenueChart {
                name: name.to_owned(),
                stage: None,
                categories: Vec::new(),
                sections: Vec::new(),
            },
            lines: CsvLines::default(),
            sections: BTreeMap::new(),
            rows: BTreeMap::new(),
            capacities: BTreeMap::new(),
            problems: Vec::new(),
            total: 0,
        }
    }

    fn problem(&mut self, line: usize, field: &str, reason: String) {
        self.total += 1;
        if self.problems.len() < CHART_PROBLEMS_MAX {
            self.problems.push(ChartProblem {
                line: Some(u32::try_from(line).unwrap_or(u32::MAX)),
                field: field.to_owned(),
                reason,
            });
        }
    }

    fn number(&mut self, line: usize, field: &str, raw: &str) -> Option<f64> {
        match raw.parse::<f64>() {
            Ok(value) if coordinate_ok(value) => Some(value),
            _ => {
                self.problem(
                    line,
                    field,
                    format!("{raw:?} is not a number within ±{COORDINATE_ABS_MAX}"),
                );
                None
            }
        }
    }

    /// One line's values, in the order of [`CSV_COLUMNS`] (absent columns empty).
    fn line(&mut self, line: usize, values: [&str; 9]) {
        let [section, row, seat, x, y, category, kind, quality, capacity] = values;
        let standing = kind == CSV_STANDING_KIND;
        let seat_kind = if standing {
            None
        } else {
            match SeatKind::parse(kind) {
                Some(kind) => Some(kind),
                None if kind.is_empty() => Some(SeatKind::Standard),
                None => {
                    let kinds: Vec<&str> = SeatKind::ALL.iter().map(|k| k.as_str()).collect();
                    self.problem(
                        line,
                        "kind",
                        format!(
                            "unknown kind {kind:?}: one of {} or {CSV_STANDING_KIND}",
                            kinds.join(", ")
                        ),
                    );
                    return;
                }
            }
        };
        let (Some(x), Some(y)) = (self.number(line, "x", x), self.number(line, "y", y)) else {
            return;
        };
        let quality = match quality {
            "" => None,
            raw => match raw.parse::<u32>() {
                Ok(q) if q <= SEAT_QUALITY_MAX && !standing => Some(q),
                Ok(_) if standing => {
                    self.problem(line, "quality", "a standing area has no quality".into());
                    return;
                }
                _ => {
                    self.problem(
                        line,
                        "quality",
                        format!("{raw:?} is not a whole number 0-{SEAT_QUALITY_MAX}"),
                    );
                    return;
                }
            },
        };
        let capacity = match capacity {
            "" => None,
            raw => match raw.parse::<u32>() {
                Ok(c) if standing && (1..=TIER_CAPACITY_MAX).contains(&c) => Some(c),
                Ok(_) if !standing => {
                    self.problem(
                        line,
                        "capacity",
                        "only a standing area's lines have a capacity".into(),
                    );
                    return;
                }
                _ => {
                    self.problem(
                        line,
                        "capacity",
                        format!("{raw:?} is not a whole number 1-{TIER_CAPACITY_MAX}"),
                    );
                    return;
                }
            },
        };
        if !self.chart.categories.iter().any(|c| c.key == category)
            && self.chart.categories.len() <= CHART_CATEGORIES_MAX
        {
            // Checked by the chart's validation (key syntax, how many).
            self.chart.categories.push(Category {
                key: category.to_owned(),
                name: category.to_owned(),
                colour: None,
            });
            self.lines
                .categories
                .push(u32::try_from(line).unwrap_or(u32::MAX));
        }
        let wanted = if standing {
            SectionKind::Standing
        } else {
            SectionKind::Reserved
        };
        let s = match self.sections.get(section) {
            Some(&s) => s,
            None => {
                let s = self.chart.sections.len();
                self.sections.insert(section.to_owned(), s);
                self.chart.sections.push(ChartSection {
                    name: section.to_owned(),
                    title: None,
                    kind: wanted,
                    rows: Vec::new(),
                    capacity: None,
                    category: standing.then(|| category.to_owned()),
                    outline: Vec::new(),
                    area: None,
                });
                self.lines
                    .sections
                    .push(u32::try_from(line).unwrap_or(u32::MAX));
                self.lines.seats.push(Vec::new());
                s
            }
        };
        let line_no = u32::try_from(line).unwrap_or(u32::MAX);
        if self.chart.sections[s].kind != wanted {
            let first = self.lines.sections[s];
            self.problem(
                line,
                "kind",
                format!(
                    "section {section} is {} since line {first}: a section is reserved or standing, not both",
                    match self.chart.sections[s].kind {
                        SectionKind::Reserved => "reserved",
                        SectionKind::Standing => "standing",
                    }
                ),
            );
            return;
        }
        let Some(seat_kind) = seat_kind else {
            // A corner of a standing area.
            if !row.is_empty() || !seat.is_empty() {
                self.problem(
                    line,
                    "row",
                    "a standing area's line leaves row and seat empty".into(),
                );
                return;
            }
            let area = &mut self.chart.sections[s];
            if area.category.as_deref() != Some(category) {
                let had = area.category.clone().unwrap_or_default();
                self.problem(
                    line,
                    "category",
                    format!("standing area {section} has category {had} on its first line"),
                );
                return;
            }
            area.outline.push(Point { x, y });
            if self.lines.seats[s].is_empty() {
                self.lines.seats[s].push(Vec::new());
            }
            self.lines.seats[s][0].push(line_no);
            if let Some(capacity) = capacity {
                match self.capacities.get(&s) {
                    Some(&(earlier, at)) if earlier != capacity => {
                        self.problem(
                            line,
                            "capacity",
                            format!("standing area {section} has capacity {earlier} on line {at}"),
                        );
                    }
                    Some(_) => {}
                    None => {
                        self.capacities.insert(s, (capacity, line));
                        self.chart.sections[s].capacity = Some(capacity);
                    }
                }
            }
            return;
        };
        let r = match self.rows.get(&(s, row.to_owned())) {
            Some(&r) => r,
            None => {
                let r = self.chart.sections[s].rows.len();
                self.rows.insert((s, row.to_owned()), r);
                self.chart.sections[s].rows.push(ChartRow {
                    label: row.to_owned(),
                    seats: Vec::new(),
                });
                self.lines.seats[s].push(Vec::new());
                r
            }
        };
        self.chart.sections[s].rows[r].seats.push(ChartSeat {
            label: seat.to_owned(),
            x,
            y,
            category: category.to_owned(),
            kind: seat_kind,
            quality,
        });
        self.lines.seats[s][r].push(line_no);
    }

    /// The chart, once every line was read and the chart's own rules hold, each problem at
    /// its line.
    fn finish(mut self) -> Result<VenueChart, ChartErrors> {
        if self.total == 0 && self.chart.sections.is_empty() {
            self.problem(1, "header", "no seats and no standing areas".into());
        }
        if self.total > 0 {
            return Err(ChartErrors {
                problems: self.problems,
                total: self.total,
            });
        }
        let chart_found = self.chart.problems();
        if chart_found.total == 0 {
            return Ok(self.chart);
        }
        Err(ChartErrors {
            problems: chart_found
                .problems
                .into_iter()
                .map(|(loc, field, reason)| ChartProblem {
                    line: self.lines.line(loc),
                    field: csv_column(loc, &field).to_owned(),
                    reason,
                })
                .collect(),
            total: chart_found.total,
        })
    }
}

/// The demo stadium's reserved seats.
pub const STADIUM_SEATS: usize = 50_000;
/// The demo stadium's standing places, on the pitch in front of the stage.
pub const STADIUM_STANDING_CAPACITY: u32 = 8_000;
/// Chart units between two seats' centres along a row (one unit is 10 cm).
const STADIUM_SEAT_PITCH: f64 = 5.0;
/// Chart units between two rows.
const STADIUM_ROW_DEPTH: f64 = 8.0;
/// The stands go round the pitch but for this many degrees behind the stage.
const STADIUM_OPEN_END_DEG: f64 = 60.0;

/// One ring of stands: its sections' name prefix, its first row's radius, its rows and how
/// many sections share its arc.
struct Ring {
    prefix: &'static str,
    title: &'static str,
    inner_radius: f64,
    rows: usize,
    sections: usize,
}

const STADIUM_RINGS: [Ring; 2] = [
    Ring {
        prefix: "L",
        title: "Lower tier",
        inner_radius: 700.0,
        rows: 26,
        sections: 20,
    },
    Ring {
        prefix: "U",
        title: "Upper tier",
        inner_radius: 1_000.0,
        rows: 27,
        sections: 24,
    },
];

/// The 50,000-seat demo stadium as a chart: two rings of stands as arcs round the pitch, open
/// behind the stage at the north end; rows lengthen with their radius; each section has an
/// aisle down its middle (a missing position, so seat numbers skip one) and seats beside it
/// of kind `aisle`; every fourth lower section has two wheelchair spaces with their
/// companions in its front row; the sections nearest the stage have restricted views in
/// their first rows; the pitch is a standing area. Seats are trimmed from the back rows so
/// that there are exactly [`STADIUM_SEATS`].
pub fn demo_stadium() -> VenueChart {
    let span = (360.0 - STADIUM_OPEN_END_DEG).to_radians();
    // Angles grow clockwise on screen (y downwards); north, behind the stage, is -90°.
    let start = (-90.0 + STADIUM_OPEN_END_DEG / 2.0_f64).to_radians();
    let mut sections = Vec::new();
    for ring in &STADIUM_RINGS {
        let width = span / ring.sections as f64;
        for k in 0..ring.sections {
            let near_stage = k == 0 || k + 1 == ring.sections;
            let accessible = ring.prefix == "L" && k % 4 == 2;
            let mut rows = Vec::new();
            for r in 0..ring.rows {
                let radius = ring.inner_radius + r as f64 * STADIUM_ROW_DEPTH;
                // A seat pitch free at each end of the section: the stairs between sections.
                let usable = radius * width - 2.0 * STADIUM_SEAT_PITCH;
                let positions = (usable / STADIUM_SEAT_PITCH).floor() as usize + 1;
                let aisle = positions / 2;
                let first = start + k as f64 * width + STADIUM_SEAT_PITCH / radius;
                let mut seats = Vec::new();
                for p in (0..positions).filter(|p| *p != aisle) {
                    let angle = first + p as f64 * STADIUM_SEAT_PITCH / radius;
                    let (x, y) = (radius * angle.cos(), radius * angle.sin());
                    let category = match (ring.prefix, r) {
                        ("L", 0..=12) => "CAT1",
                        ("L", _) => "CAT2",
                        _ => "CAT3",
                    };
                    let kind = if accessible && r == 0 && p < 4 {
                        if p % 2 == 0 {
                            SeatKind::Wheelchair
                        } else {
                            SeatKind::Companion
                        }
                    } else if near_stage && r < 3 {
                        SeatKind::RestrictedView
                    } else if p + 1 == aisle || p == aisle + 1 {
                        SeatKind::Aisle
                    } else {
                        SeatKind::Standard
                    };
                    seats.push(ChartSeat {
                        // Numbered by position: the aisle's number is skipped.
                        label: (p + 1).to_string(),
                        x: (x * 100.0).round() / 100.0,
                        y: (y * 100.0).round() / 100.0,
                        category: category.to_owned(),
                        kind,
                        quality: None,
                    });
                }
                rows.push(ChartRow {
                    label: (r + 1).to_string(),
                    seats,
                });
            }
            sections.push(ChartSection {
                name: format!("{}{:02}", ring.prefix, k + 1),
                title: Some(format!("{}, block {}", ring.title, k + 1)),
                kind: SectionKind::Reserved,
                rows,
                capacity: None,
                category: None,
                outline: Vec::new(),
                area: None,
            });
        }
    }
    let mut chart = VenueChart {
        name: "Demo stadium".into(),
        stage: Some(Point { x: 0.0, y: -450.0 }),
        categories: vec![
            category("CAT1", "Lower tier, front", "#C0392B"),
            category("CAT2", "Lower tier, back", "#E67E22"),
            category("CAT3", "Upper tier", "#2980B9"),
            category("FLOOR", "Standing on the pitch", "#27AE60"),
        ],
        sections,
    };
    // Down to exactly STADIUM_SEATS: one seat off the end of each upper section's back row
    // in turn (the ends are the stairs' side, away from the aisle).
    let mut excess = chart.seat_count().saturating_sub(STADIUM_SEATS);
    let upper: Vec<usize> = (0..chart.sections.len())
        .filter(|s| chart.sections[*s].name.starts_with('U'))
        .collect();
    let mut turn = 0;
    while excess > 0 && !upper.is_empty() {
        let section = &mut chart.sections[upper[turn % upper.len()]];
        let back = section.rows.len() - 1 - (turn / upper.len()) % section.rows.len();
        section.rows[back].seats.pop();
        excess -= 1;
        turn += 1;
    }
    chart.sections.push(ChartSection {
        name: "FLOOR".into(),
        title: Some("Pitch, standing".into()),
        kind: SectionKind::Standing,
        rows: Vec::new(),
        capacity: Some(STADIUM_STANDING_CAPACITY),
        category: Some("FLOOR".into()),
        outline: Vec::new(),
        area: Some(AreaBox {
            x: -500.0,
            y: -300.0,
            width: 1_000.0,
            height: 640.0,
        }),
    });
    chart
}

fn category(key: &str, name: &str, colour: &str) -> Category {
    Category {
        key: key.into(),
        name: name.into(),
        colour: Some(colour.into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The worked example of docs/VENUES.md: a small curved hall. Row A curves, skips seat
    /// 4 (a gap), has an aisle seat either side of its aisle; row B has a wheelchair space
    /// and its companion; a standing area at the back.
    pub(crate) fn hall_json() -> serde_json::Value {
        serde_json::json!({
            "name": "Small hall",
            "stage": {"x": 0, "y": 0},
            "categories": [
                {"key": "A", "name": "Front", "colour": "#C0392B"},
                {"key": "B", "name": "Back"},
                {"key": "STAND", "name": "Standing"}
            ],
            "sections": [
                {"name": "STALLS", "title": "Stalls", "kind": "reserved", "rows": [
                    {"label": "A", "seats": [
                        {"label": "1", "x": -30, "y": 52, "category": "A"},
                        {"label": "2", "x": -20, "y": 56, "category": "A"},
                        {"label": "3", "x": -10, "y": 58, "category": "A", "kind": "aisle"},
                        {"label": "5", "x": 10, "y": 58, "category": "A", "kind": "aisle"},
                        {"label": "6", "x": 20, "y": 56, "category": "A", "quality": 900},
                        {"label": "7", "x": 30, "y": 52, "category": "A", "kind": "restricted_view"}
                    ]},
                    {"label": "B", "seats": [
                        {"label": "1", "x": -25, "y": 70, "category": "B", "kind": "wheelchair"},
                        {"label": "2", "x": -15, "y": 72, "category": "B", "kind": "companion"},
                        {"label": "3", "x": 15, "y": 72, "category": "B"}
                    ]}
                ]},
                {"name": "BACK", "kind": "standing", "capacity": 120, "category": "STAND",
                 "outline": [{"x": -40, "y": 90}, {"x": 40, "y": 90}, {"x": 40, "y": 120},
                             {"x": -40, "y": 120}]}
            ]
        })
    }

    pub(crate) const HALL_CSV: &str = "\
section,row,seat,x,y,category,kind,quality,capacity
STALLS,A,1,-30,52,A,standard,,
STALLS,A,2,-20,56,A,standard,,
STALLS,A,3,-10,58,A,aisle,,
STALLS,A,5,10,58,A,aisle,,
STALLS,A,6,20,56,A,standard,900,
STALLS,A,7,30,52,A,restricted_view,,
STALLS,B,1,-25,70,B,wheelchair,,
STALLS,B,2,-15,72,B,companion,,
STALLS,B,3,15,72,B,standard,,
BACK,,,-40,90,STAND,standing,,120
BACK,,,40,90,STAND,standing,,
BACK,,,40,120,STAND,standing,,
BACK,,,-40,120,STAND,standing,,
";

    fn hall() -> VenueChart {
        serde_json::from_value(hall_json()).expect("the hall parses")
    }

    #[test]
    fn venue_a_curved_hall_with_a_gap_and_a_standing_area_is_accepted() {
        let chart = hall();
        chart.validate().expect("valid");
        assert_eq!(chart.seat_count(), 9);
        assert_eq!(chart.standing_capacity(), 120);
        let ids: Vec<String> = chart.seat_refs().map(|(id, _, _)| id.to_string()).collect();
        // Seat "5" of row A is the fourth seat of the first row: its id counts places.
        assert_eq!(ids[3], "STALLS-1-4");
        assert_eq!(ids[8], "STALLS-2-3");
        // Written back as it was read: standard kinds and absent fields left out.
        let written = serde_json::to_value(&chart).unwrap();
        let again: VenueChart = serde_json::from_value(written.clone()).unwrap();
        assert_eq!(again, chart);
        assert!(
            written["sections"][0]["rows"][0]["seats"][0]
                .get("kind")
                .is_none()
        );
    }

    #[test]
    fn venue_the_csv_of_the_hall_reads_as_its_json() {
        let mut from_csv = parse_chart_csv("Small hall", HALL_CSV).expect("valid CSV");
        let mut expected = hall();
        // The CSV has no stage, no colours, no titles, and names categories by their keys.
        expected.stage = None;
        expected.sections[0].title = None;
        for category in &mut expected.categories {
            category.name = category.key.clone();
            category.colour = None;
        }
        from_csv.categories.sort_by(|a, b| a.key.cmp(&b.key));
        expected.categories.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(from_csv, expected);
    }

    #[test]
    fn venue_a_csv_without_optional_columns_in_another_order_reads() {
        let csv = "kind,section,row,seat,x,y,category\r\nstandard,A,1,1,0,0,C\r\n,A,1,2,1,0,C\r\n";
        let chart = parse_chart_csv("Two seats", csv).expect("valid");
        assert_eq!(chart.seat_count(), 2);
        assert_eq!(chart.sections[0].rows[0].seats[1].kind, SeatKind::Standard);
    }

    /// Each broken rule is refused at its JSON path.
    #[test]
    fn venue_each_bad_json_case_names_its_path() {
        type Mutation = Box<dyn Fn(&mut serde_json::Value)>;
        let cases: Vec<(&str, &str, Mutation)> = vec![
            ("name", "characters", Box::new(|c| c["name"] = " ".into())),
            (
                "stage",
                "finite",
                Box::new(|c| c["stage"]["x"] = 1e9.into()),
            ),
            (
                "categories[1].key",
                "duplicate category key",
                Box::new(|c| c["categories"][1]["key"] = "A".into()),
            ),
            (
                "categories[0].colour",
                "#RRGGBB",
                Box::new(|c| c["categories"][0]["colour"] = "red".into()),
            ),
            (
                "sections[1].name",
                "duplicate section name",
                Box::new(|c| c["sections"][1]["name"] = "STALLS".into()),
            ),
            (
                "sections[0].name",
                "[A-Za-z0-9_]",
                Box::new(|c| c["sections"][0]["name"] = "ST-ALLS".into()),
            ),
            (
                "sections[0].rows[1].label",
                "duplicate row label B",
                Box::new(|c| c["sections"][0]["rows"][0]["label"] = "B".into()),
            ),
            (
                "sections[0].rows[0].label",
                "row label",
                Box::new(|c| c["sections"][0]["rows"][0]["label"] = "A 1".into()),
            ),
            (
                "sections[0].rows[0].seats[1].label",
                "duplicate seat label 1",
                Box::new(|c| c["sections"][0]["rows"][0]["seats"][1]["label"] = "1".into()),
            ),
            (
                "sections[0].rows[0].seats[1].label",
                "seat label",
                Box::new(|c| c["sections"][0]["rows"][0]["seats"][1]["label"] = "123456789".into()),
            ),
            (
                "sections[0].rows[0].seats[1].x",
                "at the position of seat 1 of row A",
                Box::new(|c| {
                    c["sections"][0]["rows"][0]["seats"][1]["x"] = (-30).into();
                    c["sections"][0]["rows"][0]["seats"][1]["y"] = 52.into();
                }),
            ),
            (
                "sections[0].rows[1].seats[2].y",
                "within",
                Box::new(|c| c["sections"][0]["rows"][1]["seats"][2]["y"] = (-100_001).into()),
            ),
            (
                "sections[0].rows[0].seats[0].category",
                "unknown category Z",
                Box::new(|c| c["sections"][0]["rows"][0]["seats"][0]["category"] = "Z".into()),
            ),
            (
                "sections[0].rows[1].seats[1].kind",
                "needs a wheelchair space",
                Box::new(|c| c["sections"][0]["rows"][1]["seats"][0]["kind"] = "standard".into()),
            ),
            (
                "sections[0].rows[0].seats[4].quality",
                "0-1000",
                Box::new(|c| c["sections"][0]["rows"][0]["seats"][4]["quality"] = 1001.into()),
            ),
            (
                "sections[0].rows[1].seats",
                "no seats",
                Box::new(|c| c["sections"][0]["rows"][1]["seats"] = serde_json::json!([])),
            ),
            (
                "sections[0].capacity",
                "belongs to a standing area",
                Box::new(|c| c["sections"][0]["capacity"] = 10.into()),
            ),
            (
                "sections[1].capacity",
                "needs a capacity",
                Box::new(|c| {
                    c["sections"][1].as_object_mut().unwrap().remove("capacity");
                }),
            ),
            (
                "sections[1].category",
                "unknown category",
                Box::new(|c| c["sections"][1]["category"] = "NOPE".into()),
            ),
            (
                "sections[1].outline",
                "3-100 corners",
                Box::new(|c| {
                    c["sections"][1]["outline"] = serde_json::json!([{"x": 0, "y": 0}]);
                }),
            ),
            (
                "sections[1].box",
                "not both",
                Box::new(|c| {
                    c["sections"][1]["box"] =
                        serde_json::json!({"x": 0, "y": 0, "width": 1, "height": 1});
                }),
            ),
            (
                "sections[1].rows",
                "has no rows",
                Box::new(|c| {
                    c["sections"][1]["rows"] = c["sections"][0]["rows"].clone();
                }),
            ),
            (
                "categories",
                "at least one category",
                Box::new(|c| c["categories"] = serde_json::json!([])),
            ),
        ];
        for (path, words, mutate) in cases {
            let mut value = hall_json();
            mutate(&mut value);
            let chart: VenueChart = serde_json::from_value(value).expect(path);
            let refused = chart.validate().expect_err(path);
            assert!(
                refused
                    .problems
                    .iter()
                    .any(|p| p.field == path && p.reason.contains(words) && p.line.is_none()),
                "{path} / {words}: {:?}",
                refused.problems
            );
        }
    }

    /// A CSV's problems name the line a spreadsheet shows (the header is line 1), all of
    /// them up to the cap.
    #[test]
    fn venue_each_bad_csv_line_names_its_number() {
        let with = |line: usize, replacement: &str| -> String {
            HALL_CSV
                .lines()
                .enumerate()
                .map(|(i, l)| if i + 1 == line { replacement } else { l })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let cases: [(String, u32, &str, &str); 10] = [
            (
                with(3, "STALLS,A,2,west,56,A,standard,,"),
                3,
                "x",
                "not a number",
            ),
            (
                with(4, "STALLS,A,3,-10,58,A,sofa,,"),
                4,
                "kind",
                "unknown kind",
            ),
            (
                with(5, "STALLS,A,1,10,58,A,aisle,,"),
                5,
                "seat",
                "duplicate seat label 1",
            ),
            (
                with(6, "STALLS,A,6,-20,56,A,standard,,"),
                6,
                "x",
                "at the position of seat 2",
            ),
            (
                with(8, "STALLS,B,1,-25,70,B,standard,,"),
                9,
                "kind",
                "needs a wheelchair space",
            ),
            (
                with(7, "STALLS,A,7,30,52,Z-1,standard,,"),
                7,
                "category",
                "category key",
            ),
            (
                with(10, "STALLS,B,3,15,72,B,standard,,120"),
                10,
                "capacity",
                "only a standing",
            ),
            (
                with(12, "BACK,,,40,90,STAND,standing,,99"),
                12,
                "capacity",
                "capacity 120 on line 11",
            ),
            (
                with(12, "BACK,,,40,90,STAND,standard,,"),
                12,
                "kind",
                "reserved or standing",
            ),
            (
                with(2, "STALLS,A,1,-30,52,A"),
                2,
                "section",
                "fields; the header has 9",
            ),
        ];
        for (csv, line, field, words) in cases {
            let refused = parse_chart_csv("Hall", &csv).expect_err(words);
            assert!(
                refused
                    .problems
                    .iter()
                    .any(|p| p.line == Some(line) && p.field == field && p.reason.contains(words)),
                "line {line} {field} / {words}: {:?}",
                refused.problems
            );
        }
        // Every bad line is reported, not only the first.
        let two = with(3, "STALLS,A,2,west,56,A,standard,,").replace("restricted_view", "x");
        let refused = parse_chart_csv("Hall", &two).unwrap_err();
        let lines: Vec<Option<u32>> = refused.problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [Some(3), Some(7)], "{:?}", refused.problems);
        // A missing column is the header's problem, on line 1.
        let refused =
            parse_chart_csv("Hall", "section,row,seat,x,y,kind\nA,1,1,0,0,\n").unwrap_err();
        assert_eq!(refused.problems[0].line, Some(1));
        assert!(refused.problems[0].reason.contains("category"), "{refused}");
    }

    #[test]
    fn venue_problems_are_capped_and_counted() {
        let mut csv = String::from("section,row,seat,x,y,category,kind\n");
        for i in 0..(CHART_PROBLEMS_MAX + 20) {
            csv.push_str(&format!("A,1,{i},nowhere,0,C,standard\n"));
        }
        let refused = parse_chart_csv("Bad", &csv).unwrap_err();
        assert_eq!(refused.problems.len(), CHART_PROBLEMS_MAX);
        assert_eq!(refused.total, CHART_PROBLEMS_MAX + 20);
        assert_eq!(refused.problems[0].line, Some(2));
    }

    #[test]
    fn venue_quoted_csv_fields_read_as_spreadsheets_write_them() {
        assert_eq!(
            csv_fields(r#""A",1, 2 ,"say ""hi"", ok""#).unwrap(),
            ["A", "1", "2", "say \"hi\", ok"]
        );
        assert!(csv_fields(r#""open"#).is_err());
    }

    #[test]
    fn venue_the_demo_stadium_has_its_seats_and_validates() {
        let chart = demo_stadium();
        chart.validate().expect("the demo stadium is a valid chart");
        assert_eq!(chart.seat_count(), STADIUM_SEATS);
        assert_eq!(
            chart.standing_capacity(),
            u64::from(STADIUM_STANDING_CAPACITY)
        );
        let seats: Vec<&ChartSeat> = chart.seat_refs().map(|(_, _, seat)| seat).collect();
        let count = |kind: SeatKind| seats.iter().filter(|s| s.kind == kind).count();
        assert_eq!(count(SeatKind::Wheelchair), 10);
        assert_eq!(count(SeatKind::Companion), 10);
        assert!(count(SeatKind::RestrictedView) > 0);
        assert!(count(SeatKind::Aisle) > 0);
        // Rows lengthen towards the back, and numbers skip at the aisle.
        let l01 = &chart.sections[0];
        assert!(l01.rows[0].seats.len() < l01.rows[25].seats.len());
        let labels: Vec<u32> = l01.rows[0]
            .seats
            .iter()
            .map(|s| s.label.parse().unwrap())
            .collect();
        assert!(labels.windows(2).any(|w| w[1] == w[0] + 2), "{labels:?}");
        // The ids it will give: one per seat.
        let ids: BTreeSet<String> = chart.seat_refs().map(|(id, _, _)| id.to_string()).collect();
        assert_eq!(ids.len(), STADIUM_SEATS);
        // It travels as JSON well under the route's body limit.
        let bytes = serde_json::to_vec(&chart).unwrap().len();
        assert!(bytes < 8 * 1024 * 1024, "{bytes}");
    }
}
