//! The Stripe adapter against the in-process simulator: the scenarios shared with
//! localstripe (`scenarios/mod.rs`), then every test card, every fault the simulator can
//! inject, webhook verification, and refunds (parts adding up, refusals, replays, lost and
//! slow answers, failures). Waiting for webhooks is a bounded poll, never a fixed
//! sleep.

mod scenarios;

scenarios!(
    crate::scenarios::Backend::simulator;
    authorize_capture_retrieve,
    authorize_then_void,
    retrieving_an_unknown_payment_is_refused,
    a_declining_card_fails_with_its_code,
    an_unknown_payment_method_is_refused_for_good,
    a_capture_is_told_by_a_signed_webhook,
    a_captured_payment_is_refunded_in_part_then_in_full,
);

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use boxoffice_payments::counting::CountingProxy;
use boxoffice_payments::simulator::{self, SimulatorConfig, SimulatorHandle};
use boxoffice_payments::stripe::{SIGNATURE_HEADER, sign_webhook};
use boxoffice_payments::{
    AuthorizeRequest, PaymentProvider, ProviderError, ProviderStatus, RefundReason, RefundRequest,
    RefundStatus, StripeProvider, WEBHOOK_TOLERANCE_S, WebhookError,
};

/// Longest a test waits for something asynchronous (a webhook) before failing.
const WAIT_MS_MAX: u64 = 10_000;
/// Pause between two looks while waiting.
const POLL_INTERVAL_MS: u64 = 10;

async fn start(config: SimulatorConfig) -> (SimulatorHandle, StripeProvider) {
    let secret_key = config.secret_key.clone();
    let webhook_secret = config.webhook_secret.clone();
    let handle = simulator::spawn(config).await.expect("simulator starts");
    let provider = StripeProvider::new(handle.base_url.clone(), secret_key, webhook_secret);
    (handle, provider)
}

fn authorize_request(operation_id: &str, payment_method: &str) -> AuthorizeRequest {
    AuthorizeRequest {
        operation_id: operation_id.to_owned(),
        order_id: format!("ord_{operation_id}"),
        amount_minor: 4_500,
        currency: "EUR".to_owned(),
        payment_method_token: payment_method.to_owned(),
    }
}

fn now_unix_s() -> i64 {
    let elapsed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(elapsed.as_secs()).expect("seconds fit in i64")
}

/// Polls `condition` until it holds, failing the test after [`WAIT_MS_MAX`].
async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
    }
}

/// One webhook as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    signature: Option<String>,
    body: Bytes,
}

type Inbox = Arc<Mutex<Vec<Received>>>;

/// A tiny webhook receiver on port 0; returns its URL and what it received.
async fn start_receiver() -> (String, Inbox) {
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

fn received(inbox: &Inbox) -> Vec<Received> {
    inbox.lock().expect("inbox lock").clone()
}

#[tokio::test]
async fn visa_authorizes_captures_idempotently_and_cannot_be_voided_after_capture() {
    let (handle, provider) = start(SimulatorConfig::default()).await;

    let authorized = provider
        .authorize(&authorize_request("op_visa", "pm_card_visa"))
        .await
        .expect("authorize");
    assert_eq!(authorized.status, ProviderStatus::Authorized);
    assert_eq!(authorized.amount_minor, 4_500);
    assert_eq!(authorized.currency, "EUR");
    assert_eq!(authorized.operation_id.as_deref(), Some("op_visa"));
    assert_eq!(authorized.decline_code, None);
    let intent = handle
        .sim
        .intent(&authorized.provider_ref)
        .expect("intent stored");
    assert_eq!(intent["currency"], "eur");
    assert_eq!(intent["capture_method"], "manual");
    assert_eq!(intent["metadata"]["order_id"], "ord_op_visa");

    let captured = provider
        .capture("op_visa", &authorized.provider_ref)
        .await
        .expect("capture");
    assert_eq!(captured.status, ProviderStatus::Captured);
    assert_eq!(captured.provider_ref, authorized.provider_ref);

    let captured_again = provider
        .capture("op_visa", &authorized.provider_ref)
        .await
        .expect("capture again");
    assert_eq!(captured_again.status, ProviderStatus::Captured);

    let retrieved = provider
        .retrieve(&authorized.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Captured);

    let void = provider.void("op_visa", &authorized.provider_ref).await;
    assert!(
        matches!(void, Err(ProviderError::Rejected { .. })),
        "void of a captured payment: {void:?}"
    );
    assert_eq!(
        handle.sim.intent(&authorized.provider_ref).expect("intent")["status"],
        "succeeded"
    );
}

#[tokio::test]
async fn void_releases_an_authorization_and_is_repeatable() {
    let (_handle, provider) = start(SimulatorConfig::default()).await;
    let authorized = provider
        .authorize(&authorize_request("op_void", "pm_card_visa"))
        .await
        .expect("authorize");
    let voided = provider
        .void("op_void", &authorized.provider_ref)
        .await
        .expect("void");
    assert_eq!(voided.status, ProviderStatus::Voided);
    let voided_again = provider
        .void("op_void", &authorized.provider_ref)
        .await
        .expect("void again");
    assert_eq!(voided_again.status, ProviderStatus::Voided);
    let capture = provider.capture("op_void", &authorized.provider_ref).await;
    assert!(
        matches!(capture, Err(ProviderError::Rejected { .. })),
        "capture of a voided payment: {capture:?}"
    );
}

#[tokio::test]
async fn the_same_operation_id_authorizes_once() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let request = authorize_request("op_twice", "pm_card_visa");
    let first = provider.authorize(&request).await.expect("first");
    let second = provider.authorize(&request).await.expect("second");
    assert_eq!(first, second);
    assert_eq!(handle.sim.authorizations("op_twice"), 1);

    // The same key with other parameters is our bug, not a new payment; nor is it a failure:
    // the first request under the key may have created one.
    let other_amount = AuthorizeRequest {
        amount_minor: 9_900,
        ..request
    };
    let reused = provider.authorize(&other_amount).await;
    assert!(
        matches!(reused, Err(ProviderError::Unknown(ref message)) if message.contains("idempotency")),
        "key reused with other parameters: {reused:?}"
    );
    assert_eq!(handle.sim.authorizations("op_twice"), 1);
}

