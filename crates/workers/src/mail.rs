//! The mail sender: renders fans' mails and sends them through SMTP (or writes them to a
//! folder), at most once each.
//!
//! Mails are made by the outbox relay's fan-out ([`mails_of`] decides who gets what from a
//! delivered message; `MailStore::fan_out_mail` makes one per message and account). Each
//! round first turns every `SENDING` mail whose lease ended into `UNCERTAIN`, then claims up
//! to [`MAIL_BATCH_MAX`] due mails — `SENDING` with a lease of [`MAIL_LEASE_S`], committed —
//! and only then renders and sends them, outside any store transaction, up to
//! [`MAIL_CONCURRENCY`] at once. The server's acceptance is recorded `SENT`. A mail whose
//! process died between the claim and that record is never sent again by a worker: it may
//! have gone out, so it is `UNCERTAIN` until an operator resends it
//! (`POST /v1/admin/mail/{mailId}/resend`). That is the price of at most once: a fan never
//! gets a mail twice from a retry, and the operator sees every mail that may be missing.
//!
//! Refusals: an SMTP 4xx, or no connection to the server at all, is `PENDING` again with the
//! backoff of `boxoffice_store::mail::retry_in_s`; a 5xx is `FAILED` with the reply; a
//! broken connection after the transaction began is `UNCERTAIN` (the server may have taken
//! it). An account without an address is `NO_ADDRESS`.
//!
//! Texts are the `mail-…` messages of the i18n catalogue `mail.ftl`, in the account's
//! language (English by default), as a plain text part and an HTML part; an order's mail
//! carries the order's PDF tickets (`boxoffice_delivery::pdf`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use boxoffice_delivery::{OrderSheet, TicketSheet};
use boxoffice_store::checkout::{OrderView, OutboxMessage, TicketView, topic};
use boxoffice_store::mail::{ClaimedMail, MailOutcome, NewMail, kind, retry_in_s};
use boxoffice_store::{Store, StoreError};
use futures_util::StreamExt;
use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use tokio::sync::Notify;

/// Mails claimed per round.
pub const MAIL_BATCH_MAX: u32 = 20;
/// Mails of a round sent at once (each one SMTP connection, none to the store while it
/// waits).
pub const MAIL_CONCURRENCY: usize = 4;
/// How long one SMTP transaction may take, connection included.
pub const SMTP_TIMEOUT_MS: u64 = 15_000;
/// How long a claim lasts: past a whole round (the last of a batch waits for
/// ⌈20 / 4⌉ − 1 turns of at most 15 s, then its own), so a live sender's mail never turns
/// `UNCERTAIN` under it.
pub const MAIL_LEASE_S: f64 = 120.0;

const _: () = assert!(
    (MAIL_BATCH_MAX as u64).div_ceil(MAIL_CONCURRENCY as u64) * SMTP_TIMEOUT_MS
        < MAIL_LEASE_S as u64 * 1000
);
/// Pause between rounds when nothing pokes the sender.
pub const MAIL_INTERVAL_MS: u64 = 1_000;
/// Reads of one relay round's fan-out made at once (who gets a message's mail).
pub const FAN_OUT_READS_CONCURRENCY: usize = 8;
/// The sender when none is configured.
pub const DEFAULT_MAIL_FROM: &str = "boxoffice <tickets@boxoffice.invalid>";

/// Where mail goes.
#[derive(Debug, Clone)]
pub enum MailTransport {
    /// An SMTP server (`smtp://host:port`, `smtps://…`, with `user:password@` when it asks).
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    /// A folder: each mail is written as `<mailId>.eml` (the demo, and tests of the demo).
    Folder(PathBuf),
}

/// The sender's configuration: where mail goes, and from whom.
#[derive(Clone)]
pub struct MailConfig {
    pub transport: MailTransport,
    pub from: Mailbox,
}

impl std::fmt::Debug for MailConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let transport = match &self.transport {
            MailTransport::Smtp(_) => "smtp".to_owned(),
            MailTransport::Folder(dir) => format!("folder {}", dir.display()),
        };
        f.debug_struct("MailConfig")
            .field("transport", &transport)
            .field("from", &self.from.to_string())
            .finish()
    }
}

