//! What a fan takes home, over HTTP on both backends: the order's PDF read back with poppler
//! and zbar (its seats printed, its QR codes the tickets' codes), the Apple pass verified by
//! `openssl smime`, the Google link's JWT verified with the key's public half; another
//! account gets 404 on all three, an order without tickets 409, a server without wallet keys
//! 409 `WALLET_NOT_CONFIGURED`, and a voided ticket's documents say so.

use crate::common;

use std::sync::{Arc, LazyLock};

use crate::common::{Backend, TestApp, token};
use boxoffice_delivery::apple::{ApplePassSigner, PassCertificate, self_signed_pass_certificate};
use boxoffice_delivery::google::{
    GoogleWalletIssuer, generate_service_account_key, service_account_public_pem, verify_save_jwt,
};
use boxoffice_delivery::readback::{check_pkpass, pdf_qr_codes, pdf_text};
use boxoffice_server::WalletConfig;
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    the_owner_gets_a_pdf_whose_codes_scan_back,
    another_account_gets_404_everywhere,
    an_order_without_tickets_has_no_pdf,
    the_apple_pass_verifies_and_the_google_link_names_the_ticket,
    a_voided_ticket_says_so_everywhere,
    without_wallet_keys_the_wallet_routes_say_so,
);

const ISSUER_ID: &str = "3388000000022222228";

/// One pass certificate and one Google key for every app of this test binary (RSA key
/// generation is the slow part).
struct Keys {
    certificate: PassCertificate,
    google_key_json: String,
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| Keys {
    certificate: self_signed_pass_certificate("pass.test.boxoffice", "TEAM123456", "Story")
        .unwrap(),
    google_key_json: generate_service_account_key("w@story-test.iam.gserviceaccount.com").unwrap(),
});

fn wallet() -> WalletConfig {
    let keys = &*KEYS;
    WalletConfig {
        apple: Some(Arc::new(
            ApplePassSigner::from_pem(
                "pass.test.boxoffice",
                "TEAM123456",
                "Story",
                keys.certificate.certificate_pem.as_bytes(),
                keys.certificate.key_pem.as_bytes(),
                None,
            )
            .unwrap(),
        )),
        google: Some(Arc::new(
            GoogleWalletIssuer::from_key_json(
                ISSUER_ID,
                "Story",
                keys.google_key_json.as_bytes(),
                vec![common::CORS_ORIGIN.into()],
            )
            .unwrap(),
        )),
    }
}

async fn get_with(
    app: &TestApp,
    account: &str,
    path: &str,
    accept_language: Option<&str>,
) -> common::Answer {
    let mut request = app
        .http
        .get(format!("{}{path}", app.base))
        .bearer_auth(token(account));
    if let Some(language) = accept_language {
        request = request.header("accept-language", language);
    }
    app.send(request).await
}

/// ann buys two seats; (order id, tickets).
async fn two_seats(app: &TestApp) -> (String, String, Vec<Value>) {
    let event_id = app.create_event(json!({"name": "Delivery Night"})).await;
    let (order_id, tickets) = common::buy_captured(
        app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-3-1", "A-3-2"]}),
    )
    .await;
    (event_id, order_id, tickets)
}

async fn the_owner_gets_a_pdf_whose_codes_scan_back(backend: Backend) {
    let app = TestApp::spawn_with_wallet(backend, wallet()).await;
    let (_, order_id, tickets) = two_seats(&app).await;
    let pdf = get_with(
        &app,
        "ann",
        &format!("/v1/orders/{order_id}/tickets.pdf"),
        None,
    )
    .await;
    assert_eq!(
        pdf.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&pdf.bytes)
    );
    assert_eq!(pdf.headers["content-type"], "application/pdf");
    let text = pdf_text(&pdf.bytes);
    assert!(text.contains("Delivery Night"), "{text}");
    assert!(text.contains("January 1, 2027, 20:00 (UTC)"), "{text}");
    let pages: Vec<&str> = text
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .collect();
    assert_eq!(pages.len(), 2, "{text}");
    let codes = pdf_qr_codes(&pdf.bytes);
    assert_eq!(codes.len(), pages.len(), "{codes:?}");
    for (page, (printed, codes)) in pages.iter().zip(&codes).enumerate() {
        let ticket = tickets
            .iter()
            .find(|t| printed.contains(t["ticketId"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("page {page} names no ticket: {printed}"));
        let seat = ticket["seatId"].as_str().unwrap();
        assert!(printed.contains(&format!("Seat {seat}")), "{printed}");
        assert!(printed.contains(&order_id), "{printed}");
        assert_eq!(codes, &vec![ticket["code"].as_str().unwrap().to_owned()]);
    }

    // The language: `?lang=` first, then Accept-Language; an unknown one is a 422.
    let path = format!("/v1/orders/{order_id}/tickets.pdf");
    let german = get_with(&app, "ann", &path, Some("de-CH, de;q=0.9, en;q=0.5")).await;
    assert_eq!(german.status, StatusCode::OK);
    assert!(pdf_text(&german.bytes).contains("Platz A-3-"));
    let spanish = get_with(&app, "ann", &format!("{path}?lang=es"), Some("de")).await;
    assert!(pdf_text(&spanish.bytes).contains("Asiento A-3-"));
    // The same bytes under a type a client generator maps, when asked for.
    let generic = app
        .send(
            app.http
                .get(format!("{}{path}", app.base))
                .bearer_auth(token("ann"))
                .header("accept", "application/octet-stream"),
        )
        .await;
    assert_eq!(generic.headers["content-type"], "application/octet-stream");
    assert!(generic.bytes.starts_with(b"%PDF-"));
    let unknown = get_with(&app, "ann", &format!("{path}?lang=tlh"), None).await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unknown.code(), "VALIDATION");
    assert_eq!(unknown.json()["field"], "lang");
    app.finish().await;
}

