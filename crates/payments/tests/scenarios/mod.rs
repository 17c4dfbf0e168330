//! The Stripe adapter's scenarios that every Stripe-speaking backend must pass, written once
//! and run against the in-process simulator (`stripe_against_simulator.rs`) and against
//! localstripe (`stripe_against_localstripe.rs`): authorize and capture, authorize and void,
//! retrieve, a declining card, a payment method the provider does not know, the signed
//! webhooks of a capture and a decline, and refunds in part and in full read back. Each backend sits behind a [`CountingProxy`], so a
//! scenario can check what the adapter sent. Waiting for a webhook is a bounded poll.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use boxoffice_payments::counting::CountingProxy;
use boxoffice_payments::localstripe::{self, LocalStripe};
use boxoffice_payments::simulator::{self, SimulatorConfig, SimulatorHandle};
use boxoffice_payments::stripe::SIGNATURE_HEADER;
use boxoffice_payments::{
    AuthorizeRequest, PaymentProvider, ProviderError, ProviderPayment, ProviderStatus,
    RefundRequest, RefundStatus, StripeProvider, WebhookEvent,
};

/// Longest a scenario waits for something asynchronous (a webhook) before failing.
pub const WAIT_MS_MAX: u64 = 10_000;
/// Pause between two looks while waiting.
pub const POLL_INTERVAL_MS: u64 = 10;

/// The Stripe-speaking server under the adapter.
pub enum Server {
    Simulator(SimulatorHandle),
    LocalStripe(LocalStripe),
}

/// One backend, the adapter pointed at it through a counting proxy.
pub struct Backend {
    pub server: Server,
    pub provider: StripeProvider,
    pub proxy: CountingProxy,
}

impl Backend {
    pub async fn simulator() -> Self {
        let config = SimulatorConfig::default();
        let (secret_key, webhook_secret) =
            (config.secret_key.clone(), config.webhook_secret.clone());
        let handle = simulator::spawn(config).await.expect("simulator starts");
        let proxy = CountingProxy::start(&handle.base_url)
            .await
            .expect("proxy starts");
        let provider = StripeProvider::new(proxy.base_url.clone(), secret_key, webhook_secret);
        Self {
            server: Server::Simulator(handle),
            provider,
            proxy,
        }
    }

    /// localstripe on a port of its own; fails (never skips) when it is not installed.
    pub async fn localstripe() -> Self {
        let started = LocalStripe::start()
            .await
            .unwrap_or_else(|why| panic!("{why}"));
        let proxy = CountingProxy::start(&started.base_url)
            .await
            .expect("proxy starts");
        let provider = StripeProvider::new(
            proxy.base_url.clone(),
            localstripe::SECRET_KEY.to_owned(),
            localstripe::WEBHOOK_SECRET.to_owned(),
        );
        Self {
            server: Server::LocalStripe(started),
            provider,
            proxy,
        }
    }

    /// A test card the backend declines when it is charged.
    pub fn declining_card(&self) -> &'static str {
        match self.server {
            Server::Simulator(_) => "pm_card_chargeDeclined",
            // localstripe's pm_card_visa_chargeDeclined authorizes (it declines only when
            // attached to a customer); the card it declines on a charge is ...0341.
            Server::LocalStripe(_) => "pm_card_chargeCustomerFail",
        }
    }

    /// The code the backend gives [`Backend::declining_card`]'s decline.
    pub fn decline_code(&self) -> &'static str {
        match self.server {
            Server::Simulator(_) => "generic_decline",
            Server::LocalStripe(_) => "card_declined",
        }
    }

    /// Makes the backend POST its events to `url`.
    pub async fn send_webhooks_to(&self, url: String) {
        match &self.server {
            Server::Simulator(handle) => handle.sim.set_webhook_url(url),
            Server::LocalStripe(started) => started
                .send_webhooks_to(&url, localstripe::WEBHOOK_SECRET)
                .await
                .expect("webhook registered"),
        }
    }
}

