//! Sale phases (issue 40): presale lanes behind access codes, each with its window, its
//! inventory, its purchase limit and its own waiting-room queue, and the general sale.
//!
//! Start with [`phase_for`] (which phase a hold is decided in, by the store's clock) and
//! [`Phase::sells_section`]: the event's writer applies them inside
//! `decide::decide_one` with the [`Lanes`] it keeps. Access codes are redeemed on the writer
//! too (`engine::access`), so two accounts racing a single-use code get one win; the pure
//! parts of codes (their spelling, the CSV an organiser imports) are here.
//!
//! An event without phases sells as before: one general sale from `onSaleAt`. With phases,
//! their windows alone decide when a hold may be made.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event::{EventSpec, SpecError, WaitingRoomSettings, spec_error};
use crate::ids::check_name_id;

/// Phases per event.
pub const PHASES_PER_EVENT_MAX: usize = 20;
/// A phase's own purchase limit at most (as the API documents it).
pub const PHASE_TICKETS_PER_ACCOUNT_MAX: u32 = 10_000;
/// Bytes of a phase's name at most.
pub const PHASE_NAME_LEN_MAX: usize = 200;

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

/// Access codes one generate call makes at most.
pub const ACCESS_CODES_PER_CALL_MAX: u32 = 100_000;
/// Access codes of one phase at most (generated and imported together).
pub const ACCESS_CODES_PER_PHASE_MAX: u64 = 1_000_000;
/// How many accounts one code may admit at most.
pub const ACCESS_CODE_USES_MAX: u32 = 100_000;
/// The shortest and longest code accepted (after normalisation).
pub const ACCESS_CODE_LEN_MIN: usize = 4;
pub const ACCESS_CODE_LEN_MAX: usize = 40;
/// Bytes of one imported CSV at most.
pub const ACCESS_CODES_CSV_BYTES_MAX: usize = 8 * 1024 * 1024;
/// The alphabet of generated codes: Crockford's base 32 (no I, L, O, U), read aloud safely.
pub const ACCESS_CODE_ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// Characters of a generated code (60 bits of randomness).
pub const ACCESS_CODE_GENERATED_LEN: usize = 12;

impl Phase {
    /// Whether the phase sells the whole event (no sections and no tiers named).
    pub fn sells_everything(&self) -> bool {
        self.sections.is_empty() && self.tiers.is_empty()
    }

    /// Whether the phase sells seats of `section`.
    pub fn sells_section(&self, section: &str) -> bool {
        self.sells_everything() || self.sections.iter().any(|s| s == section)
    }

    /// Whether the phase sells units of `tier_id`.
    pub fn sells_tier(&self, tier_id: &str) -> bool {
        self.sells_everything() || self.tiers.iter().any(|t| t == tier_id)
    }

    /// Whether the phase is open at `now`: started and not ended.
    pub fn is_open_at(&self, now: OffsetDateTime) -> bool {
        self.starts_at <= now && self.ends_at.is_none_or(|end| now < end)
    }
}

/// Why no phase takes a hold now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseRefusal {
    /// The hold names a phase the event does not have.
    Unknown { phase_id: String },
    /// The phase (or, when none was named, the next one) starts at `starts_at`.
    NotOpen { starts_at: OffsetDateTime },
    /// The phase ended at `ended_at` (when none was named: every phase has ended).
    Ended {
        phase_id: String,
        ended_at: OffsetDateTime,
    },
}

/// The phase a hold is decided in at `now` (the store's clock). `Ok(None)`: the event has no
/// phases (the general sale from `onSaleAt`). A hold that names no phase goes to the open
/// phase open now, else to the first code phase open now (whose code it then needs).
pub fn phase_for<'a>(
    phases: &'a [Phase],
    asked: Option<&str>,
    now: OffsetDateTime,
) -> Result<Option<&'a Phase>, PhaseRefusal> {
    if let Some(phase_id) = asked {
        let phase = phases
            .iter()
            .find(|p| p.phase_id == phase_id)
            .ok_or_else(|| PhaseRefusal::Unknown {
                phase_id: phase_id.to_owned(),
            })?;
        if now < phase.starts_at {
            return Err(PhaseRefusal::NotOpen {
                starts_at: phase.starts_at,
            });
        }
        if let Some(ended_at) = phase.ends_at.filter(|end| *end <= now) {
            return Err(PhaseRefusal::Ended {
                phase_id: phase.phase_id.clone(),
                ended_at,
            });
        }
        return Ok(Some(phase));
    }
    if phases.is_empty() {
        return Ok(None);
    }
    let open_now = || phases.iter().filter(|p| p.is_open_at(now));
    if let Some(phase) = open_now()
        .find(|p| p.access == PhaseAccess::Open)
        .or_else(|| open_now().next())
    {
        return Ok(Some(phase));
    }
    if let Some(starts_at) = phases
        .iter()
        .map(|p| p.starts_at)
        .filter(|start| *start > now)
        .min()
    {
        return Err(PhaseRefusal::NotOpen { starts_at });
    }
    let last = phases
        .iter()
        .filter_map(|p| Some((p.ends_at?, p)))
        .max_by_key(|(end, _)| *end);
    match last {
        Some((ended_at, phase)) => Err(PhaseRefusal::Ended {
            phase_id: phase.phase_id.clone(),
            ended_at,
        }),
        // Unreachable with phases that all started and none open (one without an end is
        // open), answered as not open rather than trusted.
        None => Err(PhaseRefusal::NotOpen {
            starts_at: phases[0].starts_at,
        }),
    }
}

