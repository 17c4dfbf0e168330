//! Apple Wallet passes: one `.pkpass` per ticket, a zip of `pass.json` (an `eventTicket`
//! pass whose QR code carries the ticket's static signed code), three small PNGs,
//! `manifest.json` (the SHA-1 of every other file) and `signature`, a detached PKCS #7
//! signature (DER) of the manifest made with the organiser's pass type certificate, with
//! Apple's WWDR intermediate certificate beside it when configured.
//!
//! Start at [`pkpass`]; [`ApplePassSigner::from_pem`] reads the configuration and
//! [`self_signed_pass_certificate`] makes a stand-in certificate for the demo and the tests
//! (Wallet on an iPhone accepts only Apple-issued pass certificates; `openssl smime -verify`
//! accepts both).

use std::io::{Cursor, Write};

use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkcs7::{Pkcs7, Pkcs7Flags};
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::stack::Stack;
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage};
use openssl::x509::{X509, X509NameBuilder};
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;
use zip::write::SimpleFileOptions;

use crate::{DeliveryError, OrderSheet, TicketSheet, labels};

/// The content type of a pass, for the HTTP answer.
pub const PKPASS_CONTENT_TYPE: &str = "application/vnd.apple.pkpass";
/// Bits of the RSA key [`self_signed_pass_certificate`] makes.
pub const PASS_KEY_BITS: u32 = 2048;
/// How long a self-signed pass certificate is valid, in days.
pub const SELF_SIGNED_VALID_DAYS: u32 = 825;
/// Longest pass type identifier, team identifier or organisation name accepted, in bytes.
pub const PASS_IDENTIFIER_LEN_MAX: usize = 200;

static ICON_PNG: &[u8] = include_bytes!("../assets/icon.png");
static ICON_2X_PNG: &[u8] = include_bytes!("../assets/icon@2x.png");
static LOGO_PNG: &[u8] = include_bytes!("../assets/logo.png");

/// What signs passes: the identifiers Apple gave the organiser and the pass type
/// certificate with its key.
pub struct ApplePassSigner {
    /// `pass.com.example.tickets`: the certificate's pass type (its subject's UID).
    pub pass_type_identifier: String,
    /// The Apple developer team (its subject's OU).
    pub team_identifier: String,
    /// Shown on the lock screen and in Wallet beside the logo.
    pub organization_name: String,
    certificate: X509,
    key: PKey<Private>,
    /// Apple's WWDR intermediate certificate, shipped in every signature so a device can
    /// build the chain to Apple's root; absent for a self-signed certificate.
    wwdr: Option<X509>,
}

impl std::fmt::Debug for ApplePassSigner {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplePassSigner")
            .field("pass_type_identifier", &self.pass_type_identifier)
            .field("team_identifier", &self.team_identifier)
            .field("organization_name", &self.organization_name)
            .field("certificate", &self.certificate.subject_name())
            .field("wwdr", &self.wwdr.is_some())
            .finish_non_exhaustive()
    }
}

impl ApplePassSigner {
    /// Reads the pass certificate, its private key (PEM, PKCS #8 or PKCS #1, unencrypted)
    /// and the optional WWDR certificate; refuses a key that is not the certificate's.
    pub fn from_pem(
        pass_type_identifier: &str,
        team_identifier: &str,
        organization_name: &str,
        certificate_pem: &[u8],
        key_pem: &[u8],
        wwdr_pem: Option<&[u8]>,
    ) -> Result<Self, DeliveryError> {
        for (what, value) in [
            ("pass type identifier", pass_type_identifier),
            ("team identifier", team_identifier),
            ("organization name", organization_name),
        ] {
            if value.trim().is_empty() || value.len() > PASS_IDENTIFIER_LEN_MAX {
                return Err(DeliveryError::Config(format!(
                    "the {what} must be 1 to {PASS_IDENTIFIER_LEN_MAX} bytes"
                )));
            }
        }
        let certificate = X509::from_pem(certificate_pem)
            .map_err(|e| DeliveryError::Config(format!("the pass certificate: {e}")))?;
        let key = PKey::private_key_from_pem(key_pem)
            .map_err(|e| DeliveryError::Config(format!("the pass key: {e}")))?;
        let matches = certificate
            .public_key()
            .is_ok_and(|public| public.public_eq(&key));
        if !matches {
            return Err(DeliveryError::Config(
                "the pass key is not the pass certificate's key".into(),
            ));
        }
        let wwdr = wwdr_pem
            .map(X509::from_pem)
            .transpose()
            .map_err(|e| DeliveryError::Config(format!("the WWDR certificate: {e}")))?;
        Ok(Self {
            pass_type_identifier: pass_type_identifier.to_owned(),
            team_identifier: team_identifier.to_owned(),
            organization_name: organization_name.to_owned(),
            certificate,
            key,
            wwdr,
        })
    }

