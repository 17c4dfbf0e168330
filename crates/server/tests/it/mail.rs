//! Fans' mail stories over HTTP on both backends (issue 39), against a real SMTP server the
//! test starts (Python's aiosmtpd, with a handler that stores every message it accepts and
//! can refuse): a purchase sends exactly one mail to the address of the buyer's token, with
//! a text and an HTML part and the PDF tickets (read back with pdftotext: the seat is on
//! it; zbarimg reads the ticket's code from its QR); the relay delivering the same outbox message again sends no second mail; an
//! exchange sends the new tickets; a German account's mail is in German; a server that
//! answers 451 then 250 gets the mail once after the backoff (the store's clock moved, not
//! slept), one that answers 550 leaves it FAILED with the reply; the admin lists, serves and
//! resends. The mail sender is driven by the test, one round at a time.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{Backend, TestApp, buy_captured, token, token_with_email};
use boxoffice_delivery::readback::SmtpServer;
use boxoffice_workers::mail::{MailConfig, MailReport};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    a_purchase_mails_the_buyer_once_with_both_parts_and_the_pdf,
    an_exchange_mails_the_new_tickets_and_a_german_account_reads_german,
    a_refusal_for_now_is_retried_and_one_for_good_is_failed,
    the_account_and_the_admin_routes_refuse_bad_requests,
    a_transfer_mails_both_sides_and_a_cancellation_every_holder,
    the_store_moves_a_mail_through_its_states_once,
);

const FROM: &str = "Box Office <tickets@example.org>";

/// A received message read by Python's `email` package: its headers, the content types of
/// its parts, its text and HTML, and its PDF attachments (name and bytes).
#[derive(Debug)]
struct Parsed {
    to: String,
    subject: String,
    message_id: String,
    content_types: Vec<String>,
    text: String,
    html: String,
    pdfs: Vec<(String, Vec<u8>)>,
}

const PARSE: &str = r#"
import sys, json, base64, email
from email import policy
m = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)
out = {"to": str(m["To"]), "subject": str(m["Subject"]), "messageId": str(m["Message-ID"]),
       "types": [], "text": "", "html": "", "pdfs": []}
for part in m.walk():
    out["types"].append(part.get_content_type())
    if part.get_content_type() == "text/plain" and not part.is_attachment():
        out["text"] = part.get_content()
    elif part.get_content_type() == "text/html":
        out["html"] = part.get_content()
    elif part.get_content_type() == "application/pdf":
        out["pdfs"].append([part.get_filename(), base64.b64encode(part.get_content()).decode()])
print(json.dumps(out))
"#;

fn parse(raw: &[u8]) -> Parsed {
    use std::io::Write;
    let mut child = Command::new("python3")
        .args(["-c", PARSE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(raw).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "parsing the mail failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = |name: &str| v[name].as_str().unwrap_or_default().to_owned();
    Parsed {
        to: s("to"),
        subject: s("subject"),
        message_id: s("messageId"),
        content_types: v["types"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_owned())
            .collect(),
        text: s("text"),
        html: s("html"),
        pdfs: v["pdfs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let bytes = base64_decode(p[1].as_str().unwrap());
                (p[0].as_str().unwrap().to_owned(), bytes)
            })
            .collect(),
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, base64; sys.stdout.buffer.write(base64.b64decode(sys.argv[1]))",
        ])
        .arg(text)
        .output()
        .unwrap();
    out.stdout
}

async fn spawn(backend: Backend, smtp: &SmtpServer) -> TestApp {
    TestApp::spawn_with_mail(backend, MailConfig::smtp(smtp.url(), FROM).unwrap()).await
}

/// One round of the mail sender.
async fn mail_round(app: &TestApp) -> MailReport {
    app.state
        .mail
        .as_ref()
        .expect("mail is on")
        .run_once()
        .await
        .expect("a mail round")
}