#[tokio::test]
async fn a_decline_is_an_answer_not_an_error() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let declined = provider
        .authorize(&authorize_request("op_decline", "pm_card_chargeDeclined"))
        .await
        .expect("a decline is Ok");
    assert_eq!(declined.status, ProviderStatus::Failed);
    assert_eq!(declined.decline_code.as_deref(), Some("generic_decline"));
    assert_eq!(declined.operation_id.as_deref(), Some("op_decline"));

    // Replaying the declined request replays the decline.
    let replayed = provider
        .authorize(&authorize_request("op_decline", "pm_card_chargeDeclined"))
        .await
        .expect("replay");
    assert_eq!(replayed, declined);
    assert_eq!(handle.sim.authorizations("op_decline"), 1);
}

#[tokio::test]
async fn three_d_secure_completes_by_a_signed_webhook() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    // The server under test starts after the simulator, so its URL is set afterwards.
    let (webhook_url, inbox) = start_receiver().await;
    handle.sim.set_webhook_url(webhook_url);

    let pending = provider
        .authorize(&authorize_request(
            "op_3ds",
            "pm_card_threeDSecure2Required",
        ))
        .await
        .expect("authorize");
    assert_eq!(pending.status, ProviderStatus::RequiresAction);
    let next_action_url = pending.next_action_url.clone().expect("next action url");
    assert!(next_action_url.starts_with(&handle.base_url));

    let shopper = reqwest::Client::new();
    let completed = shopper
        .post(&next_action_url)
        .send()
        .await
        .expect("shopper completes 3DS");
    assert!(completed.status().is_success());

    let retrieved = provider
        .retrieve(&pending.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Authorized);

    let is_capturable = |received: &Received| {
        serde_json::from_slice::<serde_json::Value>(&received.body)
            .is_ok_and(|event| event["type"] == "payment_intent.amount_capturable_updated")
    };
    wait_until("the amount_capturable_updated webhook", || {
        received(&inbox).iter().any(is_capturable)
    })
    .await;
    let webhook = received(&inbox)
        .into_iter()
        .find(is_capturable)
        .expect("webhook received");
    let event = provider
        .verify_webhook(webhook.signature.as_deref(), &webhook.body, now_unix_s())
        .expect("the simulator's webhook verifies");
    assert_eq!(event.kind, "payment_intent.amount_capturable_updated");
    assert!(event.event_id.starts_with("evt_"));
    assert_eq!(event.payment.provider_ref, pending.provider_ref);
    assert_eq!(event.payment.status, ProviderStatus::Authorized);
    assert_eq!(event.payment.operation_id.as_deref(), Some("op_3ds"));
}

