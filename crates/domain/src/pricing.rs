//! Ticket types, fees and tax (issue 40): what a fan pays for each ticket and each order, in
//! minor units, computed by the server and never by the client.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::event::{EventSpec, SpecError, spec_error};
use crate::ids::check_name_id;
use crate::sale::SaleSetup;

/// The ticket type every section and tier has: its own `priceMinor`.
pub const STANDARD_TYPE: &str = "standard";
/// Ticket types per event, besides the standard one.
pub const TICKET_TYPES_MAX: usize = 20;
/// Fees per event.
pub const FEES_MAX: usize = 10;
/// The highest rate, in basis points (100 %).
pub const RATE_BP_MAX: u32 = 10_000;

/// A ticket type (adult, child, concession, …) with its face price in each section or tier
/// that sells it (a section or tier it does not name does not sell it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TicketType {
    pub type_id: String,
    pub name: String,
    /// Face price by section name or tier id.
    pub prices: BTreeMap<String, i64>,
    /// At most this many of the type in one hold or order.
    #[serde(default)]
    pub max_per_order: Option<u32>,
}

/// What a fee is charged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeeBasis {
    Ticket,
    Order,
}

/// A fee: a fixed amount plus a share of the face value (of the ticket, or of the order's
/// tickets), per ticket or per order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fee {
    pub name: String,
    pub per: FeeBasis,
    #[serde(default)]
    pub fixed_minor: i64,
    #[serde(default)]
    pub share_bp: u32,
}

/// The tax on face value and fees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tax {
    pub name: String,
    pub rate_bp: u32,
    /// Prices and fees already include the tax (VAT in Europe); else it is added.
    pub included: bool,
}

/// Checks the ticket types, fees and tax of `setup` against the event.
pub fn validate(setup: &SaleSetup, spec: &EventSpec) -> Result<(), SpecError> {
    if setup.ticket_types.len() > TICKET_TYPES_MAX {
        return Err(spec_error(
            "ticketTypes",
            format!("at most {TICKET_TYPES_MAX} ticket types"),
        ));
    }
    for (i, ticket_type) in setup.ticket_types.iter().enumerate() {
        let field = |f: &str| format!("ticketTypes[{i}].{f}");
        check_name_id(&ticket_type.type_id, "ticket type id")
            .map_err(|e| spec_error(field("typeId"), e.0))?;
        crate::event::check_label(&field("name"), &ticket_type.name)?;
        if ticket_type.type_id == STANDARD_TYPE
            || setup.ticket_types[..i]
                .iter()
                .any(|t| t.type_id == ticket_type.type_id)
        {
            return Err(spec_error(
                field("typeId"),
                "must be unique and not \"standard\"",
            ));
        }
        if ticket_type.name.is_empty() || ticket_type.name.len() > 200 {
            return Err(spec_error(field("name"), "1-200 characters"));
        }
        if ticket_type.prices.is_empty() || ticket_type.prices.len() > 400 {
            return Err(spec_error(field("prices"), "1-400 places"));
        }
        if ticket_type.max_per_order.is_some_and(|m| m == 0 || m > 100) {
            return Err(spec_error(field("maxPerOrder"), "must be 1-100"));
        }
        for (place, price) in &ticket_type.prices {
            let known = spec.sections.iter().any(|s| &s.name == place)
                || spec.tiers.iter().any(|t| &t.tier_id == place);
            if !known {
                return Err(spec_error(
                    field("prices"),
                    format!("{place:?} is no section or tier of the event"),
                ));
            }
            if !(0..=crate::event::PRICE_MINOR_MAX).contains(price) {
                return Err(spec_error(field("prices"), "a price out of range"));
            }
        }
    }
    if setup.fees.len() > FEES_MAX {
        return Err(spec_error("fees", format!("at most {FEES_MAX} fees")));
    }
    for (i, fee) in setup.fees.iter().enumerate() {
        crate::event::check_label(&format!("fees[{i}].name"), &fee.name)?;
        if !(0..=crate::event::PRICE_MINOR_MAX).contains(&fee.fixed_minor) {
            return Err(spec_error(
                format!("fees[{i}].fixedMinor"),
                "a fee out of range",
            ));
        }
        if fee.share_bp > RATE_BP_MAX {
            return Err(spec_error(
                format!("fees[{i}].shareBp"),
                format!("must be between 0 and {RATE_BP_MAX}"),
            ));
        }
    }
    if let Some(tax) = &setup.tax {
        crate::event::check_label("tax.name", &tax.name)?;
    }
    if let Some(tax) = &setup.tax
        && tax.rate_bp > RATE_BP_MAX
    {
        return Err(spec_error(
            "tax.rateBp",
            format!("must be between 0 and {RATE_BP_MAX}"),
        ));
    }
    Ok(())
}

