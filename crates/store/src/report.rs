//! Reports for organisers (issue 19, item 4): one event's figures per section and tier, and
//! its sales over time. Start at [`ReportStore`]: each backend reads rows in one snapshot by
//! the store's clock (`store-*/src/report.rs`); the rules that turn rows into a report —
//! which section a refund belongs to, the timeline's window and buckets — are here, once.
//!
//! What the figures mean (docs/API.md, "Reports", says the same to an API user):
//!
//! - `held_now`: seats `HELD` (a hold, or a hold in checkout: its seats stay `HELD` until
//!   the payment's verdict) whose deadline is after the store's clock; tier units of holds
//!   `HELD` or `PAYMENT_PENDING` whose deadline is after it.
//! - `sold`: seats `SOLD`, tier units sold (the tier's counter). An exchange gives its old
//!   seats back and sells the new ones, so they move.
//! - `comps`: seats and units sold as comps (issue 40: an order of amount 0 paid by `comp`,
//!   issued from an allocation); they count in `sold` too, and not in `revenue_minor`.
//! - `checked_in`: tickets `CHECKED_IN`.
//! - `revenue_minor`: the face value of what is sold now — every `SOLD` seat at its price,
//!   every sold tier unit at the tier's price — less the comps'. Not the sum of the
//!   `CONFIRMED` orders' totals: an exchanged order stays `CONFIRMED` (its tickets voided) beside the exchange's new
//!   order, whose payment (provider `exchange`) charged nothing or only the difference, so
//!   that sum counts an exchanged seat twice. What the fans were charged is
//!   [`EventReport::charged_minor`]; with no compensation, charged minus refunds due is the
//!   revenue.
//! - `refunds_due_minor`: money boxoffice owes back and has queued (`refund.due`): an
//!   exchange to cheaper seats (the exchange row's negative amount due), and a payment
//!   captured for an order that kept no seat (an order `CANCELLED` whose payment is
//!   `CAPTURED`). boxoffice records no refund as paid (refunds are outside it), so this is
//!   every refund ever queued. A refund counts in the sections and tiers of the tickets it
//!   gives money back for, split in proportion to their face value ([`split_minor`]).
//! - A transfer moves tickets to another account's new order (payment provider `transfer`,
//!   amount 0) and changes none of these figures; the timeline counts a sale once, when its
//!   order was paid, never the orders that exchanges and transfers made of it.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;

use crate::{EventRecord, StoreResult};

/// Most buckets one timeline answers; a longer sale needs longer buckets.
pub const TIMELINE_BUCKETS_MAX: u32 = 1_440;
/// The longest bucket (one day).
pub const BUCKET_SECONDS_MAX: u32 = 86_400;

/// What reports read from a store.
#[async_trait]
pub trait ReportStore: Send + Sync {
    /// One event's figures per section and tier, read in one snapshot with the store's clock
    /// ([`EventReport::assemble`] makes the report of them).
    async fn report_rows(&self, event: &EventRecord) -> StoreResult<ReportRows>;

    /// The event's sales per bucket of `bucket_s` seconds from its on-sale, read in one
    /// snapshot: the window ends at the store's clock, or after
    /// [`TIMELINE_BUCKETS_MAX`] buckets ([`TimelineWindow::new`]).
    async fn timeline_rows(&self, event: &EventRecord, bucket_s: u32) -> StoreResult<TimelineRows>;
}

/// A section's figures as a backend reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SectionRow {
    pub section: String,
    pub seats: i64,
    pub held_now: i64,
    pub sold: i64,
    /// Σ price of the section's `SOLD` seats.
    pub sold_value_minor: i64,
    pub checked_in: i64,
    /// `SOLD` seats of comps (orders paid by `comp`), and Σ their prices.
    pub comps: i64,
    pub comps_value_minor: i64,
}

/// A tier's figures as a backend reads them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TierRow {
    pub tier_id: String,
    pub capacity: i64,
    pub held_now: i64,
    pub sold: i64,
    pub checked_in: i64,
    /// Units of confirmed comps (orders paid by `comp`).
    pub comps: i64,
}