impl MailConfig {
    /// Mail through the SMTP server `url` names: `smtp://host:port` (plain; add
    /// `?tls=required` for STARTTLS), `smtps://host:port` (TLS from the start), with
    /// `user:password@` for servers that ask for a login.
    pub fn smtp(url: &str, from: &str) -> Result<Self, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| format!("--smtp-url: {e}"))?
            .timeout(Some(Duration::from_millis(SMTP_TIMEOUT_MS)))
            .build();
        Ok(Self {
            transport: MailTransport::Smtp(transport),
            from: from_mailbox(from)?,
        })
    }

    /// Mail written to `dir` (created when missing).
    pub fn folder(dir: PathBuf, from: &str) -> Result<Self, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("--mail-dir {}: {e}", dir.display()))?;
        Ok(Self {
            transport: MailTransport::Folder(dir),
            from: from_mailbox(from)?,
        })
    }

    /// The folder mail is written to, in folder mode.
    pub fn folder_path(&self) -> Option<&std::path::Path> {
        match &self.transport {
            MailTransport::Folder(dir) => Some(dir),
            MailTransport::Smtp(_) => None,
        }
    }
}

fn from_mailbox(from: &str) -> Result<Mailbox, String> {
    from.parse()
        .map_err(|e| format!("--mail-from {from:?}: {e}"))
}

/// The file a mail is written to in folder mode.
pub fn eml_name(mail_id: i64) -> String {
    format!("{mail_id}.eml")
}

/// Whether a delivered outbox message may make mail (the relay reads who for these only).
pub fn makes_mail(topic_name: &str) -> bool {
    use boxoffice_store::{cancellation, exchange, refund, transfer, waitlist};
    [
        topic::TICKETS_ISSUE,
        exchange::topic::EXCHANGE_COMPLETED,
        transfer::topic::TRANSFER_ACCEPTED,
        transfer::topic::TRANSFER_OFFERED,
        waitlist::WAITLIST_OFFERED,
        refund::topic::REFUND_SUCCEEDED,
        refund::topic::REFUND_FAILED,
        cancellation::topic::EVENT_CANCELLED,
    ]
    .contains(&topic_name)
}

/// The mails a delivered outbox message asks for: who gets which [`kind`]. Reads the store
/// where the payload does not name the account (an order's owner, an event's ticket
/// holders); an error leaves the message to be delivered again.
pub async fn mails_of(
    store: &dyn Store,
    message: &OutboxMessage,
) -> Result<Vec<NewMail>, StoreError> {
    use boxoffice_store::{cancellation, exchange, refund, transfer, waitlist};
    let payload: serde_json::Value = serde_json::from_str(&message.payload).unwrap_or_default();
    let text = |name: &str| payload[name].as_str().map(str::to_owned);
    let mail = |account_id: String, mail_kind: &str| NewMail {
        outbox_id: message.id,
        account_id,
        kind: mail_kind.to_owned(),
        payload: message.payload.clone(),
    };
    let owner = |order_id: Option<String>| async move {
        match order_id {
            Some(order_id) => Ok(store.order_head(&order_id).await?.map(|o| o.account_id)),
            None => Ok::<_, StoreError>(None),
        }
    };
    let topic_name = message.topic.as_str();
    Ok(match topic_name {
        topic::TICKETS_ISSUE => owner(text("orderId"))
            .await?
            .map(|account| mail(account, kind::ORDER_TICKETS))
            .into_iter()
            .collect(),
        exchange::topic::EXCHANGE_COMPLETED => {
            // A paid exchange's new order is mailed as an order (its `tickets.issue`).
            let paid = match text("exchangeId") {
                Some(id) => store
                    .get_exchange(&id)
                    .await?
                    .is_some_and(|e| e.amount_due_minor > 0),
                None => false,
            };
            if paid {
                Vec::new()
            } else {
                owner(text("newOrderId"))
                    .await?
                    .map(|account| mail(account, kind::EXCHANGE_TICKETS))
                    .into_iter()
                    .collect()
            }
        }
        transfer::topic::TRANSFER_ACCEPTED => [
            text("toAccountId").map(|a| mail(a, kind::TRANSFER_RECEIVED)),
            text("fromAccountId").map(|a| mail(a, kind::TRANSFER_SENT)),
        ]
        .into_iter()
        .flatten()
        .collect(),
        transfer::topic::TRANSFER_OFFERED => text("toAccountId")
            .map(|a| mail(a, kind::TRANSFER_OFFERED))
            .into_iter()
            .collect(),
        waitlist::WAITLIST_OFFERED => text("accountId")
            .map(|a| mail(a, kind::WAITLIST_OFFER))
            .into_iter()
            .collect(),
        refund::topic::REFUND_SUCCEEDED | refund::topic::REFUND_FAILED => {
            let mail_kind = if topic_name == refund::topic::REFUND_FAILED {
                kind::REFUND_FAILED
            } else {
                kind::REFUND_SUCCEEDED
            };
            // Nothing paid back (a fee kept it all): nothing to tell.
            if payload["amountMinor"].as_i64().unwrap_or(0) <= 0 {
                return Ok(Vec::new());
            }
            owner(text("orderId"))
                .await?
                .map(|account| mail(account, mail_kind))
                .into_iter()
                .collect()
        }
        cancellation::topic::EVENT_CANCELLED => {
            // The first message (CANCELLING) tells the fans; the one when refunds are done
            // does not again.
            if payload["status"].as_str() != Some("CANCELLING") {
                return Ok(Vec::new());
            }
            let Some(event_id) = text("eventId") else {
                return Ok(Vec::new());
            };
            let accounts = store
                .cancelled_ticket_accounts(
                    &event_id,
                    boxoffice_store::mail::CANCELLATION_ACCOUNTS_MAX,
                )
                .await?;
            if accounts.len() >= boxoffice_store::mail::CANCELLATION_ACCOUNTS_MAX as usize {
                tracing::warn!(%event_id, "cancellation mail: only the first accounts are told");
            }
            accounts
                .into_iter()
                .map(|account| mail(account, kind::EVENT_CANCELLED))
                .collect()
        }
        _ => Vec::new(),
    })
}

