//! Seat and hold states and the transitions between them.
//!
//! A hold is a row with a `hold_id` and an `expires_at` from the store's clock, never a lock.
//! Its stored status changes only through [`HoldStatus::can_become`]; the status a client
//! sees also accounts for time ([`HoldStatus::effective`]): a `HELD` hold past its deadline
//! is `EXPIRED` whether or not the sweeper has run.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The status of one reserved seat in the authoritative store (the seat map shows a seat
/// whose hold is past its deadline as `AVAILABLE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SeatStatus {
    Available,
    Held,
    Sold,
}

impl SeatStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Available => "AVAILABLE",
            Self::Held => "HELD",
            Self::Sold => "SOLD",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "AVAILABLE" => Some(Self::Available),
            "HELD" => Some(Self::Held),
            "SOLD" => Some(Self::Sold),
            _ => None,
        }
    }
}

/// The status of a hold; a `HELD` hold past its deadline (store clock) reads `EXPIRED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HoldStatus {
    Held,
    PaymentPending,
    Confirmed,
    Released,
    Expired,
}

impl HoldStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Held => "HELD",
            Self::PaymentPending => "PAYMENT_PENDING",
            Self::Confirmed => "CONFIRMED",
            Self::Released => "RELEASED",
            Self::Expired => "EXPIRED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "HELD" => Some(Self::Held),
            "PAYMENT_PENDING" => Some(Self::PaymentPending),
            "CONFIRMED" => Some(Self::Confirmed),
            "RELEASED" => Some(Self::Released),
            "EXPIRED" => Some(Self::Expired),
            _ => None,
        }
    }

    /// The legal transitions of the stored status. Every store update that changes a hold's
    /// status is conditioned on the `from` status, so an illegal one can never be written.
    pub fn can_become(self, to: HoldStatus) -> bool {
        use HoldStatus::*;
        matches!(
            (self, to),
            (Held, PaymentPending | Released | Expired)
                | (PaymentPending, Confirmed | Expired | Released)
                // A recorded compensation (capture failed for good) gives a sale back.
                | (Confirmed, Released)
        )
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Released | Self::Expired)
    }

    /// The status as of `now`: a `HELD` hold past its deadline (or a `PAYMENT_PENDING` one
    /// past its grace deadline) is `EXPIRED` even before the sweeper writes it.
    pub fn effective(self, expires_at: OffsetDateTime, now: OffsetDateTime) -> HoldStatus {
        if matches!(self, Self::Held | Self::PaymentPending) && expires_at <= now {
            Self::Expired
        } else {
            self
        }
    }

    /// Whether the hold still claims its seats or tier units at `now`.
    pub fn is_live(self, expires_at: OffsetDateTime, now: OffsetDateTime) -> bool {
        match self {
            // In checkout, `expires_at` is the grace deadline: one bounded extension.
            Self::Held | Self::PaymentPending => expires_at > now,
            Self::Confirmed | Self::Released | Self::Expired => false,
        }
    }
}

/// Whether a seat row can be taken by a new hold at `now`: it is available, or its hold has
/// passed its deadline (nobody needs to have released it).
pub fn seat_is_free(
    status: SeatStatus,
    hold_expires_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> bool {
    if cfg!(feature = "planted-fault-skip-hold-condition") {
        // A deliberately broken build (bench/planted-fault.sh): every seat looks free, so
        // a held or sold seat is handed out again. The chaos run's check must catch it.
        return true;
    }
    match status {
        SeatStatus::Available => true,
        SeatStatus::Held => hold_expires_at.is_some_and(|deadline| deadline <= now),
        SeatStatus::Sold => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const ALL: [HoldStatus; 5] = [
        HoldStatus::Held,
        HoldStatus::PaymentPending,
        HoldStatus::Confirmed,
        HoldStatus::Released,
        HoldStatus::Expired,
    ];

    #[test]
    fn terminal_states_have_no_way_out() {
        for from in ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in ALL {
                assert!(!from.can_become(to), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn only_compensation_reopens_a_confirmed_hold() {
        assert!(HoldStatus::Confirmed.can_become(HoldStatus::Released));
        assert!(!HoldStatus::Confirmed.can_become(HoldStatus::Expired));
        assert!(!HoldStatus::Confirmed.can_become(HoldStatus::PaymentPending));
    }

    #[test]
    fn no_state_becomes_itself_or_goes_back_to_held() {
        for s in ALL {
            assert!(!s.can_become(s));
            assert!(!s.can_become(HoldStatus::Held));
        }
    }

    #[test]
    fn names_round_trip() {
        for s in ALL {
            assert_eq!(HoldStatus::parse(s.as_str()), Some(s));
        }
        for s in [SeatStatus::Available, SeatStatus::Held, SeatStatus::Sold] {
            assert_eq!(SeatStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(HoldStatus::parse("held"), None);
    }

    #[test]
    fn deadline_is_inclusive() {
        let t = datetime!(2026-12-01 10:00 UTC);
        assert_eq!(HoldStatus::Held.effective(t, t), HoldStatus::Expired);
        assert_eq!(
            HoldStatus::Held.effective(t, t - time::Duration::milliseconds(1)),
            HoldStatus::Held
        );
        assert!(seat_is_free(SeatStatus::Held, Some(t), t));
        assert!(!seat_is_free(
            SeatStatus::Held,
            Some(t),
            t - time::Duration::milliseconds(1)
        ));
        assert!(!seat_is_free(SeatStatus::Sold, None, t));
        assert!(seat_is_free(SeatStatus::Available, None, t));
        assert!(HoldStatus::PaymentPending.is_live(t, t - time::Duration::hours(1)));
        assert!(
            !HoldStatus::PaymentPending.is_live(t, t),
            "the grace deadline bounds checkout"
        );
    }
}