/// Promo codes per event.
pub const PROMO_CODES_MAX: usize = 1_000;

/// What an event charges beyond its layout: the part of [`SaleSetup`] every price is made
/// of, kept with the event's [`crate::event::SaleRules`] so that the hold decision prices
/// each ticket. The default (no types, fees or tax) prices every ticket at its section's or
/// tier's `priceMinor`, as before issue 40.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PriceList {
    pub ticket_types: Vec<TicketType>,
    pub fees: Vec<Fee>,
    pub tax: Option<Tax>,
}

impl PriceList {
    pub fn of(setup: &SaleSetup) -> Self {
        Self {
            ticket_types: setup.ticket_types.clone(),
            fees: setup.fees.clone(),
            tax: setup.tax.clone(),
        }
    }

    /// No types, fees or tax: every price is the layout's.
    pub fn is_plain(&self) -> bool {
        self.ticket_types.is_empty() && self.fees.is_empty() && self.tax.is_none()
    }

    fn ticket_type(&self, type_id: &str) -> Option<&TicketType> {
        self.ticket_types.iter().find(|t| t.type_id == type_id)
    }

    /// The face price of `type_id` at `place` (a section name or tier id) whose standard
    /// price is `standard_face_minor`; `None`: the place does not sell the type.
    pub fn face_minor(&self, type_id: &str, place: &str, standard_face_minor: i64) -> Option<i64> {
        if type_id == STANDARD_TYPE {
            return Some(standard_face_minor);
        }
        self.ticket_type(type_id)?.prices.get(place).copied()
    }

    /// One ticket of face value `face_minor` (after any discount), priced: its per-ticket
    /// fees and tax, and what the fan pays for it without the order's fees.
    pub fn ticket(&self, face_minor: i64) -> TicketPrice {
        let fees_minor: i64 = self
            .fees
            .iter()
            .filter(|fee| fee.per == FeeBasis::Ticket)
            .map(|fee| fee.fixed_minor + share_minor(face_minor, fee.share_bp))
            .sum();
        let (tax_minor, all_in_minor) = self.taxed(face_minor + fees_minor);
        TicketPrice {
            fees_minor,
            tax_minor,
            all_in_minor,
        }
    }

    /// The tax on `amount_minor` (face plus fees) and what the fan pays for it.
    fn taxed(&self, amount_minor: i64) -> (i64, i64) {
        match &self.tax {
            None => (0, amount_minor),
            Some(tax) if tax.included => {
                (included_tax_minor(amount_minor, tax.rate_bp), amount_minor)
            }
            Some(tax) => {
                let tax_minor = share_minor(amount_minor, tax.rate_bp);
                (tax_minor, amount_minor + tax_minor)
            }
        }
    }

    /// The highest standard face price whose all-in ticket price (face, per-ticket fees and
    /// tax; not the order's fees) is at most `all_in_cap_minor`: best available's
    /// `maxPriceMinor` is an all-in price, compared through this. Below every price: -1.
    pub fn face_cap_minor(&self, all_in_cap_minor: i64) -> i64 {
        if self.is_plain() || all_in_cap_minor < 0 {
            return all_in_cap_minor;
        }
        // The all-in price never falls when the face rises: the largest face within the cap
        // is found by halving.
        let (mut low, mut high) = (-1_i64, crate::event::PRICE_MINOR_MAX.min(all_in_cap_minor));
        while low < high {
            let middle = low + (high - low + 1) / 2;
            if self.ticket(middle).all_in_minor <= all_in_cap_minor {
                low = middle;
            } else {
                high = middle - 1;
            }
        }
        low
    }
}

