//! Outgoing webhook stories over HTTP on both backends (issue 19, item 5): an endpoint
//! registered through the admin routes receives each event once per event id, signed (the
//! test checks the HMAC itself); a failing endpoint is retried after it recovers (the
//! backoff's deadline passed by moving the store's clock, not by sleeping) and the event
//! arrives once; a replay sends the same event id again; the fan-out is exactly once per
//! endpoint and event however often it runs; disabled endpoints get nothing; bad requests
//! are 4xx. The webhook sender is driven by the test, one round at a time.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::{Backend, TestApp, token};
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use hmac::{Hmac, KeyInit, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    webhooks_arrive_once_signed_are_retried_after_a_failure_and_replayed,
    a_disabled_endpoint_gets_nothing_and_bad_requests_are_refused,
);

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Received {
    event_id: String,
    signature: String,
    body: Vec<u8>,
    /// What the receiver answered.
    answered: u16,
}

/// A tiny integrator: records every request, answers 500 while told to fail, else 200.
#[derive(Clone, Default)]
struct Receiver {
    requests: Arc<Mutex<Vec<Received>>>,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

impl Receiver {
    async fn spawn() -> (Self, String) {
        let receiver = Self::default();
        let served = receiver.clone();
        let app = axum::Router::new().route(
            "/hooks",
            axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
                let served = served.clone();
                async move {
                    let failing = served.failing.load(std::sync::atomic::Ordering::SeqCst);
                    let status = if failing {
                        AxumStatus::INTERNAL_SERVER_ERROR
                    } else {
                        AxumStatus::OK
                    };
                    let header = |name: &str| {
                        headers
                            .get(name)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned()
                    };
                    served.requests.lock().unwrap().push(Received {
                        event_id: header("boxoffice-event-id"),
                        signature: header("boxoffice-signature"),
                        body: body.to_vec(),
                        answered: status.as_u16(),
                    });
                    status
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (receiver, url)
    }

    fn fail(&self, failing: bool) {
        self.failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    fn requests(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests answered 200, as (event id, type, data).
    fn delivered(&self) -> Vec<(String, String, Value)> {
        self.requests()
            .into_iter()
            .filter(|r| r.answered == 200)
            .map(|r| {
                let body: Value = serde_json::from_slice(&r.body).unwrap();
                (
                    body["id"].as_str().unwrap().to_owned(),
                    body["type"].as_str().unwrap().to_owned(),
                    body["data"].clone(),
                )
            })
            .collect()
    }
}

/// Checks a `Boxoffice-Signature` the way an integrator would: `t=<unix>,v1=<hex>`, the
/// HMAC-SHA256 under the secret of `"<t>.<body>"`.
fn signature_verifies(secret: &str, header: &str, body: &[u8]) -> bool {
    let mut timestamp = None;
    let mut signature = None;
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", t)) => timestamp = Some(t.to_owned()),
            Some(("v1", v)) => signature = hex::decode(v).ok(),
            _ => {}
        }
    }
    let (Some(timestamp), Some(signature)) = (timestamp, signature) else {
        return false;
    };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.verify_slice(&signature).is_ok()
}

/// Runs rounds of the webhook sender until `done` holds for the receiver (bounded: 20 s;
/// the relay fans out in the background).
async fn send_until(app: &TestApp, receiver: &Receiver, done: impl Fn(&Receiver) -> bool) {
    for _ in 0..200 {
        app.state.webhooks.run_once().await.expect("webhook round");
        if done(receiver) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the receiver never got what was expected: {:?}",
        receiver.requests()
    );
}

/// Buys one seat for `account`: the order id, once confirmed.
async fn buy(app: &TestApp, account: &str, event_id: &str, seat: &str) -> String {
    let key = format!("hold-{}", uuid::Uuid::now_v7());
    let hold = app
        .hold(account, event_id, &key, json!({"seatIds": [seat]}))
        .await;
    assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.json());
    let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
    let paid = app
        .post(
            &token(account),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some(&format!("pay-{key}")),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{}", paid.json());
    paid.json()["orderId"].as_str().unwrap().to_owned()
}

/// Whether the order is captured and ticketed and the relay delivered every message (so it
/// fanned them out).
async fn settled(app: &TestApp, account: &str, order_id: &str) -> bool {
    let order = app
        .get(&token(account), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    order["paymentStatus"] == "CAPTURED"
        && order["tickets"].as_array().is_some_and(|t| t.len() == 1)
        && app.db.store.outbox_lag_s().await.unwrap() == 0.0
}

async fn create_endpoint(app: &TestApp, key: &str, body: &Value) -> common::Answer {
    app.post(&app.admin, "/v1/admin/webhooks", Some(key), body)
        .await
}

async fn deliveries(app: &TestApp, endpoint_id: &str, query: &str) -> Value {
    let answer = app
        .get(
            &app.admin,
            &format!("/v1/admin/webhooks/{endpoint_id}/deliveries{query}"),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    answer.json()
}

/// The delivery of `event_id` in the endpoint's log.
async fn delivery_of(app: &TestApp, endpoint_id: &str, event_id: &str) -> Value {
    let page = deliveries(app, endpoint_id, "?limit=100").await;
    page["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["eventId"] == event_id)
        .cloned()
        .unwrap_or_else(|| panic!("no delivery of event {event_id}: {page}"))
}

async fn webhooks_arrive_once_signed_are_retried_after_a_failure_and_replayed(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (receiver, url) = Receiver::spawn().await;
    let body =
        json!({"url": url, "eventTypes": ["order.confirmed", "tickets.issued", "order.confirmed"]});
    let created = create_endpoint(&app, "hook-1", &body).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let endpoint = created.json();
    let endpoint_id = endpoint["endpointId"].as_str().unwrap().to_owned();
    let secret = endpoint["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"), "{endpoint}");
    assert_eq!(
        endpoint["eventTypes"],
        json!(["order.confirmed", "tickets.issued"])
    );
    // A retry of the key answers the same endpoint; the key with another body is refused.
    let again = create_endpoint(&app, "hook-1", &body).await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.json()["endpointId"], endpoint_id.as_str());
    let other = create_endpoint(
        &app,
        "hook-1",
        &json!({"url": url, "eventTypes": ["refund.due"]}),
    )
    .await;
    assert_eq!(other.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(other.code(), "IDEMPOTENCY_KEY_REUSED");
    // The secret is never shown again.
    let read = app
        .get(&app.admin, &format!("/v1/admin/webhooks/{endpoint_id}"))
        .await;
    assert_eq!(read.status, StatusCode::OK);
    assert!(read.json().get("secret").is_none(), "{}", read.json());
    let listed = app.get(&app.admin, "/v1/admin/webhooks").await.json();
    assert_eq!(listed["endpoints"].as_array().unwrap().len(), 1);
    assert!(listed["endpoints"][0].get("secret").is_none());

    // A sale: its confirmation and its tickets, each delivered once, signed.
    let event_id = app.create_event(json!({})).await;
    let order_a = buy(&app, "ann", &event_id, "A-1-1").await;
    let of_order = |order_id: &str, kind: &str, r: &Receiver| {
        r.delivered()
            .iter()
            .filter(|(_, t, data)| t == kind && data["orderId"] == order_id)
            .count()
    };
    send_until(&app, &receiver, |r| {
        of_order(&order_a, "order.confirmed", r) >= 1
            && of_order(&order_a, "tickets.issued", r) >= 1
    })
    .await;
    for request in receiver.requests() {
        assert!(
            signature_verifies(&secret, &request.signature, &request.body),
            "signature {} of {}",
            request.signature,
            String::from_utf8_lossy(&request.body)
        );
        assert!(!signature_verifies(
            "whsec_other",
            &request.signature,
            &request.body
        ));
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        assert_eq!(body["id"], request.event_id.as_str());
        assert!(body["createdAt"].is_string(), "{body}");
    }
    let confirmed_a = receiver
        .delivered()
        .into_iter()
        .find(|(_, t, data)| t == "order.confirmed" && data["orderId"] == order_a.as_str())
        .unwrap()
        .0;

    // Failing endpoint: the next sale's confirmation is attempted, refused, and kept.
    receiver.fail(true);
    let order_b = buy(&app, "bob", &event_id, "A-1-2").await;
    let failed_attempt = |r: &Receiver| {
        r.requests().iter().any(|q| {
            let body: Value = serde_json::from_slice(&q.body).unwrap();
            q.answered == 500
                && body["type"] == "order.confirmed"
                && body["data"]["orderId"] == order_b.as_str()
        })
    };
    send_until(&app, &receiver, failed_attempt).await;
    let event_b = receiver
        .requests()
        .iter()
        .find(|q| {
            let body: Value = serde_json::from_slice(&q.body).unwrap();
            q.answered == 500
                && body["type"] == "order.confirmed"
                && body["data"]["orderId"] == order_b.as_str()
        })
        .unwrap()
        .event_id
        .clone();
    let pending = delivery_of(&app, &endpoint_id, &event_b).await;
    assert_eq!(pending["status"], "PENDING", "{pending}");
    assert!(pending["attempts"].as_u64().unwrap() >= 1, "{pending}");
    assert_eq!(pending["lastStatusCode"], 500, "{pending}");

    // It recovers; once the backoff's deadline passed (the store's clock moved past it), the
    // retry arrives, once.
    receiver.fail(false);
    app.db.advance_clock(3_600_000).await;
    send_until(&app, &receiver, |r| {
        of_order(&order_b, "order.confirmed", r) >= 1
            && of_order(&order_b, "tickets.issued", r) >= 1
    })
    .await;
    let delivered = delivery_of(&app, &endpoint_id, &event_b).await;
    assert_eq!(delivered["status"], "DELIVERED", "{delivered}");
    assert_eq!(delivered["lastStatusCode"], 200, "{delivered}");
    assert!(delivered["deliveredAt"].is_string(), "{delivered}");

    // Exactly once per event id so far, whatever the rounds: more rounds send nothing new,
    // and fanning the same events out again makes no delivery.
    for _ in 0..3 {
        let report = app.state.webhooks.run_once().await.unwrap();
        assert_eq!(report.claimed, 0, "{report:?}");
    }
    let log = deliveries(&app, &endpoint_id, "?limit=100").await;
    let again: Vec<boxoffice_store::webhook::WebhookEvent> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| boxoffice_store::webhook::WebhookEvent {
            event_id: d["eventId"].as_str().unwrap().parse().unwrap(),
            event_type: d["eventType"].as_str().unwrap().to_owned(),
            payload: d["data"].to_string(),
            created_at: boxoffice_domain::OffsetDateTime::now_utc(),
        })
        .collect();
    assert!(again.len() >= 4, "{log}");
    assert_eq!(app.db.store.fan_out_webhooks(&again).await.unwrap(), 0);
    let mut ids: Vec<String> = receiver.delivered().into_iter().map(|d| d.0).collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        n,
        "an event id delivered twice: {:?}",
        receiver.requests()
    );
    assert_eq!(
        of_order(&order_a, "order.confirmed", &receiver),
        1,
        "{:?}",
        receiver.requests()
    );
    assert_eq!(of_order(&order_b, "order.confirmed", &receiver), 1);

    // The log, newest first, in pages.
    let first = deliveries(&app, &endpoint_id, "?limit=1").await;
    let next = first["nextBefore"].as_i64().expect("a next page");
    let second = deliveries(&app, &endpoint_id, &format!("?limit=1&before={next}")).await;
    assert!(
        second["deliveries"][0]["deliveryId"].as_i64().unwrap()
            < first["deliveries"][0]["deliveryId"].as_i64().unwrap()
    );

    // A replay sends the same event id again.
    let replayed_delivery = delivery_of(&app, &endpoint_id, &confirmed_a).await;
    let delivery_id = replayed_delivery["deliveryId"].as_i64().unwrap();
    let replay = app
        .post(
            &app.admin,
            &format!("/v1/admin/webhooks/{endpoint_id}/deliveries/{delivery_id}/replay"),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(replay.status, StatusCode::OK, "{}", replay.json());
    assert_eq!(replay.json()["status"], "PENDING");
    assert_eq!(replay.json()["eventId"], confirmed_a.as_str());
    send_until(&app, &receiver, |r| {
        r.delivered().iter().filter(|d| d.0 == confirmed_a).count() == 2
    })
    .await;
    let replayed: Vec<Received> = receiver
        .requests()
        .into_iter()
        .filter(|r| r.event_id == confirmed_a)
        .collect();
    assert_eq!(replayed.len(), 2);
    assert_eq!(
        replayed[0].body, replayed[1].body,
        "the same event, byte for byte"
    );
    assert!(signature_verifies(
        &secret,
        &replayed[1].signature,
        &replayed[1].body
    ));
    assert_eq!(
        delivery_of(&app, &endpoint_id, &confirmed_a).await["status"],
        "DELIVERED"
    );
    app.finish().await;
}

async fn a_disabled_endpoint_gets_nothing_and_bad_requests_are_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (receiver, url) = Receiver::spawn().await;
    let created = create_endpoint(
        &app,
        "hook-off",
        &json!({"url": url, "eventTypes": ["order.confirmed"]}),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let endpoint_id = created.json()["endpointId"].as_str().unwrap().to_owned();
    let path = format!("/v1/admin/webhooks/{endpoint_id}");
    let disabled = app
        .send(
            app.http
                .patch(format!("{}{path}", app.base))
                .bearer_auth(&app.admin)
                .json(&json!({"enabled": false})),
        )
        .await;
    assert_eq!(disabled.status, StatusCode::OK);
    assert_eq!(disabled.json()["enabled"], false);
    // A sale while it is disabled: no delivery is made for it, none is sent.
    let event_id = app.create_event(json!({})).await;
    let order_id = buy(&app, "cat", &event_id, "A-2-1").await;
    // Until the relay delivered every message of the sale (its confirmation among them) and
    // so fanned them out.
    for _ in 0..200 {
        if settled(&app, "cat", &order_id).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        settled(&app, "cat", &order_id).await,
        "the sale's messages were never all delivered"
    );
    app.state.webhooks.run_once().await.unwrap();
    assert!(receiver.requests().is_empty(), "{:?}", receiver.requests());
    let log = deliveries(&app, &endpoint_id, "").await;
    assert_eq!(log["deliveries"], json!([]), "{log}");

    // Refusals: 4xx, never 5xx (TestApp::send fails the test on any 5xx).
    for (body, field) in [
        (
            json!({"url": "ftp://example.com/", "eventTypes": ["order.confirmed"]}),
            "url",
        ),
        (
            json!({"url": "http://[", "eventTypes": ["order.confirmed"]}),
            "url",
        ),
        (
            json!({"url": "https://example.com/", "eventTypes": []}),
            "eventTypes",
        ),
        (
            json!({"url": "https://example.com/", "eventTypes": ["hold.created"]}),
            "eventTypes",
        ),
        (
            json!({"url": format!("https://example.com/{}", "a".repeat(2048)), "eventTypes": ["refund.due"]}),
            "url",
        ),
    ] {
        let key = format!("bad-{}", uuid::Uuid::now_v7());
        let refused = create_endpoint(&app, &key, &body).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(refused.code(), "VALIDATION");
        assert!(
            refused.json()["field"].as_str().unwrap().starts_with(field),
            "{}",
            refused.json()
        );
    }
    let no_key = app
        .post(
            &app.admin,
            "/v1/admin/webhooks",
            None,
            &json!({"url": "https://example.com/", "eventTypes": ["refund.due"]}),
        )
        .await;
    assert_eq!(no_key.status, StatusCode::BAD_REQUEST);
    let fan = app
        .post(
            &token("cat"),
            "/v1/admin/webhooks",
            Some("fan-key"),
            &json!({"url": "https://example.com/", "eventTypes": ["refund.due"]}),
        )
        .await;
    assert_eq!(fan.status, StatusCode::FORBIDDEN);
    for missing in [
        "/v1/admin/webhooks/no-such-endpoint".to_owned(),
        "/v1/admin/webhooks/no-such-endpoint/deliveries".to_owned(),
    ] {
        assert_eq!(
            app.get(&app.admin, &missing).await.status,
            StatusCode::NOT_FOUND
        );
    }
    for delivery in ["1", "0", "x", "99999999999999999999"] {
        let replay = app
            .post(
                &app.admin,
                &format!("{path}/deliveries/{delivery}/replay"),
                None,
                &json!({}),
            )
            .await;
        assert_eq!(replay.status, StatusCode::NOT_FOUND, "{delivery}");
    }
    let bad_limit = app
        .get(&app.admin, &format!("{path}/deliveries?limit=0"))
        .await;
    assert_eq!(bad_limit.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Deleted: gone, with its log.
    assert_eq!(
        app.delete(&app.admin, &path).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        app.get(&app.admin, &path).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.delete(&app.admin, &path).await.status,
        StatusCode::NOT_FOUND
    );
    app.finish().await;
}
