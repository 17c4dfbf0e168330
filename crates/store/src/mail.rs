//! Mail to fans: an account's address and language ([`AccountRecord`]), and one mail per
//! (outbox message, account) ([`MailMessage`]).
//!
//! Start with [`MailStore`]. The outbox relay turns a delivered message into the mails it
//! asks for (`boxoffice_workers::mail::mails_of`: who, and what [`kind`]) and hands them to
//! [`MailStore::fan_out_mail`] before it marks the message; the unique key (outbox id,
//! account) makes that exactly once however often the relay delivers the message again. The
//! mail worker (`boxoffice_workers::mail`) claims due mails and sends them, at most once
//! each: the claim marks them `SENDING` with a lease and commits before any SMTP traffic;
//! the worker records `SENT` once the server accepted. A `SENDING` mail whose lease ended
//! (its worker died between the two) may or may not have gone out: it becomes `UNCERTAIN`
//! ([`MailStore::expire_mail_leases`]) and is sent again only when an operator asks
//! ([`MailStore::resend_mail`]).

use boxoffice_domain::OffsetDateTime;

use crate::StoreResult;

/// What a mail says, from the outbox topic it was made from.
pub mod kind {
    /// An order's tickets were issued (`tickets.issue`): the buyer's tickets, with the PDF.
    pub const ORDER_TICKETS: &str = "ORDER_TICKETS";
    /// An exchange that needed no payment completed (`exchange.completed`): the new tickets.
    /// An exchange that was paid for mails its new order's tickets as an order.
    pub const EXCHANGE_TICKETS: &str = "EXCHANGE_TICKETS";
    /// A transfer was accepted (`transfer.accepted`): the receiver's new tickets.
    pub const TRANSFER_RECEIVED: &str = "TRANSFER_RECEIVED";
    /// A transfer was accepted: the giver's tickets are void.
    pub const TRANSFER_SENT: &str = "TRANSFER_SENT";
    /// Tickets are offered to the receiver (`transfer.offered`).
    pub const TRANSFER_OFFERED: &str = "TRANSFER_OFFERED";
    /// Seats are held for a fan on the waiting list (`waitlist.offered`).
    pub const WAITLIST_OFFER: &str = "WAITLIST_OFFER";
    /// A refund's money went back (`refund.succeeded`).
    pub const REFUND_SUCCEEDED: &str = "REFUND_SUCCEEDED";
    /// A refund was refused by the provider (`refund.failed`).
    pub const REFUND_FAILED: &str = "REFUND_FAILED";
    /// The event was cancelled (`event.cancelled`, its first message): every account with
    /// tickets.
    pub const EVENT_CANCELLED: &str = "EVENT_CANCELLED";

    /// Every kind.
    pub const ALL: [&str; 9] = [
        ORDER_TICKETS,
        EXCHANGE_TICKETS,
        TRANSFER_RECEIVED,
        TRANSFER_SENT,
        TRANSFER_OFFERED,
        WAITLIST_OFFER,
        REFUND_SUCCEEDED,
        REFUND_FAILED,
        EVENT_CANCELLED,
    ];
}

/// What [`email_is_valid`] accepts, as the OpenAPI document states it (with
/// [`EMAIL_LEN_MAX`]): something, one `@`, something, none of it a space or a control
/// character.
pub const EMAIL_PATTERN: &str = r"^[^@\s\x00-\x1f\x7f-\x9f]+@[^@\s\x00-\x1f\x7f-\x9f]+$";
/// Longest address accepted, in characters (RFC 5321's path limit).
pub const EMAIL_LEN_MAX: usize = 254;
/// Most mails one fan-out of a cancelled event makes (accounts with tickets of the event).
pub const CANCELLATION_ACCOUNTS_MAX: u32 = 100_000;
/// Attempts of one mail the server refused for now before it is `FAILED`.
pub const MAIL_ATTEMPTS_MAX: u32 = 10;
/// Pause after the first refusal for now; each further one doubles it.
pub const MAIL_BACKOFF_BASE_S: f64 = 5.0;
/// Longest pause between two attempts.
pub const MAIL_BACKOFF_MAX_S: f64 = 3600.0;
/// Longest error text kept per mail, in characters.
pub const MAIL_ERROR_LEN_MAX: usize = 500;
/// Longest subject kept, in characters.
pub const MAIL_SUBJECT_LEN_MAX: usize = 200;

