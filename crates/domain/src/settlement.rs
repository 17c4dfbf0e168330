//! What a payment verdict does to an order, its hold and the money: decided here, once.
//!
//! The event writer's engine applies these rules to the holds it keeps in checkout
//! ([`crate::engine::EventEngine::decide`]); both stores' own settlement (a verdict for a hold
//! no writer keeps: an exchange's, an event no writer has loaded, a writer that was full)
//! reads the rows under its locks, asks [`step`] and [`refusal`], and only persists the
//! answer. So a verdict means the same thing whichever path applies it.

use time::OffsetDateTime;

use crate::hold::HoldStatus;
use crate::order::{OrderStatus, PaymentStatus};

/// Why an order was cancelled, as stored and shown (`cancelReason`).
pub mod reason {
    /// The provider declined or failed the payment.
    pub const PAYMENT_FAILED: &str = "PAYMENT_FAILED";
    /// The authorization was voided before the order settled.
    pub const PAYMENT_VOIDED: &str = "PAYMENT_VOIDED";
    /// The money came after the hold's deadline, or after the hold ended.
    pub const HOLD_EXPIRED: &str = "HOLD_EXPIRED";
    /// The hold is an exchange's whose exchange ended (failed, expired) meanwhile.
    pub const EXCHANGE_ENDED: &str = "EXCHANGE_ENDED";
    /// Selling the hold would take the account past the event's limit.
    pub const PURCHASE_LIMIT: &str = "PURCHASE_LIMIT";
    /// The event was cancelled while the payment was out: the authorization is voided.
    pub const EVENT_CANCELLED: &str = "EVENT_CANCELLED";
}

/// What gives back money the provider took for an order that kept no seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// Void the authorization (nothing was captured).
    Void,
    /// Refund a capture (a provider that authorizes and captures at once, or a late
    /// `CAPTURED` verdict on a cancelled order): the money is never kept.
    Refund,
}

impl Undo {
    /// What gives back a payment in `status`, or `None` when the provider holds no money.
    pub fn of(status: PaymentStatus) -> Option<Self> {
        match status {
            PaymentStatus::Authorized => Some(Self::Void),
            PaymentStatus::Captured => Some(Self::Refund),
            PaymentStatus::Authorizing
            | PaymentStatus::RequiresAction
            | PaymentStatus::Unknown
            | PaymentStatus::Voided
            | PaymentStatus::Failed => None,
        }
    }
}

/// What a verdict does, given the operation's and the order's status read under the
/// settlement's locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The operation can no longer take the verdict (payment statuses only move forward): a
    /// duplicate, a late copy, an answer overtaken by its webhook. Nothing changes.
    Stale,
    /// Only the operation moves: 3-D Secure asked for, an answer lost (`UNKNOWN`), the
    /// capture of a confirmed order, a decline or void of an order settled already.
    Record,
    /// The provider holds the money of a pending order: sell its hold unless [`refusal`]
    /// finds a reason not to, and then cancel it for that reason and give the money back
    /// ([`Undo::of`] the verdict).
    Confirm,
    /// The pending order is cancelled for `reason` and its hold ends; no money was taken.
    Cancel { reason: &'static str },
    /// The order was cancelled before the provider took the money: give it back.
    GiveBack(Undo),
}

/// Whether an operation in `status` may still sell or cancel its order: only before the
/// order settled. A verdict that sells or cancels moves the operation out of these statuses
/// in the same transaction as the order (an `AUTHORIZED` operation's order is settled).
pub fn order_unsettled(status: PaymentStatus) -> bool {
    matches!(
        status,
        PaymentStatus::Authorizing | PaymentStatus::Unknown | PaymentStatus::RequiresAction
    )
}

/// The step for a verdict `verdict` on an operation in `operation` of an order in `order`.
pub fn step(operation: PaymentStatus, verdict: PaymentStatus, order: OrderStatus) -> Step {
    if !operation.can_become(verdict) {
        return Step::Stale;
    }
    match (verdict, order) {
        (PaymentStatus::Authorized | PaymentStatus::Captured, OrderStatus::PendingPayment) => {
            Step::Confirm
        }
        (PaymentStatus::Authorized | PaymentStatus::Captured, OrderStatus::Cancelled) => {
            Undo::of(verdict).map_or(Step::Record, Step::GiveBack)
        }
        (PaymentStatus::Failed, OrderStatus::PendingPayment) => Step::Cancel {
            reason: reason::PAYMENT_FAILED,
        },
        (PaymentStatus::Voided, OrderStatus::PendingPayment) => Step::Cancel {
            reason: reason::PAYMENT_VOIDED,
        },
        (PaymentStatus::Authorized | PaymentStatus::Captured, OrderStatus::Confirmed)
        | (PaymentStatus::Failed | PaymentStatus::Voided, _)
        | (
            PaymentStatus::Authorizing | PaymentStatus::RequiresAction | PaymentStatus::Unknown,
            _,
        ) => Step::Record,
    }
}

