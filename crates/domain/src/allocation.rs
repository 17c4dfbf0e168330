//! Allocations (issue 40): seats and tier units the operator keeps back from sale (artist,
//! sponsor, production kill), released at a time or by hand, and the comps issued from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::{EventSpec, SpecError, spec_error};
use crate::ids::{SeatRef, check_name_id};

/// Allocations per event.
pub const ALLOCATIONS_PER_EVENT_MAX: usize = 100;

/// Seats and units kept back under one name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Allocation {
    pub allocation_id: String,
    pub name: String,
    #[serde(default)]
    pub seat_ids: Vec<String>,
    /// Units kept back by tier id.
    #[serde(default)]
    pub tier_units: BTreeMap<String, u32>,
    /// When what is still kept goes on sale by itself (absent: only by hand).
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub release_at: Option<OffsetDateTime>,
}

/// Checks the allocations against the event: known seats and tiers, each seat kept once.
pub fn validate(allocations: &[Allocation], spec: &EventSpec) -> Result<(), SpecError> {
    if allocations.len() > ALLOCATIONS_PER_EVENT_MAX {
        return Err(spec_error(
            "allocations",
            format!("at most {ALLOCATIONS_PER_EVENT_MAX} allocations"),
        ));
    }
    let mut ids = std::collections::BTreeSet::new();
    let mut seats = std::collections::BTreeSet::new();
    for (i, allocation) in allocations.iter().enumerate() {
        let field = |f: &str| format!("allocations[{i}].{f}");
        check_name_id(&allocation.allocation_id, "allocation id")
            .map_err(|e| spec_error(field("allocationId"), e.0))?;
        if !ids.insert(allocation.allocation_id.as_str()) {
            return Err(spec_error(field("allocationId"), "duplicate allocation id"));
        }
        for seat_id in &allocation.seat_ids {
            let known = SeatRef::parse(seat_id)
                .is_ok_and(|seat| spec.sections.iter().any(|s| s.contains(&seat)));
            if !known {
                return Err(spec_error(
                    field("seatIds"),
                    format!("{seat_id:?} is no seat of the event"),
                ));
            }
            if !seats.insert(seat_id.as_str()) {
                return Err(spec_error(
                    field("seatIds"),
                    format!("{seat_id:?} kept twice"),
                ));
            }
        }
        for tier_id in allocation.tier_units.keys() {
            if !spec.tiers.iter().any(|t| &t.tier_id == tier_id) {
                return Err(spec_error(
                    field("tierUnits"),
                    format!("{tier_id:?} is no tier of the event"),
                ));
            }
        }
    }
    Ok(())
}