/// A rendered mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub subject: String,
    pub text: String,
    pub html: String,
    /// `(file name, PDF bytes)` of an order's tickets.
    pub attachment: Option<(String, Vec<u8>)>,
}

/// What a mail is about, read from the store before it is rendered.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub event_name: String,
    pub event_starts_at: Option<boxoffice_domain::OffsetDateTime>,
    pub currency: String,
    /// The order whose tickets the mail carries.
    pub order: Option<OrderView>,
}

/// Why a claimed mail was not rendered.
#[derive(Debug)]
enum NotRendered {
    /// Not yet (an order's tickets are being issued): try again later.
    NotYet(String),
    /// Never (the order or event is gone, the payload is not one we wrote).
    Never(String),
    Store(StoreError),
}

/// The order a mail of `mail_kind` carries tickets of (its id in the payload).
fn order_field(mail_kind: &str) -> Option<&'static str> {
    match mail_kind {
        kind::ORDER_TICKETS => Some("orderId"),
        kind::EXCHANGE_TICKETS | kind::TRANSFER_RECEIVED => Some("newOrderId"),
        _ => None,
    }
}

async fn facts_of(store: &dyn Store, mail: &ClaimedMail) -> Result<Facts, NotRendered> {
    let payload: serde_json::Value = serde_json::from_str(&mail.mail.payload).unwrap_or_default();
    let mut facts = Facts::default();
    let mut event_id = payload["eventId"].as_str().map(str::to_owned);
    if let Some(field) = order_field(&mail.mail.kind) {
        let order_id = payload[field]
            .as_str()
            .ok_or_else(|| NotRendered::Never(format!("the message names no {field}")))?;
        let order = store
            .get_order(order_id)
            .await
            .map_err(NotRendered::Store)?
            .ok_or_else(|| NotRendered::Never(format!("order {order_id} not found")))?;
        if order.tickets.is_empty() {
            return Err(NotRendered::NotYet(format!(
                "order {order_id}'s tickets are not issued yet"
            )));
        }
        event_id = Some(order.event_id.clone());
        facts.order = Some(order);
    }
    if let Some(event_id) = event_id {
        let event = store
            .get_event(&event_id)
            .await
            .map_err(NotRendered::Store)?
            .ok_or_else(|| NotRendered::Never(format!("event {event_id} not found")))?;
        facts.event_name = event.name;
        facts.event_starts_at = Some(event.starts_at);
        facts.currency = event.currency;
    }
    Ok(facts)
}

/// `amount_minor` of `currency` as `12.50 EUR`.
fn money(amount_minor: i64, currency: &str) -> String {
    let sign = if amount_minor < 0 { "-" } else { "" };
    let amount = amount_minor.unsigned_abs();
    format!("{sign}{}.{:02} {currency}", amount / 100, amount % 100)
}

