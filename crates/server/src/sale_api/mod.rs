//! The JSON shapes of an event's sale setup (issue 40), given on creation and shown on the
//! event: ticket types, fees and tax (`pricing`), phases (`phases`), allocations
//! (`allocations`). Each converts to and from `boxoffice_domain::sale::SaleSetup`'s parts.

pub mod allocations;
pub mod phases;
pub mod pricing;

use boxoffice_domain::sale::SaleSetup;

/// The sale setup of a creation body, one `Vec` or option per part.
pub fn setup(
    ticket_types: Vec<pricing::TicketTypeBody>,
    fees: Vec<pricing::FeeBody>,
    tax: Option<pricing::TaxBody>,
    phases: Vec<phases::PhaseBody>,
    allocations: Vec<allocations::AllocationBody>,
) -> SaleSetup {
    SaleSetup {
        ticket_types: ticket_types.into_iter().map(Into::into).collect(),
        fees: fees.into_iter().map(Into::into).collect(),
        tax: tax.map(Into::into),
        phases: phases.into_iter().map(Into::into).collect(),
        allocations: allocations.into_iter().map(Into::into).collect(),
    }
}