pub fn authorize_request(operation_id: &str, payment_method: &str) -> AuthorizeRequest {
    AuthorizeRequest {
        operation_id: operation_id.to_owned(),
        order_id: format!("ord_{operation_id}"),
        amount_minor: 4_500,
        currency: "EUR".to_owned(),
        payment_method_token: payment_method.to_owned(),
    }
}

pub fn now_unix_s() -> i64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(elapsed.as_secs()).expect("seconds fit in i64")
}

/// A unique operation id per run (localstripe keeps what every test created).
pub fn operation_id(name: &str) -> String {
    format!("op_{name}_{}", std::process::id())
}

/// Polls `condition` until it holds, failing the test after [`WAIT_MS_MAX`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
    }
}

/// One webhook as the receiver got it.
#[derive(Debug, Clone)]
pub struct Received {
    pub signature: Option<String>,
    pub body: Bytes,
}

pub type Inbox = Arc<Mutex<Vec<Received>>>;

/// A tiny webhook receiver on port 0; returns its URL and what it received.
pub async fn start_receiver() -> (String, Inbox) {
    let inbox: Inbox = Arc::default();
    let app = Router::new()
        .route(
            "/webhooks/stripe",
            post(
                |State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes| async move {
                    let signature = headers
                        .get(SIGNATURE_HEADER)
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_owned);
                    inbox
                        .lock()
                        .expect("inbox lock")
                        .push(Received { signature, body });
                    "ok"
                },
            ),
        )
        .with_state(inbox.clone());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind receiver");
    let address = listener.local_addr().expect("receiver address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/webhooks/stripe"), inbox)
}

pub fn received(inbox: &Inbox) -> Vec<Received> {
    inbox.lock().expect("inbox lock").clone()
}

/// Waits for a webhook that verifies with the adapter's secret and is of `kind` about
/// `provider_ref`; returns it verified.
async fn verified_webhook(
    backend: &Backend,
    inbox: &Inbox,
    kind: &str,
    provider_ref: &str,
) -> WebhookEvent {
    let find = || {
        received(inbox).into_iter().find_map(|webhook| {
            let event = backend
                .provider
                .verify_webhook(webhook.signature.as_deref(), &webhook.body, now_unix_s())
                .ok()?;
            (event.kind == kind && event.payment.provider_ref == provider_ref).then_some(event)
        })
    };
    wait_until(&format!("a signed {kind} webhook"), || find().is_some()).await;
    find().expect("found above")
}

/// `pm_card_visa` authorizes with manual capture (sent once), is captured, and a retrieve
/// reads it captured.
pub async fn authorize_capture_retrieve(backend: &Backend) {
    let operation_id = operation_id("capture");
    let authorized = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_card_visa"))
        .await
        .expect("authorize");
    assert_eq!(authorized.status, ProviderStatus::Authorized);
    assert_eq!(authorized.amount_minor, 4_500);
    assert_eq!(authorized.currency, "EUR");
    assert_eq!(
        authorized.operation_id.as_deref(),
        Some(operation_id.as_str())
    );
    assert_eq!(authorized.decline_code, None);
    assert!(authorized.provider_ref.starts_with("pi_"));

    let retrieved = backend
        .provider
        .retrieve(&authorized.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Authorized);

    let captured = backend
        .provider
        .capture(&operation_id, &authorized.provider_ref)
        .await
        .expect("capture");
    assert_eq!(captured.status, ProviderStatus::Captured);
    assert_eq!(captured.provider_ref, authorized.provider_ref);
    let retrieved = backend
        .provider
        .retrieve(&authorized.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Captured);
    assert_eq!(retrieved.amount_minor, 4_500);
    assert_eq!(backend.proxy.authorizations_sent(&operation_id), 1);
}

/// An authorization is voided (cancelled) and reads voided afterwards.
pub async fn authorize_then_void(backend: &Backend) {
    let operation_id = operation_id("void");
    let authorized = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_card_visa"))
        .await
        .expect("authorize");
    let voided = backend
        .provider
        .void(&operation_id, &authorized.provider_ref)
        .await
        .expect("void");
    assert_eq!(voided.status, ProviderStatus::Voided);
    let retrieved = backend
        .provider
        .retrieve(&authorized.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Voided);
}