/// How long to wait before the next attempt after `n_attempts` attempts (counting the one
/// that was just refused for now); `None` once [`MAIL_ATTEMPTS_MAX`] were: `FAILED`.
pub fn retry_in_s(n_attempts: u32) -> Option<f64> {
    if n_attempts >= MAIL_ATTEMPTS_MAX {
        return None;
    }
    let doublings = n_attempts.saturating_sub(1).min(30);
    Some((MAIL_BACKOFF_BASE_S * f64::from(1u32 << doublings)).min(MAIL_BACKOFF_MAX_S))
}

/// Whether `email` is an address mail can be sent to: at most [`EMAIL_LEN_MAX`] characters,
/// one `@` with something on each side, no spaces or control characters. (Not a full RFC
/// 5322 parser: the SMTP server judges the rest, and refuses with a 5xx.)
pub fn email_is_valid(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    email.chars().count() <= EMAIL_LEN_MAX
        && !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Who gave an account's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmailSource {
    /// The identity token's `email` claim.
    Token,
    /// The fan (`PUT /v1/me`): a token never overwrites it.
    Fan,
}

impl EmailSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Token => "TOKEN",
            Self::Fan => "FAN",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Some(match raw {
            "TOKEN" => Self::Token,
            "FAN" => Self::Fan,
            _ => return None,
        })
    }
}

/// An account's mail settings. An account without a row has none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    pub account_id: String,
    pub email: Option<String>,
    pub email_source: Option<EmailSource>,
    /// `en`, `de`, `fr`, `es` or `zh`; `None`: English.
    pub locale: Option<String>,
    pub updated_at: OffsetDateTime,
}

/// What a fan changes of their account (`PUT /v1/me`): `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountUpdate {
    pub email: Option<String>,
    pub locale: Option<String>,
}

/// A mail's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MailStatus {
    /// Waiting for its next attempt (`next_attempt_at`).
    Pending,
    /// Claimed by a worker that may be talking to the SMTP server now (until its lease).
    Sending,
    /// The SMTP server accepted it.
    Sent,
    /// The server refused it for good (a 5xx), or for now too many times.
    Failed,
    /// Its worker's lease ended while it was `SENDING`: it may have gone out. Sent again
    /// only when an operator asks.
    Uncertain,
    /// The account has no address.
    NoAddress,
}

impl MailStatus {
    pub const ALL: [Self; 6] = [
        Self::Pending,
        Self::Sending,
        Self::Sent,
        Self::Failed,
        Self::Uncertain,
        Self::NoAddress,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Sending => "SENDING",
            Self::Sent => "SENT",
            Self::Failed => "FAILED",
            Self::Uncertain => "UNCERTAIN",
            Self::NoAddress => "NO_ADDRESS",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|status| status.as_str() == raw)
    }

    /// Whether an operator may send it again: never one that went out or may be going out.
    pub fn resendable(self) -> bool {
        match self {
            Self::Failed | Self::Uncertain | Self::NoAddress => true,
            Self::Pending | Self::Sending | Self::Sent => false,
        }
    }
}

/// A mail to make: the outbox message it comes from, to whom, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMail {
    /// The outbox message's (global) id.
    pub outbox_id: i64,
    pub account_id: String,
    /// One of [`kind::ALL`].
    pub kind: String,
    /// The outbox message's JSON payload.
    pub payload: String,
}

/// A mail as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailMessage {
    pub mail_id: i64,
    pub outbox_id: i64,
    pub account_id: String,
    pub kind: String,
    pub payload: String,
    pub status: MailStatus,
    pub n_attempts: u32,
    pub next_attempt_at: OffsetDateTime,
    pub last_error: Option<String>,
    /// The address it went (or goes) to, read from the account when it was claimed.
    pub to_address: Option<String>,
    pub subject: Option<String>,
    pub sent_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// A claimed mail (now `SENDING`) and the account's language.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedMail {
    pub mail: MailMessage,
    pub locale: Option<String>,
}

/// What became of a claimed mail, as the worker decided it.
#[derive(Debug, Clone, PartialEq)]
pub enum MailOutcome {
    /// The SMTP server accepted it (or the mail folder has it).
    Sent { subject: String },
    /// Refused for now (SMTP 4xx, no connection), or not ready to render: `PENDING` again
    /// in `retry_in_s` (from [`retry_in_s`]; `None`: `FAILED`).
    Retry {
        error: String,
        retry_in_s: Option<f64>,
    },
    /// Refused for good (SMTP 5xx), or it cannot be rendered.
    Failed { error: String },
    /// The connection broke inside the SMTP transaction: the server may have taken it.
    Uncertain { error: String },
    /// The account has no address.
    NoAddress,
}

