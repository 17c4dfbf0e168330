//! Named crash points for fault-injection tests. When the environment variable
//! `BOXOFFICE_CRASH_AT` names a point, the process sends itself SIGKILL there (no
//! destructors, no flush, no shutdown hook), falling back to `abort` if `kill` cannot run.
//! Unset in production, where each call is one cached comparison.

use std::sync::OnceLock;

/// The environment variable naming the crash point.
pub const CRASH_AT_ENV: &str = "BOXOFFICE_CRASH_AT";

/// The points a test may name.
pub const POINTS: [&str; 7] = [
    "hold_committed",
    "checkout_committed",
    "authorization_sent",
    "authorization_returned",
    "sold_committed",
    "capture_sent",
    "outbox_delivered",
];

/// The points of an exchange with a price increase, in the order they are passed: the
/// exchange's transaction, then the checkout of its new seats (the purchase points).
pub const EXCHANGE_POINTS: [&str; 5] = [
    "exchange_committed",
    "checkout_committed",
    "authorization_sent",
    "authorization_returned",
    "sold_committed",
];

/// The points of a fan's refund, in the order they are passed: the group that records it,
/// the provider asked, the provider's answer, the refund settled (before its outbox message
/// is marked delivered).
pub const REFUND_POINTS: [&str; 4] = [
    "refund_committed",
    "refund_sent",
    "refund_answered",
    "refund_settled",
];

/// The points of an event's cancellation, in the order they are passed: the group that
/// cancels it (before the answer), then a step of its refunds' job (committed: some refunds
/// recorded, none paid yet).
pub const CANCELLATION_POINTS: [&str; 2] = ["cancel_committed", "cancellation_step"];

/// The points of a mail, in the order they are passed: its claim committed (`SENDING`,
/// before any SMTP traffic), then the server's acceptance (before `SENT` is recorded).
pub const MAIL_POINTS: [&str; 2] = ["mail_claimed", "mail_accepted"];

/// Aborts the process if `BOXOFFICE_CRASH_AT` names `name`.
pub fn point(name: &str) {
    static TARGET: OnceLock<Option<String>> = OnceLock::new();
    let target = TARGET.get_or_init(|| std::env::var(CRASH_AT_ENV).ok().filter(|v| !v.is_empty()));
    if target.as_deref() == Some(name) {
        eprintln!("crash point {name}: SIGKILL");
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        std::process::abort();
    }
}
