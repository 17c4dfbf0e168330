//! Events and their inventory: reserved-seat sections and general-admission tiers, the sale
//! rules that bound every hold, and the validation of a new event with its limits.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::ids::{SeatRef, check_name_id};

/// Sections per event; a stadium has tens.
pub const SECTIONS_PER_EVENT_MAX: usize = 200;
/// Tiers per event.
pub const TIERS_PER_EVENT_MAX: usize = 50;
/// Rows per section.
pub const ROWS_PER_SECTION_MAX: u32 = 1_000;
/// Seats per row.
pub const SEATS_PER_ROW_MAX: u32 = 1_000;
/// Reserved seats per event, summed over sections. Bounds event creation time and the size
/// of one event's seat map.
pub const SEATS_PER_EVENT_MAX: u64 = 200_000;
/// Capacity of one general-admission tier.
pub const TIER_CAPACITY_MAX: u32 = 1_000_000;
/// Longest event or tier name, in characters (Unicode scalar values).
pub const EVENT_NAME_LEN_MAX: usize = 200;
/// Longest hold time to live: a day. Longer would block seats from sale for no reason.
pub const HOLD_TTL_S_MAX: u32 = 86_400;
/// Longest payment grace extension.
pub const PAYMENT_GRACE_S_MAX: u32 = 3_600;
/// Most seats in one hold the operator may configure.
pub const SEATS_PER_HOLD_MAX: u32 = 100;
/// Highest price of one seat or tier unit, in minor units.
pub const PRICE_MINOR_MAX: i64 = 100_000_000;
/// The longest refund cutoff of a policy, seconds (a year).
pub const REFUND_CUTOFF_MAX_S: u32 = 31_536_000;

/// A section of reserved seats: `rows` x `seats_per_row`, one price; or, taken from a venue
/// chart (`crate::event_chart`), rows of their own lengths inside that bounding box, each
/// seat priced by its category.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub name: String,
    pub rows: u32,
    pub seats_per_row: u32,
    /// The price of every seat; a chart's section: its cheapest seat's.
    pub price_minor: i64,
    /// A chart's section: the seats of each row, front to back (`rows` of them, none above
    /// `seats_per_row`). Empty: every row has `seats_per_row` seats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub row_lengths: Vec<u32>,
}

impl Section {
    /// A rectangular section of `rows` rows of `seats_per_row` seats at one price.
    pub fn rectangle(name: &str, rows: u32, seats_per_row: u32, price_minor: i64) -> Self {
        Self {
            name: name.to_owned(),
            rows,
            seats_per_row,
            price_minor,
            row_lengths: Vec::new(),
        }
    }

    /// The seats of `row` (1-based); 0 for a row the section does not have.
    pub fn row_len(&self, row: u32) -> u32 {
        if row == 0 || row > self.rows {
            return 0;
        }
        if self.row_lengths.is_empty() {
            return self.seats_per_row;
        }
        self.row_lengths.get(row as usize - 1).copied().unwrap_or(0)
    }

    pub fn seat_count(&self) -> u64 {
        if self.row_lengths.is_empty() {
            return u64::from(self.rows) * u64::from(self.seats_per_row);
        }
        self.row_lengths.iter().map(|n| u64::from(*n)).sum()
    }

    pub fn contains(&self, seat: &SeatRef) -> bool {
        seat.section == self.name && seat.number >= 1 && seat.number <= self.row_len(seat.row)
    }
}

/// A general-admission tier: a capacity sold by quantity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tier {
    pub tier_id: String,
    pub name: String,
    pub capacity: u32,
    pub price_minor: i64,
}

