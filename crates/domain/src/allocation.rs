//! Allocations (issue 40): seats and tier units the operator keeps back from sale (artist,
//! sponsor, production kill), released at a time or by hand, and the comps issued from them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::{EventSpec, SpecError, spec_error};
use crate::ids::{SeatRef, check_name_id};

/// Longest allocation name, characters.
pub const ALLOCATION_NAME_LEN_MAX: usize = 200;

/// Allocations per event.
pub const ALLOCATIONS_PER_EVENT_MAX: usize = 100;

/// Checks one allocation on its own: a name, something kept, not too much. The error is the
/// field (camelCase) and why.
pub fn check_one(allocation: &Allocation, spec: &EventSpec) -> Result<(), (&'static str, String)> {
    let name_len = allocation.name.chars().count();
    if allocation.name.trim().is_empty() || name_len > ALLOCATION_NAME_LEN_MAX {
        return Err((
            "name",
            format!("must be 1-{ALLOCATION_NAME_LEN_MAX} characters"),
        ));
    }
    let units: u64 = allocation.tier_units.values().map(|n| u64::from(*n)).sum();
    let items = allocation.seat_ids.len() as u64 + units;
    if items == 0 {
        return Err(("seatIds", "keeps nothing: give seatIds or tierUnits".into()));
    }
    if items > ALLOCATION_ITEMS_MAX as u64 {
        return Err((
            "seatIds",
            format!("at most {ALLOCATION_ITEMS_MAX} seats and units per allocation"),
        ));
    }
    for (tier_id, n) in &allocation.tier_units {
        let capacity = spec
            .tiers
            .iter()
            .find(|t| &t.tier_id == tier_id)
            .map(|t| u64::from(t.capacity));
        if *n == 0 || capacity.is_some_and(|c| u64::from(*n) > c) {
            return Err((
                "tierUnits",
                format!("{tier_id:?}: from 1 to the tier's capacity"),
            ));
        }
    }
    Ok(())
}

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
        crate::event::check_label(&field("name"), &allocation.name)?;
        if !ids.insert(allocation.allocation_id.as_str()) {
            return Err(spec_error(field("allocationId"), "duplicate allocation id"));
        }
        check_one(allocation, spec).map_err(|(f, reason)| spec_error(field(f), reason))?;
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

/// Seats and units one allocation keeps (its seats plus its units), at most: each is a hold
/// of its own (see [`KeptItem`]).
pub const ALLOCATION_ITEMS_MAX: usize = 1_000;

/// Seats or units one comp gives, at most.
pub const COMP_ITEMS_MAX: usize = 100;

/// How an allocation's system account begins. An account of a token is `[A-Za-z0-9_.-]`
/// (`crate::ids::AccountId`), so no fan can ever act as one.
pub const ALLOCATION_ACCOUNT_PREFIX: &str = "allocation:";

/// The system account whose holds are what `allocation_id` still keeps.
pub fn account_for(allocation_id: &str) -> String {
    format!("{ALLOCATION_ACCOUNT_PREFIX}{allocation_id}")
}

/// The allocation an account is the system account of, if it is one.
pub fn allocation_of(account_id: &str) -> Option<&str> {
    account_id.strip_prefix(ALLOCATION_ACCOUNT_PREFIX)
}

/// Whether the account is an allocation's: its holds keep inventory back and count against
/// no purchase limit.
pub fn is_allocation_account(account_id: &str) -> bool {
    allocation_of(account_id).is_some()
}

/// How long a kept seat stays kept when its allocation has no `releaseAt`: until the event
/// starts plus a day (then nothing sells any more). The deadline is the hold's, so the
/// sweeper and the writer's timer end it like any other.
pub const KEPT_WITHOUT_RELEASE_PAST_START_S: i64 = 86_400;

/// The deadline of what an allocation keeps: its `releaseAt`, else a day past the start.
pub fn kept_until(release_at: Option<OffsetDateTime>, starts_at: OffsetDateTime) -> OffsetDateTime {
    release_at.unwrap_or(starts_at + time::Duration::seconds(KEPT_WITHOUT_RELEASE_PAST_START_S))
}

/// One thing an allocation keeps: a seat, or one unit of a tier. Each is one hold of the
/// allocation's system account, so that any subset can be released or given as a comp by
/// ending exactly those holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeptItem {
    Seat(String),
    Unit(String),
}

/// What an allocation keeps, one item per seat and per unit, seats first.
pub fn kept_items(allocation: &Allocation) -> Vec<KeptItem> {
    let seats = allocation.seat_ids.iter().cloned().map(KeptItem::Seat);
    let units = allocation
        .tier_units
        .iter()
        .flat_map(|(tier_id, n)| (0..*n).map(|_| KeptItem::Unit(tier_id.clone())));
    seats.chain(units).collect()
}

/// A hold an allocation's system account has: what it still keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptHold {
    pub hold_id: String,
    pub item: KeptItem,
}