/// An RFC 3339 time of a payload written the way `locale` writes dates (as the PDF does).
fn rfc3339_text(locale: &str, raw: Option<&str>) -> String {
    raw.and_then(|raw| {
        boxoffice_domain::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
            .ok()
    })
    .map(|at| boxoffice_delivery::labels::date(locale, at))
    .unwrap_or_default()
}

fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What is printed of `order` (its tickets in the order the store lists them) for its event
/// (`event_name`, starting `starts_at`), in `locale`: the mail's attachment and the PDF and
/// passes the server's delivery routes answer.
pub fn order_sheet(
    order: &OrderView,
    event_name: &str,
    starts_at: boxoffice_domain::OffsetDateTime,
    locale: &str,
) -> OrderSheet {
    OrderSheet {
        order_id: order.order_id.clone(),
        event_id: order.event_id.clone(),
        event_name: event_name.to_owned(),
        starts_at,
        currency: order.currency.clone(),
        total_minor: order.total_minor,
        locale: locale.to_owned(),
        // Every ticket of the order: one voided before the mail went out (exchanged,
        // refunded) is printed as void, so the PDF never shows a code that no longer works.
        tickets: order
            .tickets
            .iter()
            .map(|ticket| TicketSheet {
                ticket_id: ticket.ticket_id.clone(),
                seat_id: ticket.seat_id.clone(),
                tier_id: ticket.tier_id.clone(),
                holder_name: ticket.holder.as_ref().and_then(|h| h.name.clone()),
                code: ticket.code.clone(),
                status: ticket.status.clone(),
            })
            .collect(),
    }
}

fn valid_tickets(order: &OrderView) -> impl Iterator<Item = &TicketView> {
    order.tickets.iter().filter(|t| t.status != "VOIDED")
}