/// What a confirmation checks about the order's hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmation {
    pub hold_status: HoldStatus,
    pub hold_expires_at: OffsetDateTime,
    /// For an exchange's hold: whether its exchange is still waiting for this payment (with
    /// every old ticket still marked). Any other hold: `true`.
    pub exchange_open: bool,
    /// What the account would own and hold in the event with this hold sold: its other
    /// confirmed and live holds (less what an exchange gives up), plus this one.
    pub account_total: u64,
    pub max_tickets_per_account: u64,
}

/// Why a pending order whose money the provider holds cannot be sold, or `None` when it can:
/// the hold must still be in checkout and within its deadline by the store's clock `now`,
/// an exchange's still open, and the account within the event's limit.
pub fn refusal(confirmation: &Confirmation, now: OffsetDateTime) -> Option<&'static str> {
    if confirmation.hold_status != HoldStatus::PaymentPending || confirmation.hold_expires_at <= now
    {
        Some(reason::HOLD_EXPIRED)
    } else if !confirmation.exchange_open {
        Some(reason::EXCHANGE_ENDED)
    } else if confirmation.account_total > confirmation.max_tickets_per_account {
        Some(reason::PURCHASE_LIMIT)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAYMENTS: [PaymentStatus; 7] = [
        PaymentStatus::Authorizing,
        PaymentStatus::RequiresAction,
        PaymentStatus::Authorized,
        PaymentStatus::Unknown,
        PaymentStatus::Captured,
        PaymentStatus::Voided,
        PaymentStatus::Failed,
    ];
    const ORDERS: [OrderStatus; 3] = [
        OrderStatus::PendingPayment,
        OrderStatus::Confirmed,
        OrderStatus::Cancelled,
    ];

    #[test]
    fn a_verdict_the_operation_cannot_take_changes_nothing() {
        for operation in PAYMENTS {
            for verdict in PAYMENTS {
                for order in ORDERS {
                    let stale = step(operation, verdict, order) == Step::Stale;
                    assert_eq!(
                        stale,
                        !operation.can_become(verdict),
                        "{operation:?} {verdict:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn only_a_pending_order_is_confirmed_or_cancelled() {
        for operation in PAYMENTS {
            for verdict in PAYMENTS {
                for order in [OrderStatus::Confirmed, OrderStatus::Cancelled] {
                    let moved = step(operation, verdict, order);
                    assert!(
                        !matches!(moved, Step::Confirm | Step::Cancel { .. }),
                        "{operation:?} {verdict:?} {order:?}: {moved:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn money_taken_for_a_cancelled_order_goes_back() {
        use PaymentStatus::*;
        let cancelled = OrderStatus::Cancelled;
        assert_eq!(
            step(Authorizing, Authorized, cancelled),
            Step::GiveBack(Undo::Void)
        );
        assert_eq!(
            step(Unknown, Captured, cancelled),
            Step::GiveBack(Undo::Refund)
        );
        // A late capture of an authorization already voided: nothing to move.
        assert_eq!(step(Voided, Captured, cancelled), Step::Stale);
        assert_eq!(
            step(Authorized, Captured, cancelled),
            Step::GiveBack(Undo::Refund)
        );
    }

    #[test]
    fn a_pending_order_is_sold_or_cancelled_by_a_final_verdict() {
        use PaymentStatus::*;
        let pending = OrderStatus::PendingPayment;
        for from in [Authorizing, Unknown, RequiresAction] {
            assert_eq!(step(from, Authorized, pending), Step::Confirm);
            assert_eq!(step(from, Captured, pending), Step::Confirm);
            assert_eq!(
                step(from, Failed, pending),
                Step::Cancel {
                    reason: reason::PAYMENT_FAILED
                }
            );
        }
        assert_eq!(step(Authorizing, RequiresAction, pending), Step::Record);
        assert_eq!(step(Authorizing, Unknown, pending), Step::Record);
        assert_eq!(
            step(Authorized, Captured, OrderStatus::Confirmed),
            Step::Record
        );
    }

    #[test]
    fn a_confirmation_is_refused_for_a_lapsed_hold_an_ended_exchange_or_the_limit() {
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::hours(1);
        let live = Confirmation {
            hold_status: HoldStatus::PaymentPending,
            hold_expires_at: now + time::Duration::seconds(1),
            exchange_open: true,
            account_total: 4,
            max_tickets_per_account: 4,
        };
        assert_eq!(refusal(&live, now), None);
        let lapsed = Confirmation {
            hold_expires_at: now,
            ..live
        };
        assert_eq!(refusal(&lapsed, now), Some(reason::HOLD_EXPIRED));
        let released = Confirmation {
            hold_status: HoldStatus::Released,
            ..live
        };
        assert_eq!(refusal(&released, now), Some(reason::HOLD_EXPIRED));
        let ended = Confirmation {
            exchange_open: false,
            ..live
        };
        assert_eq!(refusal(&ended, now), Some(reason::EXCHANGE_ENDED));
        let over = Confirmation {
            account_total: 5,
            ..live
        };
        assert_eq!(refusal(&over, now), Some(reason::PURCHASE_LIMIT));
    }
}
