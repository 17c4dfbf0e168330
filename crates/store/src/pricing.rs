//! Prices as stored (issue 40): a hold's priced lines (`hold_line`, written with the hold in
//! its group's transaction) and an event's promo codes. What a price is, is
//! `boxoffice_domain::pricing`'s to say; the store keeps the lines the engine priced and
//! counts a code's uses with a conditional update.

use async_trait::async_trait;
use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::pricing::{OrderPrice, PriceLine};

use crate::{EventRecord, HeldSeat, StoreResult};

/// `hold_line.line` of the order's own fees; the tickets are 1..n in the hold's seat order.
pub const ORDER_FEES_LINE: i32 = 0;
/// `hold_line.ticket_type` of the order's own fees.
pub const ORDER_FEES_TYPE: &str = "_order";

/// One `hold_line` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRow {
    pub line: i32,
    pub seat_id: Option<String>,
    pub ticket_type: String,
    pub face_minor: i64,
    pub discount_minor: i64,
    pub fees_minor: i64,
    pub tax_minor: i64,
    pub all_in_minor: i64,
}

/// The rows a priced hold is stored as: its order fees (line 0), then each ticket.
pub fn line_rows(price: &OrderPrice) -> Vec<LineRow> {
    let order_fees = LineRow {
        line: ORDER_FEES_LINE,
        seat_id: None,
        ticket_type: ORDER_FEES_TYPE.to_owned(),
        face_minor: 0,
        discount_minor: 0,
        fees_minor: price.order_fees_minor,
        tax_minor: price.order_fees_tax_minor,
        all_in_minor: price.order_fees_all_in_minor(),
    };
    std::iter::once(order_fees)
        .chain(price.lines.iter().enumerate().map(|(i, line)| LineRow {
            line: i32::try_from(i + 1).unwrap_or(i32::MAX),
            seat_id: line.seat_id.clone(),
            ticket_type: line.ticket_type.clone(),
            face_minor: line.face_minor,
            discount_minor: line.discount_minor,
            fees_minor: line.fees_minor,
            tax_minor: line.tax_minor,
            all_in_minor: line.all_in_minor,
        }))
        .collect()
}

/// The price stored as `rows` (in line order); `None` when there are none.
pub fn price_of_rows(rows: &[LineRow]) -> Option<OrderPrice> {
    if rows.is_empty() {
        return None;
    }
    let order_fees = rows.iter().find(|r| r.line == ORDER_FEES_LINE);
    Some(OrderPrice {
        lines: rows
            .iter()
            .filter(|r| r.line != ORDER_FEES_LINE)
            .map(|r| PriceLine {
                seat_id: r.seat_id.clone(),
                ticket_type: r.ticket_type.clone(),
                face_minor: r.face_minor,
                discount_minor: r.discount_minor,
                fees_minor: r.fees_minor,
                tax_minor: r.tax_minor,
                all_in_minor: r.all_in_minor,
            })
            .collect(),
        order_fees_minor: order_fees.map_or(0, |r| r.fees_minor),
        order_fees_tax_minor: order_fees.map_or(0, |r| r.tax_minor),
        total_minor: rows.iter().map(|r| r.all_in_minor).sum(),
    })
}

/// The price of a hold stored without lines (an event with no ticket types, fees or tax, as
/// before issue 40; an exchange's or a transfer's hold): every ticket standard at its seat's
/// price, or the tier's units sharing the total.
pub fn plain_price(seats: &[HeldSeat], quantity: u32, total_minor: i64) -> OrderPrice {
    let standard = |seat_id: Option<String>, price: i64| PriceLine {
        seat_id,
        ticket_type: boxoffice_domain::pricing::STANDARD_TYPE.to_owned(),
        face_minor: price,
        discount_minor: 0,
        fees_minor: 0,
        tax_minor: 0,
        all_in_minor: price,
    };
    let lines = if seats.is_empty() {
        let quantity = i64::from(quantity.max(1));
        (0..quantity)
            .map(|i| {
                // The remainder of an uneven share goes to the first units.
                let share = total_minor / quantity + i64::from(i < total_minor % quantity);
                standard(None, share)
            })
            .collect()
    } else {
        seats
            .iter()
            .map(|s| standard(Some(s.seat_id.clone()), s.price_minor))
            .collect()
    };
    OrderPrice {
        lines,
        order_fees_minor: 0,
        order_fees_tax_minor: 0,
        total_minor,
    }
}