/// One ticket's price parts besides its face value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TicketPrice {
    pub fees_minor: i64,
    /// The tax on face and fees (included in them when the tax is included).
    pub tax_minor: i64,
    /// What the fan pays for the ticket, the order's fees aside.
    pub all_in_minor: i64,
}

/// `amount_minor × share_bp / 10 000`, rounded half up to the minor unit.
pub fn share_minor(amount_minor: i64, share_bp: u32) -> i64 {
    let product = i128::from(amount_minor) * i128::from(share_bp);
    let rounded = (2 * product + 10_000).div_euclid(20_000);
    i64::try_from(rounded).unwrap_or(i64::MAX)
}

/// The tax a gross amount includes at `rate_bp`: `gross × r / (1 + r)`, rounded half up.
pub fn included_tax_minor(gross_minor: i64, rate_bp: u32) -> i64 {
    let denominator = 10_000 + i128::from(rate_bp);
    let product = i128::from(gross_minor) * i128::from(rate_bp);
    let rounded = (2 * product + denominator).div_euclid(2 * denominator);
    i64::try_from(rounded).unwrap_or(i64::MAX)
}

/// What a ticket is for: a seat (its section is the place) or a tier's unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// `None` for a tier's unit.
    pub seat_id: Option<String>,
    /// The section's name or the tier's id: where ticket types have their prices.
    pub place: String,
    /// The seat's or tier's own price: the standard type's face.
    pub standard_face_minor: i64,
}

/// A promo code's discount, taken off the face value of each eligible ticket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discount {
    /// Basis points of the face value (10 000 = free).
    pub percent_off_bp: u32,
    /// A fixed amount per ticket.
    pub amount_off_minor: i64,
    /// The ticket types it applies to; empty: every type.
    pub ticket_types: Vec<String>,
}

impl Discount {
    /// What comes off a ticket of `type_id` with face `face_minor` (never below nothing).
    pub fn off_minor(&self, type_id: &str, face_minor: i64) -> i64 {
        let eligible =
            self.ticket_types.is_empty() || self.ticket_types.iter().any(|t| t == type_id);
        if !eligible {
            return 0;
        }
        let off = self.amount_off_minor + share_minor(face_minor, self.percent_off_bp);
        off.clamp(0, face_minor.max(0))
    }
}

/// One ticket of a hold or order, priced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceLine {
    /// The seat; `None` for a tier's unit.
    pub seat_id: Option<String>,
    pub ticket_type: String,
    /// The face value charged (after any discount).
    pub face_minor: i64,
    /// What a promo code took off the face value.
    pub discount_minor: i64,
    pub fees_minor: i64,
    /// The tax on face and fees; part of them when the tax is included.
    pub tax_minor: i64,
    /// What the fan pays for this ticket: face + fees (+ tax when it is added).
    pub all_in_minor: i64,
}

/// A hold or order, priced: its tickets, the order's own fees and the total the fan pays.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OrderPrice {
    /// In the hold's seat order (a tier's units in order).
    pub lines: Vec<PriceLine>,
    /// The per-order fees, before tax.
    pub order_fees_minor: i64,
    /// The tax on the per-order fees (part of them when the tax is included).
    pub order_fees_tax_minor: i64,
    /// What the fan pays: every line's all-in price plus the order's fees (and their tax
    /// when it is added).
    pub total_minor: i64,
}

/// The sums an order's price is shown with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Breakdown {
    pub face_minor: i64,
    pub discount_minor: i64,
    /// Per-ticket fees.
    pub fees_minor: i64,
    /// All the tax, the order's fees' included.
    pub tax_minor: i64,
    pub order_fees_minor: i64,
    pub total_minor: i64,
}

impl OrderPrice {
    pub fn breakdown(&self) -> Breakdown {
        Breakdown {
            face_minor: self.lines.iter().map(|l| l.face_minor).sum(),
            discount_minor: self.lines.iter().map(|l| l.discount_minor).sum(),
            fees_minor: self.lines.iter().map(|l| l.fees_minor).sum(),
            tax_minor: self.lines.iter().map(|l| l.tax_minor).sum::<i64>()
                + self.order_fees_tax_minor,
            order_fees_minor: self.order_fees_minor,
            total_minor: self.total_minor,
        }
    }