/// One refund due and one section's or tier's share of what it refunds: a refund names as
/// many parts as the sections and tiers of its tickets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundPart {
    /// The exchange's id, or the refunded payment operation's.
    pub refund_id: String,
    pub amount_minor: i64,
    pub place: Place,
    /// Face value of the refunded tickets in this place.
    pub face_value_minor: i64,
}

/// A section (by name) or a tier (by id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Place {
    Section(String),
    Tier(String),
}

/// Everything [`ReportStore::report_rows`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRows {
    /// The store's clock when the snapshot was read.
    pub now: OffsetDateTime,
    pub sections: Vec<SectionRow>,
    pub tiers: Vec<TierRow>,
    pub refunds: Vec<RefundPart>,
    /// Σ amount of the payments of the event's `CONFIRMED` orders.
    pub charged_minor: i64,
    /// `CONFIRMED` orders, the ones exchanges and transfers made included.
    pub orders_confirmed: i64,
    /// Confirmed box-office sales by payment kind (issue 40).
    pub box_office: Vec<BoxOfficeRow>,
}

/// The confirmed box-office sales of one payment kind (`cash`, `card_present`): orders, their
/// seats and units, what their payments charged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BoxOfficeRow {
    pub payment_kind: String,
    pub orders: i64,
    pub seats: i64,
    pub charged_minor: i64,
}

/// One section's or tier's figures, or the event's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    pub capacity: i64,
    pub held_now: i64,
    pub sold: i64,
    pub comps: i64,
    pub checked_in: i64,
    pub revenue_minor: i64,
    pub refunds_due_minor: i64,
}

impl Figures {
    fn add(&mut self, other: &Figures) {
        self.capacity += other.capacity;
        self.held_now += other.held_now;
        self.sold += other.sold;
        self.comps += other.comps;
        self.checked_in += other.checked_in;
        self.revenue_minor += other.revenue_minor;
        self.refunds_due_minor += other.refunds_due_minor;
    }
}

/// One line of a report: a section or a tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportLine {
    pub place: Place,
    pub figures: Figures,
}

/// One event's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventReport {
    pub event_id: String,
    pub currency: String,
    /// The store's clock when the figures were read.
    pub now: OffsetDateTime,
    /// The sections, then the tiers, in the event's order.
    pub lines: Vec<ReportLine>,
    /// The sum of the lines, except `refunds_due_minor`: every refund due, whole.
    pub totals: Figures,
    /// What the payments of the `CONFIRMED` orders charged (an exchange's order: the
    /// difference paid, 0 when nothing was due).
    pub charged_minor: i64,
    pub orders_confirmed: i64,
    /// Confirmed box-office sales by payment kind, as read.
    pub box_office: Vec<BoxOfficeRow>,
}

impl EventReport {
    /// The report of `rows`, in the event's order; a section or tier without rows counts 0.
    pub fn assemble(event: &EventRecord, rows: ReportRows) -> Self {
        let mut lines: Vec<ReportLine> =
            Vec::with_capacity(event.sections.len() + event.tiers.len());
        for section in &event.sections {
            let row = rows
                .sections
                .iter()
                .find(|row| row.section == section.name)
                .cloned()
                .unwrap_or_default();
            let capacity = if row.seats > 0 {
                row.seats
            } else {
                i64::try_from(section.seat_count()).unwrap_or(i64::MAX)
            };
            lines.push(ReportLine {
                place: Place::Section(section.name.clone()),
                figures: Figures {
                    capacity,
                    held_now: row.held_now,
                    sold: row.sold,
                    comps: row.comps,
                    checked_in: row.checked_in,
                    revenue_minor: row.sold_value_minor - row.comps_value_minor,
                    refunds_due_minor: 0,
                },
            });
        }
        for tier in &event.tiers {
            let row = rows
                .tiers
                .iter()
                .find(|row| row.tier_id == tier.tier_id)
                .cloned()
                .unwrap_or_default();
            lines.push(ReportLine {
                place: Place::Tier(tier.tier_id.clone()),
                figures: Figures {
                    capacity: if row.capacity > 0 {
                        row.capacity
                    } else {
                        i64::from(tier.capacity)
                    },
                    held_now: row.held_now,
                    sold: row.sold,
                    comps: row.comps,
                    checked_in: row.checked_in,
                    revenue_minor: (row.sold - row.comps).saturating_mul(tier.price_minor),
                    refunds_due_minor: 0,
                },
            });
        }
        let line_of: std::collections::HashMap<Place, usize> = lines
            .iter()
            .enumerate()
            .map(|(at, line)| (line.place.clone(), at))
            .collect();
        let mut refunds_total = 0i64;
        for (amount_minor, parts) in refunds_by_id(&rows.refunds) {
            refunds_total += amount_minor;
            let weights: Vec<i64> = parts.iter().map(|part| part.face_value_minor).collect();
            for (part, share) in parts.iter().zip(split_minor(amount_minor, &weights)) {
                if let Some(&at) = line_of.get(&part.place) {
                    lines[at].figures.refunds_due_minor += share;
                }
            }
        }
        let mut totals = Figures::default();
        for line in &lines {
            totals.add(&line.figures);
        }
        totals.refunds_due_minor = refunds_total;
        Self {
            event_id: event.event_id.clone(),
            currency: event.currency.clone(),
            now: rows.now,
            lines,
            totals,
            charged_minor: rows.charged_minor,
            orders_confirmed: rows.orders_confirmed,
            box_office: rows.box_office,
        }
    }
}

