//! Allocations as the API spells them.

use std::collections::BTreeMap;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::allocation::Allocation;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Seats and tier units kept back from sale under one name.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllocationBody {
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = "^[A-Za-z0-9_]{1,32}$",
        example = "sponsor"
    )]
    pub allocation_id: String,
    #[schema(
        min_length = 1,
        max_length = 200,
        example = "Sponsor seats",
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\t-\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: String,
    /// At most 1,000 seats and units per allocation.
    #[serde(default)]
    #[schema(max_items = 1000)]
    pub seat_ids: Vec<String>,
    /// Units kept back by tier id.
    #[serde(default)]
    #[schema(value_type = BTreeMap<String, u32>)]
    pub tier_units: BTreeMap<String, u32>,
    /// When what is still kept goes on sale by itself; absent: only by hand.
    #[serde(
        default,
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub release_at: Option<OffsetDateTime>,
}

impl From<AllocationBody> for Allocation {
    fn from(body: AllocationBody) -> Self {
        Self {
            allocation_id: body.allocation_id,
            name: body.name,
            seat_ids: body.seat_ids,
            tier_units: body.tier_units,
            release_at: body.release_at,
        }
    }
}

impl From<&Allocation> for AllocationBody {
    fn from(a: &Allocation) -> Self {
        Self {
            allocation_id: a.allocation_id.clone(),
            name: a.name.clone(),
            seat_ids: a.seat_ids.clone(),
            tier_units: a.tier_units.clone(),
            release_at: a.release_at,
        }
    }
}