    /// The detached PKCS #7 signature (DER) of `content`.
    fn sign(&self, content: &[u8]) -> Result<Vec<u8>, DeliveryError> {
        let signing = |e: openssl::error::ErrorStack| DeliveryError::Signing(e.to_string());
        let mut chain = Stack::new().map_err(signing)?;
        if let Some(wwdr) = &self.wwdr {
            chain.push(wwdr.clone()).map_err(signing)?;
        }
        let signature = Pkcs7::sign(
            &self.certificate,
            &self.key,
            &chain,
            content,
            Pkcs7Flags::DETACHED | Pkcs7Flags::BINARY,
        )
        .map_err(signing)?;
        signature.to_der().map_err(signing)
    }
}

/// The `.pkpass` of `ticket` (one of `order`'s), labelled in `order.locale`.
pub fn pkpass(
    signer: &ApplePassSigner,
    order: &OrderSheet,
    ticket: &TicketSheet,
) -> Result<Vec<u8>, DeliveryError> {
    let pass_json = serde_json::to_vec_pretty(&pass_json(signer, order, ticket)?)
        .map_err(|e| DeliveryError::Render(e.to_string()))?;
    let files: [(&str, &[u8]); 4] = [
        ("pass.json", &pass_json),
        ("icon.png", ICON_PNG),
        ("icon@2x.png", ICON_2X_PNG),
        ("logo.png", LOGO_PNG),
    ];
    let manifest: serde_json::Map<String, Value> = files
        .iter()
        .map(|(name, bytes)| {
            (
                (*name).to_owned(),
                Value::String(hex::encode(openssl::sha::sha1(bytes))),
            )
        })
        .collect();
    let manifest =
        serde_json::to_vec_pretty(&manifest).map_err(|e| DeliveryError::Render(e.to_string()))?;
    let signature = signer.sign(&manifest)?;

    let zipping = |e: zip::result::ZipError| DeliveryError::Render(format!("zip: {e}"));
    let mut archive = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files
        .into_iter()
        .chain([("manifest.json", manifest.as_slice())])
        .chain([("signature", signature.as_slice())])
    {
        archive.start_file(name, options).map_err(zipping)?;
        archive
            .write_all(bytes)
            .map_err(|e| DeliveryError::Render(format!("zip: {e}")))?;
    }
    Ok(archive.finish().map_err(zipping)?.into_inner())
}