/// The parts of each refund, grouped by refund id (in the order first seen), with its amount.
fn refunds_by_id(parts: &[RefundPart]) -> Vec<(i64, Vec<&RefundPart>)> {
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut grouped: Vec<(i64, Vec<&RefundPart>)> = Vec::new();
    for part in parts {
        match index.get(part.refund_id.as_str()) {
            Some(&at) => grouped[at].1.push(part),
            None => {
                index.insert(&part.refund_id, grouped.len());
                grouped.push((part.amount_minor, vec![part]));
            }
        }
    }
    grouped
}

/// `amount` split in proportion to `weights`, in whole minor units that add up to `amount`:
/// each share rounded down, the units left over going to the largest remainders (the first
/// on a tie). Weights that add up to nothing (or are negative) give everything to the first.
pub fn split_minor(amount: i64, weights: &[i64]) -> Vec<i64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let total: i128 = weights.iter().map(|&w| i128::from(w.max(0))).sum();
    let mut shares = vec![0i64; weights.len()];
    if total == 0 {
        shares[0] = amount;
        return shares;
    }
    let mut remainders: Vec<(i128, usize)> = Vec::with_capacity(weights.len());
    let mut given = 0i64;
    for (index, &weight) in weights.iter().enumerate() {
        let exact = i128::from(amount) * i128::from(weight.max(0));
        let share = exact.div_euclid(total);
        shares[index] = i64::try_from(share).unwrap_or(0);
        given += shares[index];
        remainders.push((exact.rem_euclid(total), index));
    }
    // Largest remainder first; on a tie, the earlier place.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = amount - given;
    for &(_, index) in remainders.iter().take(usize::try_from(left).unwrap_or(0)) {
        shares[index] += 1;
    }
    shares
}

/// The buckets one timeline covers: `buckets` of `bucket_s` seconds from `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineWindow {
    pub from: OffsetDateTime,
    pub bucket_s: u32,
    pub buckets: u32,
}

impl TimelineWindow {
    /// From `from` to the end of the bucket that holds `now` (none when `now` is before
    /// `from`), at most [`TIMELINE_BUCKETS_MAX`] buckets.
    pub fn new(from: OffsetDateTime, bucket_s: u32, now: OffsetDateTime) -> Self {
        let bucket_ms = i128::from(bucket_s.max(1)) * 1_000;
        let elapsed_ms = (now - from).whole_milliseconds();
        let buckets = if elapsed_ms < 0 {
            0
        } else {
            (elapsed_ms / bucket_ms + 1).min(i128::from(TIMELINE_BUCKETS_MAX))
        };
        Self {
            from,
            bucket_s: bucket_s.max(1),
            buckets: u32::try_from(buckets).unwrap_or(TIMELINE_BUCKETS_MAX),
        }
    }

    pub fn bucket_ms(&self) -> i64 {
        i64::from(self.bucket_s) * 1_000
    }

    /// Where bucket `index` starts.
    pub fn start_of(&self, index: u32) -> OffsetDateTime {
        self.from + time::Duration::seconds(i64::from(self.bucket_s) * i64::from(index))
    }