/// The waiting-room settings of an event (`boxoffice-waitroom` runs the room itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingRoomSettings {
    pub enabled: bool,
    pub policy: QueuePolicy,
    pub max_active_shoppers: u32,
    pub admission_ttl_seconds: u32,
    /// The release controller's first rate; slow start doubles it while the sale is healthy.
    /// (Events stored before these settings existed read the defaults.)
    #[serde(default = "default_start_release")]
    pub start_release_per_second: u32,
    /// The controller's ceiling (the operator may lower it at run time).
    #[serde(default = "default_max_release")]
    pub max_release_per_second: u32,
    /// Hold latency p99 above which release backs off.
    #[serde(default = "default_target_hold_p99")]
    pub target_hold_p99_ms: u32,
    /// How long a released fan may take to claim the admission before the place expires.
    #[serde(default = "default_claim_window")]
    pub claim_window_seconds: u32,
    /// How long an admitted fan's shopper slot stays idle (no hold yet, or after a refusal)
    /// before it is given back to the queue; the admission itself lasts its TTL.
    #[serde(default = "default_hold_window")]
    pub hold_window_seconds: u32,
    /// New holds last what fans measurably need (`crate::hold_ttl`), `holdTtlSeconds` the
    /// most, while fans wait in the queue.
    #[serde(default)]
    pub hold_ttl_follows_sale: bool,
}

impl WaitingRoomSettings {
    /// Checks the settings' ranges; `prefix` names them in an error (`waitingRoom`, or a
    /// phase's `phases[0].waitingRoom`).
    pub fn validate(&self, prefix: &str) -> Result<(), SpecError> {
        check_range(
            &format!("{prefix}.maxActiveShoppers"),
            self.max_active_shoppers.into(),
            1,
            10_000_000,
        )?;
        check_range(
            &format!("{prefix}.admissionTtlSeconds"),
            self.admission_ttl_seconds.into(),
            10,
            86_400,
        )?;
        check_range(
            &format!("{prefix}.maxReleasePerSecond"),
            self.max_release_per_second.into(),
            1,
            RELEASE_PER_S_MAX.into(),
        )?;
        check_range(
            &format!("{prefix}.startReleasePerSecond"),
            self.start_release_per_second.into(),
            1,
            self.max_release_per_second.into(),
        )?;
        check_range(
            &format!("{prefix}.targetHoldP99Ms"),
            self.target_hold_p99_ms.into(),
            1,
            TARGET_HOLD_P99_MS_MAX.into(),
        )?;
        check_range(
            &format!("{prefix}.claimWindowSeconds"),
            self.claim_window_seconds.into(),
            10,
            86_400,
        )?;
        check_range(
            &format!("{prefix}.holdWindowSeconds"),
            self.hold_window_seconds.into(),
            10,
            3_600,
        )?;
        Ok(())
    }
}

/// Highest release rate an event may set, per second.
pub const RELEASE_PER_S_MAX: u32 = 100_000;
/// Highest hold p99 target an event may set, in milliseconds.
pub const TARGET_HOLD_P99_MS_MAX: u32 = 60_000;

fn default_start_release() -> u32 {
    10
}
fn default_max_release() -> u32 {
    500
}
fn default_target_hold_p99() -> u32 {
    300
}
fn default_claim_window() -> u32 {
    600
}
fn default_hold_window() -> u32 {
    60
}

impl Default for WaitingRoomSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            policy: QueuePolicy::Fifo,
            max_active_shoppers: 10_000,
            admission_ttl_seconds: 900,
            start_release_per_second: default_start_release(),
            max_release_per_second: default_max_release(),
            target_hold_p99_ms: default_target_hold_p99(),
            claim_window_seconds: default_claim_window(),
            hold_window_seconds: default_hold_window(),
            hold_ttl_follows_sale: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    Fifo,
    Random,
}

/// The rules every hold decision of an event applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleRules {
    pub on_sale_at: OffsetDateTime,
    /// Section names in the event's order: best-available tries them first to last.
    pub section_order: Vec<String>,
    pub hold_ttl_s: u32,
    pub max_seats_per_hold: u32,
    pub max_tickets_per_account: u32,
    pub currency: String,
    /// Ticket types, fees and tax: every granted hold is priced with them.
    pub prices: crate::pricing::PriceList,
    /// The event's wheelchair spaces and companion seats and the time they are kept until
    /// (`crate::accessibility`); the default (no chart) has none.
    pub accessibility: crate::accessibility::Accessibility,
}

