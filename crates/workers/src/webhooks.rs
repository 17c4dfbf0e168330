//! The webhook sender: POSTs due webhook deliveries to integrators' endpoints, signed.
//!
//! Deliveries are made by the outbox relay's fan-out (`WebhookStore::fan_out_webhooks`, one
//! per endpoint and event). Each round claims up to [`WEBHOOK_BATCH_MAX`] due deliveries with a
//! lease of [`WEBHOOK_LEASE_S`] (longer than any attempt: [`WEBHOOK_TIMEOUT_MS`]), sends up to
//! [`WEBHOOK_CONCURRENCY`] at once outside any store transaction, and records each attempt: a
//! 2xx is `DELIVERED`; anything else is retried with the backoff of
//! `boxoffice_store::webhook::retry_in_s`, and `FAILED` after its last attempt. A claim whose
//! process died comes back when its lease ends, so a delivery may be sent twice (at least
//! once): integrators dedupe on the event id, which every attempt and every replay carry.
//!
//! The request: `POST url`, body `{id, type, createdAt, data}` (JSON), headers
//! `Boxoffice-Event-Id: <id>` and `Boxoffice-Signature: t=<unix>,v1=<hex>`, the hex
//! HMAC-SHA256 under the endpoint's secret of `"<t>.<body>"` — the scheme of Stripe's
//! `Stripe-Signature`, which the payments crate verifies for incoming webhooks. Redirects are
//! not followed.

use std::sync::Arc;
use std::time::Duration;

use boxoffice_store::webhook::{Attempt, DueDelivery, WebhookDelivery, retry_in_s};
use boxoffice_store::{Store, StoreError};
use futures_util::StreamExt;
use tokio::sync::Notify;

/// Deliveries claimed per round.
pub const WEBHOOK_BATCH_MAX: u32 = 50;
/// Deliveries of a round sent at once (each holds a connection to an integrator, none to the
/// store while it waits).
pub const WEBHOOK_CONCURRENCY: usize = 8;
/// How long one attempt may take, connection included.
pub const WEBHOOK_TIMEOUT_MS: u64 = 5_000;
/// How long a claim lasts before another sender may take the delivery again: past a whole
/// round (the last of a batch waits for ⌈50 / 8⌉ − 1 turns of at most 5 s, then its own
/// attempt), so a live sender never races another.
pub const WEBHOOK_LEASE_S: f64 = 60.0;

const _: () = assert!(
    (WEBHOOK_BATCH_MAX as u64).div_ceil(WEBHOOK_CONCURRENCY as u64) * WEBHOOK_TIMEOUT_MS
        < WEBHOOK_LEASE_S as u64 * 1000
);
/// Pause between rounds when nothing pokes the sender.
pub const WEBHOOK_INTERVAL_MS: u64 = 1_000;
/// The signature header.
pub const SIGNATURE_HEADER: &str = "Boxoffice-Signature";
/// The event id header (the body's `id`).
pub const EVENT_ID_HEADER: &str = "Boxoffice-Event-Id";
/// Longest part of an endpoint's answer kept as the attempt's error, in bytes read.
const ANSWER_EXCERPT_MAX: usize = 200;

/// The `Boxoffice-Signature` value for `body` sent at `timestamp_unix_s`:
/// `t=<unix>,v1=<hex hmac_sha256(secret, "<t>.<body>")>`.
pub fn sign(secret: &str, timestamp_unix_s: i64, body: &[u8]) -> String {
    boxoffice_payments::stripe::sign_webhook(secret, timestamp_unix_s, body)
}

/// The JSON body of a delivery: `{id, type, createdAt, data}`. The same bytes for every
/// attempt of one delivery (the signature's timestamp is what changes).
pub fn body_of(delivery: &WebhookDelivery) -> Vec<u8> {
    let created_at = delivery
        .event_created_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let data: serde_json::Value =
        serde_json::from_str(&delivery.payload).unwrap_or(serde_json::Value::Null);
    serde_json::to_vec(&serde_json::json!({
        "id": delivery.event_id.to_string(),
        "type": delivery.event_type,
        "createdAt": created_at,
        "data": data,
    }))
    .unwrap_or_default()
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WebhookReport {
    pub claimed: u64,
    pub delivered: u64,
    pub retried: u64,
    pub failed: u64,
}

/// The sender and its poke handle.
#[derive(Clone)]
pub struct WebhookSender {
    store: Arc<dyn Store>,
    http: reqwest::Client,
    poke: Arc<Notify>,
}

impl std::fmt::Debug for WebhookSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSender").finish_non_exhaustive()
    }
}

