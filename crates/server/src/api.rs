//! The JSON shapes of the API (camelCase, unknown fields refused) and their conversion from
//! store records. These types are also the OpenAPI schemas.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::event::{
    EventSpec, QueuePolicy, RefundPolicy, Section, Tier, WaitingRoomSettings,
};
use boxoffice_store::{Counts, EventCounts, EventRecord, HoldView};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/admin/events` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateEventBody {
    /// 1-200 characters, not only white space.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub starts_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub on_sale_at: Option<OffsetDateTime>,
    /// ISO 4217, e.g. `EUR`.
    #[schema(min_length = 3, max_length = 3, pattern = "^[A-Z]{3}$")]
    pub currency: String,
    #[serde(default = "default_hold_ttl")]
    #[schema(minimum = 1, maximum = 86_400, default = 300)]
    pub hold_ttl_seconds: u32,
    #[serde(default = "default_payment_grace")]
    #[schema(minimum = 0, maximum = 3_600, default = 120)]
    pub payment_grace_seconds: u32,
    #[serde(default = "default_six")]
    #[schema(minimum = 1, maximum = 100, default = 6)]
    pub max_seats_per_hold: u32,
    #[serde(default = "default_six")]
    #[schema(minimum = 1, maximum = 10_000, default = 6)]
    pub max_tickets_per_account: u32,
    #[serde(default = "default_exchange_cutoff")]
    #[schema(minimum = 0, maximum = 31_536_000, default = 3600)]
    pub exchange_cutoff_seconds: u32,
    /// Transfers close this long before the start, by the store's clock (0: at the start).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 31_536_000, default = 0)]
    pub transfer_cutoff_seconds: u32,
    /// How long a waiting-list offer's hold lasts.
    #[serde(default = "default_waitlist_offer_ttl")]
    #[schema(minimum = 1, maximum = 86_400, default = 600)]
    pub waitlist_offer_ttl_seconds: u32,
    /// When fans may refund their own tickets; absent: they may not.
    #[serde(default)]
    pub refund_policy: Option<RefundPolicyBody>,
    /// What each ticket's holder gives before payment; absent: a name may be given, nothing
    /// is asked.
    #[serde(default)]
    pub holder_policy: Option<HolderPolicyBody>,
    #[serde(default)]
    pub waiting_room: Option<WaitingRoomBody>,
    /// Ticket types beyond the standard one (each section's or tier's own `priceMinor`).
    #[serde(default)]
    #[schema(max_items = 20)]
    pub ticket_types: Vec<crate::sale_api::pricing::TicketTypeBody>,
    /// Fees per ticket or per order, shown in every all-in price.
    #[serde(default)]
    #[schema(max_items = 10)]
    pub fees: Vec<crate::sale_api::pricing::FeeBody>,
    /// The tax on face value and fees; absent: none.
    #[serde(default)]
    pub tax: Option<crate::sale_api::pricing::TaxBody>,
    /// Presale lanes and the general sale; absent: one general sale from `onSaleAt`.
    #[serde(default)]
    #[schema(max_items = 20)]
    pub phases: Vec<crate::sale_api::phases::PhaseBody>,
    /// Seats and tier units kept back from sale.
    #[serde(default)]
    #[schema(max_items = 100)]
    pub allocations: Vec<crate::sale_api::allocations::AllocationBody>,
    /// Reserved seating: at most 200 sections with unique names and 200,000 seats in all;
    /// an event needs at least one section or one tier, or a `chart`.
    #[serde(default)]
    #[schema(max_items = 200)]
    pub sections: Vec<SectionBody>,
    /// General admission: at most 50 tiers with unique ids.
    #[serde(default)]
    #[schema(max_items = 50)]
    pub tiers: Vec<TierBody>,
    /// Instead of `sections` and `tiers`: a stored venue chart the event copies, its
    /// reserved sections becoming sections (seats as the chart places them) and its standing
    /// areas tiers, each seat and area priced by its category (docs/VENUES.md).
    #[serde(default)]
    pub chart: Option<EventChartBody>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
}

/// The chart an event is created on (`POST /v1/admin/events`'s `chart`), and its prices.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventChartBody {
    /// A chart's id (`POST /v1/admin/venue-charts`).
    #[schema(min_length = 1, max_length = 128)]
    pub chart_id: String,
    /// The standard ticket's face price per category key, in minor units (0-100,000,000):
    /// every category a seat or a standing area of the chart uses, and no other key.
    #[schema(value_type = std::collections::HashMap<String, i64>, example = json!({"A": 5000, "B": 3000, "STAND": 2000}))]
    pub category_prices: std::collections::BTreeMap<String, i64>,
    /// Until this instant (RFC 3339, by the store's clock) the chart's wheelchair spaces and
    /// companion seats are kept for holds that say `accessible: true`; from it they sell to
    /// everyone. Absent: they sell to everyone from the start.
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub accessible_release_at: Option<time::OffsetDateTime>,
}

/// An event's refund policy: a fan may refund until the start minus the cutoff (store
/// clock), getting each ticket's price less the kept fee.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefundPolicyBody {
    #[schema(minimum = 0, maximum = 31_536_000, example = 86_400)]
    pub fan_refund_cutoff_seconds: u32,
    /// Kept from each ticket's price.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100_000_000, default = 0)]
    pub keep_fee_minor: i64,
}

/// What an event asks of each ticket's holder before payment (issue 39).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HolderPolicyBody {
    /// Every ticket needs a holder's name before the checkout.
    #[serde(default)]
    pub name_required: bool,
    /// The event's own questions, asked per ticket (at most 20, ids unique).
    #[serde(default)]
    #[schema(max_items = 20)]
    pub questions: Vec<HolderQuestionBody>,
    /// The owner may change a ticket's holder until this long before the start, by the
    /// store's clock (0: until the start).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 31_536_000, default = 0)]
    pub change_cutoff_seconds: u32,
}

/// One question an event asks of each holder.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HolderQuestionBody {
    /// The answer's key in `answers`.
    #[schema(
        min_length = 1,
        max_length = 40,
        pattern = "^[A-Za-z0-9_-]{1,40}$",
        example = "dob"
    )]
    pub question_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Date of birth",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub label: String,
    pub kind: QuestionKindName,
    /// The checkout is refused until every ticket has an answer.
    #[serde(default)]
    pub required: bool,
}

/// Who will use a ticket: a name and the answers to the event's questions (issue 39).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HolderView {
    /// The holder's name (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        max_length = 200,
        example = "Ada Lovelace",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
    /// Answers by question id: text, or a date as `YYYY-MM-DD`.
    #[serde(default)]
    #[schema(example = json!({"dob": "1990-01-31"}))]
    pub answers: std::collections::BTreeMap<String, String>,
}

impl HolderView {
    pub fn of(details: &boxoffice_domain::holder::HolderDetails) -> Self {
        Self {
            name: details.name.clone(),
            answers: details.answers.clone(),
        }
    }

    pub fn into_details(self) -> boxoffice_domain::holder::HolderDetails {
        boxoffice_domain::holder::HolderDetails {
            name: self.name,
            answers: self.answers,
        }
    }
}

/// What a question's answer is: free text (at most 200 characters) or a date (`YYYY-MM-DD`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum QuestionKindName {
    Text,
    Date,
}

impl HolderPolicyBody {
    pub fn into_policy(self) -> boxoffice_domain::holder::HolderPolicy {
        use boxoffice_domain::holder::{HolderPolicy, HolderQuestion, QuestionKind};
        HolderPolicy {
            name_required: self.name_required,
            questions: self
                .questions
                .into_iter()
                .map(|q| HolderQuestion {
                    question_id: q.question_id,
                    label: q.label,
                    kind: match q.kind {
                        QuestionKindName::Text => QuestionKind::Text,
                        QuestionKindName::Date => QuestionKind::Date,
                    },
                    required: q.required,
                })
                .collect(),
            change_cutoff_s: self.change_cutoff_seconds,
        }
    }

    pub fn of(policy: &boxoffice_domain::holder::HolderPolicy) -> Self {
        use boxoffice_domain::holder::QuestionKind;
        Self {
            name_required: policy.name_required,
            questions: policy
                .questions
                .iter()
                .map(|q| HolderQuestionBody {
                    question_id: q.question_id.clone(),
                    label: q.label.clone(),
                    kind: match q.kind {
                        QuestionKind::Text => QuestionKindName::Text,
                        QuestionKind::Date => QuestionKindName::Date,
                    },
                    required: q.required,
                })
                .collect(),
            change_cutoff_seconds: policy.change_cutoff_s,
        }
    }
}

fn default_hold_ttl() -> u32 {
    300
}
fn default_payment_grace() -> u32 {
    120
}
fn default_six() -> u32 {
    6
}
fn default_waitlist_offer_ttl() -> u32 {
    600
}
fn default_exchange_cutoff() -> u32 {
    3600
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitingRoomBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<QueuePolicyName>)]
    pub policy: Option<QueuePolicy>,
    /// 1-10,000,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10_000_000)]
    pub max_active_shoppers: Option<u32>,
    /// 10-86,400 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 86_400)]
    pub admission_ttl_seconds: Option<u32>,
    /// The release controller's first rate (1 to `maxReleasePerSecond`; default 10); slow
    /// start doubles it every healthy second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100_000)]
    pub start_release_per_second: Option<u32>,
    /// The release controller's ceiling, 1-100000 (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100_000)]
    pub max_release_per_second: Option<u32>,
    /// Hold latency p99 above which release backs off, 1-60000 ms (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 60_000)]
    pub target_hold_p99_ms: Option<u32>,
    /// How long a released fan may take to claim the admission, 10-86400 s (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 86_400)]
    pub claim_window_seconds: Option<u32>,
    /// How long an admitted fan's shopper slot stays idle (no hold yet, or after a refused
    /// hold) before it goes back to the queue, 10-3600 s (default 60). The admission stays
    /// valid for its TTL: a later try takes a slot again if one is free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 10, maximum = 3_600)]
    pub hold_window_seconds: Option<u32>,
    /// Let the hold TTL follow the sale (default false): while fans wait in the queue, a new
    /// hold lasts the measured 99th percentile of the time from hold to checkout start plus
    /// 30 s (at least 60 s, never more than `holdTtlSeconds`); a granted hold's `expiresAt`
    /// never moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_ttl_follows_sale: Option<bool>,
}

impl WaitingRoomBody {
    /// The settings this body gives, each field absent taken from `defaults`.
    pub fn settings(self, defaults: &WaitingRoomSettings) -> WaitingRoomSettings {
        let body = self;
        WaitingRoomSettings {
            enabled: body.enabled.unwrap_or(defaults.enabled),
            policy: body.policy.unwrap_or(defaults.policy),
            max_active_shoppers: body
                .max_active_shoppers
                .unwrap_or(defaults.max_active_shoppers),
            admission_ttl_seconds: body
                .admission_ttl_seconds
                .unwrap_or(defaults.admission_ttl_seconds),
            // A lower ceiling alone brings the default start down with it.
            start_release_per_second: body.start_release_per_second.unwrap_or(
                defaults.start_release_per_second.min(
                    body.max_release_per_second
                        .unwrap_or(defaults.max_release_per_second),
                ),
            ),
            max_release_per_second: body
                .max_release_per_second
                .unwrap_or(defaults.max_release_per_second),
            target_hold_p99_ms: body
                .target_hold_p99_ms
                .unwrap_or(defaults.target_hold_p99_ms),
            claim_window_seconds: body
                .claim_window_seconds
                .unwrap_or(defaults.claim_window_seconds),
            hold_window_seconds: body
                .hold_window_seconds
                .unwrap_or(defaults.hold_window_seconds),
            hold_ttl_follows_sale: body
                .hold_ttl_follows_sale
                .unwrap_or(defaults.hold_ttl_follows_sale),
        }
    }

    /// The body that shows `settings` (every field given).
    pub fn of(settings: &WaitingRoomSettings) -> Self {
        Self {
            enabled: Some(settings.enabled),
            policy: Some(settings.policy),
            max_active_shoppers: Some(settings.max_active_shoppers),
            admission_ttl_seconds: Some(settings.admission_ttl_seconds),
            start_release_per_second: Some(settings.start_release_per_second),
            max_release_per_second: Some(settings.max_release_per_second),
            target_hold_p99_ms: Some(settings.target_hold_p99_ms),
            claim_window_seconds: Some(settings.claim_window_seconds),
            hold_window_seconds: Some(settings.hold_window_seconds),
            hold_ttl_follows_sale: Some(settings.hold_ttl_follows_sale),
        }
    }
}

/// How the waiting room orders its fans.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)] // the schema of `QueuePolicy`, which is the domain's
pub enum QueuePolicyName {
    Fifo,
    Random,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SectionBody {
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub name: String,
    #[schema(minimum = 1, maximum = 1_000)]
    pub rows: u32,
    #[schema(minimum = 1, maximum = 1_000)]
    pub seats_per_row: u32,
    #[schema(minimum = 0, maximum = 100_000_000)]
    pub price_minor: i64,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TierBody {
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub tier_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub name: String,
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub capacity: u32,
    #[schema(minimum = 0, maximum = 100_000_000)]
    pub price_minor: i64,
}

impl CreateEventBody {
    pub fn into_spec(self) -> EventSpec {
        let defaults = WaitingRoomSettings::default();
        let waiting_room = match self.waiting_room {
            None => defaults,
            Some(body) => body.settings(&defaults),
        };
        EventSpec {
            name: self.name,
            starts_at: self.starts_at,
            on_sale_at: self.on_sale_at,
            currency: self.currency,
            hold_ttl_s: self.hold_ttl_seconds,
            payment_grace_s: self.payment_grace_seconds,
            max_seats_per_hold: self.max_seats_per_hold,
            max_tickets_per_account: self.max_tickets_per_account,
            exchange_cutoff_s: self.exchange_cutoff_seconds,
            transfer_cutoff_s: self.transfer_cutoff_seconds,
            waitlist_offer_ttl_s: self.waitlist_offer_ttl_seconds,
            refund_policy: self.refund_policy.map(|p| RefundPolicy {
                fan_refund_cutoff_s: p.fan_refund_cutoff_seconds,
                keep_fee_minor: p.keep_fee_minor,
            }),
            holder_policy: self.holder_policy.map(HolderPolicyBody::into_policy),
            sale: crate::sale_api::setup(
                self.ticket_types,
                self.fees,
                self.tax,
                self.phases,
                self.allocations,
            ),
            // Set by the route, which reads the stored chart (`routes::events::on_chart`).
            chart: None,
            waiting_room,
            sections: self
                .sections
                .into_iter()
                .map(|s| Section::rectangle(&s.name, s.rows, s.seats_per_row, s.price_minor))
                .collect(),
            tiers: self
                .tiers
                .into_iter()
                .map(|t| Tier {
                    tier_id: t.tier_id,
                    name: t.name,
                    capacity: t.capacity,
                    price_minor: t.price_minor,
                })
                .collect(),
        }
    }
}

/// An event with its sections and tiers; counts are present on `GET /v1/events/{id}` and on
/// creation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    pub event_id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub starts_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub on_sale_at: OffsetDateTime,
    pub currency: String,
    /// `ACTIVE`, or `CANCELLED` once an organiser cancelled it (shown with the counts: on one
    /// event and its creation, not in the list).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::api::status_names::EventStatus>)]
    pub status: Option<&'static str>,
    pub hold_ttl_seconds: u32,
    pub payment_grace_seconds: u32,
    pub max_seats_per_hold: u32,
    pub max_tickets_per_account: u32,
    pub exchange_cutoff_seconds: u32,
    pub transfer_cutoff_seconds: u32,
    pub waitlist_offer_ttl_seconds: u32,
    /// When fans may refund their own tickets; absent: they may not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refund_policy: Option<RefundPolicyBody>,
    /// What each ticket's holder gives before payment; absent: a name may be given, nothing
    /// is asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holder_policy: Option<HolderPolicyBody>,
    /// Ticket types beyond the standard one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ticket_types: Vec<crate::sale_api::pricing::TicketTypeBody>,
    /// Fees per ticket or per order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fees: Vec<crate::sale_api::pricing::FeeBody>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax: Option<crate::sale_api::pricing::TaxBody>,
    /// The sale's phases; absent: one general sale from `onSaleAt`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<crate::sale_api::phases::PhaseBody>,
    /// Allocations as created.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocations: Vec<crate::sale_api::allocations::AllocationBody>,
    pub waiting_room: WaitingRoomView,
    pub sections: Vec<SectionView>,
    pub tiers: Vec<TierView>,
    /// The venue chart the event was created on; absent: sections of rows × seats. Each
    /// seat's labels, position, category and kind are on the seat map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chart: Option<EventChartView>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
}

/// What a chart event shows of its chart beside its sections and tiers: the categories with
/// their prices (the seat map's legend) and the standing areas' shapes.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventChartView {
    /// The stored chart the event copied (the event keeps its own copy).
    pub chart_id: String,
    pub name: String,
    /// Where the stage (or the pitch's centre) is drawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<boxoffice_domain::venue::Point>)]
    pub stage: Option<boxoffice_domain::venue::Point>,
    /// Every category of the chart, in its order.
    pub categories: Vec<CategoryView>,
    /// The standing areas (the event's tiers of the same ids), in the chart's order.
    pub standing_areas: Vec<StandingAreaView>,
    /// Until this instant (the store's clock) wheelchair spaces and companion seats are held
    /// only by holds with `accessible: true`; absent: they sell to everyone.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "time::serde::rfc3339::option"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub accessible_release_at: Option<OffsetDateTime>,
}

/// A price category of a chart event.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CategoryView {
    pub key: String,
    pub name: String,
    /// `#RRGGBB`; absent: the storefront picks one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub colour: Option<String>,
    /// The standard ticket's face price (0 for a category no seat uses and none was given).
    pub price_minor: i64,
    /// The standard ticket's all-in price: face, per-ticket fees and added tax.
    pub all_in_price_minor: i64,
}

