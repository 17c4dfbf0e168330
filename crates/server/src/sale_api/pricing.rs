//! Ticket types, fees and tax as the API spells them, and the priced lines and breakdown
//! every hold and order shows (issue 40).

use std::collections::BTreeMap;

use boxoffice_domain::pricing::{
    Breakdown, Fee, FeeBasis, OrderPrice, PriceLine, PriceList, STANDARD_TYPE, Tax, TicketType,
};
use boxoffice_store::pricing::SalesSplit;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A ticket type beyond the standard one, priced per section or tier.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TicketTypeBody {
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = "^[A-Za-z0-9_]{1,32}$",
        example = "child"
    )]
    pub type_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Child",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    /// Face price by section name or tier id; a place not named does not sell the type.
    #[schema(value_type = BTreeMap<String, i64>)]
    pub prices: BTreeMap<String, i64>,
    /// At most this many of the type in one hold or order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 100)]
    pub max_per_order: Option<u32>,
}

impl From<TicketTypeBody> for TicketType {
    fn from(body: TicketTypeBody) -> Self {
        Self {
            type_id: body.type_id,
            name: body.name,
            prices: body.prices,
            max_per_order: body.max_per_order,
        }
    }
}

impl From<&TicketType> for TicketTypeBody {
    fn from(t: &TicketType) -> Self {
        Self {
            type_id: t.type_id.clone(),
            name: t.name.clone(),
            prices: t.prices.clone(),
            max_per_order: t.max_per_order,
        }
    }
}

/// `ticket` or `order`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum FeeBasisName {
    Ticket,
    Order,
}

/// A fee: `fixedMinor` plus `shareBp` basis points of the face value, per ticket or order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FeeBody {
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Service fee",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    pub per: FeeBasisName,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 100_000_000, default = 0)]
    pub fixed_minor: i64,
    #[serde(default)]
    #[schema(minimum = 0, maximum = 10_000, default = 0)]
    pub share_bp: u32,
}

impl From<FeeBody> for Fee {
    fn from(body: FeeBody) -> Self {
        Self {
            name: body.name,
            per: match body.per {
                FeeBasisName::Ticket => FeeBasis::Ticket,
                FeeBasisName::Order => FeeBasis::Order,
            },
            fixed_minor: body.fixed_minor,
            share_bp: body.share_bp,
        }
    }
}

impl From<&Fee> for FeeBody {
    fn from(fee: &Fee) -> Self {
        Self {
            name: fee.name.clone(),
            per: match fee.per {
                FeeBasis::Ticket => FeeBasisName::Ticket,
                FeeBasis::Order => FeeBasisName::Order,
            },
            fixed_minor: fee.fixed_minor,
            share_bp: fee.share_bp,
        }
    }
}

/// The tax on face value and fees.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaxBody {
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "VAT",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    #[schema(minimum = 0, maximum = 10_000, example = 2000)]
    pub rate_bp: u32,
    /// Prices and fees include the tax; else it is added on top.
    pub included: bool,
}

impl From<TaxBody> for Tax {
    fn from(body: TaxBody) -> Self {
        Self {
            name: body.name,
            rate_bp: body.rate_bp,
            included: body.included,
        }
    }
}

impl From<&Tax> for TaxBody {
    fn from(tax: &Tax) -> Self {
        Self {
            name: tax.name.clone(),
            rate_bp: tax.rate_bp,
            included: tax.included,
        }
    }
}

/// One ticket of a hold or order, priced: what the fan pays (`allInMinor`) and what it is
/// made of.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PriceLineView {
    /// The seat; absent for a tier's unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seat_id: Option<String>,
    #[schema(example = "adult")]
    pub ticket_type: String,
    /// The face value charged (after a promo code's discount).
    pub face_minor: i64,
    /// What a promo code took off the face value.
    pub discount_minor: i64,
    /// Per-ticket fees.
    pub fees_minor: i64,
    /// The tax on face and fees (part of them when the event's tax is included).
    pub tax_minor: i64,
    /// What the fan pays for this ticket, the order's fees aside.
    pub all_in_minor: i64,
}

impl From<&PriceLine> for PriceLineView {
    fn from(line: &PriceLine) -> Self {
        Self {
            seat_id: line.seat_id.clone(),
            ticket_type: line.ticket_type.clone(),
            face_minor: line.face_minor,
            discount_minor: line.discount_minor,
            fees_minor: line.fees_minor,
            tax_minor: line.tax_minor,
            all_in_minor: line.all_in_minor,
        }
    }
}

/// The sums of a hold's or order's price. `totalMinor` = `faceMinor` + `feesMinor` +
/// `orderFeesMinor`, plus `taxMinor` when the event's tax is added (included: the tax is
/// part of the others).
#[derive(Debug, Clone, Copy, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BreakdownView {
    pub face_minor: i64,
    pub discount_minor: i64,
    pub fees_minor: i64,
    /// All the tax, the order fees' included.
    pub tax_minor: i64,
    pub order_fees_minor: i64,
    pub total_minor: i64,
}

impl From<Breakdown> for BreakdownView {
    fn from(b: Breakdown) -> Self {
        Self {
            face_minor: b.face_minor,
            discount_minor: b.discount_minor,
            fees_minor: b.fees_minor,
            tax_minor: b.tax_minor,
            order_fees_minor: b.order_fees_minor,
            total_minor: b.total_minor,
        }
    }
}