async fn another_account_gets_404_everywhere(backend: Backend) {
    let app = TestApp::spawn_with_wallet(backend, wallet()).await;
    let (_, order_id, tickets) = two_seats(&app).await;
    let ticket_id = tickets[0]["ticketId"].as_str().unwrap();
    for path in [
        format!("/v1/orders/{order_id}/tickets.pdf"),
        format!("/v1/tickets/{ticket_id}/wallet/apple"),
        format!("/v1/tickets/{ticket_id}/wallet/google"),
        format!("/v1/orders/{}/tickets.pdf", uuid::Uuid::now_v7()),
        format!("/v1/tickets/{}/wallet/apple", uuid::Uuid::now_v7()),
    ] {
        let answer = get_with(&app, "bob", &path, None).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(answer.code(), "NOT_FOUND", "{path}");
        let anonymous = app.send(app.http.get(format!("{}{path}", app.base))).await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED, "{path}");
    }
    app.finish().await;
}

async fn an_order_without_tickets_has_no_pdf(backend: Backend) {
    let app = TestApp::spawn_with_wallet(backend, wallet()).await;
    let event_id = app.create_event(json!({})).await;
    let hold = app
        .hold("ann", &event_id, "h-3ds", json!({"seatIds": ["A-5-1"]}))
        .await;
    let hold_id = hold.json()["holdId"].as_str().unwrap().to_owned();
    // 3-D Secure: the order waits for the fan, its payment not captured, no tickets.
    let paid = app
        .post(
            &token("ann"),
            &format!("/v1/holds/{hold_id}/checkout"),
            Some("pay-3ds"),
            &json!({"paymentMethodToken": "pm_card_threeDSecure2Required"}),
        )
        .await;
    let order_id = paid.json()["orderId"].as_str().unwrap().to_owned();
    let order = app
        .get(&token("ann"), &format!("/v1/orders/{order_id}"))
        .await;
    assert_eq!(order.json()["tickets"], json!([]), "{}", order.json());
    let pdf = get_with(
        &app,
        "ann",
        &format!("/v1/orders/{order_id}/tickets.pdf"),
        None,
    )
    .await;
    assert_eq!(pdf.status, StatusCode::CONFLICT);
    assert_eq!(pdf.code(), "TICKETS_NOT_ISSUED");
    app.finish().await;
}

async fn the_apple_pass_verifies_and_the_google_link_names_the_ticket(backend: Backend) {
    let app = TestApp::spawn_with_wallet(backend, wallet()).await;
    let (event_id, order_id, tickets) = two_seats(&app).await;
    let ticket = &tickets[1];
    let ticket_id = ticket["ticketId"].as_str().unwrap();

    let pass = get_with(
        &app,
        "ann",
        &format!("/v1/tickets/{ticket_id}/wallet/apple"),
        None,
    )
    .await;
    assert_eq!(
        pass.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&pass.bytes)
    );
    assert_eq!(pass.headers["content-type"], "application/vnd.apple.pkpass");
    let checked = check_pkpass(&pass.bytes, &KEYS.certificate.certificate_pem);
    assert_eq!(checked.pass_json["serialNumber"], ticket_id);
    assert_eq!(checked.pass_json["barcodes"][0]["message"], ticket["code"]);
    assert_eq!(checked.pass_json["relevantDate"], "2027-01-01T20:00:00Z");
    assert_eq!(
        checked.pass_json["eventTicket"]["secondaryFields"][0]["value"],
        ticket["seatId"]
    );
    assert_eq!(
        checked.pass_json["eventTicket"]["backFields"][0]["value"],
        order_id.as_str()
    );
    assert!(checked.pass_json.get("voided").is_none());

    let link = get_with(
        &app,
        "ann",
        &format!("/v1/tickets/{ticket_id}/wallet/google"),
        None,
    )
    .await;
    assert_eq!(link.status, StatusCode::OK, "{}", link.json());
    let link = link.json();
    assert_eq!(link["ticketId"], ticket_id);
    let jwt = link["jwt"].as_str().unwrap();
    assert_eq!(
        link["saveUrl"],
        format!("https://pay.google.com/gp/v/save/{jwt}")
    );
    let public = service_account_public_pem(KEYS.google_key_json.as_bytes()).unwrap();
    let claims = verify_save_jwt(jwt, &public).unwrap();
    let object = &claims.payload["eventTicketObjects"][0];
    assert_eq!(object["id"], format!("{ISSUER_ID}.{ticket_id}"));
    assert_eq!(object["classId"], format!("{ISSUER_ID}.{event_id}"));
    assert_eq!(object["state"], "ACTIVE");
    assert_eq!(object["barcode"]["value"], ticket["code"]);
    assert_eq!(
        claims.payload["eventTicketClasses"][0]["eventName"]["defaultValue"]["value"],
        "Delivery Night"
    );
    let other = generate_service_account_key("x@story-test.iam.gserviceaccount.com").unwrap();
    let other_public = service_account_public_pem(other.as_bytes()).unwrap();
    assert!(verify_save_jwt(jwt, &other_public).is_err());
    app.finish().await;
}

