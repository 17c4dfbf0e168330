//! Sale phases (issue 40): presale lanes behind access codes, each with its window, its
//! inventory, its purchase limit and its own waiting-room queue, and the general sale.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::{EventSpec, SpecError, WaitingRoomSettings, spec_error};
use crate::ids::check_name_id;

/// Phases per event.
pub const PHASES_PER_EVENT_MAX: usize = 20;

/// Who may buy in a phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PhaseAccess {
    /// Any fan (the general sale).
    Open,
    /// Only fans who redeemed a valid access code for the phase.
    Code,
}

/// One phase of the sale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Phase {
    pub phase_id: String,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub starts_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub ends_at: Option<OffsetDateTime>,
    pub access: PhaseAccess,
    /// Section names the phase sells (empty with `tiers` empty: everything).
    #[serde(default)]
    pub sections: Vec<String>,
    /// Tier ids the phase sells.
    #[serde(default)]
    pub tiers: Vec<String>,
    /// The phase's own purchase limit per account (absent: the event's).
    #[serde(default)]
    pub max_tickets_per_account: Option<u32>,
    /// The phase's own queue (absent: the event's settings).
    #[serde(default)]
    pub waiting_room: Option<WaitingRoomSettings>,
}

/// Checks the phases against the event.
pub fn validate(phases: &[Phase], spec: &EventSpec) -> Result<(), SpecError> {
    if phases.len() > PHASES_PER_EVENT_MAX {
        return Err(spec_error(
            "phases",
            format!("at most {PHASES_PER_EVENT_MAX} phases"),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, phase) in phases.iter().enumerate() {
        let field = |f: &str| format!("phases[{i}].{f}");
        check_name_id(&phase.phase_id, "phase id")
            .map_err(|e| spec_error(field("phaseId"), e.0))?;
        if !seen.insert(phase.phase_id.as_str()) {
            return Err(spec_error(field("phaseId"), "duplicate phase id"));
        }
        if phase.ends_at.is_some_and(|end| end <= phase.starts_at) {
            return Err(spec_error(field("endsAt"), "must be after startsAt"));
        }
        for section in &phase.sections {
            if !spec.sections.iter().any(|s| &s.name == section) {
                return Err(spec_error(
                    field("sections"),
                    format!("{section:?} is no section of the event"),
                ));
            }
        }
        for tier in &phase.tiers {
            if !spec.tiers.iter().any(|t| &t.tier_id == tier) {
                return Err(spec_error(
                    field("tiers"),
                    format!("{tier:?} is no tier of the event"),
                ));
            }
        }
    }
    Ok(())
}