/// A payment that does not exist is refused for good (404 `resource_missing`).
pub async fn retrieving_an_unknown_payment_is_refused(backend: &Backend) {
    let missing = backend.provider.retrieve("pi_does_not_exist").await;
    assert!(
        matches!(&missing, Err(ProviderError::Rejected { code, .. }) if code == "resource_missing"),
        "{missing:?}"
    );
}

/// The code of a payment that failed for good: a decline with its payment (`Ok(Failed)`),
/// or a refusal ([`ProviderError::Rejected`]); `None` for anything else.
pub fn failure_code(result: &Result<ProviderPayment, ProviderError>) -> Option<&str> {
    match result {
        Ok(payment) if payment.status == ProviderStatus::Failed => payment.decline_code.as_deref(),
        Err(ProviderError::Rejected { code, .. }) => Some(code),
        _ => None,
    }
}

/// A declining card fails the payment with the backend's decline code, and the backend
/// tells it by a signed `payment_intent.payment_failed` webhook. The simulator answers as
/// Stripe does (402 with the PaymentIntent: `Ok(Failed)`); localstripe's 402 carries no
/// PaymentIntent, so the adapter sees a refusal for good: the order ends the same way.
pub async fn a_declining_card_fails_with_its_code(backend: &Backend) {
    let (url, inbox) = start_receiver().await;
    backend.send_webhooks_to(url).await;
    let operation_id = operation_id("decline");
    let declined = backend
        .provider
        .authorize(&authorize_request(&operation_id, backend.declining_card()))
        .await;
    assert_eq!(
        failure_code(&declined),
        Some(backend.decline_code()),
        "{declined:?}"
    );
    if let Server::Simulator(_) = backend.server {
        assert!(matches!(&declined, Ok(p) if p.status == ProviderStatus::Failed));
    }
    assert_eq!(backend.proxy.authorizations_sent(&operation_id), 1);
    // The failed payment's webhook names our operation in its metadata.
    let find = || {
        received(&inbox).into_iter().find_map(|webhook| {
            let event = backend
                .provider
                .verify_webhook(webhook.signature.as_deref(), &webhook.body, now_unix_s())
                .ok()?;
            (event.kind == "payment_intent.payment_failed"
                && event.payment.operation_id.as_deref() == Some(operation_id.as_str()))
            .then_some(event)
        })
    };
    wait_until("a signed payment_failed webhook", || find().is_some()).await;
    let event = find().expect("found above");
    assert_eq!(event.payment.status, ProviderStatus::Failed);
    assert!(event.event_id.starts_with("evt_"));
}

/// A payment method the provider does not know is refused for good (`resource_missing`:
/// Stripe answers 400, localstripe 404), never an unknown outcome; the adapter sent it once.
pub async fn an_unknown_payment_method_is_refused_for_good(backend: &Backend) {
    let operation_id = operation_id("unknown_pm");
    let refused = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_does_not_exist"))
        .await;
    assert!(
        matches!(&refused, Err(ProviderError::Rejected { code, .. }) if code == "resource_missing"),
        "an unknown payment method: {refused:?}"
    );
    assert_eq!(backend.proxy.authorizations_sent(&operation_id), 1);
}

/// A capture is told by a signed `payment_intent.succeeded` webhook that the adapter
/// verifies (Stripe's `t=...,v1=...` scheme) and reads as captured.
pub async fn a_capture_is_told_by_a_signed_webhook(backend: &Backend) {
    let (url, inbox) = start_receiver().await;
    backend.send_webhooks_to(url).await;
    let operation_id = operation_id("webhook");
    let authorized = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_card_visa"))
        .await
        .expect("authorize");
    backend
        .provider
        .capture(&operation_id, &authorized.provider_ref)
        .await
        .expect("capture");
    let event = verified_webhook(
        backend,
        &inbox,
        "payment_intent.succeeded",
        &authorized.provider_ref,
    )
    .await;
    assert_eq!(event.payment.status, ProviderStatus::Captured);
    assert_eq!(
        event.payment.operation_id.as_deref(),
        Some(operation_id.as_str())
    );
    // A tampered copy does not verify.
    let webhook = received(&inbox)
        .into_iter()
        .find(|webhook| {
            backend
                .provider
                .verify_webhook(webhook.signature.as_deref(), &webhook.body, now_unix_s())
                .is_ok_and(|e| e.event_id == event.event_id)
        })
        .expect("the webhook");
    let mut tampered = webhook.body.to_vec();
    tampered.push(b' ');
    assert!(
        backend
            .provider
            .verify_webhook(webhook.signature.as_deref(), &tampered, now_unix_s())
            .is_err()
    );
}