impl WebhookSender {
    pub fn new(store: Arc<dyn Store>) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(WEBHOOK_TIMEOUT_MS))
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("boxoffice-webhooks")
            .build()
            .unwrap_or_default();
        Self {
            store,
            http,
            poke: Arc::new(Notify::new()),
        }
    }

    /// What wakes the sender before its interval (the relay, after a fan-out; a replay).
    pub fn poke_handle(&self) -> Arc<Notify> {
        self.poke.clone()
    }

    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Claims one round of due deliveries and sends them.
    pub async fn run_once(&self) -> Result<WebhookReport, StoreError> {
        let due = self
            .store
            .claim_webhook_deliveries(WEBHOOK_BATCH_MAX, WEBHOOK_LEASE_S)
            .await?;
        let mut report = WebhookReport {
            claimed: due.len() as u64,
            ..WebhookReport::default()
        };
        // Each attempt is recorded as soon as it ends, so a delivery's lease only has to
        // cover its wait for a turn and its own attempt.
        let attempts = futures_util::stream::iter(due)
            .map(|due| async move {
                let attempt = self.attempt(&due).await;
                let recorded = self
                    .store
                    .record_webhook_attempt(due.delivery.delivery_id, &attempt)
                    .await;
                (attempt, recorded)
            })
            .buffer_unordered(WEBHOOK_CONCURRENCY)
            .collect::<Vec<(Attempt, Result<(), StoreError>)>>()
            .await;
        let mut failed_to_record = None;
        for (attempt, recorded) in attempts {
            if let Err(error) = recorded {
                // Not recorded: the delivery comes back when its lease ends.
                failed_to_record = Some(error);
                continue;
            }
            match &attempt {
                Attempt::Delivered { .. } => report.delivered += 1,
                Attempt::Failed {
                    retry_in_s: Some(_),
                    ..
                } => report.retried += 1,
                Attempt::Failed {
                    retry_in_s: None, ..
                } => report.failed += 1,
            }
        }
        metrics::counter!("boxoffice_webhook_attempts_total", "outcome" => "delivered")
            .increment(report.delivered);
        metrics::counter!("boxoffice_webhook_attempts_total", "outcome" => "retried")
            .increment(report.retried);
        metrics::counter!("boxoffice_webhook_attempts_total", "outcome" => "failed")
            .increment(report.failed);
        match failed_to_record {
            Some(error) => Err(error),
            None => Ok(report),
        }
    }

    /// One POST, and what it says about the delivery.
    async fn attempt(&self, due: &DueDelivery) -> Attempt {
        let delivery = &due.delivery;
        let body = body_of(delivery);
        let signature = sign(&due.secret, now_unix_s(), &body);
        let sent = self
            .http
            .post(&due.url)
            .header("content-type", "application/json")
            .header(EVENT_ID_HEADER, delivery.event_id.to_string())
            .header(SIGNATURE_HEADER, signature)
            .body(body)
            .send()
            .await;
        let n_attempts = delivery.n_attempts.saturating_add(1);
        match sent {
            Ok(answer) if answer.status().is_success() => Attempt::Delivered {
                status_code: answer.status().as_u16(),
            },
            Ok(answer) => {
                let status = answer.status();
                let excerpt = answer
                    .bytes()
                    .await
                    .map(|bytes| {
                        String::from_utf8_lossy(&bytes[..bytes.len().min(ANSWER_EXCERPT_MAX)])
                            .into_owned()
                    })
                    .unwrap_or_default();
                tracing::info!(delivery_id = delivery.delivery_id, %status, "webhook endpoint refused a delivery");
                Attempt::Failed {
                    status_code: Some(status.as_u16()),
                    error: format!("answered {status}: {excerpt}"),
                    retry_in_s: retry_in_s(n_attempts),
                }
            }
            Err(error) => {
                tracing::info!(delivery_id = delivery.delivery_id, %error, "webhook endpoint not reached");
                Attempt::Failed {
                    status_code: None,
                    error: error.to_string(),
                    retry_in_s: retry_in_s(n_attempts),
                }
            }
        }
    }

    /// Rounds until the task is dropped: the next at once after a full one, else after a poke
    /// or the interval.
    pub async fn run(self) {
        loop {
            let mut full = false;
            match self.run_once().await {
                Ok(report) => full = report.claimed >= u64::from(WEBHOOK_BATCH_MAX),
                Err(error) => tracing::warn!(%error, "webhook round failed"),
            }
            if full {
                continue;
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(WEBHOOK_INTERVAL_MS)) => {}
                _ = self.poke.notified() => {}
            }
        }
    }
}

fn now_unix_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use boxoffice_store::webhook::DeliveryStatus;

    fn delivery() -> WebhookDelivery {
        let at = boxoffice_domain::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        WebhookDelivery {
            delivery_id: 7,
            endpoint_id: "ep".into(),
            event_id: 42,
            event_type: "order.confirmed".into(),
            payload: r#"{"orderId":"o-1"}"#.into(),
            event_created_at: at,
            status: DeliveryStatus::Pending,
            n_attempts: 0,
            next_attempt_at: at,
            last_status_code: None,
            last_error: None,
            delivered_at: None,
            created_at: at,
        }
    }

    #[test]
    fn the_body_carries_the_event_id_type_time_and_data() {
        let body: serde_json::Value = serde_json::from_slice(&body_of(&delivery())).unwrap();
        assert_eq!(body["id"], "42");
        assert_eq!(body["type"], "order.confirmed");
        assert_eq!(body["createdAt"], "2027-01-15T08:00:00Z");
        assert_eq!(body["data"]["orderId"], "o-1");
    }

    #[test]
    fn the_signature_is_the_hmac_of_the_timestamp_and_the_body() {
        // Computed independently: printf '1800000000.{"a":1}' |
        // openssl dgst -sha256 -hmac whsec_test
        let header = sign("whsec_test", 1_800_000_000, br#"{"a":1}"#);
        assert_eq!(
            header,
            "t=1800000000,v1=7de5e6bbc99c65ef0ddccacd4308ba03a5a12eb8859a0db070c5ca731c4fdc19"
        );
    }

    #[test]
    fn a_signature_verifies_with_its_secret_only() {
        let body = body_of(&delivery());
        let header = sign("whsec_right", 1_800_000_000, &body);
        let verify = |secret: &str, body: &[u8]| {
            boxoffice_payments::stripe::verify_signature(secret, Some(&header), body, 1_800_000_000)
        };
        assert!(verify("whsec_right", &body).is_ok());
        assert!(verify("whsec_wrong", &body).is_err());
        assert!(verify("whsec_right", b"{}").is_err());
    }
}
