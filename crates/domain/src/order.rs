//! Orders and payment operations: their states and the forward-only transitions between
//! them.
//!
//! An order is created when a hold goes to checkout and settles as `CONFIRMED` or
//! `CANCELLED`. Its payment status follows the provider: every update is a conditional write
//! that only moves forward ([`PaymentStatus::can_become`]), so a late or duplicated webhook,
//! a reconciler run and the original response can arrive in any order and the latest truth
//! wins exactly once.

use serde::{Deserialize, Serialize};

/// An order's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    PendingPayment,
    Confirmed,
    Cancelled,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PendingPayment => "PENDING_PAYMENT",
            Self::Confirmed => "CONFIRMED",
            Self::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "PENDING_PAYMENT" => Some(Self::PendingPayment),
            "CONFIRMED" => Some(Self::Confirmed),
            "CANCELLED" => Some(Self::Cancelled),
            _ => None,
        }
    }

    /// `PENDING_PAYMENT` settles once; a confirmed order may still be cancelled by a
    /// recorded compensation (capture failed for good).
    pub fn can_become(self, to: OrderStatus) -> bool {
        matches!(
            (self, to),
            (Self::PendingPayment, Self::Confirmed | Self::Cancelled)
                | (Self::Confirmed, Self::Cancelled)
        )
    }
}

/// What the payment provider last told us, or `UNKNOWN` when a call's outcome was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PaymentStatus {
    Authorizing,
    RequiresAction,
    Authorized,
    Unknown,
    Captured,
    Voided,
    Failed,
}

impl PaymentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Authorizing => "AUTHORIZING",
            Self::RequiresAction => "REQUIRES_ACTION",
            Self::Authorized => "AUTHORIZED",
            Self::Unknown => "UNKNOWN",
            Self::Captured => "CAPTURED",
            Self::Voided => "VOIDED",
            Self::Failed => "FAILED",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "AUTHORIZING" => Some(Self::Authorizing),
            "REQUIRES_ACTION" => Some(Self::RequiresAction),
            "AUTHORIZED" => Some(Self::Authorized),
            "UNKNOWN" => Some(Self::Unknown),
            "CAPTURED" => Some(Self::Captured),
            "VOIDED" => Some(Self::Voided),
            "FAILED" => Some(Self::Failed),
            _ => None,
        }
    }

    /// Terminal: nothing the provider says later changes it.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Captured | Self::Voided | Self::Failed)
    }

    /// The legal forward moves. `UNKNOWN` may resolve to anything the provider reports; a
    /// terminal status never moves; nothing moves back to `AUTHORIZING`.
    pub fn can_become(self, to: PaymentStatus) -> bool {
        use PaymentStatus::*;
        if self == to || self.is_terminal() || to == Authorizing {
            return false;
        }
        match self {
            Authorizing | Unknown => true,
            RequiresAction => matches!(to, Authorized | Captured | Voided | Failed),
            Authorized => matches!(to, Captured | Voided),
            Captured | Voided | Failed => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [PaymentStatus; 7] = [
        PaymentStatus::Authorizing,
        PaymentStatus::RequiresAction,
        PaymentStatus::Authorized,
        PaymentStatus::Unknown,
        PaymentStatus::Captured,
        PaymentStatus::Voided,
        PaymentStatus::Failed,
    ];

    #[test]
    fn terminal_payment_states_never_move() {
        for from in ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in ALL {
                assert!(!from.can_become(to), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn a_late_authorization_never_undoes_a_capture() {
        assert!(!PaymentStatus::Captured.can_become(PaymentStatus::Authorized));
        assert!(!PaymentStatus::Authorized.can_become(PaymentStatus::RequiresAction));
        assert!(PaymentStatus::Authorized.can_become(PaymentStatus::Captured));
        assert!(PaymentStatus::Unknown.can_become(PaymentStatus::Captured));
    }

    #[test]
    fn moves_are_acyclic() {
        // Following legal moves can never return to a state already left.
        fn walk(from: PaymentStatus, seen: &mut Vec<PaymentStatus>) {
            for to in ALL {
                if from.can_become(to) {
                    assert!(!seen.contains(&to), "cycle back to {to:?} via {seen:?}");
                    seen.push(to);
                    walk(to, seen);
                    seen.pop();
                }
            }
        }
        walk(
            PaymentStatus::Authorizing,
            &mut vec![PaymentStatus::Authorizing],
        );
    }

    #[test]
    fn names_round_trip() {
        for s in ALL {
            assert_eq!(PaymentStatus::parse(s.as_str()), Some(s));
        }
        for s in [
            OrderStatus::PendingPayment,
            OrderStatus::Confirmed,
            OrderStatus::Cancelled,
        ] {
            assert_eq!(OrderStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn orders_settle_once() {
        assert!(OrderStatus::PendingPayment.can_become(OrderStatus::Confirmed));
        assert!(!OrderStatus::Cancelled.can_become(OrderStatus::Confirmed));
        assert!(!OrderStatus::Confirmed.can_become(OrderStatus::PendingPayment));
    }
}