/// Rounds until `done` holds of the admin's mail list (bounded: 20 s of rounds).
async fn mail_until(app: &TestApp, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut mails = Vec::new();
    for _ in 0..200 {
        mail_round(app).await;
        mails = app.get(&app.admin, "/v1/admin/mail").await.json()["mails"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if done(&mails) {
            return mails;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the mails never reached the expected state: {mails:?}");
}

/// Signs in with a token carrying `email` and waits until the account has it.
async fn sign_in_with_email(app: &TestApp, account: &str, email: &str) {
    let token = token_with_email(account, email);
    for _ in 0..100 {
        let me = app.get(&token, "/v1/me").await;
        assert_eq!(me.status, StatusCode::OK, "{}", me.json());
        if me.json()["email"] == email {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the token's email was never recorded for {account}");
}

fn sql_of(app: &TestApp, postgres: &'static str, sqlite: &'static str) -> &'static str {
    if app.db.pg.is_some() {
        postgres
    } else {
        sqlite
    }
}

/// Makes the relay deliver every `topic` message again, as after a crash before it marked
/// them, and waits until it has.
async fn deliver_again(app: &TestApp, topic: &str) {
    let reset = sql_of(
        app,
        "UPDATE outbox SET published_at = NULL, next_attempt_at = NULL WHERE topic = $1",
        "UPDATE outbox SET published_at = NULL, next_attempt_at = NULL WHERE topic = ?1",
    );
    let pending = sql_of(
        app,
        "SELECT count(*) FROM outbox WHERE topic = $1 AND published_at IS NULL",
        "SELECT count(*) FROM outbox WHERE topic = ?1 AND published_at IS NULL",
    );
    let count = |sql: &'static str| async move {
        if let Some(pg) = app.db.pg.as_ref() {
            sqlx::query(sql)
                .bind(topic)
                .execute(pg.pool())
                .await
                .unwrap()
                .rows_affected() as i64
        } else {
            let pool = app.db.sqlite.as_ref().unwrap().pool();
            sqlx::query(sql)
                .bind(topic)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected() as i64
        }
    };
    assert!(
        count(reset).await >= 1,
        "no {topic} message to deliver again"
    );
    app.state.relay.poke();
    for _ in 0..200 {
        let left: i64 = if let Some(pg) = app.db.pg.as_ref() {
            sqlx::query_scalar(pending)
                .bind(topic)
                .fetch_one(pg.pool())
                .await
                .unwrap()
        } else {
            let pool = app.db.sqlite.as_ref().unwrap().pool();
            sqlx::query_scalar(pending)
                .bind(topic)
                .fetch_one(pool)
                .await
                .unwrap()
        };
        if left == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the relay never delivered {topic} again");
}

fn order_mails<'a>(mails: &'a [Value], kind: &str) -> Vec<&'a Value> {
    mails.iter().filter(|m| m["kind"] == kind).collect()
}

async fn a_purchase_mails_the_buyer_once_with_both_parts_and_the_pdf(backend: Backend) {
    let smtp = SmtpServer::start("accept");
    let app = spawn(backend, &smtp).await;
    sign_in_with_email(&app, "ann", "ann@example.org").await;
    let event_id = app.create_event(json!({})).await;
    // The ticket names its holder (asked before payment): the PDF prints it.
    let held = app
        .hold("ann", &event_id, "h-ann", json!({"seatIds": ["A-1-1"]}))
        .await;
    let hold_id = held.json()["holdId"].as_str().unwrap().to_owned();
    let named = app
        .put(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/holders"),
            &json!({"holders": [{"seatId": "A-1-1", "name": "Ada Lovelace"}]}),
        )
        .await;
    assert_eq!(named.status, StatusCode::OK, "{}", named.json());
    let paid = app
        .post(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some("pay-ann"),
            &json!({"paymentMethodToken": "pm_card_visa"}),
        )
        .await;
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order = common::order_until(&app, "ann", &order_id, |o| {
        o["paymentStatus"] == "CAPTURED" && o["tickets"].as_array().is_some_and(|t| t.len() == 1)
    })
    .await;
    let tickets = order["tickets"].as_array().unwrap().clone();

    let mails = mail_until(&app, |mails| {
        order_mails(mails, "ORDER_TICKETS")
            .first()
            .is_some_and(|m| m["status"] == "SENT")
    })
    .await;
    let mail = order_mails(&mails, "ORDER_TICKETS")[0].clone();
    assert_eq!(mail["to"], "ann@example.org");
    assert_eq!(mail["accountId"], "ann");
    assert_eq!(mail["attempts"], 1);
    let received = smtp.received();
    assert_eq!(received.len(), 1, "exactly one mail reached the server");
    let parsed = parse(&received[0]);
    assert_eq!(parsed.to, "ann@example.org");
    assert_eq!(
        parsed.message_id,
        format!("<boxoffice-mail-{}@example.org>", mail["mailId"])
    );
    assert_eq!(Some(parsed.subject.as_str()), mail["subject"].as_str());
    assert!(
        parsed.subject.starts_with("Your tickets for "),
        "{}",
        parsed.subject
    );
    for part in [
        "multipart/mixed",
        "multipart/alternative",
        "text/plain",
        "text/html",
        "application/pdf",
    ] {
        assert!(
            parsed.content_types.iter().any(|t| t == part),
            "{part}: {:?}",
            parsed.content_types
        );
    }
    assert!(parsed.text.contains(&order_id), "{}", parsed.text);
    assert!(parsed.text.contains("Seat A-1-1"), "{}", parsed.text);
    assert!(parsed.html.contains("<li>Seat A-1-1"), "{}", parsed.html);
    let (name, pdf) = &parsed.pdfs[0];
    assert_eq!(name, &format!("tickets-{order_id}.pdf"));
    let text = boxoffice_delivery::readback::pdf_text(pdf);
    assert!(text.contains("A-1-1"), "the seat on the PDF: {text}");
    assert!(
        text.contains("Ada Lovelace"),
        "the holder on the PDF: {text}"
    );
    // Its QR code (zbarimg) is the ticket's code.
    let codes = boxoffice_delivery::readback::pdf_qr_codes(pdf);
    assert_eq!(
        codes,
        vec![vec![tickets[0]["code"].as_str().unwrap().to_owned()]]
    );

    // The relay delivers the same message again (as after a crash before it marked it):
    // no second mail is made, none is sent.
    deliver_again(&app, "tickets.issue").await;
    for _ in 0..3 {
        let report = mail_round(&app).await;
        assert_eq!(report.claimed, 0, "{report:?}");
    }
    let mails = app.get(&app.admin, "/v1/admin/mail").await.json();
    assert_eq!(
        order_mails(mails["mails"].as_array().unwrap(), "ORDER_TICKETS").len(),
        1
    );
    assert_eq!(smtp.received().len(), 1);

    // A sent mail is not sent again on request.
    let resend = app
        .post(
            &app.admin,
            &format!("/v1/admin/mail/{}/resend", mail["mailId"]),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(
        (resend.status, resend.code().as_str()),
        (StatusCode::CONFLICT, "NOT_RESENDABLE")
    );
    // Folder mode is off: no file to serve.
    let file = app
        .get(
            &app.admin,
            &format!("/v1/admin/mail/{}.eml", mail["mailId"]),
        )
        .await;
    assert_eq!(file.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

async fn an_exchange_mails_the_new_tickets_and_a_german_account_reads_german(backend: Backend) {
    let smtp = SmtpServer::start("accept");
    let app = spawn(backend, &smtp).await;
    sign_in_with_email(&app, "ann", "ann@example.org").await;
    // Bob sets his own address and language; a later token claim does not overwrite it.
    let me = app
        .send(
            app.http
                .put(format!("{}/v1/me", app.base))
                .bearer_auth(token("bob"))
                .json(&json!({"email": "bob@example.de", "locale": "de"})),
        )
        .await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.json());
    assert_eq!(
        me.json(),
        json!({"accountId": "bob", "email": "bob@example.de", "locale": "de"})
    );
    let _ = app
        .get(&token_with_email("bob", "other@example.org"), "/v1/me")
        .await;

    let event_id = app.create_event(json!({})).await;
    let (order_id, _) = buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-3-1"]})).await;
    let done = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/exchanges"),
            Some("x1"),
            &json!({"fromSeatIds": ["A-1-1"], "toSeatIds": ["A-2-1"]}),
        )
        .await;
    assert_eq!(done.status, StatusCode::CREATED, "{}", done.json());
    let new_order_id = done.json()["newOrderId"].as_str().unwrap().to_owned();

    let mails = mail_until(&app, |mails| {
        mails.len() == 3 && mails.iter().all(|m| m["status"] == "SENT")
    })
    .await;
    let received: Vec<Parsed> = smtp.received().iter().map(|m| parse(m)).collect();
    assert_eq!(
        received.len(),
        3,
        "one mail per order and one for the exchange"
    );

    let exchange = order_mails(&mails, "EXCHANGE_TICKETS");
    assert_eq!(exchange.len(), 1);
    let exchanged = received
        .iter()
        .find(|m| Some(m.subject.as_str()) == exchange[0]["subject"].as_str())
        .expect("the exchange's mail");
    assert!(
        exchanged.subject.starts_with("Your new tickets for "),
        "{}",
        exchanged.subject
    );
    assert!(exchanged.text.contains("Seat A-2-1"), "{}", exchanged.text);
    assert!(!exchanged.text.contains("Seat A-1-1"), "{}", exchanged.text);
    assert_eq!(exchanged.pdfs[0].0, format!("tickets-{new_order_id}.pdf"));

    let german = received
        .iter()
        .find(|m| m.to == "bob@example.de")
        .expect("bob's mail, at the address he set");
    assert!(
        german.subject.starts_with("Ihre Tickets für "),
        "{}",
        german.subject
    );
    assert!(german.text.contains("Platz A-3-1"), "{}", german.text);
    assert!(german.html.contains("lang=\"de\""));
    app.finish().await;
}

async fn a_refusal_for_now_is_retried_and_one_for_good_is_failed(backend: Backend) {
    // 451 to the first attempt, 250 to the next.
    let smtp = SmtpServer::start("451-once");
    let app = spawn(backend, &smtp).await;
    sign_in_with_email(&app, "ann", "ann@example.org").await;
    let event_id = app.create_event(json!({})).await;
    buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    let mails = mail_until(&app, |mails| {
        mails
            .first()
            .is_some_and(|m| m["status"] == "PENDING" && m["attempts"] == 1)
    })
    .await;
    assert!(
        mails[0]["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("451"),
        "{mails:?}"
    );
    assert!(smtp.received().is_empty());
    // Not due before its backoff; due once the store's clock passed it.
    assert_eq!(mail_round(&app).await.claimed, 0);
    app.db.advance_clock(10_000).await;
    let mails = mail_until(&app, |mails| mails[0]["status"] == "SENT").await;
    assert_eq!(mails[0]["attempts"], 2);
    assert_eq!(smtp.received().len(), 1);
    app.finish().await;

    // 550: refused for good, the reply kept; an operator may queue it again.
    let smtp = SmtpServer::start("550");
    let app = spawn(backend, &smtp).await;
    sign_in_with_email(&app, "ann", "ann@example.org").await;
    let event_id = app.create_event(json!({})).await;
    buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    let mails = mail_until(&app, |mails| {
        mails.first().is_some_and(|m| m["status"] == "FAILED")
    })
    .await;
    assert!(
        mails[0]["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("mailbox unavailable"),
        "{mails:?}"
    );
    assert!(smtp.received().is_empty());
    let failed = app
        .get(&app.admin, "/v1/admin/mail?status=FAILED&limit=10")
        .await
        .json();
    assert_eq!(failed["mails"].as_array().unwrap().len(), 1);
    let resend = app
        .post(
            &app.admin,
            &format!("/v1/admin/mail/{}/resend", mails[0]["mailId"]),
            None,
            &json!({}),
        )
        .await;
    assert_eq!(resend.status, StatusCode::OK, "{}", resend.json());
    assert_eq!(resend.json()["status"], "PENDING");
    assert_eq!(resend.json()["attempts"], 0);
    app.finish().await;

    // A fan without an address: NO_ADDRESS, nothing sent.
    let smtp = SmtpServer::start("accept");
    let app = spawn(backend, &smtp).await;
    let event_id = app.create_event(json!({})).await;
    buy_captured(&app, "cat", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    mail_until(&app, |mails| {
        mails.first().is_some_and(|m| m["status"] == "NO_ADDRESS")
    })
    .await;
    assert!(smtp.received().is_empty());
    app.finish().await;
}

/// The mail of `kind` to `account`, as the admin lists it.
fn mail_to<'a>(mails: &'a [Value], kind: &str, account: &str) -> Option<&'a Value> {
    mails
        .iter()
        .find(|m| m["kind"] == kind && m["accountId"] == account)
}

async fn a_transfer_mails_both_sides_and_a_cancellation_every_holder(backend: Backend) {
    let smtp = SmtpServer::start("accept");
    let app = spawn(backend, &smtp).await;
    sign_in_with_email(&app, "ann", "ann@example.org").await;
    sign_in_with_email(&app, "bob", "bob@example.org").await;
    let event_id = app.create_event(json!({})).await;
    let (order_id, tickets) = buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-1-1", "A-1-2"]}),
    )
    .await;
    let given = tickets.iter().find(|t| t["seatId"] == "A-1-1").unwrap();
    let offered = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/transfers"),
            Some("give-1"),
            &json!({"ticketIds": [given["ticketId"]], "toAccountId": "bob"}),
        )
        .await;
    assert_eq!(offered.status, StatusCode::CREATED, "{}", offered.json());
    let transfer_id = offered.json()["transferId"].as_str().unwrap().to_owned();
    // The offer is mailed to the receiver before they accept.
    mail_until(&app, |mails| {
        mail_to(mails, "TRANSFER_OFFERED", "bob").is_some_and(|m| m["status"] == "SENT")
    })
    .await;
    let accepted = app
        .post(
            &token("bob"),
            &format!("/v1/transfers/{transfer_id}/accept"),
            Some("accept-1"),
            &json!({}),
        )
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.json());
    let mails = mail_until(&app, |mails| {
        ["TRANSFER_RECEIVED", "TRANSFER_SENT"].iter().all(|kind| {
            mails
                .iter()
                .any(|m| m["kind"] == *kind && m["status"] == "SENT")
        })
    })
    .await;
    assert!(
        mail_to(&mails, "TRANSFER_RECEIVED", "bob").is_some(),
        "{mails:?}"
    );
    assert!(
        mail_to(&mails, "TRANSFER_SENT", "ann").is_some(),
        "{mails:?}"
    );
    let received: Vec<Parsed> = smtp.received().iter().map(|m| parse(m)).collect();
    let to_bob = received
        .iter()
        .find(|m| m.to == "bob@example.org" && m.subject.contains("were transferred to you"))
        .expect("the receiver's mail");
    assert!(
        to_bob.text.contains("ann transferred tickets to you"),
        "{}",
        to_bob.text
    );
    assert!(to_bob.text.contains("Seat A-1-1"), "{}", to_bob.text);
    assert_eq!(to_bob.pdfs.len(), 1, "the receiver's tickets as a PDF");

    // Another event is cancelled: every account whose tickets it voided is told once, and
    // each paid order's refund is mailed to its owner. (Another event: cancelling one whose
    // tickets were transferred trips `boxoffice check`'s I11 on the receiver's order, which
    // is not the mail's to judge.)
    let event_id = app.create_event(json!({})).await;
    buy_captured(&app, "ann", &event_id, json!({"seatIds": ["A-1-1"]})).await;
    buy_captured(&app, "bob", &event_id, json!({"seatIds": ["A-1-2"]})).await;
    let cancelled = app
        .post(
            &app.admin,
            &format!("/v1/admin/events/{event_id}/cancel"),
            Some("cancel-1"),
            &json!({"reason": "storm"}),
        )
        .await;
    assert!(cancelled.status.is_success(), "{}", cancelled.json());
    let mails = mail_until(&app, |mails| {
        ["ann", "bob"].iter().all(|account| {
            mail_to(mails, "EVENT_CANCELLED", account).is_some_and(|m| m["status"] == "SENT")
        }) && ["ann", "bob"].iter().all(|account| {
            mail_to(mails, "REFUND_SUCCEEDED", account).is_some_and(|m| m["status"] == "SENT")
        })
    })
    .await;
    let cancellations = mails
        .iter()
        .filter(|m| m["kind"] == "EVENT_CANCELLED")
        .count();
    assert_eq!(cancellations, 2, "one per holder, once: {mails:?}");
    let refund = received_with(&smtp, "ann@example.org", "Your refund for ");
    assert!(refund.text.contains("EUR"), "{}", refund.text);
    app.finish().await;
}

/// The one received mail to `to` whose subject starts with `subject`.
fn received_with(smtp: &SmtpServer, to: &str, subject: &str) -> Parsed {
    let mut found: Vec<Parsed> = smtp
        .received()
        .iter()
        .map(|m| parse(m))
        .filter(|m| m.to == to && m.subject.starts_with(subject))
        .collect();
    assert_eq!(found.len(), 1, "one mail to {to} starting {subject:?}");
    found.remove(0)
}

async fn the_account_and_the_admin_routes_refuse_bad_requests(backend: Backend) {
    let smtp = SmtpServer::start("accept");
    let app = spawn(backend, &smtp).await;
    let put = |body: Value| {
        app.send(
            app.http
                .put(format!("{}/v1/me", app.base))
                .bearer_auth(token("ann"))
                .json(&body),
        )
    };
    let long = format!("{}@example.org", "a".repeat(250));
    for (body, field) in [
        (json!({"email": "not an address"}), "email"),
        (json!({"email": "ann@"}), "email"),
        (json!({"email": "a@b@c"}), "email"),
        (json!({"email": long}), "email"),
        (json!({"locale": "xx"}), "locale"),
        (json!({"locale": 5}), "locale"),
        (json!({"nickname": "ann"}), "body"),
    ] {
        let refused = put(body.clone()).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(refused.code(), "VALIDATION", "{body}");
        let named = refused.json()["field"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(named.contains(field) || field == "body", "{body}: {named}");
    }
    let me = app.get(&token("ann"), "/v1/me").await;
    assert_eq!(me.json(), json!({"accountId": "ann"}));
    let unauthenticated = app.send(app.http.get(format!("{}/v1/me", app.base))).await;
    assert_eq!(unauthenticated.status, StatusCode::UNAUTHORIZED);

    assert_eq!(
        app.get(&token("ann"), "/v1/admin/mail").await.status,
        StatusCode::FORBIDDEN
    );
    for query in [
        "status=LOST",
        "limit=0",
        "limit=201",
        "before=0",
        "colour=red",
    ] {
        let refused = app
            .get(&app.admin, &format!("/v1/admin/mail?{query}"))
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{query}");
    }
    for path in [
        "/v1/admin/mail/999/resend",
        "/v1/admin/mail/x/resend",
        "/v1/admin/mail/-1/resend",
    ] {
        let missing = app.post(&app.admin, path, None, &json!({})).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{path}");
    }
    for path in [
        "/v1/admin/mail/1.eml",
        "/v1/admin/mail/..%2Fetc.eml",
        "/v1/admin/mail/1.txt",
    ] {
        assert_eq!(
            app.get(&app.admin, path).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    app.finish().await;
}

/// The store's side alone: a fan-out is once per (message, account); a claim is `SENDING`
/// with the account's address; a lapsed claim is `UNCERTAIN` and no outcome but the
/// server's acceptance is recorded on it; a resend only of what cannot be going out; a
/// token's address never overwrites the fan's.
async fn the_store_moves_a_mail_through_its_states_once(backend: Backend) {
    use boxoffice_store::mail::{AccountUpdate, MailOutcome, MailStatus, NewMail, Resent};
    let db = common::TestStore::new(backend).await;
    let store = db.store.clone();
    assert!(
        store
            .record_token_email("ann", "ann@token.org")
            .await
            .unwrap()
    );
    assert!(
        !store
            .record_token_email("ann", "ann@token.org")
            .await
            .unwrap()
    );
    store
        .update_account(
            "ann",
            &AccountUpdate {
                email: Some("ann@fan.org".into()),
                locale: Some("fr".into()),
            },
        )
        .await
        .unwrap();
    assert!(
        !store
            .record_token_email("ann", "ann@other.org")
            .await
            .unwrap()
    );
    let ann = store.get_account("ann").await.unwrap().unwrap();
    assert_eq!(
        (ann.email.as_deref(), ann.locale.as_deref()),
        (Some("ann@fan.org"), Some("fr"))
    );

    let mail = |outbox_id: i64, account: &str| NewMail {
        outbox_id,
        account_id: account.into(),
        kind: "EVENT_CANCELLED".into(),
        payload: "{}".into(),
    };
    assert_eq!(
        store
            .fan_out_mail(&[mail(7, "ann"), mail(7, "bob")])
            .await
            .unwrap(),
        2
    );
    assert_eq!(
        store
            .fan_out_mail(&[mail(7, "ann"), mail(8, "ann")])
            .await
            .unwrap(),
        1
    );

    let claimed = store.claim_mail(10, 1.0).await.unwrap();
    assert_eq!(claimed.len(), 3);
    assert!(
        claimed
            .iter()
            .all(|c| c.mail.status == MailStatus::Sending && c.mail.n_attempts == 1)
    );
    let to_ann = claimed.iter().find(|c| c.mail.account_id == "ann").unwrap();
    assert_eq!(to_ann.mail.to_address.as_deref(), Some("ann@fan.org"));
    assert_eq!(to_ann.locale.as_deref(), Some("fr"));
    let to_bob = claimed.iter().find(|c| c.mail.account_id == "bob").unwrap();
    assert_eq!(to_bob.mail.to_address, None);
    assert!(
        store.claim_mail(10, 1.0).await.unwrap().is_empty(),
        "claimed once"
    );

    // Nothing lapses before its lease; after it, every claim left SENDING is UNCERTAIN.
    assert_eq!(store.expire_mail_leases().await.unwrap(), 0);
    let sent = claimed[0].mail.mail_id;
    assert!(
        store
            .record_mail(
                sent,
                &MailOutcome::Sent {
                    subject: "s".into()
                }
            )
            .await
            .unwrap()
    );
    db.advance_clock(2_000).await;
    assert_eq!(store.expire_mail_leases().await.unwrap(), 2);
    let uncertain = claimed[1].mail.mail_id;
    let retry = MailOutcome::Retry {
        error: "451".into(),
        retry_in_s: Some(5.0),
    };
    assert!(
        !store.record_mail(uncertain, &retry).await.unwrap(),
        "an UNCERTAIN mail is not retried"
    );
    assert!(
        store.claim_mail(10, 1.0).await.unwrap().is_empty(),
        "nor claimed"
    );
    assert!(
        store
            .record_mail(
                uncertain,
                &MailOutcome::Sent {
                    subject: "late".into()
                }
            )
            .await
            .unwrap()
    );
    assert_eq!(
        store.get_mail(uncertain).await.unwrap().unwrap().status,
        MailStatus::Sent
    );

    let third = claimed[2].mail.mail_id;
    assert!(matches!(
        store.resend_mail(sent).await.unwrap(),
        Some(Resent::NotResendable(_))
    ));
    assert!(store.resend_mail(9_999).await.unwrap().is_none());
    match store.resend_mail(third).await.unwrap() {
        Some(Resent::Queued(mail)) => {
            assert_eq!((mail.status, mail.n_attempts), (MailStatus::Pending, 0))
        }
        other => panic!("{other:?}"),
    }
    let listed = store
        .list_mail(Some(MailStatus::Sent), None, 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].mail_id > listed[1].mail_id, "newest first");
    db.cleanup().await;
}