/// The pass's `pass.json` (formatVersion 1, an `eventTicket`).
pub fn pass_json(
    signer: &ApplePassSigner,
    order: &OrderSheet,
    ticket: &TicketSheet,
) -> Result<Value, DeliveryError> {
    let locale = order.locale.as_str();
    let label = |id: &str| labels::message(locale, id, &[]);
    let starts_at = order
        .starts_at
        .format(&Rfc3339)
        .map_err(|e| DeliveryError::Render(e.to_string()))?;
    let place = match (&ticket.seat_id, &ticket.tier_id) {
        (Some(seat), _) => Some(json!({
            "key": "seat", "label": label("tickets-field-seat"), "value": seat,
        })),
        (None, Some(tier)) => Some(json!({
            "key": "tier", "label": label("tickets-field-tier"), "value": tier,
        })),
        (None, None) => None,
    };
    let holder = ticket.holder_name.as_ref().map(
        |name| json!({ "key": "holder", "label": label("tickets-field-holder"), "value": name }),
    );
    let date = json!({
        "key": "date",
        "label": label("tickets-field-date"),
        "value": starts_at,
        "dateStyle": "PKDateStyleMedium",
        "timeStyle": "PKDateStyleShort",
        // The event's local time as the organiser gave it, wherever the phone is.
        "ignoresTimeZone": true,
    });
    let auxiliary: Vec<Value> = std::iter::once(date).chain(holder).collect();
    let mut pass = json!({
        "formatVersion": 1,
        "passTypeIdentifier": signer.pass_type_identifier,
        "teamIdentifier": signer.team_identifier,
        "organizationName": signer.organization_name,
        "serialNumber": ticket.ticket_id,
        "description": labels::message(
            locale,
            "tickets-pass-description",
            &[("event", &order.event_name)],
        ),
        "relevantDate": starts_at,
        "backgroundColor": "rgb(20, 40, 90)",
        "foregroundColor": "rgb(255, 255, 255)",
        "labelColor": "rgb(190, 205, 235)",
        "barcodes": [{
            "format": "PKBarcodeFormatQR",
            "message": ticket.code,
            "messageEncoding": "iso-8859-1",
        }],
        "eventTicket": {
            "primaryFields": [{
                "key": "event", "label": label("tickets-field-event"), "value": order.event_name,
            }],
            "secondaryFields": place.into_iter().collect::<Vec<_>>(),
            "auxiliaryFields": auxiliary,
            "backFields": [
                { "key": "order", "label": label("tickets-field-order"), "value": order.order_id },
                { "key": "ticket", "label": label("tickets-field-ticket"), "value": ticket.ticket_id },
            ],
        },
    });
    if ticket.status == "VOIDED" {
        pass["voided"] = Value::Bool(true);
        pass["eventTicket"]["headerFields"] = json!([{
            "key": "status",
            "label": label("tickets-field-status"),
            "value": label("tickets-void"),
        }]);
    }
    Ok(pass)
}

/// A self-signed pass certificate and its key, as PEM: what `boxoffice demo` and the tests
/// sign with. The subject reads like an Apple pass type certificate's (UID = the pass type
/// identifier, OU = the team, CN = "Pass Type ID: …"), for code signing.
#[derive(Debug, Clone)]
pub struct PassCertificate {
    pub certificate_pem: String,
    pub key_pem: String,
}

