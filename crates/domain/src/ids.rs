//! Validated identifiers. Each constructor checks the syntax the API contract promises, so
//! code past the HTTP edge never sees a malformed id.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why an identifier was refused; the message names the rule that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidId(pub String);

/// Longest account id the contract allows (`sub` of the JWT).
pub const ACCOUNT_ID_LEN_MAX: usize = 64;
/// Longest section name or tier id.
pub const NAME_ID_LEN_MAX: usize = 32;
/// Longest idempotency key (API.md: 1-255 chars).
pub const IDEMPOTENCY_KEY_LEN_MAX: usize = 255;

/// An account: the `sub` of a verified token, 1-64 chars of `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AccountId(String);

impl AccountId {
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        let ok_len = !raw.is_empty() && raw.len() <= ACCOUNT_ID_LEN_MAX;
        let ok_chars = raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if ok_len && ok_chars {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidId(format!(
                "account id must be 1-{ACCOUNT_ID_LEN_MAX} characters of [A-Za-z0-9_.-]"
            )))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AccountId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a section name or tier id: 1-32 chars of `[A-Za-z0-9_]`. No `-`, because seat ids
/// use `-` to separate section, row and number.
pub fn check_name_id(raw: &str, what: &str) -> Result<(), InvalidId> {
    let ok_len = !raw.is_empty() && raw.len() <= NAME_ID_LEN_MAX;
    let ok_chars = raw.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok_len && ok_chars {
        Ok(())
    } else {
        Err(InvalidId(format!(
            "{what} must be 1-{NAME_ID_LEN_MAX} characters of [A-Za-z0-9_]"
        )))
    }
}

/// A reserved seat, `"<section>-<row>-<number>"` with row and number from 1 (`"A-12-7"`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeatRef {
    pub section: String,
    pub row: u32,
    pub number: u32,
}

impl SeatRef {
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        let bad = || InvalidId(format!("seat id {raw:?} is not <section>-<row>-<number>"));
        let mut parts = raw.rsplitn(3, '-');
        let number = parts.next().ok_or_else(bad)?;
        let row = parts.next().ok_or_else(bad)?;
        let section = parts.next().ok_or_else(bad)?;
        check_name_id(section, "section").map_err(|_| bad())?;
        let parse_pos = |s: &str| -> Option<u32> {
            // Canonical decimal only: "07" or "+7" would name the same seat as "7" under
            // another id.
            let digits = s.bytes().all(|b| b.is_ascii_digit());
            if s.is_empty() || s.len() > 6 || s.starts_with('0') || !digits {
                return None;
            }
            s.parse::<u32>().ok().filter(|n| *n >= 1)
        };
        Ok(Self {
            section: section.to_owned(),
            row: parse_pos(row).ok_or_else(bad)?,
            number: parse_pos(number).ok_or_else(bad)?,
        })
    }
}

impl fmt::Display for SeatRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.section, self.row, self.number)
    }
}

/// Checks an idempotency key: 1-255 visible ASCII characters.
pub fn check_idempotency_key(raw: &str) -> Result<(), InvalidId> {
    let ok_len = !raw.is_empty() && raw.len() <= IDEMPOTENCY_KEY_LEN_MAX;
    if ok_len && raw.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(InvalidId(format!(
            "idempotency key must be 1-{IDEMPOTENCY_KEY_LEN_MAX} visible ASCII characters"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_ids() {
        assert!(AccountId::parse("alice.smith-01_x").is_ok());
        assert!(AccountId::parse("").is_err());
        assert!(AccountId::parse(&"a".repeat(65)).is_err());
        assert!(AccountId::parse(&"a".repeat(64)).is_ok());
        assert!(AccountId::parse("bob smith").is_err());
        assert!(AccountId::parse("bob/../x").is_err());
    }

    #[test]
    fn seat_refs() {
        let seat = SeatRef::parse("A-12-7").unwrap();
        assert_eq!((seat.section.as_str(), seat.row, seat.number), ("A", 12, 7));
        assert_eq!(seat.to_string(), "A-12-7");
        for bad in [
            "",
            "A",
            "A-1",
            "A-0-1",
            "A-1-0",
            "A-01-1",
            "-1-1",
            "A-B-1-1",
            "A-1-x",
            "A-1-9999999",
            "Ä-1-1",
        ] {
            assert!(SeatRef::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    /// Found by the `ids` fuzz target: `u32::from_str` takes a leading `+`, so "A-12-+7"
    /// was the seat "A-12-7" under a second id (a hold could name one seat twice).
    #[test]
    fn a_seat_has_one_spelling() {
        for bad in ["A-12-+7", "A-+12-7", "A-+1-+1", "A- 12-7", "A-12-7 "] {
            assert!(SeatRef::parse(bad).is_err(), "{bad} should be refused");
        }
        let seat = SeatRef::parse("A-12-7").unwrap();
        assert_eq!(SeatRef::parse(&seat.to_string()), Ok(seat));
    }

    #[test]
    fn idempotency_keys() {
        assert!(check_idempotency_key("k-1").is_ok());
        assert!(check_idempotency_key("").is_err());
        assert!(check_idempotency_key("has space").is_err());
        assert!(check_idempotency_key(&"k".repeat(256)).is_err());
    }
}