#[tokio::test]
async fn three_d_secure_can_fail() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let pending = provider
        .authorize(&authorize_request(
            "op_3ds_fail",
            "pm_card_threeDSecure2Required",
        ))
        .await
        .expect("authorize");
    let fail_url = format!("{}/sim/3ds/{}/fail", handle.base_url, pending.provider_ref);
    let failed = reqwest::Client::new()
        .post(&fail_url)
        .send()
        .await
        .expect("shopper fails 3DS");
    assert!(failed.status().is_success());
    let retrieved = provider
        .retrieve(&pending.provider_ref)
        .await
        .expect("retrieve");
    assert_eq!(retrieved.status, ProviderStatus::Failed);
    assert!(retrieved.decline_code.is_some());
    let kinds: Vec<_> = handle
        .sim
        .events()
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "payment_intent.requires_action",
            "payment_intent.payment_failed"
        ]
    );
}

#[tokio::test]
async fn a_lost_response_is_unknown_and_converges_on_retry() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let provider = provider.with_timeout_ms(300);
    let request = authorize_request("op_lost", "pm_sim_timeout");

    let lost = provider.authorize(&request).await;
    assert!(
        matches!(lost, Err(ProviderError::Unknown(_))),
        "a lost response is unknown, never a failure: {lost:?}"
    );
    assert_eq!(handle.sim.authorizations("op_lost"), 1);

    let converged = provider.authorize(&request).await.expect("retry");
    assert_eq!(converged.status, ProviderStatus::Authorized);
    let created = handle.sim.events();
    assert_eq!(created.len(), 1, "one authorization, one event");
    assert_eq!(
        created[0]["data"]["object"]["id"].as_str(),
        Some(converged.provider_ref.as_str())
    );
    assert_eq!(handle.sim.authorizations("op_lost"), 1);
}