/// A ticket type's price at one section or tier, as the event shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TypePriceView {
    pub ticket_type: String,
    pub face_minor: i64,
    pub fees_minor: i64,
    pub tax_minor: i64,
    /// Face, per-ticket fees and added tax: what one ticket costs before the order's fees.
    pub all_in_minor: i64,
}

/// The types a section or tier (`place`, its standard price `price_minor`) sells, standard
/// first, each with its all-in price.
pub fn type_prices(prices: &PriceList, place: &str, price_minor: i64) -> Vec<TypePriceView> {
    std::iter::once(STANDARD_TYPE)
        .chain(prices.ticket_types.iter().map(|t| t.type_id.as_str()))
        .filter_map(|type_id| {
            let face_minor = prices.face_minor(type_id, place, price_minor)?;
            let ticket = prices.ticket(face_minor);
            Some(TypePriceView {
                ticket_type: type_id.to_owned(),
                face_minor,
                fees_minor: ticket.fees_minor,
                tax_minor: ticket.tax_minor,
                all_in_minor: ticket.all_in_minor,
            })
        })
        .collect()
}

/// The price a hold or order shows: its stored lines, or (none stored) its seats and total.
pub fn shown_price(
    stored: Option<OrderPrice>,
    seats: &[boxoffice_store::HeldSeat],
    quantity: u32,
    total_minor: i64,
) -> OrderPrice {
    stored.unwrap_or_else(|| boxoffice_store::pricing::plain_price(seats, quantity, total_minor))
}

/// What one section's or tier's confirmed orders sold, split.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlaceSalesView {
    /// `section` or `tier`.
    #[schema(example = "section")]
    pub kind: String,
    /// The section's name or the tier's id.
    pub id: String,
    pub face_minor: i64,
    pub discount_minor: i64,
    pub fees_minor: i64,
    pub tax_minor: i64,
    pub all_in_minor: i64,
}

/// The confirmed sales split into face value, fees and tax, per section and tier (in the
/// event's order) and in all. `totalMinor` = Σ `allInMinor` + `orderFeesMinor` (+
/// `orderFeesTaxMinor` when the tax is added): what the orders cost.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SalesView {
    pub lines: Vec<PlaceSalesView>,
    pub face_minor: i64,
    pub discount_minor: i64,
    pub fees_minor: i64,
    /// All the tax, the order fees' included.
    pub tax_minor: i64,
    pub order_fees_minor: i64,
    pub order_fees_tax_minor: i64,
    pub total_minor: i64,
}

impl SalesView {
    pub fn new(event: &boxoffice_store::EventRecord, split: &SalesSplit) -> Self {
        let places = event
            .sections
            .iter()
            .map(|s| ("section", s.name.as_str()))
            .chain(event.tiers.iter().map(|t| ("tier", t.tier_id.as_str())));
        let lines: Vec<PlaceSalesView> = places
            .map(|(kind, id)| {
                let sold = split.places.iter().find(|p| p.place == id);
                PlaceSalesView {
                    kind: kind.to_owned(),
                    id: id.to_owned(),
                    face_minor: sold.map_or(0, |p| p.face_minor),
                    discount_minor: sold.map_or(0, |p| p.discount_minor),
                    fees_minor: sold.map_or(0, |p| p.fees_minor),
                    tax_minor: sold.map_or(0, |p| p.tax_minor),
                    all_in_minor: sold.map_or(0, |p| p.all_in_minor),
                }
            })
            .collect();
        Self {
            face_minor: lines.iter().map(|l| l.face_minor).sum(),
            discount_minor: lines.iter().map(|l| l.discount_minor).sum(),
            fees_minor: lines.iter().map(|l| l.fees_minor).sum(),
            tax_minor: lines.iter().map(|l| l.tax_minor).sum::<i64>() + split.order_fees_tax_minor,
            order_fees_minor: split.order_fees_minor,
            order_fees_tax_minor: split.order_fees_tax_minor,
            total_minor: split.total_minor,
            lines,
        }
    }
}

/// The columns `report.csv` gains for an event with ticket types, fees or tax, after its
/// own: each row's sales split (the total row's with the order fees), matched to the rows
/// by section or tier id.
pub const SALES_CSV_COLUMNS: [&str; 6] = [
    "faceMinor",
    "discountMinor",
    "feesMinor",
    "taxMinor",
    "orderFeesMinor",
    "totalMinor",
];

/// Appends [`SALES_CSV_COLUMNS`] to the report's rows: the header, then each line's (the
/// order fees column empty), then the total row's.
pub fn sales_csv_columns(sales: &SalesView, rows: &mut [Vec<String>]) {
    let Some((header, rest)) = rows.split_first_mut() else {
        return;
    };
    header.extend(SALES_CSV_COLUMNS.iter().map(|c| (*c).to_owned()));
    let count = rest.len();
    for (i, row) in rest.iter_mut().enumerate() {
        if i + 1 == count {
            row.extend(
                [
                    sales.face_minor,
                    sales.discount_minor,
                    sales.fees_minor,
                    sales.tax_minor,
                    sales.order_fees_minor,
                    sales.total_minor,
                ]
                .map(|n| n.to_string()),
            );
            continue;
        }
        let id = row.get(1).cloned().unwrap_or_default();
        let line = sales.lines.iter().find(|l| l.id == id);
        let figures = line.map_or([0; 4], |l| {
            [l.face_minor, l.discount_minor, l.fees_minor, l.tax_minor]
        });
        row.extend(figures.map(|n| n.to_string()));
        row.push(String::new());
        row.push(line.map_or(0, |l| l.all_in_minor).to_string());
    }
}