/// A promo code as stored, with its uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromoCode {
    pub event_id: String,
    /// Upper case, as fans may type it in any case.
    pub code: String,
    pub percent_off_bp: u32,
    pub amount_off_minor: i64,
    /// Types it applies to; empty: every type.
    pub ticket_types: Vec<String>,
    pub max_uses: u32,
    pub uses: u32,
    pub valid_from: Option<OffsetDateTime>,
    pub valid_until: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

impl PromoCode {
    pub fn discount(&self) -> boxoffice_domain::pricing::Discount {
        boxoffice_domain::pricing::Discount {
            percent_off_bp: self.percent_off_bp,
            amount_off_minor: self.amount_off_minor,
            ticket_types: self.ticket_types.clone(),
        }
    }

    /// Why the code cannot be used at `now`, if it cannot.
    pub fn refusal(&self, now: OffsetDateTime) -> Option<&'static str> {
        if self.valid_from.is_some_and(|from| now < from) {
            Some("the code is not valid yet")
        } else if self.valid_until.is_some_and(|until| now >= until) {
            Some("the code has expired")
        } else if self.uses >= self.max_uses {
            Some("the code has been used up")
        } else {
            None
        }
    }
}

/// What applying a code to a hold did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromoApplied {
    /// Applied now (its use counted), or applied before to this hold (counted then): the
    /// hold's price now.
    Applied(OrderPrice),
    /// Unknown, not yet valid, expired or used up (why), or another code is applied.
    Invalid(String),
    /// The hold is no longer held (checked out, released, expired) or is not the account's.
    HoldNotOpen,
}

/// What the confirmed orders of one section or tier sold, split (from their lines).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlaceSales {
    /// The section's name or the tier's id.
    pub place: String,
    pub face_minor: i64,
    pub discount_minor: i64,
    pub fees_minor: i64,
    pub tax_minor: i64,
    pub all_in_minor: i64,
}

/// The split of an event's confirmed sales into face value, fees and tax, from the lines of
/// the confirmed orders' holds (orders without lines — an exchange's, a transfer's — are not
/// in it).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SalesSplit {
    pub places: Vec<PlaceSales>,
    pub order_fees_minor: i64,
    pub order_fees_tax_minor: i64,
    /// Every line's all-in price, the order fees' included: what the orders cost.
    pub total_minor: i64,
}

/// Prices and promo codes.
#[async_trait]
pub trait PricingStore: Send + Sync {
    /// The event's confirmed sales split into face value, fees and tax, per section or tier.
    async fn sales_split(&self, event_id: &str) -> StoreResult<SalesSplit>;

    /// The hold's stored lines as its price; `None` when it has none (see [`plain_price`]).
    async fn hold_price(&self, event_id: &str, hold_id: &str) -> StoreResult<Option<OrderPrice>>;

    /// Creates `code` with `response` stored under `scope` in the same transaction; a
    /// retry of the scope answers the stored response. `None`: the code exists already.
    async fn create_promo_code(
        &self,
        code: &PromoCode,
        scope: &IdempotencyScope,
        request_digest: &str,
        response: &StoredResponse,
    ) -> StoreResult<Option<Idempotent>>;

    /// The event's codes with their uses, by code.
    async fn promo_codes(&self, event_id: &str) -> StoreResult<Vec<PromoCode>>;

    /// Applies `code` to the hold, if it is `account_id`'s and still held by the store's
    /// clock: counts a use (only while `uses < max_uses`), re-prices the hold's tickets with
    /// the discount and rewrites its lines, seats and total — one transaction, so racing
    /// checkouts cannot use a code more than its `max_uses`.
    async fn apply_promo_code(
        &self,
        event: &EventRecord,
        hold_id: &str,
        account_id: &str,
        code: &str,
    ) -> StoreResult<PromoApplied>;
}
