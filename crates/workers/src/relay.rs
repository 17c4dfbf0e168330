//! The outbox relay: delivers every outbox row at least once to its consumer, then marks it.
//!
//! Rows are claimed with a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL), delivered outside
//! any transaction, and marked delivered; a failed delivery is retried with backoff, and a
//! claim whose process died comes back when its lease ends. No row is skipped: the relay
//! reads every undelivered row, not a high-water mark, so rows committed out of id order are
//! delivered too. Consumers are idempotent: capture and void carry derived idempotency keys,
//! ticket issuance skips units already issued, notifications are a log.
//!
//! A delivered message whose topic integrators hear about (`boxoffice_store::webhook::
//! event_type_of`) is fanned out into webhook deliveries before it is marked
//! ([`Store::fan_out_webhooks`], exactly once per endpoint and message whatever the relay
//! redelivers); the webhook sender (`crate::webhooks`) sends them. With mail on
//! ([`OutboxRelay::with_mail`]), one that tells fans something is fanned out into mails the
//! same way ([`crate::mail::mails_of`], [`Store::fan_out_mail`]); the mail sender
//! (`crate::mail`) sends them.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_domain::order::PaymentStatus;
use boxoffice_payments::{
    PaymentProvider, ProviderError, RefundRequest as ProviderRefundRequest,
    RefundStatus as ProviderRefundStatus,
};
use boxoffice_store::checkout::{
    OutboxMessage, PaymentOperation, ProviderVerdict, TicketDraft, topic,
};
use boxoffice_store::refund::{
    REASON_EXCHANGE_DIFFERENCE, RefundSettled, RefundStatus, RefundView, RefundWrite,
    topic as refund_topic,
};
use boxoffice_store::webhook::WebhookEvent;
use boxoffice_store::{Store, StoreError};
use boxoffice_tickets::{TicketClaims, TicketSigner};
use futures_util::StreamExt;
use tokio::sync::Notify;

use crate::payment::{Settler, StoreSettler, verdict_of};

/// Rows claimed per round.
pub const RELAY_BATCH_MAX: u32 = 100;
/// Messages of a round delivered at once. Each is a few short store calls and perhaps a
/// provider call, and each await waits its turn among the requests' tasks: during the
/// on-sale 8 at once delivered about 10 messages a second while the crowd was in, and the
/// last ticket came ~100 s after the last fan. More at once share the workers' own pool
/// (`serve` on PostgreSQL gives it 16), never the requests'. A round's captures are asked of
/// the provider with the same bound beside them (their reads and writes are one call each).
pub const RELAY_CONCURRENCY: usize = 32;
/// Rounds under way at once, each with its share of [`RELAY_CONCURRENCY`]: a round ends with
/// its slowest message (a capture's provider call), and one round at a time left the other
/// deliveries idle behind it; while one round waits, the others claim and deliver.
pub const RELAY_LOOPS: usize = 4;
/// How long a claim lasts before another relay may take the row again.
pub const RELAY_LEASE_S: f64 = 10.0;
/// Pause between rounds when nothing pokes the relay.
pub const RELAY_INTERVAL_MS: u64 = 500;
/// Capture attempts the provider refuses before the sale is compensated (order cancelled,
/// seats back on sale, tickets voided, authorization voided).
pub const CAPTURE_REFUSALS_MAX: u32 = 3;
/// Longest pause between two delivery attempts of one row.
pub const RELAY_BACKOFF_MAX_S: f64 = 60.0;

/// What asking the provider for one capture left to write.
enum Captured {
    /// Nothing: the operation is gone, already captured, or its sale was compensated.
    Nothing,
    /// The provider took the money: the verdict to settle.
    Taken(ProviderVerdict),
}

/// Why one delivery did not complete.
#[derive(Debug)]
enum Delivery {
    /// Try again later.
    Retry(String),
    Store(StoreError),
}

/// A consumer of notification topics (`hold.*`, `order.*`), told after each one is
/// delivered. It must be idempotent: a row may be delivered more than once. An error makes
/// the relay retry the row later.
#[async_trait::async_trait]
pub trait OutboxListener: Send + Sync + std::fmt::Debug {
    async fn delivered(&self, message: &OutboxMessage) -> Result<(), String>;
}