/// A standing area of a chart event as the map draws it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StandingAreaView {
    /// The tier that sells it.
    pub tier_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub category: String,
    pub capacity: u32,
    /// Its corners in order (a box as its four corners from the top left, clockwise).
    #[schema(value_type = Vec<boxoffice_domain::venue::Point>)]
    pub outline: Vec<boxoffice_domain::venue::Point>,
}

impl EventChartView {
    fn of(
        chart: &boxoffice_domain::event_chart::EventChart,
        prices: &boxoffice_domain::pricing::PriceList,
    ) -> Self {
        use boxoffice_domain::event_chart::EventChart;
        use boxoffice_domain::venue::SectionKind;
        Self {
            chart_id: chart.chart_id.clone(),
            name: chart.chart.name.clone(),
            stage: chart.chart.stage,
            categories: chart
                .chart
                .categories
                .iter()
                .map(|c| {
                    let price_minor = chart.price_of(&c.key);
                    CategoryView {
                        key: c.key.clone(),
                        name: c.name.clone(),
                        colour: c.colour.clone(),
                        price_minor,
                        all_in_price_minor: prices.ticket(price_minor).all_in_minor,
                    }
                })
                .collect(),
            standing_areas: chart
                .chart
                .sections
                .iter()
                .filter(|s| s.kind == SectionKind::Standing)
                .map(|s| StandingAreaView {
                    tier_id: s.name.clone(),
                    title: s.title.clone(),
                    category: s.category.clone().unwrap_or_default(),
                    capacity: s.capacity.unwrap_or(0),
                    outline: EventChart::outline(s),
                })
                .collect(),
            accessible_release_at: chart.accessible_release_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitingRoomView {
    pub enabled: bool,
    #[schema(value_type = String, example = "fifo")]
    pub policy: QueuePolicy,
    pub max_active_shoppers: u32,
    pub admission_ttl_seconds: u32,
    pub start_release_per_second: u32,
    pub max_release_per_second: u32,
    pub target_hold_p99_ms: u32,
    pub claim_window_seconds: u32,
    pub hold_window_seconds: u32,
    pub hold_ttl_follows_sale: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SectionView {
    pub name: String,
    /// A chart's section: what fans read ("Lower tier, block 12"), when the chart names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A chart's section: its rows (their lengths differ: see `rowLengths`).
    pub rows: u32,
    /// A chart's section: its longest row.
    pub seats_per_row: u32,
    /// A chart's section: the seats of each row, front to back; absent: every row has
    /// `seatsPerRow`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub row_lengths: Vec<u32>,
    /// A chart's section: its cheapest seat's price (each seat costs its category's).
    pub price_minor: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sold: Option<i64>,
    /// The most seats side by side in one row still free (held seats past their deadline
    /// count as free): the largest party seated together. From the seat map, like its own
    /// `sections[].largestBlock`; with the counts only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest_block: Option<u32>,
    /// The standard ticket's all-in price: face, per-ticket fees and added tax.
    pub all_in_price_minor: i64,
    /// Every type sold here with its all-in price, standard first; absent when the event
    /// has no ticket types, fees or tax.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ticket_prices: Vec<crate::sale_api::pricing::TypePriceView>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TierView {
    pub tier_id: String,
    pub name: String,
    pub capacity: u32,
    pub price_minor: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sold: Option<i64>,
    /// As a section's.
    pub all_in_price_minor: i64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ticket_prices: Vec<crate::sale_api::pricing::TypePriceView>,
}

impl EventView {
    /// The event; `counts` fills the per-section and per-tier counts when given.
    pub fn new(event: &EventRecord, counts: Option<&EventCounts>) -> Self {
        let prices = boxoffice_domain::pricing::PriceList::of(&event.sale);
        let shown_types = |place: &str, price_minor: i64| {
            if prices.is_plain() {
                Vec::new()
            } else {
                crate::sale_api::pricing::type_prices(&prices, place, price_minor)
            }
        };
        let section_counts = |name: &str| -> Option<Counts> {
            counts.map(|c| {
                c.sections
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, c)| *c)
                    .unwrap_or_default()
            })
        };
        let tier_counts = |id: &str| -> Option<Counts> {
            counts.map(|c| {
                c.tiers
                    .iter()
                    .find(|(n, _)| n == id)
                    .map(|(_, c)| *c)
                    .unwrap_or_default()
            })
        };
        Self {
            event_id: event.event_id.clone(),
            name: event.name.clone(),
            starts_at: event.starts_at,
            on_sale_at: event.on_sale_at,
            currency: event.currency.clone(),
            status: counts.map(|c| if c.cancelled { "CANCELLED" } else { "ACTIVE" }),
            hold_ttl_seconds: event.hold_ttl_s,
            payment_grace_seconds: event.payment_grace_s,
            max_seats_per_hold: event.max_seats_per_hold,
            max_tickets_per_account: event.max_tickets_per_account,
            exchange_cutoff_seconds: event.exchange_cutoff_s,
            transfer_cutoff_seconds: event.transfer_cutoff_s,
            waitlist_offer_ttl_seconds: event.waitlist_offer_ttl_s,
            refund_policy: event.refund_policy.map(|p| RefundPolicyBody {
                fan_refund_cutoff_seconds: p.fan_refund_cutoff_s,
                keep_fee_minor: p.keep_fee_minor,
            }),
            holder_policy: event.holder_policy.as_ref().map(HolderPolicyBody::of),
            ticket_types: event.sale.ticket_types.iter().map(Into::into).collect(),
            fees: event.sale.fees.iter().map(Into::into).collect(),
            tax: event.sale.tax.as_ref().map(Into::into),
            phases: event.sale.phases.iter().map(Into::into).collect(),
            allocations: event.sale.allocations.iter().map(Into::into).collect(),
            waiting_room: WaitingRoomView {
                enabled: event.waiting_room.enabled,
                policy: event.waiting_room.policy,
                max_active_shoppers: event.waiting_room.max_active_shoppers,
                admission_ttl_seconds: event.waiting_room.admission_ttl_seconds,
                start_release_per_second: event.waiting_room.start_release_per_second,
                max_release_per_second: event.waiting_room.max_release_per_second,
                target_hold_p99_ms: event.waiting_room.target_hold_p99_ms,
                claim_window_seconds: event.waiting_room.claim_window_seconds,
                hold_window_seconds: event.waiting_room.hold_window_seconds,
                hold_ttl_follows_sale: event.waiting_room.hold_ttl_follows_sale,
            },
            sections: event
                .sections
                .iter()
                .map(|s| {
                    let c = section_counts(&s.name);
                    SectionView {
                        name: s.name.clone(),
                        title: event
                            .chart
                            .as_ref()
                            .and_then(|chart| chart.section(&s.name))
                            .and_then(|chart_section| chart_section.title.clone()),
                        rows: s.rows,
                        seats_per_row: s.seats_per_row,
                        row_lengths: s.row_lengths.clone(),
                        price_minor: s.price_minor,
                        available: c.map(|c| c.available),
                        held: c.map(|c| c.held),
                        sold: c.map(|c| c.sold),
                        largest_block: None,
                        all_in_price_minor: prices.ticket(s.price_minor).all_in_minor,
                        ticket_prices: shown_types(&s.name, s.price_minor),
                    }
                })
                .collect(),
            tiers: event
                .tiers
                .iter()
                .map(|t| {
                    let c = tier_counts(&t.tier_id);
                    TierView {
                        tier_id: t.tier_id.clone(),
                        name: t.name.clone(),
                        capacity: t.capacity,
                        price_minor: t.price_minor,
                        available: c.map(|c| c.available),
                        held: c.map(|c| c.held),
                        sold: c.map(|c| c.sold),
                        all_in_price_minor: prices.ticket(t.price_minor).all_in_minor,
                        ticket_prices: shown_types(&t.tier_id, t.price_minor),
                    }
                })
                .collect(),
            chart: event
                .chart
                .as_ref()
                .map(|chart| EventChartView::of(chart, &prices)),
            created_at: event.created_at,
        }
    }

    /// Shows `policy` as the event's refund policy (read from the store now: the cached event
    /// may be older than a `PATCH`).
    pub fn with_refund_policy(mut self, policy: Option<RefundPolicy>) -> Self {
        self.refund_policy = policy.map(|p| RefundPolicyBody {
            fan_refund_cutoff_seconds: p.fan_refund_cutoff_s,
            keep_fee_minor: p.keep_fee_minor,
        });
        self
    }

    /// Sets each section's `largestBlock` (by section name; a section not named keeps none).
    pub fn with_largest_blocks(mut self, blocks: &[(String, u32)]) -> Self {
        for section in &mut self.sections {
            section.largest_block = blocks
                .iter()
                .find(|(name, _)| *name == section.name)
                .map(|(_, largest)| *largest);
        }
        self
    }

    /// The largest blocks of a brand-new event: every row is free.
    pub fn fresh_largest_blocks(event: &EventRecord) -> Vec<(String, u32)> {
        event
            .sections
            .iter()
            .map(|s| (s.name.clone(), s.seats_per_row))
            .collect()
    }

    /// Counts of a brand-new event: everything available.
    pub fn fresh_counts(event: &EventRecord) -> EventCounts {
        let all_available = |n: u64| Counts {
            available: i64::try_from(n).unwrap_or(i64::MAX),
            held: 0,
            sold: 0,
        };
        EventCounts {
            sections: event
                .sections
                .iter()
                .map(|s| (s.name.clone(), all_available(s.seat_count())))
                .collect(),
            tiers: event
                .tiers
                .iter()
                .map(|t| (t.tier_id.clone(), all_available(t.capacity.into())))
                .collect(),
            cancelled: false,
        }
    }
}

/// A page of events.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventPage {
    pub events: Vec<EventView>,
    /// Pass as `cursor` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST /v1/events/{eventId}/holds` body: exactly one of `seatIds`, `tierId` + `quantity`,
/// `bestAvailable`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateHoldBody {
    /// 1 to the event's `maxSeatsPerHold` distinct seats of the event.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100, value_type = Option<Vec<SeatId>>)]
    pub seat_ids: Option<Vec<String>>,
    /// A tier of the event, with `quantity`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub tier_id: Option<String>,
    /// 1 to the event's `maxSeatsPerHold`, with `tierId`.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: Option<u32>,
    #[serde(default)]
    pub best_available: Option<BestAvailableBody>,
    /// Ticket types by count (`{"adult": 2, "child": 1}`), summing to the hold's quantity;
    /// given to the hold's seats in its seat order, `standard` first, then the event's types
    /// in the event's order. Absent: every ticket `standard`.
    #[serde(default)]
    pub ticket_types: Option<std::collections::BTreeMap<String, u32>>,
    /// Alternative to the `Idempotency-Key` header (the same key when both are sent).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 255, pattern = "^[!-~]+$")]
    pub idempotency_key: Option<String>,
    /// Alternative to the `Admission-Token` header.
    #[serde(default)]
    pub admission_token: Option<String>,
    /// The sale phase to buy in (absent: the admission token's lane, else the phase open
    /// now, an open one first).
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub phase_id: Option<String>,
    /// The fan needs accessible places: the hold may take wheelchair spaces and companion
    /// seats an event on a chart keeps until its `accessibleReleaseAt` (docs/VENUES.md,
    /// "Accessible seats"). Absent: false. A companion seat is held only with a wheelchair
    /// space of its section in the same hold, whatever this says.
    #[serde(default)]
    pub accessible: Option<bool>,
}

/// A seat id: `<section>-<row>-<number>`, e.g. `A-1-1`.
#[derive(Debug, ToSchema)]
#[schema(value_type = String, pattern = "^[A-Za-z0-9_]{1,32}-[1-9][0-9]{0,5}-[1-9][0-9]{0,5}$", min_length = 5, max_length = 46)]
#[allow(dead_code)] // the schema of a seat id; the server parses them with `ids::SeatRef`
pub struct SeatId(String);

/// n adjacent seats in one row chosen by the server; when no row has them together,
/// `together` says whether the party may be split.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BestAvailableBody {
    /// 1 to the event's `maxSeatsPerHold`.
    #[schema(minimum = 1, maximum = 100)]
    pub quantity: u32,
    /// A section of the event.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 32, pattern = "^[A-Za-z0-9_]{1,32}$")]
    pub section: Option<String>,
    #[serde(default)]
    #[schema(minimum = 0)]
    pub max_price_minor: Option<i64>,
    /// Absent or `null`: `prefer`.
    #[serde(default)]
    pub together: Option<TogetherBody>,
}