pub fn self_signed_pass_certificate(
    pass_type_identifier: &str,
    team_identifier: &str,
    organization_name: &str,
) -> Result<PassCertificate, DeliveryError> {
    let failed = |e: openssl::error::ErrorStack| DeliveryError::Signing(e.to_string());
    let key = PKey::from_rsa(Rsa::generate(PASS_KEY_BITS).map_err(failed)?).map_err(failed)?;
    let mut name = X509NameBuilder::new().map_err(failed)?;
    name.append_entry_by_nid(Nid::USERID, pass_type_identifier)
        .map_err(failed)?;
    name.append_entry_by_nid(
        Nid::COMMONNAME,
        &format!("Pass Type ID: {pass_type_identifier}"),
    )
    .map_err(failed)?;
    name.append_entry_by_nid(Nid::ORGANIZATIONALUNITNAME, team_identifier)
        .map_err(failed)?;
    name.append_entry_by_nid(Nid::ORGANIZATIONNAME, organization_name)
        .map_err(failed)?;
    let name = name.build();
    let mut serial = BigNum::new().map_err(failed)?;
    serial
        .rand(127, MsbOption::MAYBE_ZERO, false)
        .map_err(failed)?;
    let serial = serial.to_asn1_integer().map_err(failed)?;
    let not_before = Asn1Time::days_from_now(0).map_err(failed)?;
    let not_after = Asn1Time::days_from_now(SELF_SIGNED_VALID_DAYS).map_err(failed)?;
    let mut builder = X509::builder().map_err(failed)?;
    builder.set_version(2).map_err(failed)?;
    builder.set_serial_number(&serial).map_err(failed)?;
    builder.set_subject_name(&name).map_err(failed)?;
    builder.set_issuer_name(&name).map_err(failed)?;
    builder.set_pubkey(&key).map_err(failed)?;
    builder.set_not_before(&not_before).map_err(failed)?;
    builder.set_not_after(&not_after).map_err(failed)?;
    builder
        .append_extension(BasicConstraints::new().critical().build().map_err(failed)?)
        .map_err(failed)?;
    builder
        .append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .build()
                .map_err(failed)?,
        )
        .map_err(failed)?;
    builder
        .append_extension(
            ExtendedKeyUsage::new()
                .code_signing()
                .build()
                .map_err(failed)?,
        )
        .map_err(failed)?;
    builder
        .sign(&key, MessageDigest::sha256())
        .map_err(failed)?;
    let certificate = builder.build();
    Ok(PassCertificate {
        certificate_pem: String::from_utf8_lossy(&certificate.to_pem().map_err(failed)?)
            .into_owned(),
        key_pem: String::from_utf8_lossy(&key.private_key_to_pem_pkcs8().map_err(failed)?)
            .into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> (ApplePassSigner, PassCertificate) {
        let made =
            self_signed_pass_certificate("pass.test.boxoffice", "TEAM123456", "Boxoffice Test")
                .unwrap();
        let signer = ApplePassSigner::from_pem(
            "pass.test.boxoffice",
            "TEAM123456",
            "Boxoffice Test",
            made.certificate_pem.as_bytes(),
            made.key_pem.as_bytes(),
            None,
        )
        .unwrap();
        (signer, made)
    }

    #[test]
    fn pass_json_names_the_ticket_and_carries_its_code() {
        let (signer, _) = signer();
        let order = crate::tests::sample_order();
        let pass = pass_json(&signer, &order, &order.tickets[0]).unwrap();
        assert_eq!(pass["formatVersion"], 1);
        assert_eq!(pass["serialNumber"], order.tickets[0].ticket_id);
        assert_eq!(pass["passTypeIdentifier"], "pass.test.boxoffice");
        assert_eq!(pass["teamIdentifier"], "TEAM123456");
        assert_eq!(pass["relevantDate"], "2027-03-14T20:00:00+01:00");
        assert_eq!(pass["barcodes"][0]["format"], "PKBarcodeFormatQR");
        assert_eq!(pass["barcodes"][0]["message"], order.tickets[0].code);
        assert_eq!(pass["barcodes"][0]["messageEncoding"], "iso-8859-1");
        assert_eq!(
            pass["eventTicket"]["primaryFields"][0]["value"],
            order.event_name
        );
        assert_eq!(pass["eventTicket"]["secondaryFields"][0]["value"], "A-12-7");
        assert_eq!(
            pass["eventTicket"]["auxiliaryFields"][1]["value"],
            "Zoë Müller"
        );
        assert_eq!(
            pass["eventTicket"]["backFields"][0]["value"],
            order.order_id
        );
        assert!(pass.get("voided").is_none());
        let general = pass_json(&signer, &order, &order.tickets[1]).unwrap();
        assert_eq!(general["eventTicket"]["secondaryFields"][0]["key"], "tier");
        assert_eq!(
            general["eventTicket"]["auxiliaryFields"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn a_voided_ticket_is_a_voided_pass() {
        let (signer, _) = signer();
        let mut order = crate::tests::sample_order();
        order.tickets[0].status = "VOIDED".into();
        order.locale = "de".into();
        let pass = pass_json(&signer, &order, &order.tickets[0]).unwrap();
        assert_eq!(pass["voided"], true);
        assert_eq!(pass["eventTicket"]["headerFields"][0]["value"], "UNGÜLTIG");
    }

    #[test]
    fn refuses_a_key_that_is_not_the_certificates() {
        let (_, made) = signer();
        let (_, other) = signer();
        let refused = ApplePassSigner::from_pem(
            "pass.test.boxoffice",
            "TEAM123456",
            "Boxoffice Test",
            made.certificate_pem.as_bytes(),
            other.key_pem.as_bytes(),
            None,
        );
        assert!(
            matches!(refused, Err(DeliveryError::Config(m)) if m.contains("not the pass certificate's key"))
        );
        let refused = ApplePassSigner::from_pem(
            "",
            "TEAM123456",
            "Boxoffice Test",
            made.certificate_pem.as_bytes(),
            made.key_pem.as_bytes(),
            None,
        );
        assert!(matches!(refused, Err(DeliveryError::Config(_))));
        let refused = ApplePassSigner::from_pem(
            "pass.test.boxoffice",
            "TEAM123456",
            "Boxoffice Test",
            b"not a certificate",
            made.key_pem.as_bytes(),
            None,
        );
        assert!(matches!(refused, Err(DeliveryError::Config(_))));
    }
}