async fn a_voided_ticket_says_so_everywhere(backend: Backend) {
    let app = TestApp::spawn_with_wallet(backend, wallet()).await;
    let event_id = app
        .create_event(json!({
            "refundPolicy": {"fanRefundCutoffSeconds": 3600, "keepFeeMinor": 100}
        }))
        .await;
    let (order_id, tickets) = common::buy_captured(
        &app,
        "ann",
        &event_id,
        json!({"seatIds": ["A-4-1", "A-4-2"]}),
    )
    .await;
    let voided = &tickets[0];
    let kept = &tickets[1];
    let voided_id = voided["ticketId"].as_str().unwrap();
    let refund = app
        .post(
            &token("ann"),
            &format!("/v1/orders/{order_id}/refunds"),
            Some("refund-one"),
            &json!({"ticketIds": [voided_id]}),
        )
        .await;
    assert_eq!(refund.status, StatusCode::ACCEPTED, "{}", refund.json());
    common::order_until(&app, "ann", &order_id, |o| {
        o["tickets"].as_array().is_some_and(|t| {
            t.iter()
                .any(|t| t["ticketId"] == voided_id && t["status"] == "VOIDED")
        })
    })
    .await;

    let pdf = get_with(
        &app,
        "ann",
        &format!("/v1/orders/{order_id}/tickets.pdf"),
        None,
    )
    .await;
    assert_eq!(pdf.status, StatusCode::OK);
    let text = pdf_text(&pdf.bytes);
    let pages: Vec<&str> = text
        .split('\u{c}')
        .filter(|p| !p.trim().is_empty())
        .collect();
    let codes = pdf_qr_codes(&pdf.bytes);
    assert_eq!((pages.len(), codes.len()), (2, 2), "{text}");
    for (printed, codes) in pages.iter().zip(&codes) {
        if printed.contains(voided_id) {
            assert!(printed.contains("VOID"), "{printed}");
            assert!(codes.is_empty(), "a void ticket carries no code: {codes:?}");
        } else {
            assert!(!printed.contains("VOID"), "{printed}");
            assert_eq!(codes, &vec![kept["code"].as_str().unwrap().to_owned()]);
        }
    }

    let pass = get_with(
        &app,
        "ann",
        &format!("/v1/tickets/{voided_id}/wallet/apple"),
        None,
    )
    .await;
    let checked = check_pkpass(&pass.bytes, &KEYS.certificate.certificate_pem);
    assert_eq!(checked.pass_json["voided"], true);
    let link = get_with(
        &app,
        "ann",
        &format!("/v1/tickets/{voided_id}/wallet/google"),
        None,
    )
    .await;
    let public = service_account_public_pem(KEYS.google_key_json.as_bytes()).unwrap();
    let claims = verify_save_jwt(link.json()["jwt"].as_str().unwrap(), &public).unwrap();
    assert_eq!(claims.payload["eventTicketObjects"][0]["state"], "INACTIVE");
    app.finish().await;
}

async fn without_wallet_keys_the_wallet_routes_say_so(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, order_id, tickets) = two_seats(&app).await;
    let ticket_id = tickets[0]["ticketId"].as_str().unwrap();
    for (wallet, path) in [
        ("apple", format!("/v1/tickets/{ticket_id}/wallet/apple")),
        ("google", format!("/v1/tickets/{ticket_id}/wallet/google")),
    ] {
        let answer = get_with(&app, "ann", &path, None).await;
        assert_eq!(answer.status, StatusCode::CONFLICT, "{path}");
        assert_eq!(answer.code(), "WALLET_NOT_CONFIGURED");
        assert_eq!(answer.json()["wallet"], wallet);
        // Still 404 for anyone else: nothing is said about a ticket that is not theirs.
        assert_eq!(
            get_with(&app, "bob", &path, None).await.status,
            StatusCode::NOT_FOUND
        );
    }
    // The PDF needs no keys.
    let pdf = get_with(
        &app,
        "ann",
        &format!("/v1/orders/{order_id}/tickets.pdf"),
        None,
    )
    .await;
    assert_eq!(pdf.status, StatusCode::OK);
    app.finish().await;
}