/// What [`MailStore::resend_mail`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resent {
    /// `PENDING` again, due now.
    Queued(MailMessage),
    /// Sent, or being sent or attempted: left alone.
    NotResendable(MailMessage),
}

/// `error` cut to [`MAIL_ERROR_LEN_MAX`] characters.
pub fn bounded_error(error: &str) -> String {
    error.chars().take(MAIL_ERROR_LEN_MAX).collect()
}

/// Accounts and mails. Every method is one short transaction (or none); none sends
/// anything.
#[async_trait::async_trait]
pub trait MailStore: Send + Sync {
    async fn get_account(&self, account_id: &str) -> StoreResult<Option<AccountRecord>>;

    /// Sets what `update` gives (an email set here is the fan's), creating the row.
    async fn update_account(
        &self,
        account_id: &str,
        update: &AccountUpdate,
    ) -> StoreResult<AccountRecord>;

    /// Records the address of an identity token's `email` claim unless the fan set one;
    /// `true` if it changed.
    async fn record_token_email(&self, account_id: &str, email: &str) -> StoreResult<bool>;

    /// One `PENDING` mail per (outbox message, account), unless that pair has one already.
    /// Returns how many were new.
    async fn fan_out_mail(&self, mails: &[NewMail]) -> StoreResult<u64>;

    /// The accounts whose tickets of `event_id` its cancellation voided (at most `limit`).
    async fn cancelled_ticket_accounts(
        &self,
        event_id: &str,
        limit: u32,
    ) -> StoreResult<Vec<String>>;

    /// Every `SENDING` mail whose lease ended becomes `UNCERTAIN`; how many did.
    async fn expire_mail_leases(&self) -> StoreResult<u64>;

    /// Claims up to `limit` due `PENDING` mails: `SENDING` until `lease_s` from now, one
    /// attempt more, their address read from the account, committed before this returns.
    async fn claim_mail(&self, limit: u32, lease_s: f64) -> StoreResult<Vec<ClaimedMail>>;

    /// Records what became of a `SENDING` mail (one no longer `SENDING` is left alone:
    /// `false`).
    async fn record_mail(&self, mail_id: i64, outcome: &MailOutcome) -> StoreResult<bool>;

    async fn get_mail(&self, mail_id: i64) -> StoreResult<Option<MailMessage>>;

    /// Mails newest first, of one status when given, below `before` (a mail id) when given.
    async fn list_mail(
        &self,
        status: Option<MailStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<MailMessage>>;

    /// Queues a `FAILED`, `UNCERTAIN` or `NO_ADDRESS` mail again (due now, attempts from
    /// zero); `None` if there is no such mail.
    async fn resend_mail(&self, mail_id: i64) -> StoreResult<Option<Resent>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_and_gives_up_after_the_last_attempt() {
        assert_eq!(retry_in_s(1), Some(5.0));
        assert_eq!(retry_in_s(2), Some(10.0));
        assert_eq!(retry_in_s(MAIL_ATTEMPTS_MAX - 1), Some(1280.0));
        assert_eq!(retry_in_s(MAIL_ATTEMPTS_MAX), None);
        for n in 0..MAIL_ATTEMPTS_MAX {
            assert!(retry_in_s(n).unwrap() <= MAIL_BACKOFF_MAX_S);
        }
    }

    #[test]
    fn addresses_are_judged_by_length_one_at_and_no_spaces() {
        assert!(email_is_valid("ann@example.org"));
        assert!(email_is_valid("a+b@x"));
        for bad in [
            "",
            "ann",
            "@example.org",
            "ann@",
            "a@b@c",
            "ann @example.org",
            "ann@exa\tmple.org",
            "ann@example.org\n",
            "ann@exam\u{7}ple.org",
        ] {
            assert!(!email_is_valid(bad), "{bad:?}");
        }
        let long = format!("{}@example.org", "a".repeat(EMAIL_LEN_MAX));
        assert!(!email_is_valid(&long));
        let longest = format!("{}@x.org", "a".repeat(EMAIL_LEN_MAX - 6));
        assert!(email_is_valid(&longest));
    }

    #[test]
    fn only_mails_that_cannot_be_going_out_are_resent() {
        let resendable: Vec<&str> = MailStatus::ALL
            .into_iter()
            .filter(|s| s.resendable())
            .map(MailStatus::as_str)
            .collect();
        assert_eq!(resendable, ["FAILED", "UNCERTAIN", "NO_ADDRESS"]);
        for status in MailStatus::ALL {
            assert_eq!(MailStatus::parse(status.as_str()), Some(status));
        }
    }
}