/// When and for how much fans may refund their own tickets (absent: they may not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundPolicy {
    /// Refunds close this long before the event's start, by the store's clock.
    pub fan_refund_cutoff_s: u32,
    /// Kept from each ticket's price (a refund is never below nothing).
    pub keep_fee_minor: i64,
}

/// A complete event definition, validated: what the store persists on creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    pub name: String,
    pub starts_at: OffsetDateTime,
    /// `None` means "now by the store's clock", resolved inside the creating transaction.
    pub on_sale_at: Option<OffsetDateTime>,
    pub currency: String,
    pub hold_ttl_s: u32,
    pub payment_grace_s: u32,
    pub max_seats_per_hold: u32,
    pub max_tickets_per_account: u32,
    pub exchange_cutoff_s: u32,
    /// Transfers close this long before the start (0: until the start).
    pub transfer_cutoff_s: u32,
    /// How long a waiting-list offer's hold lasts.
    pub waitlist_offer_ttl_s: u32,
    pub refund_policy: Option<RefundPolicy>,
    /// What each ticket's holder must give before payment (absent: a name may be given,
    /// nothing is asked).
    pub holder_policy: Option<crate::holder::HolderPolicy>,
    pub waiting_room: WaitingRoomSettings,
    pub sections: Vec<Section>,
    pub tiers: Vec<Tier>,
    /// Ticket types, fees and tax, phases, allocations (issue 40); the default sells as
    /// before.
    pub sale: crate::sale::SaleSetup,
    /// The venue chart the event is created on, copied with its category prices (issue 41);
    /// `sections` and `tiers` are then the chart's ([`crate::event_chart::EventChart`]).
    /// Shared, not copied again, by the records made from the spec.
    pub chart: Option<std::sync::Arc<crate::event_chart::EventChart>>,
}

/// A refusal of an event definition: the field and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: String,
    pub reason: String,
}