/// A refund of `amount_minor` of payment `provider_ref` under our refund id `refund_id`.
pub fn refund_request(refund_id: &str, provider_ref: &str, amount_minor: i64) -> RefundRequest {
    RefundRequest {
        refund_id: refund_id.to_owned(),
        order_id: format!("ord_{refund_id}"),
        provider_ref: provider_ref.to_owned(),
        amount_minor,
        currency: "EUR".to_owned(),
        reason: None,
    }
}

/// A unique refund id per run (localstripe keeps what every test created).
pub fn refund_id(name: &str) -> String {
    format!("rf_{name}_{}", std::process::id())
}

/// An authorized and captured `pm_card_visa` payment of 4,500.
pub async fn captured_payment(backend: &Backend, name: &str) -> ProviderPayment {
    let operation_id = operation_id(name);
    let authorized = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_card_visa"))
        .await
        .expect("authorize");
    let captured = backend
        .provider
        .capture(&operation_id, &authorized.provider_ref)
        .await
        .expect("capture");
    assert_eq!(captured.status, ProviderStatus::Captured);
    captured
}

/// A captured payment is refunded in part, then the rest; each refund answers `succeeded`
/// with our refund id, is sent once, and reads back the same by its provider id and by our
/// refund id.
pub async fn a_captured_payment_is_refunded_in_part_then_in_full(backend: &Backend) {
    let payment = captured_payment(backend, "refund_parts").await;
    let mut made = Vec::new();
    for (name, amount_minor) in [("part", 1_500), ("rest", 3_000)] {
        let refund_id = refund_id(name);
        let refund = backend
            .provider
            .refund(&refund_request(
                &refund_id,
                &payment.provider_ref,
                amount_minor,
            ))
            .await
            .expect("refund");
        assert_eq!(refund.status, RefundStatus::Succeeded);
        assert!(refund.provider_refund_ref.starts_with("re_"), "{refund:?}");
        assert_eq!(
            refund.provider_ref.as_deref(),
            Some(payment.provider_ref.as_str())
        );
        assert_eq!(refund.refund_id.as_deref(), Some(refund_id.as_str()));
        assert_eq!(refund.amount_minor, amount_minor);
        assert_eq!(refund.currency, "EUR");
        assert_eq!(backend.proxy.refunds_sent(&refund_id), 1);
        made.push((refund_id, refund));
    }
    for (refund_id, refund) in &made {
        let retrieved = backend
            .provider
            .retrieve_refund(&refund.provider_refund_ref)
            .await
            .expect("retrieve refund");
        assert_eq!(&retrieved, refund);
        let found = backend
            .provider
            .find_refund(&payment.provider_ref, refund_id)
            .await
            .expect("find refund");
        assert_eq!(found.as_ref(), Some(refund));
    }
    let refunded: i64 = made.iter().map(|(_, refund)| refund.amount_minor).sum();
    assert_eq!(refunded, payment.amount_minor);
    let none = backend
        .provider
        .find_refund(&payment.provider_ref, &refund_id("never_made"))
        .await
        .expect("find refund");
    assert_eq!(none, None);
}

/// Declares one `#[tokio::test]` per scenario, each on a fresh backend from `$backend`.
#[macro_export]
macro_rules! scenarios {
    ($backend:path; $($name:ident),* $(,)?) => {
        mod shared_scenarios {
            $(
                #[tokio::test]
                async fn $name() {
                    let backend = $backend().await;
                    $crate::scenarios::$name(&backend).await;
                }
            )*
        }
    };
}