    /// Where the window ends (the end of its last bucket, exclusive).
    pub fn to(&self) -> OffsetDateTime {
        self.start_of(self.buckets)
    }
}

/// One bucket's sales as a backend reads them (buckets without sales have no row).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BucketRow {
    /// 0 for the window's first bucket.
    pub index: i64,
    pub orders: i64,
    pub seats: i64,
    pub charged_minor: i64,
}

/// Everything [`ReportStore::timeline_rows`] reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineRows {
    pub now: OffsetDateTime,
    pub window: TimelineWindow,
    pub buckets: Vec<BucketRow>,
    /// Sales ever confirmed (inside the window or not): orders, seats or units, charged.
    pub orders_total: i64,
    pub seats_total: i64,
    pub charged_total_minor: i64,
}

/// One bucket of a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineBucket {
    pub start: OffsetDateTime,
    pub orders: i64,
    pub seats: i64,
    pub charged_minor: i64,
}

/// An event's sales over time: every bucket of the window, empty ones included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    pub now: OffsetDateTime,
    pub window: TimelineWindow,
    pub buckets: Vec<TimelineBucket>,
    /// The window stops before the store's clock (more buckets than
    /// [`TIMELINE_BUCKETS_MAX`]): later sales are in the totals, not in a bucket.
    pub truncated: bool,
    pub orders_total: i64,
    pub seats_total: i64,
    pub charged_total_minor: i64,
}