/// The relay and its poke handle.
#[derive(Clone)]
pub struct OutboxRelay {
    store: Arc<dyn Store>,
    provider: Arc<dyn PaymentProvider>,
    signer: TicketSigner,
    poke: Arc<Notify>,
    listener: Option<Arc<dyn OutboxListener>>,
    /// Where a sale whose capture was refused for good is given back.
    settler: Arc<dyn Settler>,
    /// Woken after a fan-out made webhook deliveries (the webhook sender's poke).
    webhooks_poke: Option<Arc<Notify>>,
    /// Mail is on: delivered messages are fanned out into mails, and this (the mail
    /// sender's poke) is woken after a fan-out made some.
    mail_poke: Option<Arc<Notify>>,
}

impl std::fmt::Debug for OutboxRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboxRelay").finish_non_exhaustive()
    }
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    pub delivered: u64,
    pub retried: u64,
    /// Rows the round claimed: a full round means more may be waiting.
    pub claimed: u64,
}

impl OutboxRelay {
    pub fn new(
        store: Arc<dyn Store>,
        provider: Arc<dyn PaymentProvider>,
        signer: TicketSigner,
    ) -> Self {
        Self {
            settler: Arc::new(StoreSettler(store.clone())),
            store,
            provider,
            signer,
            poke: Arc::new(Notify::new()),
            listener: None,
            webhooks_poke: None,
            mail_poke: None,
        }
    }

    /// Gives sales back through `settler` (the event's writer, in `serve`) rather than the
    /// store's one-shot path.
    pub fn with_settler(mut self, settler: Arc<dyn Settler>) -> Self {
        self.settler = settler;
        self
    }