#[tokio::test]
async fn a_slow_authorization_answers_late_and_a_hasty_client_converges() {
    let slow_ms = 400;
    let (handle, provider) = start(SimulatorConfig {
        slow_ms,
        ..SimulatorConfig::default()
    })
    .await;

    let started = Instant::now();
    let slow = provider
        .authorize(&authorize_request("op_slow", "pm_sim_slow"))
        .await
        .expect("slow authorize");
    assert_eq!(slow.status, ProviderStatus::Authorized);
    assert!(started.elapsed() >= Duration::from_millis(slow_ms));

    // A client that gives up before the provider answers sees Unknown, and retrying with
    // the same operation id settles on one authorization.
    let hasty = provider.clone().with_timeout_ms(100);
    let request = authorize_request("op_slow_hasty", "pm_sim_slow");
    let first = hasty.authorize(&request).await;
    assert!(
        matches!(first, Err(ProviderError::Unknown(_))),
        "timed out: {first:?}"
    );
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
    let settled = loop {
        match provider.authorize(&request).await {
            Ok(payment) => break payment,
            Err(ProviderError::Unknown(_)) => {
                assert!(Instant::now() < deadline, "the slow payment never settled");
                tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    };
    assert_eq!(settled.status, ProviderStatus::Authorized);
    assert_eq!(handle.sim.authorizations("op_slow_hasty"), 1);
}

#[tokio::test]
async fn a_failing_provider_is_unavailable() {
    let (handle, provider) = start(SimulatorConfig {
        fail_5xx_share: 1.0,
        ..SimulatorConfig::default()
    })
    .await;
    let outage = provider
        .authorize(&authorize_request("op_outage", "pm_card_visa"))
        .await;
    assert!(
        matches!(outage, Err(ProviderError::Unavailable(_))),
        "503: {outage:?}"
    );
    assert_eq!(handle.sim.authorizations("op_outage"), 0);
    let retrieve = provider.retrieve("pi_anything").await;
    assert!(matches!(retrieve, Err(ProviderError::Unavailable(_))));

    // Recovery: the same operation id then authorizes once.
    handle.sim.set_fail_5xx_share(0.0);
    let recovered = provider
        .authorize(&authorize_request("op_outage", "pm_card_visa"))
        .await
        .expect("after the outage");
    assert_eq!(recovered.status, ProviderStatus::Authorized);
    assert_eq!(handle.sim.authorizations("op_outage"), 1);
}

#[tokio::test]
async fn a_refused_connection_is_unavailable() {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    drop(listener);
    let provider = StripeProvider::new(
        format!("http://{address}"),
        "sk_test_x".to_owned(),
        "whsec_x".to_owned(),
    );
    let refused = provider
        .authorize(&authorize_request("op_refused", "pm_card_visa"))
        .await;
    assert!(
        matches!(refused, Err(ProviderError::Unavailable(_))),
        "connection refused: {refused:?}"
    );
}

/// Our key refused (401) is our misconfiguration, not the fan's failure: nothing was tried,
/// so it is `Unavailable` (asked again later), never a refusal that cancels an order.
#[tokio::test]
async fn a_wrong_api_key_is_unavailable_not_a_failure() {
    let handle = simulator::spawn(SimulatorConfig::default())
        .await
        .expect("simulator");
    let provider = StripeProvider::new(
        handle.base_url.clone(),
        "sk_test_wrong".to_owned(),
        "whsec_x".to_owned(),
    );
    let unauthorized = provider
        .authorize(&authorize_request("op_key", "pm_card_visa"))
        .await;
    assert!(
        matches!(unauthorized, Err(ProviderError::Unavailable(_))),
        "401: {unauthorized:?}"
    );
    assert_eq!(handle.sim.authorizations("op_key"), 0);
}

#[tokio::test]
async fn a_refused_capture_leaves_the_payment_authorized() {
    let (handle, provider) = start(SimulatorConfig {
        capture_fails: true,
        ..SimulatorConfig::default()
    })
    .await;
    let authorized = provider
        .authorize(&authorize_request("op_capture_fails", "pm_card_visa"))
        .await
        .expect("authorize");
    let refused = provider
        .capture("op_capture_fails", &authorized.provider_ref)
        .await
        .expect("a refused capture is an answer");
    assert_eq!(refused.status, ProviderStatus::Authorized);
    assert!(refused.decline_code.is_some());
    assert_eq!(
        handle.sim.intent(&authorized.provider_ref).expect("intent")["status"],
        "requires_capture"
    );
}

#[tokio::test]
async fn webhook_verification_accepts_only_fresh_correctly_signed_bodies() {
    let secret = "whsec_test_verification";
    let provider = StripeProvider::new(
        "http://127.0.0.1:9".to_owned(),
        "sk_test_x".to_owned(),
        secret.to_owned(),
    );
    let body = serde_json::to_vec(&serde_json::json!({
        "id": "evt_verify",
        "object": "event",
        "type": "payment_intent.succeeded",
        "created": 1_700_000_000,
        "data": {"object": {
            "id": "pi_verify", "object": "payment_intent", "status": "succeeded",
            "amount": 1_000, "currency": "usd", "metadata": {"operation_id": "op_verify"},
        }},
    }))
    .expect("json");
    let now = now_unix_s();
    let signature = sign_webhook(secret, now, &body);

    let event = provider
        .verify_webhook(Some(&signature), &body, now)
        .expect("a correct signature verifies");
    assert_eq!(event.event_id, "evt_verify");
    assert_eq!(event.kind, "payment_intent.succeeded");
    assert_eq!(event.created_unix_s, 1_700_000_000);
    assert_eq!(event.payment.status, ProviderStatus::Captured);
    assert_eq!(event.payment.currency, "USD");
    assert_eq!(event.payment.operation_id.as_deref(), Some("op_verify"));

    assert_eq!(
        provider.verify_webhook(None, &body, now),
        Err(WebhookError::MissingSignature)
    );

    let mut tampered = body.clone();
    let amount_at = tampered
        .windows(4)
        .position(|window| window == b"1000")
        .expect("amount in body");
    tampered[amount_at] = b'9';
    assert_eq!(
        provider.verify_webhook(Some(&signature), &tampered, now),
        Err(WebhookError::BadSignature)
    );

    let wrong_secret = sign_webhook("whsec_someone_else", now, &body);
    assert_eq!(
        provider.verify_webhook(Some(&wrong_secret), &body, now),
        Err(WebhookError::BadSignature)
    );

    let old = now - WEBHOOK_TOLERANCE_S - 1;
    let stale = sign_webhook(secret, old, &body);
    assert_eq!(
        provider.verify_webhook(Some(&stale), &body, now),
        Err(WebhookError::StaleTimestamp)
    );

    let not_json = b"not json";
    let signed_garbage = sign_webhook(secret, now, not_json);
    assert!(matches!(
        provider.verify_webhook(Some(&signed_garbage), not_json, now),
        Err(WebhookError::Malformed(_))
    ));
}

#[tokio::test]
async fn duplicated_webhooks_carry_the_same_event_id() {
    let (handle, provider) = start(SimulatorConfig {
        seed: 42,
        webhook_duplicates_max: 3,
        webhook_delay_ms: (0, 50),
        ..SimulatorConfig::default()
    })
    .await;
    let (webhook_url, inbox) = start_receiver().await;
    handle.sim.set_webhook_url(webhook_url);

    for n in 0..4 {
        let operation_id = format!("op_dup_{n}");
        let authorized = provider
            .authorize(&authorize_request(&operation_id, "pm_card_visa"))
            .await
            .expect("authorize");
        provider
            .capture(&operation_id, &authorized.provider_ref)
            .await
            .expect("capture");
    }
    let emitted = handle.sim.events();
    assert_eq!(emitted.len(), 8, "two state changes per payment");

    wait_until("every planned webhook copy", || {
        handle.sim.webhooks_delivered() == handle.sim.webhooks_planned()
            && received(&inbox).len() as u64 == handle.sim.webhooks_planned()
    })
    .await;

    let now = now_unix_s();
    let mut copies_by_event: HashMap<String, Vec<Bytes>> = HashMap::new();
    for webhook in received(&inbox) {
        let event = provider
            .verify_webhook(webhook.signature.as_deref(), &webhook.body, now)
            .expect("every copy verifies");
        copies_by_event
            .entry(event.event_id)
            .or_default()
            .push(webhook.body);
    }
    for event in &emitted {
        let event_id = event["id"].as_str().expect("event id");
        let copies = copies_by_event
            .get(event_id)
            .unwrap_or_else(|| panic!("event {event_id} never delivered"));
        assert!(
            (1..=3).contains(&copies.len()),
            "{event_id}: {} copies",
            copies.len()
        );
        assert!(
            copies.windows(2).all(|pair| pair[0] == pair[1]),
            "copies of {event_id} differ"
        );
    }
    assert_eq!(copies_by_event.len(), emitted.len());
    assert!(
        copies_by_event.values().any(|copies| copies.len() > 1),
        "with duplicates_max = 3 some event arrives more than once"
    );
}

/// `POST /sim/conditions` (a chaos run's control of a simulator in its own process): an
/// outage set through it is seen by the adapter, bad settings are refused with 400 and change
/// nothing, and recovery through it authorizes again.
#[tokio::test]
async fn conditions_set_over_http_change_how_the_provider_answers() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{}/sim/conditions", handle.base_url);
    for bad in [
        "not json",
        r#"{"fail5xxShare": 1.5}"#,
        r#"{"loseShare": -0.1}"#,
        r#"{"authLatencyMs": [500, 100]}"#,
        r#"{"authLatencyMs": [0, 60001]}"#,
        r#"{"authLatencyMs": [1]}"#,
    ] {
        let answer = http.post(&url).body(bad).send().await.expect("answer");
        assert_eq!(answer.status().as_u16(), 400, "{bad}");
    }
    let fine = provider
        .authorize(&authorize_request("op_before", "pm_card_visa"))
        .await
        .expect("refused settings changed nothing");
    assert_eq!(fine.status, ProviderStatus::Authorized);

    let answer = http
        .post(&url)
        .body(r#"{"fail5xxShare": 1.0, "authLatencyMs": [0, 5]}"#)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status().as_u16(), 200);
    let outage = provider
        .authorize(&authorize_request("op_cond", "pm_card_visa"))
        .await;
    assert!(
        matches!(outage, Err(ProviderError::Unavailable(_))),
        "{outage:?}"
    );
    let answer = http
        .post(&url)
        .body(r#"{"fail5xxShare": 0.0}"#)
        .send()
        .await
        .expect("answer");
    assert_eq!(answer.status().as_u16(), 200);
    let recovered = provider
        .authorize(&authorize_request("op_cond", "pm_card_visa"))
        .await
        .expect("after recovery");
    assert_eq!(recovered.status, ProviderStatus::Authorized);
    assert_eq!(handle.sim.authorizations("op_cond"), 1);
}

fn refund_request(refund_id: &str, provider_ref: &str, amount_minor: i64) -> RefundRequest {
    RefundRequest {
        refund_id: refund_id.to_owned(),
        order_id: format!("ord_{refund_id}"),
        provider_ref: provider_ref.to_owned(),
        amount_minor,
        currency: "EUR".to_owned(),
        reason: Some(RefundReason::RequestedByCustomer),
    }
}

/// An authorized and captured payment of 4,500 made with `payment_method`.
async fn captured(provider: &StripeProvider, operation_id: &str, payment_method: &str) -> String {
    let authorized = provider
        .authorize(&authorize_request(operation_id, payment_method))
        .await
        .expect("authorize");
    let captured = provider
        .capture(operation_id, &authorized.provider_ref)
        .await
        .expect("capture");
    assert_eq!(captured.status, ProviderStatus::Captured);
    captured.provider_ref
}

fn rejection_code<T: std::fmt::Debug>(result: &Result<T, ProviderError>) -> Option<&str> {
    match result {
        Err(ProviderError::Rejected { code, .. }) => Some(code),
        _ => None,
    }
}

#[tokio::test]
async fn a_full_refund_succeeds_reads_back_and_leaves_nothing_to_refund() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_full", "pm_card_visa").await;

    let refund = provider
        .refund(&refund_request("rf_full", &payment, 4_500))
        .await
        .expect("refund");
    assert_eq!(refund.status, RefundStatus::Succeeded);
    assert_eq!(refund.amount_minor, 4_500);
    assert_eq!(refund.currency, "EUR");
    assert_eq!(refund.refund_id.as_deref(), Some("rf_full"));
    assert_eq!(refund.provider_ref.as_deref(), Some(payment.as_str()));
    let stored = handle
        .sim
        .refund(&refund.provider_refund_ref)
        .expect("refund stored");
    assert_eq!(stored["metadata"]["order_id"], "ord_rf_full");
    assert_eq!(stored["reason"], "requested_by_customer");

    let retrieved = provider
        .retrieve_refund(&refund.provider_refund_ref)
        .await
        .expect("retrieve refund");
    assert_eq!(retrieved, refund);

    let nothing_left = provider
        .refund(&refund_request("rf_full_again", &payment, 1))
        .await;
    assert_eq!(
        rejection_code(&nothing_left),
        Some("charge_already_refunded"),
        "{nothing_left:?}"
    );
    assert_eq!(handle.sim.refunds_made("rf_full_again"), 0);
}

#[tokio::test]
async fn partial_refunds_add_up_and_one_past_the_captured_amount_is_refused() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_parts", "pm_card_visa").await;

    for (refund_id, amount_minor) in [("rf_part_1", 1_500), ("rf_part_2", 2_000)] {
        let refund = provider
            .refund(&refund_request(refund_id, &payment, amount_minor))
            .await
            .expect("partial refund");
        assert_eq!(refund.status, RefundStatus::Succeeded);
        assert_eq!(refund.amount_minor, amount_minor);
    }
    // 1,000 is left: 1,500 more is refused for good and moves nothing.
    let too_much = provider
        .refund(&refund_request("rf_part_3", &payment, 1_500))
        .await;
    assert_eq!(
        rejection_code(&too_much),
        Some("amount_too_large"),
        "{too_much:?}"
    );
    assert_eq!(handle.sim.refunds_made("rf_part_3"), 0);
    // The same key answers the same refusal.
    let again = provider
        .refund(&refund_request("rf_part_3", &payment, 1_500))
        .await;
    assert_eq!(again, too_much);

    let rest = provider
        .refund(&refund_request("rf_part_4", &payment, 1_000))
        .await
        .expect("the rest");
    assert_eq!(rest.status, RefundStatus::Succeeded);
    let one_more = provider
        .refund(&refund_request("rf_part_5", &payment, 1))
        .await;
    assert_eq!(
        rejection_code(&one_more),
        Some("charge_already_refunded"),
        "{one_more:?}"
    );
}

/// The caller's rule: an authorization not yet captured is voided, never refunded; the
/// provider refuses the refund for good.
#[tokio::test]
async fn an_uncaptured_payment_is_not_refunded_but_voided() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let authorized = provider
        .authorize(&authorize_request("op_refund_uncaptured", "pm_card_visa"))
        .await
        .expect("authorize");
    let refused = provider
        .refund(&refund_request(
            "rf_uncaptured",
            &authorized.provider_ref,
            4_500,
        ))
        .await;
    assert_eq!(
        rejection_code(&refused),
        Some("payment_intent_unexpected_state"),
        "{refused:?}"
    );
    assert_eq!(handle.sim.refunds_made("rf_uncaptured"), 0);

    let voided = provider
        .void("op_refund_uncaptured", &authorized.provider_ref)
        .await
        .expect("void");
    assert_eq!(voided.status, ProviderStatus::Voided);
    let refused = provider
        .refund(&refund_request(
            "rf_voided",
            &authorized.provider_ref,
            4_500,
        ))
        .await;
    assert_eq!(
        rejection_code(&refused),
        Some("payment_intent_unexpected_state"),
        "{refused:?}"
    );

    let unknown = provider
        .refund(&refund_request("rf_unknown_pi", "pi_does_not_exist", 100))
        .await;
    assert_eq!(
        rejection_code(&unknown),
        Some("resource_missing"),
        "{unknown:?}"
    );
    let missing = provider.retrieve_refund("re_does_not_exist").await;
    assert_eq!(
        rejection_code(&missing),
        Some("resource_missing"),
        "{missing:?}"
    );
}