/// Which of an allocation's kept items a release or a comp names: seats by id, units by tier
/// and count. Empty selection (no seats, no units): everything still kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub seat_ids: Vec<String>,
    pub tier_units: BTreeMap<String, u32>,
}

/// Why a selection cannot be taken from what is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectionError {
    /// Seats the allocation does not keep (any more).
    SeatsNotKept(Vec<String>),
    /// Fewer units of the tier are kept than named.
    UnitsNotKept { tier_id: String, kept: u32 },
    /// A seat named twice.
    Duplicate(String),
}

/// The kept holds a selection names, in `kept`'s order; all or nothing.
pub fn select(kept: &[KeptHold], selection: &Selection) -> Result<Vec<KeptHold>, SelectionError> {
    if selection.seat_ids.is_empty() && selection.tier_units.values().all(|n| *n == 0) {
        return Ok(kept.to_vec());
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for seat_id in &selection.seat_ids {
        if !seen.insert(seat_id.as_str()) {
            return Err(SelectionError::Duplicate(seat_id.clone()));
        }
        match kept
            .iter()
            .find(|k| matches!(&k.item, KeptItem::Seat(s) if s == seat_id))
        {
            Some(hold) => chosen.push(hold.clone()),
            None => missing.push(seat_id.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(SelectionError::SeatsNotKept(missing));
    }
    for (tier_id, n) in &selection.tier_units {
        let units: Vec<&KeptHold> = kept
            .iter()
            .filter(|k| matches!(&k.item, KeptItem::Unit(t) if t == tier_id))
            .collect();
        if units.len() < *n as usize {
            return Err(SelectionError::UnitsNotKept {
                tier_id: tier_id.clone(),
                kept: u32::try_from(units.len()).unwrap_or(u32::MAX),
            });
        }
        chosen.extend(units.into_iter().take(*n as usize).cloned());
    }
    Ok(chosen)
}

/// What an allocation's hold request does (a [`crate::decide::HoldShape::Allocation`]):
/// decided outside the sale's rules — before the sale opens, past the per-hold bound, its
/// price 0 — but on the same inventory, so a kept seat is never sold and never kept twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationShape {
    /// Seats (or, with `tier`, none).
    pub seat_ids: Vec<String>,
    /// Units of one tier (or, with `seat_ids`, none).
    pub tier: Option<(String, u32)>,
    pub purpose: AllocationPurpose,
}

/// Why an allocation holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocationPurpose {
    /// Keeps one item back for the allocation's system account until `until` (its
    /// `releaseAt`), counted against no purchase limit.
    Keep { until: OffsetDateTime },
    /// A comp: the allocation's holds `from_hold_ids` (its system account's, kept, live) end
    /// and the requesting account holds exactly their seats and units at price 0, in the same
    /// group, under the purchase limit; its checkout then confirms it (`engine::allocation`).
    Comp {
        from_account: String,
        from_hold_ids: Vec<String>,
    },
}

impl AllocationShape {
    pub fn quantity(&self) -> u32 {
        match &self.tier {
            Some((_, n)) => *n,
            None => u32::try_from(self.seat_ids.len()).unwrap_or(u32::MAX),
        }
    }

    /// The plain shape the same inventory rules apply to.
    pub fn plain(&self) -> crate::decide::HoldShape {
        match &self.tier {
            Some((tier_id, quantity)) => crate::decide::HoldShape::Tier {
                tier_id: tier_id.clone(),
                quantity: *quantity,
            },
            None => crate::decide::HoldShape::Seats {
                seat_ids: self.seat_ids.clone(),
            },
        }
    }

    /// The hold's deadline, when it keeps.
    pub fn kept_until(&self) -> Option<OffsetDateTime> {
        match &self.purpose {
            AllocationPurpose::Keep { until } => Some(*until),
            AllocationPurpose::Comp { .. } => None,
        }
    }

    pub fn is_comp(&self) -> bool {
        matches!(self.purpose, AllocationPurpose::Comp { .. })
    }
}

/// The hold shape that keeps `item` until `until`.
pub fn keep_shape(item: &KeptItem, until: OffsetDateTime) -> crate::decide::HoldShape {
    let (seat_ids, tier) = match item {
        KeptItem::Seat(seat_id) => (vec![seat_id.clone()], None),
        KeptItem::Unit(tier_id) => (Vec::new(), Some((tier_id.clone(), 1))),
    };
    crate::decide::HoldShape::Allocation(AllocationShape {
        seat_ids,
        tier,
        purpose: AllocationPurpose::Keep { until },
    })
}

/// The hold shape of a comp of `from` (kept holds of `allocation_id`): their seats, or their
/// units of one tier. `None` when they are empty or mix seats and units or tiers.
pub fn comp_shape(allocation_id: &str, from: &[KeptHold]) -> Option<crate::decide::HoldShape> {
    let first = from.first()?;
    let (seat_ids, tier) = match &first.item {
        KeptItem::Seat(_) => {
            let seat_ids: Option<Vec<String>> = from
                .iter()
                .map(|k| match &k.item {
                    KeptItem::Seat(s) => Some(s.clone()),
                    KeptItem::Unit(_) => None,
                })
                .collect();
            (seat_ids?, None)
        }
        KeptItem::Unit(tier_id) => {
            if from
                .iter()
                .any(|k| !matches!(&k.item, KeptItem::Unit(t) if t == tier_id))
            {
                return None;
            }
            (
                Vec::new(),
                Some((tier_id.clone(), u32::try_from(from.len()).ok()?)),
            )
        }
    };
    Some(crate::decide::HoldShape::Allocation(AllocationShape {
        seat_ids,
        tier,
        purpose: AllocationPurpose::Comp {
            from_account: account_for(allocation_id),
            from_hold_ids: from.iter().map(|k| k.hold_id.clone()).collect(),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(items: &[(&str, KeptItem)]) -> Vec<KeptHold> {
        items
            .iter()
            .map(|(hold_id, item)| KeptHold {
                hold_id: (*hold_id).into(),
                item: item.clone(),
            })
            .collect()
    }

    fn ids(holds: &[KeptHold]) -> Vec<&str> {
        holds.iter().map(|h| h.hold_id.as_str()).collect()
    }

    #[test]
    fn a_selection_names_seats_and_units_all_or_nothing() {
        let holds = kept(&[
            ("a", KeptItem::Seat("A-1-1".into())),
            ("b", KeptItem::Seat("A-1-2".into())),
            ("c", KeptItem::Unit("GA".into())),
            ("d", KeptItem::Unit("GA".into())),
        ]);
        let all = select(&holds, &Selection::default()).expect("everything");
        assert_eq!(ids(&all), ["a", "b", "c", "d"]);
        let some = select(
            &holds,
            &Selection {
                seat_ids: vec!["A-1-2".into()],
                tier_units: BTreeMap::from([("GA".into(), 1)]),
            },
        )
        .expect("some");
        assert_eq!(ids(&some), ["b", "c"]);
        assert_eq!(
            select(
                &holds,
                &Selection {
                    seat_ids: vec!["A-1-2".into(), "A-1-9".into()],
                    ..Selection::default()
                }
            ),
            Err(SelectionError::SeatsNotKept(vec!["A-1-9".into()]))
        );
        assert_eq!(
            select(
                &holds,
                &Selection {
                    tier_units: BTreeMap::from([("GA".into(), 3)]),
                    ..Selection::default()
                }
            ),
            Err(SelectionError::UnitsNotKept {
                tier_id: "GA".into(),
                kept: 2
            })
        );
        assert_eq!(
            select(
                &holds,
                &Selection {
                    seat_ids: vec!["A-1-1".into(), "A-1-1".into()],
                    ..Selection::default()
                }
            ),
            Err(SelectionError::Duplicate("A-1-1".into()))
        );
    }

    #[test]
    fn a_comp_is_seats_or_units_of_one_tier() {
        let mixed = kept(&[
            ("a", KeptItem::Seat("A-1-1".into())),
            ("c", KeptItem::Unit("GA".into())),
        ]);
        assert!(comp_shape("x", &mixed).is_none());
        assert!(comp_shape("x", &[]).is_none());
        let tiers = kept(&[
            ("c", KeptItem::Unit("GA".into())),
            ("d", KeptItem::Unit("VIP".into())),
        ]);
        assert!(comp_shape("x", &tiers).is_none());
        assert!(comp_shape("x", &tiers[..1]).is_some());
    }

    #[test]
    fn accounts_of_allocations_are_no_fans() {
        assert_eq!(account_for("sponsor"), "allocation:sponsor");
        assert_eq!(allocation_of("allocation:sponsor"), Some("sponsor"));
        assert!(!is_allocation_account("sponsor"));
        assert!(crate::ids::AccountId::parse(&account_for("sponsor")).is_err());
    }

    #[test]
    fn items_are_seats_then_units() {
        let allocation = Allocation {
            allocation_id: "s".into(),
            name: "S".into(),
            seat_ids: vec!["A-1-1".into()],
            tier_units: BTreeMap::from([("GA".into(), 2)]),
            release_at: None,
        };
        assert_eq!(
            kept_items(&allocation),
            [
                KeptItem::Seat("A-1-1".into()),
                KeptItem::Unit("GA".into()),
                KeptItem::Unit("GA".into())
            ]
        );
        let start = time::macros::datetime!(2026-12-01 20:00 UTC);
        assert_eq!(kept_until(None, start), start + time::Duration::days(1));
        assert_eq!(
            kept_until(Some(start), start + time::Duration::days(9)),
            start
        );
    }
}