/// Renders a mail of `mail_kind` from its `payload` and `facts`, in `locale` (English when
/// not spoken). Pure: the PDF is made by the caller ([`attach_pdf`]).
pub fn render(mail_kind: &str, payload: &str, locale: &str, facts: &Facts) -> Rendered {
    let locale = boxoffice_i18n::spoken(locale).unwrap_or(boxoffice_i18n::DEFAULT_LOCALE);
    let payload: serde_json::Value = serde_json::from_str(payload).unwrap_or_default();
    let text = |name: &str| payload[name].as_str().unwrap_or_default().to_owned();
    let m = |id: &str, args: &[(&str, &str)]| boxoffice_i18n::message(locale, id, args);
    let event = facts.event_name.as_str();
    let order_id = facts
        .order
        .as_ref()
        .map(|o| o.order_id.clone())
        .unwrap_or_else(|| text("orderId"));
    let amount = money(
        payload["amountMinor"].as_i64().unwrap_or(0),
        payload["currency"].as_str().unwrap_or(&facts.currency),
    );
    let (subject, body) = match mail_kind {
        kind::ORDER_TICKETS => (
            m("mail-order-subject", &[("event", event)]),
            m("mail-order-body", &[("order", &order_id)]),
        ),
        kind::EXCHANGE_TICKETS => (
            m("mail-exchange-subject", &[("event", event)]),
            m("mail-exchange-body", &[]),
        ),
        kind::TRANSFER_RECEIVED => (
            m("mail-transfer-received-subject", &[("event", event)]),
            m(
                "mail-transfer-received-body",
                &[("from", &text("fromAccountId"))],
            ),
        ),
        kind::TRANSFER_SENT => (
            m("mail-transfer-sent-subject", &[("event", event)]),
            m("mail-transfer-sent-body", &[("to", &text("toAccountId"))]),
        ),
        kind::TRANSFER_OFFERED => {
            let from = text("fromAccountId");
            let expires = rfc3339_text(locale, payload["expiresAt"].as_str());
            (
                m(
                    "mail-transfer-offered-subject",
                    &[("from", &from), ("event", event)],
                ),
                m(
                    "mail-transfer-offered-body",
                    &[("from", &from), ("event", event), ("expires", &expires)],
                ),
            )
        }
        kind::WAITLIST_OFFER => {
            let seats: Vec<&str> = payload["seatIds"]
                .as_array()
                .map(|seats| seats.iter().filter_map(|s| s.as_str()).collect())
                .unwrap_or_default();
            let expires = rfc3339_text(locale, payload["expiresAt"].as_str());
            (
                m("mail-waitlist-subject", &[("event", event)]),
                m(
                    "mail-waitlist-body",
                    &[("seats", &seats.join(", ")), ("expires", &expires)],
                ),
            )
        }
        kind::REFUND_SUCCEEDED => (
            m("mail-refund-subject", &[("event", event)]),
            m(
                "mail-refund-succeeded-body",
                &[("amount", &amount), ("order", &order_id)],
            ),
        ),
        kind::REFUND_FAILED => (
            m("mail-refund-failed-subject", &[("event", event)]),
            m(
                "mail-refund-failed-body",
                &[("amount", &amount), ("order", &order_id)],
            ),
        ),
        kind::EVENT_CANCELLED => (
            m("mail-cancelled-subject", &[("event", event)]),
            m("mail-cancelled-body", &[("event", event)]),
        ),
        other => (other.to_owned(), String::new()),
    };
    let tickets: Vec<String> = facts
        .order
        .iter()
        .flat_map(valid_tickets)
        .map(|ticket| {
            let place = match (&ticket.seat_id, &ticket.tier_id) {
                (Some(seat), _) => m("mail-seat", &[("seat", seat)]),
                (None, tier) => m(
                    "mail-general",
                    &[("tier", tier.as_deref().unwrap_or_default())],
                ),
            };
            m(
                "mail-ticket-line",
                &[("place", &place), ("ticket", &ticket.ticket_id)],
            )
        })
        .collect();
    let starts = facts.event_starts_at.map(|at| {
        m(
            "mail-starts",
            &[("starts", &boxoffice_delivery::labels::date(locale, at))],
        )
    });
    let attachment_note = facts.order.as_ref().map(|_| m("mail-attachment", &[]));
    let greeting = m("mail-greeting", &[]);
    let signoff = m("mail-signoff", &[]);

    let mut plain = format!("{greeting}\n\n{body}\n");
    for line in &tickets {
        plain.push_str(&format!("  - {line}\n"));
    }
    if let Some(starts) = &starts {
        plain.push_str(&format!("\n{event}: {starts}\n"));
    }
    if let Some(note) = &attachment_note {
        plain.push_str(&format!("\n{note}\n"));
    }
    plain.push_str(&format!("\n{signoff}\n"));

    let mut html = format!(
        "<!doctype html>\n<html lang=\"{locale}\"><head><meta charset=\"utf-8\"><title>{}</title></head><body>\n<p>{}</p>\n<p>{}</p>\n",
        html_escape(&subject),
        html_escape(&greeting),
        html_escape(&body)
    );
    if !tickets.is_empty() {
        html.push_str("<ul>\n");
        for line in &tickets {
            html.push_str(&format!("<li>{}</li>\n", html_escape(line)));
        }
        html.push_str("</ul>\n");
    }
    if let Some(starts) = &starts {
        html.push_str(&format!(
            "<p><strong>{}</strong>: {}</p>\n",
            html_escape(event),
            html_escape(starts)
        ));
    }
    if let Some(note) = &attachment_note {
        html.push_str(&format!("<p>{}</p>\n", html_escape(note)));
    }
    html.push_str(&format!(
        "<p>{}</p>\n</body></html>\n",
        html_escape(&signoff)
    ));
    Rendered {
        subject,
        text: plain,
        html,
        attachment: None,
    }
}

/// Attaches the order's PDF tickets (`tickets-<orderId>.pdf`) to a mail that carries an
/// order.
fn attach_pdf(rendered: &mut Rendered, facts: &Facts, locale: &str) -> Result<(), String> {
    let Some(order) = &facts.order else {
        return Ok(());
    };
    let locale = boxoffice_i18n::spoken(locale).unwrap_or(boxoffice_i18n::DEFAULT_LOCALE);
    let starts_at = facts
        .event_starts_at
        .unwrap_or(boxoffice_domain::OffsetDateTime::UNIX_EPOCH);
    let sheet = order_sheet(order, &facts.event_name, starts_at, locale);
    let pdf =
        boxoffice_delivery::pdf::order_pdf(&sheet).map_err(|e| format!("the PDF tickets: {e}"))?;
    rendered.attachment = Some((format!("tickets-{}.pdf", order.order_id), pdf));
    Ok(())
}