/// The same refund id sent twice (through the counting proxy: two requests) makes one
/// refund and answers it twice; the key reused with another amount is our bug and may have
/// made a refund, so it is unknown, never a second refund.
#[tokio::test]
async fn the_same_refund_id_refunds_once() {
    let (handle, direct) = start(SimulatorConfig::default()).await;
    let proxy = CountingProxy::start(&handle.base_url)
        .await
        .expect("proxy starts");
    let provider = StripeProvider::new(
        proxy.base_url.clone(),
        simulator::DEFAULT_SECRET_KEY.to_owned(),
        simulator::DEFAULT_WEBHOOK_SECRET.to_owned(),
    );
    let payment = captured(&direct, "op_refund_twice", "pm_card_visa").await;
    let request = refund_request("rf_twice", &payment, 2_000);

    let first = provider.refund(&request).await.expect("first");
    let second = provider.refund(&request).await.expect("second");
    assert_eq!(first, second);
    assert_eq!(proxy.refunds_sent("rf_twice"), 2);
    assert_eq!(handle.sim.refunds_made("rf_twice"), 1);

    let reused = provider
        .refund(&RefundRequest {
            amount_minor: 1_000,
            ..request
        })
        .await;
    assert!(
        matches!(reused, Err(ProviderError::Unknown(ref message)) if message.contains("idempotency")),
        "key reused with another amount: {reused:?}"
    );
    assert_eq!(handle.sim.refunds_made("rf_twice"), 1);
    // 2,500 is still refundable: only one refund of 2,000 exists.
    let rest = provider
        .refund(&refund_request("rf_twice_rest", &payment, 2_500))
        .await
        .expect("the rest");
    assert_eq!(rest.status, RefundStatus::Succeeded);
}

