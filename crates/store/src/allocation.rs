//! Allocations, comps and the box office (issue 40), as stored: what the holds of an
//! allocation's system account cannot say (its name and what it was given, the comps issued
//! from it, the orders sold at the box office). What an allocation still keeps is its live
//! holds ([`AllocationStore::kept_holds`]); they are made, released, lapsed and given as comps
//! by the event's writer like any hold (`boxoffice_domain::allocation`).

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::allocation::Allocation;

use crate::{NewRecord, StoreResult};

/// A request's answer stored with what it created (`endpoint` and the record under it).
#[derive(Debug, Clone)]
pub struct Answer {
    pub endpoint: String,
    pub record: NewRecord,
}

/// A live hold of an allocation's system account: one kept seat or unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRow {
    pub allocation_id: String,
    pub hold_id: String,
    /// The kept seat (none for a unit).
    pub seat_id: Option<String>,
    /// The kept unit's tier (none for a seat).
    pub tier_id: Option<String>,
    pub quantity: u32,
    pub expires_at: OffsetDateTime,
}

/// A comp as recorded: its order, the allocation it came from, its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompRecord {
    pub event_id: String,
    pub order_id: String,
    pub allocation_id: String,
    pub account_id: String,
    pub issued_by: String,
}

/// A box-office sale as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoxOfficeSale {
    pub event_id: String,
    pub order_id: String,
    /// `cash` or `card_present`.
    pub payment_kind: String,
    pub sold_by: String,
    pub buyer_email: Option<String>,
    pub buyer_name: Option<String>,
}

#[async_trait::async_trait]
pub trait AllocationStore: Send + Sync {
    /// Records allocations of the event (one already there under its id is left as it is)
    /// and, in the same transaction, the answer of the request that added them. Returns
    /// the ids recorded now.
    async fn add_allocations(
        &self,
        event_id: &str,
        allocations: &[Allocation],
        answer: Option<&Answer>,
    ) -> StoreResult<Vec<String>>;

    /// The event's allocations as given, oldest first.
    async fn allocations(&self, event_id: &str) -> StoreResult<Vec<Allocation>>;

    /// What the event's allocations still keep: their system accounts' live holds, by the
    /// store's clock.
    async fn kept_holds(&self, event_id: &str) -> StoreResult<Vec<KeptRow>>;

    /// Records a comp (its order confirmed) and the answer of the request that issued it.
    async fn record_comp(&self, comp: &CompRecord, answer: Option<&Answer>) -> StoreResult<()>;

    /// The event's comps.
    async fn comps(&self, event_id: &str) -> StoreResult<Vec<CompRecord>>;

    /// Records a box-office sale and the answer of the request that made it.
    async fn record_box_office_sale(
        &self,
        sale: &BoxOfficeSale,
        answer: Option<&Answer>,
    ) -> StoreResult<()>;

    /// The box-office sale of an order, if it was one.
    async fn box_office_sale(
        &self,
        event_id: &str,
        order_id: &str,
    ) -> StoreResult<Option<BoxOfficeSale>>;

    /// Confirmed orders of the event paid by `comp` with no comp recorded (`violations`).
    async fn unrecorded_comp_orders(&self, event_id: &str) -> StoreResult<Vec<String>>;

    /// Stores a request's answer about the event on its own (a release: the holds it ended
    /// are the state, written by the writer).
    async fn record_answer(&self, event_id: &str, answer: &Answer) -> StoreResult<()>;
}

/// What `boxoffice check` finds wrong with the event's comps: comps come only from
/// allocations. Each recorded comp names an allocation of the event, its order is the
/// account's, of amount 0, and holds only seats and tiers the allocation was given; every
/// order paid by `comp` is a recorded comp.
pub async fn violations(store: &dyn crate::Store, event_id: &str) -> StoreResult<Vec<String>> {
    let allocations = store.allocations(event_id).await?;
    let mut out = Vec::new();
    for comp in store.comps(event_id).await? {
        let Some(allocation) = allocations
            .iter()
            .find(|a| a.allocation_id == comp.allocation_id)
        else {
            out.push(format!(
                "comp order {} names no allocation {}",
                comp.order_id, comp.allocation_id
            ));
            continue;
        };
        let Some(order) = store.get_order(&comp.order_id).await? else {
            out.push(format!("comp order {} does not exist", comp.order_id));
            continue;
        };
        if order.event_id != event_id || order.account_id != comp.account_id {
            out.push(format!(
                "comp order {} is not {}'s of this event",
                comp.order_id, comp.account_id
            ));
        }
        if order.total_minor != 0 {
            out.push(format!(
                "comp order {} costs {}",
                comp.order_id, order.total_minor
            ));
        }
        for seat in &order.seats {
            if !allocation.seat_ids.contains(&seat.seat_id) {
                out.push(format!(
                    "comp order {} has seat {} that allocation {} was not given",
                    comp.order_id, seat.seat_id, comp.allocation_id
                ));
            }
        }
        if let Some(tier_id) = &order.tier_id
            && !allocation.tier_units.contains_key(tier_id)
        {
            out.push(format!(
                "comp order {} has units of {tier_id} that allocation {} was not given",
                comp.order_id, comp.allocation_id
            ));
        }
    }
    for order_id in store.unrecorded_comp_orders(event_id).await? {
        out.push(format!(
            "order {order_id} is paid by comp but is no allocation's comp"
        ));
    }
    Ok(out)
}