    /// What the order's fees cost the fan with their tax when it is added.
    pub fn order_fees_all_in_minor(&self) -> i64 {
        self.total_minor - self.lines.iter().map(|l| l.all_in_minor).sum::<i64>()
    }
}

/// A refusal of a ticket-type request: the field (as the API spells it) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriceError {
    pub field: String,
    pub reason: String,
}

fn price_error(reason: impl Into<String>) -> PriceError {
    PriceError {
        field: "ticketTypes".into(),
        reason: reason.into(),
    }
}

/// Ticket types asked per hold (type id → count), at most this many entries.
pub const TYPE_COUNTS_MAX: usize = TICKET_TYPES_MAX + 1;

/// The type of each of a hold's `quantity` tickets, from the request's counts (empty: all
/// standard). Types are given to the hold's seats (or units) in the hold's seat order:
/// the standard type first, then the event's ticket types in the order the event lists them.
/// The counts must sum to `quantity`, name known types, and keep each type's `maxPerOrder`.
pub fn assign_types(
    prices: &PriceList,
    counts: &BTreeMap<String, u32>,
    quantity: u32,
) -> Result<Vec<String>, PriceError> {
    if counts.is_empty() {
        return Ok(vec![STANDARD_TYPE.to_owned(); quantity as usize]);
    }
    if counts.len() > TYPE_COUNTS_MAX {
        return Err(price_error(format!("at most {TYPE_COUNTS_MAX} types")));
    }
    let mut sum: u64 = 0;
    for (type_id, count) in counts {
        if *count == 0 {
            return Err(price_error(format!(
                "{type_id}: a count must be at least 1"
            )));
        }
        if type_id != STANDARD_TYPE && prices.ticket_type(type_id).is_none() {
            return Err(price_error(format!("unknown ticket type {type_id}")));
        }
        if let Some(max) = prices.ticket_type(type_id).and_then(|t| t.max_per_order)
            && *count > max
        {
            return Err(price_error(format!(
                "at most {max} {type_id} tickets per order"
            )));
        }
        sum += u64::from(*count);
    }
    if sum != u64::from(quantity) {
        return Err(price_error(format!(
            "the counts sum to {sum}, the hold has {quantity} tickets"
        )));
    }
    let order = std::iter::once(STANDARD_TYPE)
        .chain(prices.ticket_types.iter().map(|t| t.type_id.as_str()));
    let mut types = Vec::with_capacity(quantity as usize);
    for type_id in order {
        if let Some(count) = counts.get(type_id) {
            types.extend(std::iter::repeat_n(type_id.to_owned(), *count as usize));
        }
    }
    Ok(types)
}