/// The refund is made and its answer lost: unknown, never failed. It is found by our refund
/// id, and retrying with the same id answers that refund, never a second one.
#[tokio::test]
async fn a_lost_refund_answer_is_unknown_and_converges_on_retry() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_lost", "pm_card_visa").await;
    handle.sim.set_refund_lose_share(1.0);
    let hasty = provider.clone().with_timeout_ms(300);
    let request = refund_request("rf_lost", &payment, 4_500);

    let lost = hasty.refund(&request).await;
    assert!(
        matches!(lost, Err(ProviderError::Unknown(_))),
        "a lost refund answer is unknown: {lost:?}"
    );
    assert_eq!(handle.sim.refunds_made("rf_lost"), 1);

    let found = provider
        .find_refund(&payment, "rf_lost")
        .await
        .expect("find refund")
        .expect("the lost refund exists");
    assert_eq!(found.status, RefundStatus::Succeeded);
    assert_eq!(found.amount_minor, 4_500);

    let converged = hasty.refund(&request).await.expect("retry");
    assert_eq!(converged, found);
    assert_eq!(handle.sim.refunds_made("rf_lost"), 1);
}

/// A slow provider: a client that gives up first sees Unknown (then 409 while the refund is
/// in flight, Unknown too), and retrying with the same refund id settles on one refund.
#[tokio::test]
async fn a_slow_refund_answers_late_and_a_hasty_client_converges() {
    let (handle, provider) = start(SimulatorConfig {
        refund_latency_ms: (400, 400),
        ..SimulatorConfig::default()
    })
    .await;
    let payment = captured(&provider, "op_refund_slow", "pm_card_visa").await;
    let request = refund_request("rf_slow", &payment, 1_000);
    let hasty = provider.clone().with_timeout_ms(100);
    let first = hasty.refund(&request).await;
    assert!(
        matches!(first, Err(ProviderError::Unknown(_))),
        "timed out: {first:?}"
    );
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
    let settled = loop {
        match provider.refund(&request).await {
            Ok(refund) => break refund,
            Err(ProviderError::Unknown(_)) => {
                assert!(Instant::now() < deadline, "the slow refund never settled");
                tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    };
    assert_eq!(settled.status, RefundStatus::Succeeded);
    assert_eq!(handle.sim.refunds_made("rf_slow"), 1);
}

/// A refund the provider made but that failed is an answer: `Failed` with its reason, the
/// money still owed and still refundable.
#[tokio::test]
async fn a_failing_refund_comes_back_failed_and_the_money_is_still_owed() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_fails", "pm_card_visa").await;
    handle.sim.set_refund_fails(true);
    let failed = provider
        .refund(&refund_request("rf_fails", &payment, 4_500))
        .await
        .expect("a failed refund is an answer");
    assert_eq!(
        failed.status,
        RefundStatus::Failed {
            reason: "declined".to_owned()
        }
    );
    assert!(failed.status.is_failed());
    let retrieved = provider
        .retrieve_refund(&failed.provider_refund_ref)
        .await
        .expect("retrieve refund");
    assert_eq!(retrieved, failed);

    handle.sim.set_refund_fails(false);
    let retried = provider
        .refund(&refund_request("rf_fails_retry", &payment, 4_500))
        .await
        .expect("a new refund of the money still owed");
    assert_eq!(retried.status, RefundStatus::Succeeded);
}

/// `pm_card_refundFail` as at Stripe: the refund answers succeeded, then reads failed.
#[tokio::test]
async fn a_refund_fail_card_refund_succeeds_then_reads_failed() {
    let (_handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(
        &provider,
        "op_refund_fail_card",
        simulator::REFUND_FAIL_CARD,
    )
    .await;
    let refund = provider
        .refund(&refund_request("rf_fail_card", &payment, 4_500))
        .await
        .expect("refund");
    assert_eq!(refund.status, RefundStatus::Succeeded);
    let later = provider
        .retrieve_refund(&refund.provider_refund_ref)
        .await
        .expect("retrieve refund");
    assert_eq!(
        later.status,
        RefundStatus::Failed {
            reason: "expired_or_canceled_card".to_owned()
        }
    );
    let found = provider
        .find_refund(&payment, "rf_fail_card")
        .await
        .expect("find refund");
    assert_eq!(found, Some(later));
}

#[tokio::test]
async fn a_failing_provider_refunds_nothing_and_is_unavailable() {
    let (handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_outage", "pm_card_visa").await;
    handle.sim.set_fail_5xx_share(1.0);
    let request = refund_request("rf_outage", &payment, 4_500);
    let outage = provider.refund(&request).await;
    assert!(
        matches!(outage, Err(ProviderError::Unavailable(_))),
        "503: {outage:?}"
    );
    assert!(matches!(
        provider.retrieve_refund("re_anything").await,
        Err(ProviderError::Unavailable(_))
    ));
    assert!(matches!(
        provider.find_refund(&payment, "rf_outage").await,
        Err(ProviderError::Unavailable(_))
    ));
    assert_eq!(handle.sim.refunds_made("rf_outage"), 0);

    handle.sim.set_fail_5xx_share(0.0);
    let recovered = provider.refund(&request).await.expect("after the outage");
    assert_eq!(recovered.status, RefundStatus::Succeeded);
    assert_eq!(handle.sim.refunds_made("rf_outage"), 1);
}

/// `find_refund` reads every page: the oldest of more refunds than one page holds (lists
/// are newest first) is found on the second page.
#[tokio::test]
async fn find_refund_reads_past_the_first_page() {
    let (_handle, provider) = start(SimulatorConfig::default()).await;
    let payment = captured(&provider, "op_refund_pages", "pm_card_visa").await;
    let count = boxoffice_payments::stripe::REFUND_LIST_PAGE_LEN + 1;
    for n in 0..count {
        provider
            .refund(&refund_request(&format!("rf_page_{n}"), &payment, 1))
            .await
            .expect("refund");
    }
    let oldest = provider
        .find_refund(&payment, "rf_page_0")
        .await
        .expect("find refund")
        .expect("the oldest refund");
    assert_eq!(oldest.refund_id.as_deref(), Some("rf_page_0"));
    let newest = provider
        .find_refund(&payment, &format!("rf_page_{}", count - 1))
        .await
        .expect("find refund");
    assert!(newest.is_some());
    assert_eq!(
        provider.find_refund(&payment, "rf_page_none").await,
        Ok(None)
    );
}