    /// Tells `listener` about every delivered notification.
    pub fn with_listener(mut self, listener: Arc<dyn OutboxListener>) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Wakes `poke` (the webhook sender's) after a fan-out made deliveries.
    pub fn with_webhooks_poke(mut self, poke: Arc<Notify>) -> Self {
        self.webhooks_poke = Some(poke);
        self
    }

    /// Fans delivered messages out into mails too, and wakes `poke` (the mail sender's)
    /// after a fan-out made some.
    pub fn with_mail(mut self, poke: Arc<Notify>) -> Self {
        self.mail_poke = Some(poke);
        self
    }

    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Claims and delivers one round of rows.
    pub async fn run_once(&self) -> Result<RelayReport, StoreError> {
        self.round(RELAY_CONCURRENCY).await
    }

    /// Claims one round of rows and delivers up to `concurrency` of them at once.
    async fn round(&self, concurrency: usize) -> Result<RelayReport, StoreError> {
        let mut report = RelayReport::default();
        let messages = self
            .store
            .claim_outbox(RELAY_BATCH_MAX, RELAY_LEASE_S)
            .await?;
        report.claimed = messages.len() as u64;
        // Delivered rows are marked published together at the end of the round: one write
        // instead of one commit per row. A crash before that redelivers them (delivery is
        // at least once; every consumer is idempotent).
        //
        // Up to RELAY_CONCURRENCY messages are delivered at once (ticket issuance for an
        // on-sale's thousands of orders went one transaction at a time). No consumer depends
        // on the order of two messages: each is a conditional transaction on its own order
        // or payment operation, and a waiting-room slot ends only an admission older than
        // the event that ends it.
        //
        // The round's `tickets.issue` messages are one call (one transaction on PostgreSQL),
        // beside the other deliveries.
        //
        // Its `payment.capture` messages are read in one call and written in one call where
        // the store can (the provider's captures go out at once in between).
        let (tickets, others): (Vec<OutboxMessage>, Vec<OutboxMessage>) = messages
            .into_iter()
            .partition(|message| message.topic == topic::TICKETS_ISSUE);
        let (captures, others): (Vec<OutboxMessage>, Vec<OutboxMessage>) = others
            .into_iter()
            .partition(|message| message.topic == topic::PAYMENT_CAPTURE);
        let others = futures_util::stream::iter(others)
            .map(|message| async move {
                let outcome = self.deliver(&message).await;
                (message, outcome)
            })
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<(OutboxMessage, Result<(), Delivery>)>>();
        let (mut outcomes, issued, captured) = tokio::join!(
            others,
            self.issue_tickets(&tickets),
            self.captures(&captures, concurrency)
        );
        for (message, outcome) in tickets.into_iter().zip(issued) {
            outcomes.push((message, outcome.map_err(Delivery::Retry)));
        }
        outcomes.extend(captures.into_iter().zip(captured));
        let mut delivered = Vec::with_capacity(outcomes.len());
        let mut events = Vec::new();
        let mut mail_sources = Vec::new();
        for (message, outcome) in outcomes {
            match outcome {
                Ok(()) => {
                    crate::crash::point("outbox_delivered");
                    delivered.push(message.id);
                    events.extend(WebhookEvent::of(&message));
                    if self.mail_poke.is_some() && crate::mail::makes_mail(&message.topic) {
                        mail_sources.push(message);
                    }
                    report.delivered += 1;
                }
                Err(Delivery::Retry(why)) => {
                    self.retry(&message, &why).await?;
                    report.retried += 1;
                }
                Err(Delivery::Store(error)) => {
                    self.finish(delivered, events, mail_sources).await?;
                    return Err(error);
                }
            }
        }
        self.finish(delivered, events, mail_sources).await?;
        Ok(report)
    }

    /// Schedules another delivery of `message`, with its backoff.
    async fn retry(&self, message: &OutboxMessage, why: &str) -> Result<(), StoreError> {
        let delay_s = f64::from(1u32 << message.n_attempts.min(6)).min(RELAY_BACKOFF_MAX_S);
        tracing::warn!(id = message.id, topic = %message.topic, %why, delay_s, "outbox delivery will be retried");
        self.store.retry_outbox(message.id, delay_s, why).await
    }

    /// Fans the delivered messages out into webhook deliveries and mails, then marks them
    /// published. A fan-out that fails leaves its messages unmarked (delivered again after
    /// their lease, which every consumer allows, and fanned out then), never marked without
    /// deliveries or mails.
    async fn finish(
        &self,
        mut delivered: Vec<i64>,
        events: Vec<WebhookEvent>,
        mail_sources: Vec<OutboxMessage>,
    ) -> Result<(), StoreError> {
        if !events.is_empty() {
            match self.store.fan_out_webhooks(&events).await {
                Ok(made) => {
                    metrics::counter!("boxoffice_webhook_deliveries_made_total").increment(made);
                    if made > 0
                        && let Some(poke) = &self.webhooks_poke
                    {
                        poke.notify_one();
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "webhook fan-out failed; its messages stay unmarked");
                    delivered.retain(|id| !events.iter().any(|event| event.event_id == *id));
                }
            }
        }
        if !mail_sources.is_empty() {
            let not_mailed = self.fan_out_mail(&mail_sources).await;
            delivered.retain(|id| !not_mailed.contains(id));
        }
        self.store.finish_outbox(&delivered).await
    }

    /// The mails of these delivered messages, made in one store call; the ids of the
    /// messages whose mails could not be made (their readers or the fan-out failed).
    async fn fan_out_mail(&self, messages: &[OutboxMessage]) -> Vec<i64> {
        let read = futures_util::stream::iter(messages.to_vec())
            .map(|message| {
                let store = self.store.clone();
                async move {
                    let made = crate::mail::mails_of(store.as_ref(), &message).await;
                    (message.id, made)
                }
            })
            .buffer_unordered(crate::mail::FAN_OUT_READS_CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        let mut not_mailed = Vec::new();
        let mut mails = Vec::new();
        for (id, made) in read {
            match made {
                Ok(made) => mails.extend(made),
                Err(error) => {
                    tracing::warn!(id, %error, "reading who to mail failed; the message stays unmarked");
                    not_mailed.push(id);
                }
            }
        }
        if mails.is_empty() {
            return not_mailed;
        }
        match self.store.fan_out_mail(&mails).await {
            Ok(made) => {
                metrics::counter!("boxoffice_mail_made_total").increment(made);
                if made > 0
                    && let Some(poke) = &self.mail_poke
                {
                    poke.notify_one();
                }
                not_mailed
            }
            Err(error) => {
                tracing::warn!(%error, "mail fan-out failed; its messages stay unmarked");
                messages.iter().map(|message| message.id).collect()
            }
        }
    }

    async fn deliver(&self, message: &OutboxMessage) -> Result<(), Delivery> {
        let payload: serde_json::Value = serde_json::from_str(&message.payload).unwrap_or_default();
        let field = |name: &str| payload[name].as_str().unwrap_or_default().to_owned();
        match message.topic.as_str() {
            topic::PAYMENT_CAPTURE => self
                .captures(std::slice::from_ref(message), 1)
                .await
                .pop()
                .unwrap_or(Ok(())),
            topic::PAYMENT_VOID => self.void(&field("operationId")).await,
            refund_topic::REFUND_REQUESTED => {
                self.refund(&field("eventId"), &field("refundId")).await
            }
            topic::REFUND_DUE => {
                self.refund_due(message, &payload).await?;
                match &self.listener {
                    Some(listener) => listener.delivered(message).await.map_err(Delivery::Retry),
                    None => Ok(()),
                }
            }
            topic::TICKETS_ISSUE => self
                .issue_tickets(std::slice::from_ref(message))
                .await
                .pop()
                .unwrap_or(Ok(()))
                .map_err(Delivery::Retry),
            // Notifications: a log line per event others would subscribe to.
            other => {
                tracing::info!(topic = other, payload = %message.payload, "notification");
                match &self.listener {
                    Some(listener) => listener.delivered(message).await.map_err(Delivery::Retry),
                    None => Ok(()),
                }
            }
        }
    }

    /// The tickets of the orders these `tickets.issue` messages name, in one store call; when
    /// that fails, one call per message, so a message the store keeps refusing fails alone.
    /// One outcome per message; an error is retried later, with the message's backoff.
    async fn issue_tickets(&self, messages: &[OutboxMessage]) -> Vec<Result<(), String>> {
        if messages.is_empty() {
            return Vec::new();
        }
        let order_ids: Vec<String> = messages
            .iter()
            .map(|message| {
                let payload: serde_json::Value =
                    serde_json::from_str(&message.payload).unwrap_or_default();
                payload["orderId"].as_str().unwrap_or_default().to_owned()
            })
            .collect();
        let signer = self.signer.clone();
        let sign = move |draft: &TicketDraft| sign_draft(&signer, draft, now_unix_s());
        if let Ok(issued) = self.store.issue_tickets_of(&order_ids, &sign).await {
            metrics::counter!("boxoffice_tickets_issued_total").increment(u64::from(issued));
            return vec![Ok(()); messages.len()];
        }
        let mut outcomes = Vec::with_capacity(order_ids.len());
        for order_id in &order_ids {
            outcomes.push(match self.store.issue_tickets(order_id, &sign).await {
                Ok(issued) => {
                    metrics::counter!("boxoffice_tickets_issued_total")
                        .increment(u64::from(issued));
                    Ok(())
                }
                Err(error) => Err(format!("issuing tickets: {error}")),
            });
        }
        outcomes
    }

    /// The captures these `payment.capture` messages ask for, one outcome per message:
    /// their operations read in one store call, the provider asked for up to `concurrency`
    /// at once, the captures it took written in one store call
    /// ([`Store::capture_confirmed`]), and any the store left (or a failed batch) settled
    /// one by one, which decides every other case.
    async fn captures(
        &self,
        messages: &[OutboxMessage],
        concurrency: usize,
    ) -> Vec<Result<(), Delivery>> {
        if messages.is_empty() {
            return Vec::new();
        }
        let operation_ids: Vec<String> = messages
            .iter()
            .map(|message| {
                let payload: serde_json::Value =
                    serde_json::from_str(&message.payload).unwrap_or_default();
                payload["operationId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let operations = match self.store.payment_operations(&operation_ids).await {
            Ok(operations) => operations,
            Err(error) => {
                let why = error.to_string();
                return messages
                    .iter()
                    .map(|_| Err(Delivery::Retry(format!("reading the operation: {why}"))))
                    .collect();
            }
        };
        let operations: std::collections::HashMap<&str, &PaymentOperation> = operations
            .iter()
            .map(|operation| (operation.operation_id.as_str(), operation))
            .collect();
        let asks: Vec<_> = messages
            .iter()
            .zip(&operation_ids)
            .enumerate()
            .map(|(index, (message, operation_id))| {
                let operation = operations.get(operation_id.as_str()).copied();
                let n_attempts = message.n_attempts;
                async move { (index, self.ask_capture(operation, n_attempts).await) }
            })
            .collect();
        let asked = futures_util::stream::iter(asks)
            .buffer_unordered(concurrency.max(1))
            .collect::<Vec<(usize, Result<Captured, Delivery>)>>()
            .await;
        let mut outcomes: Vec<Result<(), Delivery>> = messages.iter().map(|_| Ok(())).collect();
        let mut taken: Vec<(usize, String, ProviderVerdict)> = Vec::new();
        for (index, step) in asked {
            match step {
                Ok(Captured::Nothing) => {}
                Ok(Captured::Taken(verdict)) => {
                    taken.push((index, operation_ids[index].clone(), verdict));
                }
                Err(delivery) => outcomes[index] = Err(delivery),
            }
        }
        let batch: Vec<(String, String)> = taken
            .iter()
            .map(|(_, operation_id, verdict)| {
                (
                    operation_id.clone(),
                    verdict.provider_ref().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        // A batch that fails applies nothing: every capture is then settled alone.
        let applied: std::collections::HashSet<String> = self
            .store
            .capture_confirmed(&batch)
            .await
            .unwrap_or_default()
            .into_iter()
            .collect();
        let left: Vec<(usize, String, ProviderVerdict)> = taken
            .into_iter()
            .filter(|(_, operation_id, _)| !applied.contains(operation_id))
            .collect();
        // What the batch left is read again in one call: most often the provider's webhook of
        // the same capture got there first, and an operation that can no longer take the
        // verdict needs no settlement.
        let left_ids: Vec<String> = left.iter().map(|(_, id, _)| id.clone()).collect();
        let moved_on: std::collections::HashSet<String> =
            match self.store.payment_operations(&left_ids).await {
                Ok(now) => now
                    .into_iter()
                    .filter(|operation| {
                        !operation
                            .status
                            .can_become(boxoffice_domain::order::PaymentStatus::Captured)
                    })
                    .map(|operation| operation.operation_id)
                    .collect(),
                Err(_) => std::collections::HashSet::new(),
            };
        for (index, operation_id, verdict) in left {
            if moved_on.contains(&operation_id) {
                continue;
            }
            if let Err(error) = self
                .store
                .settle_payment(&operation_id, &verdict, None, None)
                .await
            {
                outcomes[index] = Err(Delivery::Store(error));
            }
        }
        outcomes
    }

    /// One capture asked of the provider. A refusal is retried, and after
    /// [`CAPTURE_REFUSALS_MAX`] attempts the sale is compensated.
    async fn ask_capture(
        &self,
        operation: Option<&PaymentOperation>,
        n_attempts: u32,
    ) -> Result<Captured, Delivery> {
        let Some(operation) = operation else {
            return Ok(Captured::Nothing);
        };
        // Captured already, or voided (a refund of the whole order before its capture).
        if !operation
            .status
            .can_become(boxoffice_domain::order::PaymentStatus::Captured)
        {
            return Ok(Captured::Nothing);
        }
        let operation_id = operation.operation_id.as_str();
        let Some(provider_ref) = operation.provider_ref.clone() else {
            return Err(Delivery::Retry("no provider reference yet".into()));
        };
        crate::crash::point("capture_sent");
        let refusal = match self.provider.capture(operation_id, &provider_ref).await {
            Ok(payment) if payment.status == boxoffice_payments::ProviderStatus::Captured => {
                return Ok(Captured::Taken(verdict_of(&payment)));
            }
            // A declined capture answers with the payment still authorized.
            Ok(payment) => format!(
                "capture declined ({})",
                payment.decline_code.as_deref().unwrap_or("no reason given")
            ),
            Err(ProviderError::Rejected { message, .. }) => format!("capture rejected: {message}"),
            Err(error) => return Err(Delivery::Retry(error.to_string())),
        };
        if n_attempts < CAPTURE_REFUSALS_MAX {
            return Err(Delivery::Retry(refusal));
        }
        // Failed for good: give the sale back, recorded in one transaction.
        let compensated = self
            .settler
            .compensate(operation_id, "CAPTURE_FAILED")
            .await
            .map_err(Delivery::Store)?;
        if compensated {
            tracing::warn!(operation_id, %refusal, "capture failed for good; the order was cancelled and its seats freed");
            metrics::counter!("boxoffice_capture_compensations_total").increment(1);
            Ok(Captured::Nothing)
        } else {
            // A ticket was already used (or the order is not confirmed): an operator's case.
            Err(Delivery::Retry(format!("{refusal}; compensation refused")))
        }
    }

    /// Pays a recorded refund back through its order's payment: a captured payment is
    /// refunded (our refund id is the provider's idempotency key, so a redelivery never pays
    /// twice); an authorization not captured yet is voided when nothing valid is left of the
    /// order, else the refund waits for the capture; a payment never taken owes nothing. The
    /// refund settles `SUCCEEDED`, or `FAILED` when the provider refuses (the money is still
    /// owed: the operator's case); anything unknown is asked again later.
    async fn refund(&self, event_id: &str, refund_id: &str) -> Result<(), Delivery> {
        let store = |e: StoreError| Delivery::Store(e);
        let Some(refund) = self
            .store
            .get_refund(event_id, refund_id)
            .await
            .map_err(store)?
        else {
            return Ok(());
        };
        if refund.status != RefundStatus::Pending {
            return Ok(());
        }
        let settle = |settled: RefundSettled| async move {
            self.store
                .settle_refund(event_id, refund_id, &settled)
                .await
                .map_err(Delivery::Store)?;
            crate::crash::point("refund_settled");
            Ok(())
        };
        let Some(operation) = self
            .store
            .payment_operation(&refund.operation_id)
            .await
            .map_err(store)?
        else {
            return settle(RefundSettled::Failed {
                provider_ref: None,
                reason: "the order has no payment to refund".into(),
            })
            .await;
        };
        if refund.amount_minor == 0 {
            // The kept fee took it all (or a comp cost nothing): nothing to pay back.
            return settle(RefundSettled::Succeeded { provider_ref: None }).await;
        }
        if operation.provider != self.provider.name() {
            // Taken by another hand than this provider's (cash at the box office): the
            // provider knows no such payment, so the money goes back the way it came, by
            // the operator; the refund says so instead of asking the provider.
            return settle(RefundSettled::Failed {
                provider_ref: None,
                reason: format!(
                    "paid by {} at the box office, not through {}: the operator pays it back",
                    operation.provider,
                    self.provider.name()
                ),
            })
            .await;
        }
        match operation.status {
            PaymentStatus::Captured => {}
            PaymentStatus::Authorized => return self.refund_uncaptured(&refund, &operation).await,
            // Never taken (declined, voided, compensated): nothing is owed.
            PaymentStatus::Voided | PaymentStatus::Failed => {
                return settle(RefundSettled::Succeeded { provider_ref: None }).await;
            }
            other => {
                return Err(Delivery::Retry(format!(
                    "the payment is {}: the refund waits for it",
                    other.as_str()
                )));
            }
        }
        let Some(provider_ref) = operation.provider_ref.clone() else {
            return Err(Delivery::Retry("no provider reference yet".into()));
        };
        let request = ProviderRefundRequest {
            refund_id: refund.refund_id.clone(),
            order_id: refund.order_id.clone(),
            provider_ref,
            amount_minor: refund.amount_minor,
            currency: refund.currency.clone(),
            // Stripe takes a reason; localstripe, the outside Stripe the tests pay through,
            // refuses one (400 "Unexpected reason"): ours stays on the refund row.
            reason: None,
        };
        crate::crash::point("refund_sent");
        let answered = self.provider.refund(&request).await;
        crate::crash::point("refund_answered");
        match answered {
            Ok(done) => match done.status {
                ProviderRefundStatus::Succeeded => {
                    metrics::counter!("boxoffice_refunds_total", "status" => "SUCCEEDED")
                        .increment(1);
                    settle(RefundSettled::Succeeded {
                        provider_ref: Some(done.provider_refund_ref),
                    })
                    .await
                }
                ProviderRefundStatus::Pending => Err(Delivery::Retry(format!(
                    "refund {} pending at the provider",
                    done.provider_refund_ref
                ))),
                ProviderRefundStatus::Failed { reason } => {
                    metrics::counter!("boxoffice_refunds_total", "status" => "FAILED").increment(1);
                    settle(RefundSettled::Failed {
                        provider_ref: Some(done.provider_refund_ref),
                        reason,
                    })
                    .await
                }
                ProviderRefundStatus::Canceled => {
                    metrics::counter!("boxoffice_refunds_total", "status" => "FAILED").increment(1);
                    settle(RefundSettled::Failed {
                        provider_ref: Some(done.provider_refund_ref),
                        reason: "canceled".into(),
                    })
                    .await
                }
            },
            Err(ProviderError::Rejected { message, .. }) => {
                metrics::counter!("boxoffice_refunds_total", "status" => "FAILED").increment(1);
                settle(RefundSettled::Failed {
                    provider_ref: None,
                    reason: message,
                })
                .await
            }
            Err(error) => Err(Delivery::Retry(format!("refund: {error}"))),
        }
    }

    /// Money owed back (`refund.due`: a cheaper exchange's difference, or a capture of an
    /// order that kept nothing) is recorded as a refund of the order, once per exchange or
    /// payment operation (its idempotency key), and paid like any refund. One the store will
    /// not record (more than the payment took, nothing captured) is logged and left: the
    /// webhook still tells integrators.
    async fn refund_due(
        &self,
        message: &OutboxMessage,
        payload: &serde_json::Value,
    ) -> Result<(), Delivery> {
        let text = |name: &str| payload[name].as_str().map(str::to_owned);
        let (Some(order_id), Some(amount)) = (text("orderId"), payload["amountMinor"].as_i64())
        else {
            tracing::warn!(id = message.id, payload = %message.payload, "refund.due without an order or amount");
            return Ok(());
        };
        let owed_for = text("exchangeId")
            .map(|id| format!("exchange:{id}"))
            .or_else(|| text("operationId").map(|id| format!("operation:{id}")))
            .unwrap_or_else(|| format!("message:{}", message.id));
        let Some(order) = self
            .store
            .get_order(&order_id)
            .await
            .map_err(Delivery::Store)?
        else {
            return Ok(());
        };
        let now = self.store.now().await.map_err(Delivery::Store)?;
        let reason = text("reason").unwrap_or_else(|| REASON_EXCHANGE_DIFFERENCE.into());
        let key = format!("refund.due:{owed_for}");
        let mut write = RefundWrite::new(
            &order,
            &order.account_id,
            Vec::new(),
            amount,
            &reason,
            (&key, ""),
            now,
        );
        if let Some(currency) = text("currency") {
            write.refund.currency = currency;
        }
        match self
            .store
            .record_refund_due(&write)
            .await
            .map_err(Delivery::Store)?
        {
            Ok(refund) => self.refund(&refund.event_id, &refund.refund_id).await,
            Err(why) => {
                tracing::warn!(id = message.id, %order_id, %why, "refund.due not recorded as a refund");
                Ok(())
            }
        }
    }

    /// A refund of an order whose payment is only authorized: when nothing valid is left of
    /// the order the authorization is voided (the capture then finds it void and takes
    /// nothing) and the refund succeeds; otherwise the rest is still to be captured, and the
    /// refund waits for that capture, then refunds its part.
    async fn refund_uncaptured(
        &self,
        refund: &RefundView,
        operation: &PaymentOperation,
    ) -> Result<(), Delivery> {
        let order = self
            .store
            .get_order(&refund.order_id)
            .await
            .map_err(Delivery::Store)?;
        let nothing_left = order
            .as_ref()
            .is_some_and(|o| o.tickets.iter().all(|t| t.status == "VOIDED"));
        if !nothing_left {
            return Err(Delivery::Retry(
                "part of the order stays: the refund waits for the capture".into(),
            ));
        }
        let Some(provider_ref) = operation.provider_ref.clone() else {
            return Err(Delivery::Retry("no provider reference yet".into()));
        };
        match self
            .provider
            .void(&operation.operation_id, &provider_ref)
            .await
        {
            Ok(payment) if payment.status == boxoffice_payments::ProviderStatus::Voided => {
                self.store
                    .settle_payment(&operation.operation_id, &verdict_of(&payment), None, None)
                    .await
                    .map_err(Delivery::Store)?;
                metrics::counter!("boxoffice_refunds_total", "status" => "SUCCEEDED").increment(1);
                self.store
                    .settle_refund(
                        &refund.event_id,
                        &refund.refund_id,
                        &RefundSettled::Succeeded {
                            provider_ref: Some(provider_ref),
                        },
                    )
                    .await
                    .map(|_| ())
                    .map_err(Delivery::Store)
            }
            // Captured meanwhile (the capture won the race): refunded on the next delivery.
            Ok(payment) => Err(Delivery::Retry(format!(
                "the void found the payment {:?}; refunded once the capture is recorded",
                payment.status
            ))),
            Err(error) => Err(Delivery::Retry(format!("void for a refund: {error}"))),
        }
    }

    async fn void(&self, operation_id: &str) -> Result<(), Delivery> {
        let Some(operation) = self
            .store
            .payment_operation(operation_id)
            .await
            .map_err(Delivery::Store)?
        else {
            return Ok(());
        };
        let Some(provider_ref) = operation.provider_ref.clone() else {
            return Err(Delivery::Retry("no provider reference yet".into()));
        };
        match self.provider.void(operation_id, &provider_ref).await {
            Ok(payment) => {
                self.store
                    .settle_payment(operation_id, &verdict_of(&payment), None, None)
                    .await
                    .map_err(Delivery::Store)?;
                Ok(())
            }
            Err(error) => Err(Delivery::Retry(error.to_string())),
        }
    }

    /// Runs [`RELAY_LOOPS`] rounds at a time until the task is dropped (which stops them).
    pub async fn run(self) {
        let mut loops = tokio::task::JoinSet::new();
        for n in 0..RELAY_LOOPS {
            loops.spawn(self.clone().run_loop(n));
        }
        while loops.join_next().await.is_some() {}
    }

    /// One loop of rounds: the next round at once after a full one, else after a poke or the
    /// interval. Loop 0 also reports the relay's lag.
    async fn run_loop(self, n: usize) {
        loop {
            let mut full = false;
            match self.round(RELAY_CONCURRENCY / RELAY_LOOPS).await {
                Ok(report) => {
                    metrics::counter!("boxoffice_outbox_delivered_total")
                        .increment(report.delivered);
                    metrics::counter!("boxoffice_outbox_retried_total").increment(report.retried);
                    full = report.claimed >= u64::from(RELAY_BATCH_MAX);
                }
                Err(error) => tracing::warn!(%error, "outbox relay round failed"),
            }
            if n == 0
                && let Ok(lag_s) = self.store.outbox_lag_s().await
            {
                metrics::gauge!("boxoffice_outbox_lag_seconds").set(lag_s);
            }
            if full {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(RELAY_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}

/// A ticket's signed code, from its draft.
pub fn sign_draft(signer: &TicketSigner, draft: &TicketDraft, issued_at_unix_s: i64) -> String {
    signer.sign(&TicketClaims {
        ticket_id: draft.ticket_id.clone(),
        event_id: draft.event_id.clone(),
        order_id: draft.order_id.clone(),
        seat_id: draft.seat_id.clone(),
        tier_id: draft.tier_id.clone(),
        unit: draft.unit,
        issued_at_unix_s,
    })
}

fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