impl Timeline {
    pub fn assemble(rows: TimelineRows) -> Self {
        let window = rows.window;
        let mut buckets: Vec<TimelineBucket> = (0..window.buckets)
            .map(|index| TimelineBucket {
                start: window.start_of(index),
                orders: 0,
                seats: 0,
                charged_minor: 0,
            })
            .collect();
        for row in rows.buckets {
            if let Some(bucket) = usize::try_from(row.index)
                .ok()
                .and_then(|index| buckets.get_mut(index))
            {
                bucket.orders += row.orders;
                bucket.seats += row.seats;
                bucket.charged_minor += row.charged_minor;
            }
        }
        Self {
            truncated: window.to() <= rows.now,
            now: rows.now,
            window,
            buckets,
            orders_total: rows.orders_total,
            seats_total: rows.seats_total,
            charged_total_minor: rows.charged_total_minor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_split_adds_up_to_the_amount() {
        assert_eq!(split_minor(400, &[1000]), [400]);
        assert_eq!(split_minor(100, &[1, 1, 1]), [34, 33, 33]);
        assert_eq!(split_minor(10, &[600, 400]), [6, 4]);
        assert_eq!(split_minor(7, &[0, 0]), [7, 0]);
        assert_eq!(split_minor(5, &[1, 3]), [1, 4]);
        assert!(split_minor(5, &[]).is_empty());
        for (amount, weights) in [(999, vec![3, 7, 11]), (1, vec![5, 5]), (0, vec![2, 9])] {
            assert_eq!(split_minor(amount, &weights).iter().sum::<i64>(), amount);
        }
    }

    #[test]
    fn a_window_ends_with_the_bucket_of_now_and_is_bounded() {
        let from = datetime!(2027-01-01 10:00 UTC);
        assert_eq!(
            TimelineWindow::new(from, 60, from - time::Duration::SECOND).buckets,
            0
        );
        assert_eq!(TimelineWindow::new(from, 60, from).buckets, 1);
        let window = TimelineWindow::new(from, 60, datetime!(2027-01-01 10:02:30 UTC));
        assert_eq!(window.buckets, 3);
        assert_eq!(window.to(), datetime!(2027-01-01 10:03 UTC));
        let long = TimelineWindow::new(from, 1, datetime!(2027-01-02 10:00 UTC));
        assert_eq!(long.buckets, TIMELINE_BUCKETS_MAX);
        assert_eq!(long.to(), datetime!(2027-01-01 10:24 UTC));
    }

    #[test]
    fn a_timeline_names_every_bucket_and_says_when_it_stops_early() {
        let from = datetime!(2027-01-01 10:00 UTC);
        let now = datetime!(2027-01-01 10:02:30 UTC);
        let rows = TimelineRows {
            now,
            window: TimelineWindow::new(from, 60, now),
            buckets: vec![BucketRow {
                index: 1,
                orders: 2,
                seats: 3,
                charged_minor: 3000,
            }],
            orders_total: 2,
            seats_total: 3,
            charged_total_minor: 3000,
        };
        let timeline = Timeline::assemble(rows.clone());
        assert_eq!(timeline.buckets.len(), 3);
        assert_eq!(timeline.buckets[1].orders, 2);
        assert_eq!(timeline.buckets[0].orders + timeline.buckets[2].orders, 0);
        assert!(!timeline.truncated);
        let short = Timeline::assemble(TimelineRows {
            window: TimelineWindow::new(from, 1, datetime!(2027-01-01 12:00 UTC)),
            now: datetime!(2027-01-01 12:00 UTC),
            ..rows
        });
        assert!(short.truncated);
    }

    fn event() -> EventRecord {
        use boxoffice_domain::event::{Section, Tier};
        let at = datetime!(2027-01-01 10:00 UTC);
        EventRecord {
            event_id: "evt".into(),
            name: "Night".into(),
            starts_at: at,
            on_sale_at: at,
            currency: "EUR".into(),
            hold_ttl_s: 60,
            payment_grace_s: 60,
            max_seats_per_hold: 6,
            max_tickets_per_account: 6,
            exchange_cutoff_s: 0,
            transfer_cutoff_s: 0,
            waitlist_offer_ttl_s: 600,
            refund_policy: None,
            holder_policy: None,
            sale: Default::default(),
            chart: None,
            waiting_room: Default::default(),
            sections: vec![
                Section {
                    name: "A".into(),
                    rows: 1,
                    seats_per_row: 4,
                    price_minor: 1000,
                    row_lengths: Vec::new(),
                },
                Section {
                    name: "B".into(),
                    rows: 1,
                    seats_per_row: 2,
                    price_minor: 600,
                    row_lengths: Vec::new(),
                },
            ],
            tiers: vec![Tier {
                tier_id: "GA".into(),
                name: "Floor".into(),
                capacity: 10,
                price_minor: 500,
            }],
            created_at: at,
        }
    }

    #[test]
    fn a_report_puts_refunds_where_their_tickets_were_and_adds_up() {
        let event = event();
        let rows = ReportRows {
            now: event.on_sale_at,
            sections: vec![SectionRow {
                section: "A".into(),
                seats: 4,
                held_now: 1,
                sold: 2,
                sold_value_minor: 2000,
                checked_in: 1,
                ..SectionRow::default()
            }],
            tiers: vec![TierRow {
                tier_id: "GA".into(),
                capacity: 10,
                held_now: 0,
                sold: 3,
                checked_in: 0,
                ..TierRow::default()
            }],
            refunds: vec![
                RefundPart {
                    refund_id: "x1".into(),
                    amount_minor: 400,
                    place: Place::Section("A".into()),
                    face_value_minor: 1000,
                },
                RefundPart {
                    refund_id: "op1".into(),
                    amount_minor: 1100,
                    place: Place::Section("A".into()),
                    face_value_minor: 1000,
                },
                RefundPart {
                    refund_id: "op1".into(),
                    amount_minor: 1100,
                    place: Place::Tier("GA".into()),
                    face_value_minor: 100,
                },
            ],
            charged_minor: 4500,
            orders_confirmed: 3,
            box_office: Vec::new(),
        };
        let report = EventReport::assemble(&event, rows);
        let names: Vec<&Place> = report.lines.iter().map(|l| &l.place).collect();
        assert_eq!(
            names,
            [
                &Place::Section("A".into()),
                &Place::Section("B".into()),
                &Place::Tier("GA".into())
            ]
        );
        assert_eq!(report.lines[0].figures.refunds_due_minor, 1400);
        assert_eq!(report.lines[2].figures.refunds_due_minor, 100);
        assert_eq!(
            report.lines[1].figures.capacity, 2,
            "a section without rows"
        );
        assert_eq!(report.lines[2].figures.revenue_minor, 1500);
        assert_eq!(report.totals.refunds_due_minor, 1500);
        assert_eq!(report.totals.revenue_minor, 3500);
        assert_eq!(report.totals.capacity, 16);
        assert_eq!(report.totals.sold, 5);
    }
}