/// Prices a hold or order: `types[i]` is the type of the ticket for `places[i]`.
///
/// The one price function (holds, checkouts with a promo code, the event's shown prices
/// all come from it). Per ticket: face = the type's price at the place, less the discount
/// (never below 0); each fee = `fixedMinor` + `shareBp` of the face, the share rounded half
/// up to the minor unit; tax on face + fees at `rateBp`: added, `round(amount × r)`; included,
/// `round(amount × r / (1 + r))`, both half up, per line. Per order: each fee = `fixedMinor` +
/// `shareBp` of the tickets' face total (rounded half up), taxed as one amount the same way.
/// Total = Σ lines' all-in + order fees (+ their tax when it is added).
pub fn price_order(
    prices: &PriceList,
    places: &[Place],
    types: &[String],
    discount: Option<&Discount>,
) -> Result<OrderPrice, PriceError> {
    if places.len() != types.len() {
        return Err(price_error("one ticket type per ticket"));
    }
    let mut lines = Vec::with_capacity(places.len());
    for (place, type_id) in places.iter().zip(types) {
        let Some(list_face) = prices.face_minor(type_id, &place.place, place.standard_face_minor)
        else {
            return Err(price_error(format!(
                "{type_id} is not sold in {}",
                place.place
            )));
        };
        let discount_minor = discount.map_or(0, |d| d.off_minor(type_id, list_face));
        let face_minor = list_face - discount_minor;
        let ticket = prices.ticket(face_minor);
        lines.push(PriceLine {
            seat_id: place.seat_id.clone(),
            ticket_type: type_id.clone(),
            face_minor,
            discount_minor,
            fees_minor: ticket.fees_minor,
            tax_minor: ticket.tax_minor,
            all_in_minor: ticket.all_in_minor,
        });
    }
    let face_total: i64 = lines.iter().map(|l| l.face_minor).sum();
    let order_fees_minor: i64 = if lines.is_empty() {
        0
    } else {
        prices
            .fees
            .iter()
            .filter(|fee| fee.per == FeeBasis::Order)
            .map(|fee| fee.fixed_minor + share_minor(face_total, fee.share_bp))
            .sum()
    };
    let (order_fees_tax_minor, order_fees_all_in) = prices.taxed(order_fees_minor);
    let total_minor = lines.iter().map(|l| l.all_in_minor).sum::<i64>() + order_fees_all_in;
    Ok(OrderPrice {
        lines,
        order_fees_minor,
        order_fees_tax_minor,
        total_minor,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(section: &str, seat: &str, face: i64) -> Place {
        Place {
            seat_id: Some(seat.into()),
            place: section.into(),
            standard_face_minor: face,
        }
    }

    fn child() -> TicketType {
        TicketType {
            type_id: "child".into(),
            name: "Child".into(),
            prices: [("A".to_owned(), 2500)].into(),
            max_per_order: Some(2),
        }
    }

    fn fee(per: FeeBasis, fixed_minor: i64, share_bp: u32) -> Fee {
        Fee {
            name: "Service".into(),
            per,
            fixed_minor,
            share_bp,
        }
    }

    fn types(list: &[&str]) -> Vec<String> {
        list.iter().map(|t| (*t).to_owned()).collect()
    }

    #[test]
    fn plain_prices_are_the_layouts() {
        let prices = PriceList::default();
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 4900), place("A", "A-1-2", 4900)],
            &types(&["standard", "standard"]),
            None,
        )
        .unwrap();
        assert_eq!(priced.total_minor, 9800);
        assert_eq!(priced.lines[0].all_in_minor, 4900);
        assert_eq!(priced.order_fees_minor, 0);
        assert_eq!(prices.face_cap_minor(4900), 4900);
    }

    #[test]
    fn per_ticket_fee_with_a_share_rounded_half_up() {
        // 150 fixed + 2.5 % of the face: 4900 → 122.5 → 123; 2500 → 62.5 → 63.
        let prices = PriceList {
            ticket_types: vec![child()],
            fees: vec![fee(FeeBasis::Ticket, 150, 250)],
            tax: None,
        };
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 4900), place("A", "A-1-2", 4900)],
            &types(&["standard", "child"]),
            None,
        )
        .unwrap();
        assert_eq!(priced.lines[0].fees_minor, 273);
        assert_eq!(priced.lines[0].all_in_minor, 5173);
        assert_eq!(priced.lines[1].face_minor, 2500);
        assert_eq!(priced.lines[1].fees_minor, 213);
        assert_eq!(priced.lines[1].all_in_minor, 2713);
        assert_eq!(priced.total_minor, 5173 + 2713);
    }

    #[test]
    fn per_order_fee_on_the_face_total() {
        // 300 fixed + 1 % of 7400 = 74 → 374 once per order.
        let prices = PriceList {
            ticket_types: vec![child()],
            fees: vec![fee(FeeBasis::Order, 300, 100)],
            tax: None,
        };
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 4900), place("A", "A-1-2", 4900)],
            &types(&["standard", "child"]),
            None,
        )
        .unwrap();
        assert_eq!(priced.order_fees_minor, 374);
        assert_eq!(priced.total_minor, 4900 + 2500 + 374);
        assert_eq!(priced.breakdown().order_fees_minor, 374);
    }

    #[test]
    fn vat_included_is_taken_out_of_the_gross() {
        // 20 % included: face 4900 + fee 100 = 5000 gross; tax = 5000 × 0.2 / 1.2 = 833.33 →
        // 833. Order fee 250: 41.67 → 42.
        let prices = PriceList {
            ticket_types: Vec::new(),
            fees: vec![fee(FeeBasis::Ticket, 100, 0), fee(FeeBasis::Order, 250, 0)],
            tax: Some(Tax {
                name: "VAT".into(),
                rate_bp: 2000,
                included: true,
            }),
        };
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 4900)],
            &types(&["standard"]),
            None,
        )
        .unwrap();
        assert_eq!(priced.lines[0].tax_minor, 833);
        assert_eq!(priced.lines[0].all_in_minor, 5000);
        assert_eq!(priced.order_fees_tax_minor, 42);
        assert_eq!(priced.total_minor, 5250);
        let breakdown = priced.breakdown();
        assert_eq!(breakdown.tax_minor, 875);
        assert_eq!(
            breakdown.face_minor + breakdown.fees_minor + breakdown.order_fees_minor,
            5250
        );
    }

    #[test]
    fn sales_tax_excluded_is_added_per_line() {
        // 8.88 % added: face 2500 + fee 5 % (125) = 2625; tax = 233.1 → 233; all-in 2858.
        // Order fee 199: tax 17.67 → 18; total 2858 + 199 + 18.
        let prices = PriceList {
            ticket_types: Vec::new(),
            fees: vec![fee(FeeBasis::Ticket, 0, 500), fee(FeeBasis::Order, 199, 0)],
            tax: Some(Tax {
                name: "Sales tax".into(),
                rate_bp: 888,
                included: false,
            }),
        };
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 2500)],
            &types(&["standard"]),
            None,
        )
        .unwrap();
        assert_eq!(priced.lines[0].fees_minor, 125);
        assert_eq!(priced.lines[0].tax_minor, 233);
        assert_eq!(priced.lines[0].all_in_minor, 2858);
        assert_eq!(priced.order_fees_tax_minor, 18);
        assert_eq!(priced.total_minor, 2858 + 199 + 18);
        // The cap of best available: the highest face whose all-in is within 2858.
        assert_eq!(prices.face_cap_minor(2858), 2500);
        assert_eq!(prices.face_cap_minor(2857), 2499);
    }

    #[test]
    fn a_discount_comes_off_the_face_before_fees_and_tax() {
        // 10 % off 4900 = 490 → face 4410; fee 10 % = 441; tax 20 % added on 4851 = 970.2 →
        // 970; all-in 5821. The child ticket is not eligible.
        let prices = PriceList {
            ticket_types: vec![child()],
            fees: vec![fee(FeeBasis::Ticket, 0, 1000)],
            tax: Some(Tax {
                name: "VAT".into(),
                rate_bp: 2000,
                included: false,
            }),
        };
        let discount = Discount {
            percent_off_bp: 1000,
            amount_off_minor: 0,
            ticket_types: types(&["standard"]),
        };
        let priced = price_order(
            &prices,
            &[place("A", "A-1-1", 4900), place("A", "A-1-2", 4900)],
            &types(&["standard", "child"]),
            Some(&discount),
        )
        .unwrap();
        assert_eq!(priced.lines[0].discount_minor, 490);
        assert_eq!(priced.lines[0].face_minor, 4410);
        assert_eq!(priced.lines[0].fees_minor, 441);
        assert_eq!(priced.lines[0].tax_minor, 970);
        assert_eq!(priced.lines[0].all_in_minor, 5821);
        assert_eq!(priced.lines[1].discount_minor, 0);
        // A discount larger than the face leaves it at nothing.
        let big = Discount {
            percent_off_bp: 0,
            amount_off_minor: 99_999,
            ticket_types: Vec::new(),
        };
        assert_eq!(big.off_minor("child", 2500), 2500);
    }

    #[test]
    fn types_go_to_seats_standard_first_then_the_events_order() {
        let prices = PriceList {
            ticket_types: vec![child()],
            ..PriceList::default()
        };
        let counts: BTreeMap<String, u32> =
            [("child".to_owned(), 1), ("standard".to_owned(), 2)].into();
        assert_eq!(
            assign_types(&prices, &counts, 3).unwrap(),
            types(&["standard", "standard", "child"])
        );
        assert!(assign_types(&prices, &counts, 4).is_err());
        let too_many: BTreeMap<String, u32> = [("child".to_owned(), 3)].into();
        assert!(assign_types(&prices, &too_many, 3).is_err());
        let unknown: BTreeMap<String, u32> = [("senior".to_owned(), 1)].into();
        assert!(assign_types(&prices, &unknown, 1).is_err());
        // A place that does not sell the type refuses it.
        let refused = price_order(
            &prices,
            &[place("B", "B-1-1", 1000)],
            &types(&["child"]),
            None,
        );
        assert_eq!(refused.unwrap_err().field, "ticketTypes");
    }

    /// The hold decision prices each granted seat by its type, all or nothing: a request
    /// whose types do not fit holds nothing; best available's cap is the all-in price.
    #[test]
    fn the_hold_decision_prices_each_seat_by_its_type() {
        use crate::decide::{
            BatchState, HoldOutcome, HoldRequest, HoldShape, SeatRow, decide_holds,
        };
        use crate::event::SaleRules;
        use crate::hold::SeatStatus;
        let now = time::macros::datetime!(2026-12-01 10:00 UTC);
        let rules = SaleRules {
            on_sale_at: now,
            section_order: vec!["A".into()],
            hold_ttl_s: 300,
            max_seats_per_hold: 4,
            max_tickets_per_account: 8,
            currency: "EUR".into(),
            prices: PriceList {
                ticket_types: vec![child()],
                fees: vec![
                    fee(FeeBasis::Ticket, 150, 250),
                    fee(FeeBasis::Order, 300, 0),
                ],
                tax: None,
            },
            accessibility: Default::default(),
        };
        let seats = (1..=4)
            .map(|n| {
                let seat_id = format!("A-1-{n}");
                let row = SeatRow {
                    seat_id: seat_id.clone(),
                    status: SeatStatus::Available,
                    hold_id: None,
                    hold_expires_at: None,
                    price_minor: 4900,
                };
                (seat_id, row)
            })
            .collect();
        let mut state = BatchState {
            now,
            seats,
            tiers: BTreeMap::new(),
            usage_by_account: BTreeMap::new(),
            prior_digests: BTreeMap::new(),
        };
        let request = |key: &str, shape: HoldShape, counts: &[(&str, u32)]| HoldRequest {
            account_id: "ann".into(),
            idempotency_key: key.into(),
            request_digest: key.into(),
            new_hold_id: format!("h-{key}"),
            shape,
            ticket_types: counts.iter().map(|(t, n)| ((*t).to_owned(), *n)).collect(),
            phase_id: None,
            accessible: false,
        };
        let named = HoldShape::Seats {
            seat_ids: vec!["A-1-1".into(), "A-1-2".into()],
        };
        let cheap = HoldShape::BestAvailable {
            quantity: 2,
            section: None,
            // One under the standard all-in price (4900 + 150 + 123 = 5173).
            max_price_minor: Some(5172),
            together: crate::best::Together::Prefer,
        };
        let outcomes = decide_holds(
            &rules,
            &mut state,
            &[
                request("too-many", named.clone(), &[("child", 3)]),
                request("typed", named, &[("standard", 1), ("child", 1)]),
                request("capped", cheap, &[]),
            ],
        );
        assert!(
            matches!(&outcomes[0], HoldOutcome::Invalid { field, .. } if field == "ticketTypes")
        );
        let HoldOutcome::Held(hold) = &outcomes[1] else {
            panic!("{:?}", outcomes[1]);
        };
        assert_eq!(
            hold.seats,
            vec![("A-1-1".to_owned(), 5173), ("A-1-2".to_owned(), 2713)]
        );
        assert_eq!(hold.total_minor, 5173 + 2713 + 300);
        assert_eq!(hold.price.lines[1].ticket_type, "child");
        assert!(
            matches!(&outcomes[2], HoldOutcome::SeatsUnavailable { .. }),
            "{:?}",
            outcomes[2]
        );
    }
}