/// How together a best-available party must sit when no block of its size is left in one
/// row: `prefer` (the default) seats it as close as the house allows — one row, then
/// adjacent rows, then anywhere in one section — and the answer says `split: true`;
/// `required` refuses (409 `SEATS_UNAVAILABLE` with `largestBlock`); `no` takes any free
/// seats of the asked sections, best first. A block that fits is taken in every mode.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TogetherBody {
    Prefer,
    Required,
    No,
}

impl From<TogetherBody> for boxoffice_domain::best::Together {
    fn from(body: TogetherBody) -> Self {
        match body {
            TogetherBody::Prefer => Self::Prefer,
            TogetherBody::Required => Self::Required,
            TogetherBody::No => Self::No,
        }
    }
}

/// The status names the API answers with, as the document's enums (so that a client
/// generated from it gets one type per status, not a plain string). The domain's statuses
/// (hold, seat, order, payment) are their own schemas (`boxoffice-domain`'s `openapi`
/// feature); these are the others. Schema only: the handlers write the store's own names
/// (`as_str`), and `tests::status_names_are_the_domains` checks that each name here is one
/// of them.
pub mod status_names {
    use utoipa::ToSchema;

    /// A ticket's status: `EXCHANGING` while an exchange that pays a difference is open.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum TicketStatus {
        Valid,
        CheckedIn,
        Voided,
        Exchanging,
    }

    /// An order's status: `REFUNDED` once no valid ticket is left and every refund was paid back.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum OrderStatus {
        PendingPayment,
        Confirmed,
        Cancelled,
        Refunded,
    }

    /// An event's status.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum EventStatus {
        Active,
        Cancelled,
    }

    /// A cancellation's status: `CANCELLED` once every paid order's money went back (or its
    /// refund failed, for the operator).
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum CancellationStatus {
        Cancelling,
        Cancelled,
    }

    /// A refund's status: `FAILED` is money still owed (the operator's case).
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum RefundStatus {
        Pending,
        Succeeded,
        Failed,
    }

    /// An exchange's status.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum ExchangeStatus {
        PaymentRequired,
        Completed,
        Failed,
        Expired,
    }

    /// A transfer's status (`EXPIRED`: an offer past `expiresAt`, store clock).
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum TransferStatus {
        Offered,
        Accepted,
        Declined,
        Withdrawn,
        Expired,
    }

    /// A waiting-list entry's status.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum WaitlistStatus {
        Waiting,
        Offered,
        Purchased,
        Lapsed,
        Left,
    }

    /// A webhook delivery's status.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum DeliveryStatus {
        Pending,
        Delivered,
        Failed,
    }

    /// A place in the waiting room: `SOLD_OUT` once nothing is left to sell.
    #[derive(Debug, ToSchema)]
    #[schema(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)] // schema only
    pub enum QueueStatus {
        Waiting,
        Admitted,
        Expired,
        SoldOut,
        Cancelled,
    }
}