/// The message as sent: `From`, `To`, `Subject`, a `Message-ID` naming the mail, the text
/// and HTML alternatives, and the attachment.
pub fn build_message(
    from: &Mailbox,
    to: &str,
    mail_id: i64,
    rendered: &Rendered,
) -> Result<lettre::Message, String> {
    let to: Mailbox = to.parse().map_err(|e| format!("the address {to:?}: {e}"))?;
    let domain = from.email.domain().to_owned();
    let alternative =
        MultiPart::alternative_plain_html(rendered.text.clone(), rendered.html.clone());
    let body = match &rendered.attachment {
        Some((name, bytes)) => MultiPart::mixed().multipart(alternative).singlepart(
            Attachment::new(name.clone()).body(
                bytes.clone(),
                ContentType::parse("application/pdf").map_err(|e| e.to_string())?,
            ),
        ),
        None => alternative,
    };
    lettre::Message::builder()
        .from(from.clone())
        .to(to)
        .subject(rendered.subject.clone())
        .message_id(Some(format!("<boxoffice-mail-{mail_id}@{domain}>")))
        .multipart(body)
        .map_err(|e| e.to_string())
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MailReport {
    pub claimed: u64,
    pub sent: u64,
    pub retried: u64,
    pub failed: u64,
    pub no_address: u64,
    /// Mails whose lease ended while `SENDING` (this round's expiry), and mails whose
    /// connection broke mid-transaction.
    pub uncertain: u64,
}

/// The sender and its poke handle.
#[derive(Clone)]
pub struct MailSender {
    store: Arc<dyn Store>,
    config: Arc<MailConfig>,
    poke: Arc<Notify>,
}

impl std::fmt::Debug for MailSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MailSender")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl MailSender {
    pub fn new(store: Arc<dyn Store>, config: MailConfig) -> Self {
        Self {
            store,
            config: Arc::new(config),
            poke: Arc::new(Notify::new()),
        }
    }

    pub fn config(&self) -> &MailConfig {
        &self.config
    }

    /// What wakes the sender before its interval (the relay, after a fan-out; a resend).
    pub fn poke_handle(&self) -> Arc<Notify> {
        self.poke.clone()
    }

    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Marks lapsed claims `UNCERTAIN`, then claims one round of due mails and sends them.
    pub async fn run_once(&self) -> Result<MailReport, StoreError> {
        let uncertain = self.store.expire_mail_leases().await?;
        if uncertain > 0 {
            tracing::warn!(
                uncertain,
                "mails whose sender died mid-send are UNCERTAIN: resend them from the admin page if they did not arrive"
            );
        }
        let claimed = self.store.claim_mail(MAIL_BATCH_MAX, MAIL_LEASE_S).await?;
        let mut report = MailReport {
            claimed: claimed.len() as u64,
            uncertain,
            ..MailReport::default()
        };
        if !claimed.is_empty() {
            crate::crash::point("mail_claimed");
        }
        let outcomes = futures_util::stream::iter(claimed)
            .map(|mail| async move {
                let outcome = self.attempt(&mail).await;
                let recorded = self.store.record_mail(mail.mail.mail_id, &outcome).await;
                (outcome, recorded)
            })
            .buffer_unordered(MAIL_CONCURRENCY)
            .collect::<Vec<(MailOutcome, Result<bool, StoreError>)>>()
            .await;
        let mut failed_to_record = None;
        for (outcome, recorded) in outcomes {
            if let Err(error) = recorded {
                // Not recorded: the mail turns UNCERTAIN when its lease ends.
                failed_to_record = Some(error);
                continue;
            }
            match outcome {
                MailOutcome::Sent { .. } => report.sent += 1,
                MailOutcome::Retry {
                    retry_in_s: Some(_),
                    ..
                } => report.retried += 1,
                MailOutcome::Retry {
                    retry_in_s: None, ..
                }
                | MailOutcome::Failed { .. } => report.failed += 1,
                MailOutcome::NoAddress => report.no_address += 1,
                MailOutcome::Uncertain { .. } => report.uncertain += 1,
            }
        }
        for (outcome, n) in [
            ("sent", report.sent),
            ("retried", report.retried),
            ("failed", report.failed),
            ("no_address", report.no_address),
            ("uncertain", report.uncertain),
        ] {
            metrics::counter!("boxoffice_mail_messages_total", "outcome" => outcome).increment(n);
        }
        match failed_to_record {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    /// Renders and sends one claimed mail.
    async fn attempt(&self, mail: &ClaimedMail) -> MailOutcome {
        let message = &mail.mail;
        let Some(to) = message.to_address.clone() else {
            return MailOutcome::NoAddress;
        };
        let n_attempts = message.n_attempts;
        let locale = mail
            .locale
            .as_deref()
            .unwrap_or(boxoffice_i18n::DEFAULT_LOCALE);
        let facts = match facts_of(self.store.as_ref(), mail).await {
            Ok(facts) => facts,
            Err(NotRendered::NotYet(why)) => {
                return MailOutcome::Retry {
                    error: why,
                    retry_in_s: retry_in_s(n_attempts),
                };
            }
            Err(NotRendered::Store(error)) => {
                return MailOutcome::Retry {
                    error: format!("reading the mail's order or event: {error}"),
                    retry_in_s: retry_in_s(n_attempts),
                };
            }
            Err(NotRendered::Never(why)) => {
                return MailOutcome::Failed { error: why };
            }
        };
        let mut rendered = render(&message.kind, &message.payload, locale, &facts);
        if let Err(error) = attach_pdf(&mut rendered, &facts, locale) {
            return MailOutcome::Failed { error };
        }
        let email = match build_message(&self.config.from, &to, message.mail_id, &rendered) {
            Ok(email) => email,
            Err(error) => return MailOutcome::Failed { error },
        };
        let subject = rendered.subject.clone();
        match &self.config.transport {
            MailTransport::Folder(dir) => match write_eml(dir, message.mail_id, &email.formatted())
            {
                Ok(()) => {
                    crate::crash::point("mail_accepted");
                    MailOutcome::Sent { subject }
                }
                Err(error) => MailOutcome::Retry {
                    error,
                    retry_in_s: retry_in_s(n_attempts),
                },
            },
            MailTransport::Smtp(transport) => match transport.send(email).await {
                Ok(_) => {
                    crate::crash::point("mail_accepted");
                    MailOutcome::Sent { subject }
                }
                Err(error) => judge_smtp_error(&error, n_attempts),
            },
        }
    }

    /// Rounds until the task is dropped: the next at once after a full one, else after a poke
    /// or the interval.
    pub async fn run(self) {
        loop {
            let mut full = false;
            match self.run_once().await {
                Ok(report) => full = report.claimed >= u64::from(MAIL_BATCH_MAX),
                Err(error) => tracing::warn!(%error, "mail round failed"),
            }
            if full {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(MAIL_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}

/// What an SMTP error says about the mail: a reply of the server says it was refused (4xx
/// for now, 5xx for good); no connection at all says nothing was sent; anything else — the
/// connection broke or timed out inside the transaction — may have been accepted.
fn judge_smtp_error(error: &lettre::transport::smtp::Error, n_attempts: u32) -> MailOutcome {
    let text = error.to_string();
    if error.is_permanent() {
        return MailOutcome::Failed { error: text };
    }
    // lettre's connection errors (connect, resolve, TLS set-up) come before any command.
    let never_connected = error.is_transient()
        || text.starts_with("Connection error")
        || error.is_tls()
        || error.is_client();
    if never_connected {
        tracing::info!(%text, "SMTP server refused a mail for now");
        return MailOutcome::Retry {
            error: text,
            retry_in_s: retry_in_s(n_attempts),
        };
    }
    tracing::warn!(%text, "SMTP connection broke mid-transaction: the mail may have gone out");
    MailOutcome::Uncertain { error: text }
}

/// Writes `bytes` as `<mailId>.eml` in `dir`: to a temporary name first, then renamed, so a
/// reader never sees half a mail.
fn write_eml(dir: &std::path::Path, mail_id: i64, bytes: &[u8]) -> Result<(), String> {
    let path = dir.join(eml_name(mail_id));
    let partial = dir.join(format!(".{mail_id}.eml.partial"));
    std::fs::write(&partial, bytes)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(value: serde_json::Value) -> String {
        value.to_string()
    }

    fn facts() -> Facts {
        Facts {
            event_name: "Stadium Night".into(),
            event_starts_at: boxoffice_domain::OffsetDateTime::from_unix_timestamp(1_800_000_000)
                .ok(),
            currency: "EUR".into(),
            order: None,
        }
    }

    #[test]
    fn every_kind_renders_a_subject_and_both_parts_in_every_language() {
        let body = payload(serde_json::json!({
            "orderId": "o-1", "amountMinor": 1250, "currency": "EUR",
            "fromAccountId": "ann", "toAccountId": "bob", "seatIds": ["A-1-1"],
            "expiresAt": "2027-01-15T08:00:00Z",
        }));
        for locale in boxoffice_i18n::LOCALES {
            for mail_kind in kind::ALL {
                let rendered = render(mail_kind, &body, locale, &facts());
                assert!(!rendered.subject.is_empty(), "{locale} {mail_kind}");
                assert!(
                    !rendered.subject.starts_with("mail-"),
                    "{locale} {mail_kind}"
                );
                assert!(!rendered.text.contains("mail-"), "{locale} {mail_kind}");
                assert!(rendered.html.contains(&format!("lang=\"{locale}\"")));
            }
        }
    }

    #[test]
    fn a_german_account_reads_german_and_an_unknown_language_english() {
        let body = payload(serde_json::json!({"eventId": "e"}));
        let german = render(kind::EVENT_CANCELLED, &body, "de", &facts());
        assert_eq!(german.subject, "Stadium Night ist abgesagt");
        assert!(
            german
                .text
                .contains("Beginn: 15. Januar 2027, 08:00 Uhr (UTC)"),
            "{}",
            german.text
        );
        let unknown = render(kind::EVENT_CANCELLED, &body, "xx", &facts());
        assert_eq!(unknown.subject, "Stadium Night is cancelled");
        assert!(
            unknown
                .text
                .contains("Starts January 15, 2027, 08:00 (UTC)"),
            "{}",
            unknown.text
        );
    }

    #[test]
    fn a_refund_names_its_amount_and_the_html_is_escaped() {
        let body = payload(
            serde_json::json!({"orderId": "o-<1>", "amountMinor": 1250, "currency": "EUR"}),
        );
        let mut with_markup = facts();
        with_markup.event_name = "Rock & <Roll>".into();
        let rendered = render(kind::REFUND_SUCCEEDED, &body, "en", &with_markup);
        assert!(rendered.text.contains("12.50 EUR"), "{}", rendered.text);
        assert!(rendered.html.contains("Rock &amp; &lt;Roll&gt;"));
        assert!(!rendered.html.contains("<Roll>"));
        assert!(rendered.html.contains("o-&lt;1&gt;"));
    }

    #[test]
    fn the_message_has_text_and_html_parts_and_names_the_mail() {
        let from: Mailbox = DEFAULT_MAIL_FROM.parse().unwrap();
        let rendered = render(kind::EVENT_CANCELLED, "{}", "fr", &facts());
        let message = build_message(&from, "ann@example.org", 42, &rendered).unwrap();
        let text = String::from_utf8(message.formatted()).unwrap();
        assert!(
            text.contains("Message-ID: <boxoffice-mail-42@boxoffice.invalid>"),
            "{text}"
        );
        assert!(text.contains("multipart/alternative"));
        assert!(text.contains("text/plain"));
        assert!(text.contains("text/html"));
        assert!(build_message(&from, "not an address", 1, &rendered).is_err());
    }

    #[test]
    fn money_reads_in_major_units() {
        assert_eq!(money(1250, "EUR"), "12.50 EUR");
        assert_eq!(money(5, "USD"), "0.05 USD");
        assert_eq!(money(-100, "EUR"), "-1.00 EUR");
    }

    #[tokio::test]
    async fn no_server_listening_is_a_refusal_for_now() {
        // A port nothing listens on: bind one, note it, close it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config =
            MailConfig::smtp(&format!("smtp://127.0.0.1:{port}"), DEFAULT_MAIL_FROM).unwrap();
        let MailTransport::Smtp(transport) = &config.transport else {
            panic!("smtp");
        };
        let rendered = render(kind::EVENT_CANCELLED, "{}", "en", &facts());
        let message = build_message(&config.from, "ann@example.org", 1, &rendered).unwrap();
        let error = transport.send(message).await.unwrap_err();
        match judge_smtp_error(&error, 1) {
            MailOutcome::Retry { retry_in_s, .. } => {
                assert_eq!(retry_in_s, Some(5.0))
            }
            other => panic!("{error}: {other:?}"),
        }
    }
}
