//! Wallet passes checked as a phone would before trusting them: the `.pkpass` unpacked by
//! another zip reader, its manifest's hashes recomputed and its signature verified by
//! `openssl smime`; the Google link's JWT verified with the key's public half.

use boxoffice_delivery::apple::{ApplePassSigner, pkpass, self_signed_pass_certificate};
use boxoffice_delivery::google::{
    GoogleWalletIssuer, generate_service_account_key, save_link, service_account_public_pem,
    verify_save_jwt,
};
use boxoffice_delivery::readback::{check_pkpass, pkpass_verifies_with};
use boxoffice_delivery::{OrderSheet, TicketSheet};

fn order() -> OrderSheet {
    OrderSheet {
        order_id: "019a0000-0000-7000-8000-00000000a001".into(),
        event_id: "019a0000-0000-7000-8000-00000000e001".into(),
        event_name: "Rust Symphony".into(),
        starts_at: time::macros::datetime!(2027-03-14 20:00 +01:00),
        currency: "EUR".into(),
        total_minor: 6_000,
        locale: "fr".into(),
        tickets: vec![TicketSheet {
            ticket_id: "019a0000-0000-7000-8000-0000000000b1".into(),
            seat_id: Some("A-12-7".into()),
            tier_id: None,
            holder_name: Some("Zoë Müller".into()),
            code: "BO1.eyJ0IjoiYjEifQ.c2lnbmF0dXJl".into(),
            status: "VALID".into(),
        }],
    }
}

fn make_signer() -> (ApplePassSigner, String) {
    let made =
        self_signed_pass_certificate("pass.test.boxoffice", "TEAM123456", "Boxoffice").unwrap();
    let signer = ApplePassSigner::from_pem(
        "pass.test.boxoffice",
        "TEAM123456",
        "Boxoffice",
        made.certificate_pem.as_bytes(),
        made.key_pem.as_bytes(),
        None,
    )
    .unwrap();
    (signer, made.certificate_pem)
}

#[test]
fn a_pkpass_verifies_with_openssl_against_its_certificate() {
    let (signer, certificate) = make_signer();
    let order = order();
    let pass = pkpass(&signer, &order, &order.tickets[0]).unwrap();
    let checked = check_pkpass(&pass, &certificate);
    assert_eq!(
        checked.files,
        [
            "icon.png",
            "icon@2x.png",
            "logo.png",
            "manifest.json",
            "pass.json",
            "signature"
        ]
    );
    assert_eq!(
        checked.pass_json["serialNumber"],
        order.tickets[0].ticket_id
    );
    assert_eq!(
        checked.pass_json["barcodes"][0]["message"],
        order.tickets[0].code
    );
    assert_eq!(
        checked.pass_json["eventTicket"]["secondaryFields"][0]["label"],
        "Place"
    );
    assert!(checked.pass_json.get("voided").is_none());

    let (_, other_certificate) = make_signer();
    assert!(!pkpass_verifies_with(&pass, &other_certificate));
}

#[test]
fn a_pkpass_signed_with_an_intermediate_carries_it_and_verifies() {
    // A stand-in for Apple's WWDR certificate: any certificate travels in the signature.
    let wwdr = self_signed_pass_certificate("pass.wwdr", "WWDR", "Stand-in WWDR").unwrap();
    let made =
        self_signed_pass_certificate("pass.test.boxoffice", "TEAM123456", "Boxoffice").unwrap();
    let signer = ApplePassSigner::from_pem(
        "pass.test.boxoffice",
        "TEAM123456",
        "Boxoffice",
        made.certificate_pem.as_bytes(),
        made.key_pem.as_bytes(),
        Some(wwdr.certificate_pem.as_bytes()),
    )
    .unwrap();
    let order = order();
    let pass = pkpass(&signer, &order, &order.tickets[0]).unwrap();
    check_pkpass(&pass, &made.certificate_pem);
}

#[test]
fn a_voided_tickets_pass_is_voided() {
    let (signer, certificate) = make_signer();
    let mut order = order();
    order.tickets[0].status = "VOIDED".into();
    let pass = pkpass(&signer, &order, &order.tickets[0]).unwrap();
    let checked = check_pkpass(&pass, &certificate);
    assert_eq!(checked.pass_json["voided"], true);
    assert_eq!(
        checked.pass_json["eventTicket"]["headerFields"][0]["value"],
        "ANNULÉ"
    );
}

#[test]
fn a_google_link_verifies_with_its_key_only() {
    let key_json =
        generate_service_account_key("w@boxoffice-test.iam.gserviceaccount.com").unwrap();
    let issuer = GoogleWalletIssuer::from_key_json(
        "3388000000022222228",
        "Boxoffice",
        key_json.as_bytes(),
        vec![],
    )
    .unwrap();
    let order = order();
    let link = save_link(
        &issuer,
        &order,
        &order.tickets[0],
        time::OffsetDateTime::now_utc(),
    )
    .unwrap();
    assert!(
        link.save_url
            .starts_with("https://pay.google.com/gp/v/save/")
    );
    let public = service_account_public_pem(key_json.as_bytes()).unwrap();
    let claims = verify_save_jwt(&link.jwt, &public).unwrap();
    assert_eq!(
        claims.payload["eventTicketObjects"][0]["ticketNumber"],
        order.tickets[0].ticket_id
    );
    let other = generate_service_account_key("w@boxoffice-test.iam.gserviceaccount.com").unwrap();
    let other_public = service_account_public_pem(other.as_bytes()).unwrap();
    assert!(verify_save_jwt(&link.jwt, &other_public).is_err());
}