/// A hold. `status` accounts for the store's clock: a hold past its deadline is `EXPIRED`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldResponse {
    pub hold_id: String,
    pub event_id: String,
    #[schema(value_type = boxoffice_domain::hold::HoldStatus, example = "HELD")]
    pub status: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: OffsetDateTime,
    pub seats: Vec<HeldSeatView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantity: Option<u32>,
    /// The all-in total: every ticket's all-in price and the order's fees.
    pub total_minor: i64,
    pub currency: String,
    /// `true` on the 201 of a best-available hold whose party was seated apart (no block of
    /// its size was left); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<bool>,
    /// Each ticket priced, in seat order (a tier's units in order).
    pub lines: Vec<crate::sale_api::pricing::PriceLineView>,
    pub breakdown: crate::sale_api::pricing::BreakdownView,
}

/// A seat of a hold or order at its all-in price (`priceMinor`), with its ticket type and
/// what the price is made of.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeldSeatView {
    pub seat_id: String,
    pub price_minor: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ticket_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub face_minor: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fees_minor: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tax_minor: Option<i64>,
}

impl HeldSeatView {
    /// The seats of `price`'s lines (a tier's lines have none).
    pub fn of_price(price: &boxoffice_domain::pricing::OrderPrice) -> Vec<Self> {
        price
            .lines
            .iter()
            .filter_map(|line| {
                Some(Self {
                    seat_id: line.seat_id.clone()?,
                    price_minor: line.all_in_minor,
                    ticket_type: Some(line.ticket_type.clone()),
                    face_minor: Some(line.face_minor),
                    fees_minor: Some(line.fees_minor),
                    tax_minor: Some(line.tax_minor),
                })
            })
            .collect()
    }
}

