//! Sale phases as the API spells them.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::phase::{Phase, PhaseAccess};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `open` (the general sale) or `code` (fans with an access code only).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PhaseAccessName {
    Open,
    Code,
}

/// One phase of the sale: a presale lane or the general sale.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhaseBody {
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = "^[A-Za-z0-9_]{1,32}$",
        example = "fanclub"
    )]
    pub phase_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Fan club presale",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub starts_at: OffsetDateTime,
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub ends_at: Option<OffsetDateTime>,
    pub access: PhaseAccessName,
    /// Section names the phase sells (with `tiers` empty too: everything).
    #[serde(default)]
    pub sections: Vec<String>,
    /// Tier ids the phase sells.
    #[serde(default)]
    pub tiers: Vec<String>,
    /// The phase's own purchase limit per account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10_000)]
    pub max_tickets_per_account: Option<u32>,
    /// The phase's own waiting-room queue settings (with the event's waiting room enabled,
    /// every phase queued for with `phaseId` has its own queue, release rate and shopper
    /// slots): `maxActiveShoppers`, the release rates, windows and `policy`, validated as the
    /// event's; a field left out takes the default an event's would. `enabled` and
    /// `holdTtlFollowsSale` are the event's alone and ignored here. The phase's queue opens
    /// at its `startsAt`. Absent: the phase's queue runs with the event's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_room: Option<crate::api::WaitingRoomBody>,
}

impl From<PhaseBody> for Phase {
    fn from(body: PhaseBody) -> Self {
        Self {
            phase_id: body.phase_id,
            name: body.name,
            starts_at: body.starts_at,
            ends_at: body.ends_at,
            access: match body.access {
                PhaseAccessName::Open => PhaseAccess::Open,
                PhaseAccessName::Code => PhaseAccess::Code,
            },
            sections: body.sections,
            tiers: body.tiers,
            max_tickets_per_account: body.max_tickets_per_account,
            waiting_room: body.waiting_room.map(|settings| {
                settings.settings(&boxoffice_domain::event::WaitingRoomSettings::default())
            }),
        }
    }
}

impl From<&Phase> for PhaseBody {
    fn from(phase: &Phase) -> Self {
        Self {
            phase_id: phase.phase_id.clone(),
            name: phase.name.clone(),
            starts_at: phase.starts_at,
            ends_at: phase.ends_at,
            access: match phase.access {
                PhaseAccess::Open => PhaseAccessName::Open,
                PhaseAccess::Code => PhaseAccessName::Code,
            },
            sections: phase.sections.clone(),
            tiers: phase.tiers.clone(),
            max_tickets_per_account: phase.max_tickets_per_account,
            waiting_room: phase.waiting_room.as_ref().map(|settings| {
                let mut body = crate::api::WaitingRoomBody::of(settings);
                body.enabled = None;
                body.hold_ttl_follows_sale = None;
                body
            }),
        }
    }
}