/// One redemption of an access code: the account may buy in the phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redemption {
    pub phase_id: String,
    pub account_id: String,
    pub code: String,
}

/// What the event's writer keeps of the phases: the phases themselves (fixed with the
/// event), who redeemed a code for which phase, and how many times each code was redeemed
/// (every redemption is decided by the writer, so these are complete once loaded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lanes {
    pub phases: Vec<Phase>,
    /// (phase id, account id) of every redemption.
    pub redeemed: BTreeSet<(String, String)>,
    /// Redemptions per (phase id, code).
    pub code_uses: BTreeMap<(String, String), u32>,
    /// Seats or units each (account, phase) holds live or owns, filled per group by the
    /// engine for the accounts the group names (like `BatchState::usage_by_account`).
    pub usage: BTreeMap<(String, String), u32>,
}

impl Lanes {
    /// The lanes of an event with `phases` and the redemptions read from the store.
    pub fn new(phases: Vec<Phase>, redemptions: Vec<Redemption>) -> Self {
        let mut lanes = Self {
            phases,
            ..Self::default()
        };
        for redemption in redemptions {
            lanes.record(&redemption);
        }
        lanes
    }

    /// Takes in one redemption.
    pub fn record(&mut self, redemption: &Redemption) {
        self.redeemed
            .insert((redemption.phase_id.clone(), redemption.account_id.clone()));
        *self
            .code_uses
            .entry((redemption.phase_id.clone(), redemption.code.clone()))
            .or_default() += 1;
    }

    pub fn phase(&self, phase_id: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.phase_id == phase_id)
    }

    /// Whether the account may buy in the phase (an open phase: anyone).
    pub fn admits(&self, phase: &Phase, account_id: &str) -> bool {
        match phase.access {
            PhaseAccess::Open => true,
            PhaseAccess::Code => self
                .redeemed
                .contains(&(phase.phase_id.clone(), account_id.to_owned())),
        }
    }
}

/// A code as stored: trimmed and upper-cased; 4-40 characters of `[A-Z0-9-]`.
pub fn normalize_code(raw: &str) -> Result<String, String> {
    let code = raw.trim().to_ascii_uppercase();
    let ok_len = (ACCESS_CODE_LEN_MIN..=ACCESS_CODE_LEN_MAX).contains(&code.len());
    let ok_chars = code.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok_len && ok_chars {
        Ok(code)
    } else {
        Err(format!(
            "a code is {ACCESS_CODE_LEN_MIN}-{ACCESS_CODE_LEN_MAX} characters of A-Z, 0-9 and -"
        ))
    }
}

/// A generated code from random bytes (at least [`ACCESS_CODE_GENERATED_LEN`] of them): each
/// byte picks one character of [`ACCESS_CODE_ALPHABET`] (256 is a multiple of 32: unbiased).
pub fn code_from_random(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(ACCESS_CODE_GENERATED_LEN)
        .map(|b| char::from(ACCESS_CODE_ALPHABET[usize::from(*b) % ACCESS_CODE_ALPHABET.len()]))
        .collect()
}

/// An error of an imported CSV, naming its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    pub line: usize,
    pub reason: String,
}