pub(crate) fn spec_error(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A name shown to fans or operators (a ticket type, a fee, a tax, a phase, an allocation):
/// 1-200 characters, not only white space, no control characters.
pub(crate) fn check_label(field: &str, name: &str) -> Result<(), SpecError> {
    if name.trim().is_empty()
        || name.chars().count() > EVENT_NAME_LEN_MAX
        || name.chars().any(char::is_control)
    {
        return Err(spec_error(
            field,
            format!(
                "must be 1-{EVENT_NAME_LEN_MAX} characters, not only white space, no control characters"
            ),
        ));
    }
    Ok(())
}

fn check_range(field: &str, value: u64, min: u64, max: u64) -> Result<(), SpecError> {
    if value < min || value > max {
        return Err(spec_error(
            field,
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(())
}

fn check_price(field: &str, price_minor: i64) -> Result<(), SpecError> {
    if !(0..=PRICE_MINOR_MAX).contains(&price_minor) {
        return Err(spec_error(
            field,
            format!("must be between 0 and {PRICE_MINOR_MAX}"),
        ));
    }
    Ok(())
}

impl EventSpec {
    /// Checks every field against its limit; the error names the first bad field in the
    /// API's camelCase spelling.
    pub fn validate(&self) -> Result<(), SpecError> {
        let name = self.name.trim();
        if name.is_empty() || self.name.chars().count() > EVENT_NAME_LEN_MAX {
            return Err(spec_error(
                "name",
                format!("must be 1-{EVENT_NAME_LEN_MAX} characters, not only white space"),
            ));
        }
        let currency_ok =
            self.currency.len() == 3 && self.currency.bytes().all(|b| b.is_ascii_uppercase());
        if !currency_ok {
            return Err(spec_error(
                "currency",
                "must be an ISO 4217 code such as EUR",
            ));
        }
        check_range(
            "holdTtlSeconds",
            self.hold_ttl_s.into(),
            1,
            HOLD_TTL_S_MAX.into(),
        )?;
        check_range(
            "paymentGraceSeconds",
            self.payment_grace_s.into(),
            0,
            PAYMENT_GRACE_S_MAX.into(),
        )?;
        check_range(
            "maxSeatsPerHold",
            self.max_seats_per_hold.into(),
            1,
            SEATS_PER_HOLD_MAX.into(),
        )?;
        check_range(
            "maxTicketsPerAccount",
            self.max_tickets_per_account.into(),
            1,
            10_000,
        )?;
        check_range(
            "exchangeCutoffSeconds",
            self.exchange_cutoff_s.into(),
            0,
            31_536_000,
        )?;
        check_range(
            "transferCutoffSeconds",
            self.transfer_cutoff_s.into(),
            0,
            31_536_000,
        )?;
        if let Some(policy) = &self.refund_policy {
            check_range(
                "refundPolicy.fanRefundCutoffSeconds",
                policy.fan_refund_cutoff_s.into(),
                0,
                REFUND_CUTOFF_MAX_S.into(),
            )?;
            check_price("refundPolicy.keepFeeMinor", policy.keep_fee_minor)?;
        }
        if let Some(policy) = &self.holder_policy {
            policy.validate()?;
        }
        check_range(
            "waitlistOfferTtlSeconds",
            self.waitlist_offer_ttl_s.into(),
            1,
            86_400,
        )?;
        self.waiting_room.validate("waitingRoom")?;
        if self.sections.is_empty() && self.tiers.is_empty() {
            return Err(spec_error(
                "sections",
                "an event needs at least one section or tier",
            ));
        }
        if self.sections.len() > SECTIONS_PER_EVENT_MAX {
            return Err(spec_error(
                "sections",
                format!("at most {SECTIONS_PER_EVENT_MAX} sections"),
            ));
        }
        if self.tiers.len() > TIERS_PER_EVENT_MAX {
            return Err(spec_error(
                "tiers",
                format!("at most {TIERS_PER_EVENT_MAX} tiers"),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut seat_total = 0u64;
        for (i, section) in self.sections.iter().enumerate() {
            let field = |f: &str| format!("sections[{i}].{f}");
            check_name_id(&section.name, "section name")
                .map_err(|e| spec_error(field("name"), e.0))?;
            if !seen.insert(section.name.clone()) {
                return Err(spec_error(field("name"), "duplicate section name"));
            }
            check_range(
                &field("rows"),
                section.rows.into(),
                1,
                ROWS_PER_SECTION_MAX.into(),
            )?;
            check_range(
                &field("seatsPerRow"),
                section.seats_per_row.into(),
                1,
                SEATS_PER_ROW_MAX.into(),
            )?;
            check_price(&field("priceMinor"), section.price_minor)?;
            if !section.row_lengths.is_empty() {
                let fits = section.row_lengths.len() == section.rows as usize
                    && section
                        .row_lengths
                        .iter()
                        .all(|n| (1..=section.seats_per_row).contains(n));
                if !fits {
                    return Err(spec_error(
                        field("rowLengths"),
                        "one length of 1 to seatsPerRow per row",
                    ));
                }
            }
            seat_total += section.seat_count();
        }
        if seat_total > SEATS_PER_EVENT_MAX {
            return Err(spec_error(
                "sections",
                format!("at most {SEATS_PER_EVENT_MAX} seats per event"),
            ));
        }
        let mut seen_tiers = std::collections::BTreeSet::new();
        for (i, tier) in self.tiers.iter().enumerate() {
            let field = |f: &str| format!("tiers[{i}].{f}");
            check_name_id(&tier.tier_id, "tier id")
                .map_err(|e| spec_error(field("tierId"), e.0))?;
            if !seen_tiers.insert(tier.tier_id.clone()) {
                return Err(spec_error(field("tierId"), "duplicate tier id"));
            }
            if tier.name.trim().is_empty() || tier.name.chars().count() > EVENT_NAME_LEN_MAX {
                return Err(spec_error(
                    field("name"),
                    format!("must be 1-{EVENT_NAME_LEN_MAX} characters, not only white space"),
                ));
            }
            check_range(
                &field("capacity"),
                tier.capacity.into(),
                1,
                TIER_CAPACITY_MAX.into(),
            )?;
            check_price(&field("priceMinor"), tier.price_minor)?;
        }
        self.sale.validate(self)
    }

    /// Every seat of every section with its price, in section order then row then number:
    /// a chart's seat at its category's price, any other at its section's.
    pub fn seats(&self) -> impl Iterator<Item = (SeatRef, i64)> + '_ {
        self.sections.iter().flat_map(move |section| {
            (1..=section.rows).flat_map(move |row| {
                (1..=section.row_len(row)).map(move |number| {
                    let seat = SeatRef {
                        section: section.name.clone(),
                        row,
                        number,
                    };
                    let price = self
                        .chart
                        .as_ref()
                        .and_then(|chart| chart.seat_price(&seat))
                        .unwrap_or(section.price_minor);
                    (seat, price)
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn spec() -> EventSpec {
        EventSpec {
            name: "Stadium Night".into(),
            starts_at: time::macros::datetime!(2026-12-31 20:00 UTC),
            on_sale_at: None,
            currency: "EUR".into(),
            hold_ttl_s: 300,
            payment_grace_s: 120,
            max_seats_per_hold: 6,
            max_tickets_per_account: 6,
            exchange_cutoff_s: 3600,
            transfer_cutoff_s: 0,
            waitlist_offer_ttl_s: 600,
            refund_policy: None,
            holder_policy: None,
            sale: Default::default(),
            chart: None,
            waiting_room: WaitingRoomSettings::default(),
            sections: vec![Section::rectangle("A", 2, 3, 9900)],
            tiers: vec![Tier {
                tier_id: "FLOOR".into(),
                name: "Floor".into(),
                capacity: 10,
                price_minor: 5900,
            }],
        }
    }

    #[test]
    fn valid_spec_and_its_seats() {
        let spec = spec();
        spec.validate().unwrap();
        let seats: Vec<String> = spec.seats().map(|(s, _)| s.to_string()).collect();
        assert_eq!(
            seats,
            ["A-1-1", "A-1-2", "A-1-3", "A-2-1", "A-2-2", "A-2-3"]
        );
    }

    #[test]
    fn each_limit_names_its_field() {
        type Mutation = Box<dyn Fn(&mut EventSpec)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("name", Box::new(|s| s.name = " ".into())),
            ("currency", Box::new(|s| s.currency = "eur".into())),
            ("holdTtlSeconds", Box::new(|s| s.hold_ttl_s = 0)),
            ("maxSeatsPerHold", Box::new(|s| s.max_seats_per_hold = 0)),
            ("sections[0].rows", Box::new(|s| s.sections[0].rows = 0)),
            (
                "sections[0].name",
                Box::new(|s| s.sections[0].name = "A-B".into()),
            ),
            (
                "sections[0].priceMinor",
                Box::new(|s| s.sections[0].price_minor = -1),
            ),
            ("tiers[0].capacity", Box::new(|s| s.tiers[0].capacity = 0)),
            (
                "sections",
                Box::new(|s| {
                    s.sections.clear();
                    s.tiers.clear();
                }),
            ),
            (
                "sections",
                Box::new(|s| {
                    s.sections[0].rows = 1000;
                    s.sections[0].seats_per_row = 1000;
                }),
            ),
        ];
        for (field, mutate) in cases {
            let mut spec = spec();
            mutate(&mut spec);
            let err = spec.validate().unwrap_err();
            assert_eq!(err.field, field, "{err}");
        }
    }
}
