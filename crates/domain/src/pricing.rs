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