impl HoldResponse {
    pub fn from_view(hold: &HoldView, now: OffsetDateTime) -> Self {
        Self {
            hold_id: hold.hold_id.clone(),
            event_id: hold.event_id.clone(),
            status: hold.effective_status(now).as_str().to_owned(),
            expires_at: hold.expires_at,
            seats: Vec::new(),
            tier_id: hold.tier_id.clone(),
            quantity: hold.tier_id.as_ref().map(|_| hold.quantity),
            total_minor: hold.total_minor,
            currency: hold.currency.clone(),
            split: None,
            lines: Vec::new(),
            breakdown: Default::default(),
        }
        .priced(&crate::sale_api::pricing::shown_price(
            None,
            &hold.seats,
            hold.quantity,
            hold.total_minor,
        ))
    }

    /// The hold at `price`: its seats, lines, breakdown and total.
    pub fn priced(mut self, price: &boxoffice_domain::pricing::OrderPrice) -> Self {
        self.seats = HeldSeatView::of_price(price);
        self.lines = price.lines.iter().map(Into::into).collect();
        self.breakdown = price.breakdown().into();
        self.total_minor = price.total_minor;
        self
    }
}

/// RFC 9457 problem details, as every error is rendered.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable UPPER_SNAKE code clients branch on.
    pub code: String,
    /// `VALIDATION`: the offending field, by its JSON path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// 429 `RATE_LIMITED` of an abuse limit: its name (`holds-per-account`, ...); 409
    /// `PURCHASE_LIMIT`: the event's `maxTicketsPerAccount`, a number.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<ProblemLimit>)]
    pub limit: Option<serde_json::Value>,
    /// 409 `SEATS_UNAVAILABLE`: the asked seats that are sold or held (empty for a
    /// best-available hold, which names no seats); 409 `SEAT_KEPT_ACCESSIBLE`: the asked
    /// seats kept for fans who need accessible places.
    #[serde(rename = "unavailableSeatIds", skip_serializing_if = "Option::is_none")]
    pub unavailable_seat_ids: Option<Vec<String>>,
    /// 409 `SEATS_UNAVAILABLE` of a best-available hold: the most seats side by side in one
    /// row still free in the asked sections under the price cap (0: none free).
    #[serde(rename = "largestBlock", skip_serializing_if = "Option::is_none")]
    pub largest_block: Option<u32>,
    /// 409 `SOLD_OUT`: the tier asked for.
    #[serde(rename = "tierId", skip_serializing_if = "Option::is_none")]
    pub tier_id: Option<String>,
    /// 409 `SOLD_OUT`: how many of the tier are left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<u32>,
    /// 409 `PURCHASE_LIMIT`: the tickets the account holds or owns on the event now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current: Option<u32>,
    /// 409 `SALE_NOT_OPEN`: when the sale opens.
    #[serde(rename = "onSaleAt", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub on_sale_at: Option<String>,
    /// 409 of a waiting-list join: the account's live entry on the event.
    #[serde(rename = "waitlistId", skip_serializing_if = "Option::is_none")]
    pub waitlist_id: Option<String>,
    /// The sale phase of a refusal: 403 `ACCESS_CODE_REQUIRED`, 409 `OUTSIDE_PHASE`,
    /// `PHASE_ENDED`, `ACCESS_CODE_USED_UP`, `NOT_A_CODE_PHASE`; 422 `ACCESS_CODE_INVALID`.
    #[serde(rename = "phaseId", skip_serializing_if = "Option::is_none")]
    pub phase_id: Option<String>,
    /// 409 `PHASE_ENDED` of a hold: when the phase ended.
    #[serde(rename = "endedAt", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ended_at: Option<String>,
    /// 422 `CSV_INVALID`, `INVALID_CHART`: the 1-based line of the imported CSV at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 409 `ACCESS_CODE_EXISTS`: the imported code the phase has already.
    #[serde(rename = "accessCode", skip_serializing_if = "Option::is_none")]
    pub access_code: Option<String>,
    /// 422 `INVALID_CHART`: the chart's problems, each with its JSON path or its CSV line
    /// and column (the first 50; `field` and `line` above repeat the first one's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problems: Option<Vec<crate::routes::venues::ChartProblemView>>,
    /// 422 `INVALID_CHART`: how many problems the chart has in all.
    #[serde(rename = "problemsTotal", skip_serializing_if = "Option::is_none")]
    pub problems_total: Option<u32>,
    /// 409 `COMPANION_SEAT_ALONE`: the companion seat named without a wheelchair space of
    /// its section in the same hold.
    #[serde(rename = "seatId", skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    /// 409 `SEAT_KEPT_ACCESSIBLE`: when the kept wheelchair spaces and companion seats
    /// (`unavailableSeatIds`) sell to everyone.
    #[serde(rename = "releaseAt", skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub release_at: Option<String>,
}