/// Parses an organiser's CSV of codes, `code,uses` per line (an optional header line
/// `code,uses`; blank lines skipped; `uses` absent: 1). Every code once; at most
/// `rows_max` codes.
pub fn parse_codes_csv(text: &str, rows_max: usize) -> Result<Vec<(String, u32)>, CsvError> {
    let mut codes = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |reason: String| CsvError { line, reason };
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            continue;
        }
        let mut fields = trimmed.split(',').map(str::trim);
        let code = fields.next().unwrap_or_default();
        let uses = fields.next();
        if fields.next().is_some() {
            return Err(err("expected code,uses".into()));
        }
        if line == 1 && code.eq_ignore_ascii_case("code") {
            continue;
        }
        let code = normalize_code(code).map_err(err)?;
        let uses = match uses {
            None | Some("") => 1,
            Some(uses) => uses
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=ACCESS_CODE_USES_MAX).contains(n))
                .ok_or_else(|| err(format!("uses must be 1-{ACCESS_CODE_USES_MAX}")))?,
        };
        if !seen.insert(code.clone()) {
            return Err(err(format!("code {code} appears twice")));
        }
        if codes.len() >= rows_max {
            return Err(err(format!("at most {rows_max} codes per import")));
        }
        codes.push((code, uses));
    }
    if codes.is_empty() {
        return Err(CsvError {
            line: 1,
            reason: "no codes".into(),
        });
    }
    Ok(codes)
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
        crate::event::check_label(&field("name"), &phase.name)?;
        if !seen.insert(phase.phase_id.as_str()) {
            return Err(spec_error(field("phaseId"), "duplicate phase id"));
        }
        if phase
            .max_tickets_per_account
            .is_some_and(|n| n == 0 || n > PHASE_TICKETS_PER_ACCOUNT_MAX)
        {
            return Err(spec_error(
                field("maxTicketsPerAccount"),
                format!("must be 1-{PHASE_TICKETS_PER_ACCOUNT_MAX}"),
            ));
        }
        if phase.name.trim().is_empty() || phase.name.len() > PHASE_NAME_LEN_MAX {
            return Err(spec_error(
                field("name"),
                format!("must be 1-{PHASE_NAME_LEN_MAX} characters"),
            ));
        }
        if let Some(settings) = &phase.waiting_room {
            settings.validate(&field("waitingRoom"))?;
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

#[cfg(test)]
mod tests {
    use time::Duration;
    use time::macros::datetime;

    use super::*;

    const NOW: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

    fn phase(phase_id: &str, access: PhaseAccess, from_h: i64, to_h: Option<i64>) -> Phase {
        Phase {
            phase_id: phase_id.into(),
            name: phase_id.into(),
            starts_at: NOW + Duration::hours(from_h),
            ends_at: to_h.map(|h| NOW + Duration::hours(h)),
            access,
            sections: Vec::new(),
            tiers: Vec::new(),
            max_tickets_per_account: None,
            waiting_room: None,
        }
    }

    #[test]
    fn a_hold_goes_to_the_phase_open_now_an_open_one_first() {
        let phases = vec![
            phase("presale", PhaseAccess::Code, -1, Some(2)),
            phase("general", PhaseAccess::Open, 1, None),
        ];
        let at = |h: i64| NOW + Duration::hours(h);
        assert_eq!(phase_for(&[], None, NOW), Ok(None));
        assert_eq!(
            phase_for(&phases, None, NOW).unwrap().unwrap().phase_id,
            "presale"
        );
        // Both open: the open one.
        assert_eq!(
            phase_for(&phases, None, at(1)).unwrap().unwrap().phase_id,
            "general"
        );
        assert_eq!(
            phase_for(&phases, None, at(-2)),
            Err(PhaseRefusal::NotOpen { starts_at: at(-1) })
        );
        assert_eq!(
            phase_for(&phases, Some("general"), NOW),
            Err(PhaseRefusal::NotOpen { starts_at: at(1) })
        );
        assert_eq!(
            phase_for(&phases, Some("presale"), at(2)),
            Err(PhaseRefusal::Ended {
                phase_id: "presale".into(),
                ended_at: at(2)
            })
        );
        assert_eq!(
            phase_for(&phases, Some("nope"), NOW),
            Err(PhaseRefusal::Unknown {
                phase_id: "nope".into()
            })
        );
        let ended = vec![phase("presale", PhaseAccess::Code, -3, Some(-1))];
        assert_eq!(
            phase_for(&ended, None, NOW),
            Err(PhaseRefusal::Ended {
                phase_id: "presale".into(),
                ended_at: at(-1)
            })
        );
    }

    #[test]
    fn a_phase_sells_what_it_names_or_everything() {
        let mut lane = phase("lane", PhaseAccess::Code, 0, None);
        assert!(lane.sells_section("A") && lane.sells_tier("GA"));
        lane.sections = vec!["A".into()];
        assert!(lane.sells_section("A"));
        assert!(!lane.sells_section("B"));
        assert!(!lane.sells_tier("GA"));
        lane.tiers = vec!["GA".into()];
        assert!(lane.sells_tier("GA"));
    }

    #[test]
    fn codes_are_normalised_and_generated_from_the_alphabet() {
        assert_eq!(normalize_code("  ab-12cd "), Ok("AB-12CD".into()));
        assert!(normalize_code("abc").is_err());
        assert!(normalize_code("with space").is_err());
        assert!(normalize_code(&"A".repeat(41)).is_err());
        let code = code_from_random(&[0, 31, 32, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(code.len(), ACCESS_CODE_GENERATED_LEN);
        assert_eq!(&code[..4], "0Z0Z");
        assert!(normalize_code(&code).is_ok());
    }

    #[test]
    fn an_imported_csv_names_the_line_of_its_first_error() {
        let parsed = parse_codes_csv("code,uses\nfans0001,2\n\nFANS0002\n", 10).unwrap();
        assert_eq!(
            parsed,
            vec![("FANS0001".to_owned(), 2), ("FANS0002".to_owned(), 1)]
        );
        let line = |text: &str| parse_codes_csv(text, 10).unwrap_err().line;
        assert_eq!(line("code,uses\nGOOD0001,1\nBAD,1\n"), 3);
        assert_eq!(line("GOOD0001,0\n"), 1);
        assert_eq!(line("GOOD0001,1,extra\n"), 1);
        assert_eq!(line("GOOD0001\ngood0001\n"), 2);
        assert_eq!(line("code,uses\n"), 1);
        assert_eq!(
            parse_codes_csv("A001\nA002\nA003\n", 2).unwrap_err().line,
            3
        );
    }
}
