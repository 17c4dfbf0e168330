//! How an event sells beyond its inventory (issue 40): ticket types and their prices, the
//! fees and the tax shown in every all-in price ([`crate::pricing`]), the sale's phases —
//! presale lanes behind access codes and the general sale ([`crate::phase`]) — and the seats
//! and units kept back from sale ([`crate::allocation`]).
//!
//! [`SaleSetup`] is what an event is created with; it is validated with the event
//! ([`crate::event::EventSpec::validate`]) and stored beside it as one JSON document (the
//! `event.sale_setup` column). What changes during a sale (access codes and their uses,
//! promo codes, an allocation's release) lives in its own rows.

use serde::{Deserialize, Serialize};

use crate::allocation::Allocation;
use crate::event::{EventSpec, SpecError};
use crate::phase::Phase;
use crate::pricing::{Fee, Tax, TicketType};

/// Everything an event sells by beyond sections, tiers and their `priceMinor`. The default
/// (all empty) is the event as it sold before issue 40: one price per section or tier, no
/// fees, no tax, one general sale from `onSaleAt`, nothing kept back.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaleSetup {
    /// Ticket types beyond the standard one (a section's or tier's own `priceMinor`).
    #[serde(default)]
    pub ticket_types: Vec<TicketType>,
    /// Fees added to every ticket or every order.
    #[serde(default)]
    pub fees: Vec<Fee>,
    /// The tax on face value and fees, and whether prices include it.
    #[serde(default)]
    pub tax: Option<Tax>,
    /// Presale lanes and the general sale; empty: one general sale from `onSaleAt`.
    #[serde(default)]
    pub phases: Vec<Phase>,
    /// Seats and tier units kept back from sale when the event is created.
    #[serde(default)]
    pub allocations: Vec<Allocation>,
}

impl SaleSetup {
    /// Checks each part against the event it belongs to; the error names the first bad field
    /// in the API's camelCase spelling.
    pub fn validate(&self, spec: &EventSpec) -> Result<(), SpecError> {
        crate::pricing::validate(self, spec)?;
        crate::phase::validate(&self.phases, spec)?;
        crate::allocation::validate(&self.allocations, spec)?;
        Ok(())
    }
}