/// `limit` of a problem: an abuse limit's name (429) or a purchase limit (409).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // schema only
pub enum ProblemLimit {
    Name(String),
    Count(u32),
}

/// Unix milliseconds as RFC 3339, rendered exactly as every other time in the API
/// (`time::serde::rfc3339`), so one instant reads the same on every endpoint.
pub fn rfc3339_ms(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::status_names;
    use utoipa::PartialSchema;

    /// The values of a schema-only enum, as the document lists them.
    fn names<T: PartialSchema>() -> Vec<String> {
        let schema = serde_json::to_value(T::schema()).expect("a schema");
        let values = schema["enum"].as_array().cloned().unwrap_or_default();
        assert!(!values.is_empty(), "{schema}");
        values
            .iter()
            .map(|v| v.as_str().expect("a name").to_owned())
            .collect()
    }

    /// Each status the document names is one the domain or the store writes, and as many
    /// (the domain's own enums included: their schema names against their `parse`).
    #[test]
    fn status_names_are_the_domains() {
        use boxoffice_domain::hold::{HoldStatus, SeatStatus};
        use boxoffice_domain::order::{OrderStatus, PaymentStatus};
        /// What, the document's names, whether the server writes a name, how many it has.
        type Check = (&'static str, Vec<String>, fn(&str) -> bool, usize);
        let checks: [Check; 9] = [
            (
                "hold",
                names::<HoldStatus>(),
                |s| HoldStatus::parse(s).is_some(),
                5,
            ),
            (
                "order",
                names::<OrderStatus>(),
                |s| OrderStatus::parse(s).is_some(),
                3,
            ),
            (
                "payment",
                names::<PaymentStatus>(),
                |s| PaymentStatus::parse(s).is_some(),
                7,
            ),
            (
                "seat",
                names::<SeatStatus>(),
                |s| SeatStatus::parse(s).is_some(),
                3,
            ),
            (
                "exchange",
                names::<status_names::ExchangeStatus>(),
                |s| boxoffice_store::exchange::ExchangeStatus::parse(s).is_some(),
                4,
            ),
            (
                "transfer",
                names::<status_names::TransferStatus>(),
                |s| boxoffice_store::transfer::TransferStatus::parse(s).is_some(),
                5,
            ),
            (
                "waitlist",
                names::<status_names::WaitlistStatus>(),
                |s| boxoffice_store::waitlist::WaitlistStatus::parse(s).is_some(),
                5,
            ),
            (
                "delivery",
                names::<status_names::DeliveryStatus>(),
                |s| boxoffice_store::webhook::DeliveryStatus::parse(s).is_some(),
                3,
            ),
            // A stored ticket is VALID, VOIDED or CHECKED_IN (the tables' CHECK); a valid
            // one an exchange has marked reads EXCHANGING.
            (
                "ticket",
                names::<status_names::TicketStatus>(),
                |s| ["VALID", "VOIDED", "CHECKED_IN", "EXCHANGING"].contains(&s),
                4,
            ),
        ];
        for (what, names, parses, count) in checks {
            assert_eq!(names.len(), count, "{what}: {names:?}");
            for name in &names {
                assert!(
                    parses(name),
                    "{what}: {name} is not a status the server writes"
                );
            }
        }
        assert_eq!(
            names::<status_names::QueueStatus>(),
            ["WAITING", "ADMITTED", "EXPIRED", "SOLD_OUT", "CANCELLED"]
        );
    }
}
