//! "Save to Google Wallet" links: `https://pay.google.com/gp/v/save/<jwt>`, where the JWT
//! (RS256, signed with the issuer's service-account key) carries the whole pass — the event
//! ticket class (the event: its name and start) and the ticket's object (holder, seat, state,
//! QR code) — so nothing is uploaded to Google beforehand: Google creates or updates both
//! when the fan saves the pass.
//!
//! The QR code is the ticket's **static** signed code. Google's rotating barcodes
//! (`rotatingBarcode` with `totpDetails`) can only substitute RFC 6238 TOTP values —
//! algorithm `TOTP_SHA1`, decimal digits — and timestamps into a `valuePattern`. boxoffice's
//! rotating codes (`BR1.<step>.<tag>.<static>`, `crates/tickets/src/rotating.rs`) carry a
//! base64url tag of HMAC-SHA256 over the step, which Google cannot compute, and a door scanner
//! verifies only that tag: a Google-rotated code would be refused at every door. The static
//! code is what the PDF prints too; the door's first-scan-wins rule stops a copy.
//!
//! Start at [`save_link`]; [`GoogleWalletIssuer::from_key_json`] reads the key file Google
//! gives (JSON: `client_email`, `private_key`, `private_key_id`), and
//! [`generate_service_account_key`] makes a look-alike for the demo and the tests.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use openssl::pkey::PKey;
use openssl::rsa::Rsa;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::{DeliveryError, OrderSheet, TicketSheet};

/// Where a save link points; the JWT follows the last slash.
pub const SAVE_URL_PREFIX: &str = "https://pay.google.com/gp/v/save/";
/// Bits of the RSA key [`generate_service_account_key`] makes.
pub const SERVICE_ACCOUNT_KEY_BITS: u32 = 2048;
/// Longest issuer id accepted, in bytes (Google's are 19 decimal digits).
pub const ISSUER_ID_LEN_MAX: usize = 64;
/// Largest key file read, in bytes (Google's are ~2.4 KB).
pub const KEY_FILE_LEN_MAX: usize = 64 * 1024;

/// The fields of a Google service-account key file that signing needs.
#[derive(Clone, Deserialize, Serialize)]
pub struct ServiceAccountKey {
    pub client_email: String,
    /// PEM, PKCS #8 (`-----BEGIN PRIVATE KEY-----`).
    pub private_key: String,
    pub private_key_id: String,
}

impl std::fmt::Debug for ServiceAccountKey {
    // The private key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .finish_non_exhaustive()
    }
}

/// What signs save links: the issuer account's id and its service account's key.
pub struct GoogleWalletIssuer {
    /// The Google Wallet issuer id (digits): every class and object id starts with it.
    pub issuer_id: String,
    /// Shown on the pass as who issued it.
    pub issuer_name: String,
    /// Web origins allowed to show the save button (`https://tickets.example.com`); may be
    /// empty for plain links.
    pub origins: Vec<String>,
    client_email: String,
    private_key_id: String,
    key: EncodingKey,
}

impl std::fmt::Debug for GoogleWalletIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleWalletIssuer")
            .field("issuer_id", &self.issuer_id)
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .finish_non_exhaustive()
    }
}

impl GoogleWalletIssuer {
    /// Reads the service-account key file's JSON and checks the issuer id (digits only).
    pub fn from_key_json(
        issuer_id: &str,
        issuer_name: &str,
        key_json: &[u8],
        origins: Vec<String>,
    ) -> Result<Self, DeliveryError> {
        if issuer_id.is_empty()
            || issuer_id.len() > ISSUER_ID_LEN_MAX
            || !issuer_id.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(DeliveryError::Config(format!(
                "the Google Wallet issuer id must be 1 to {ISSUER_ID_LEN_MAX} digits"
            )));
        }
        if key_json.len() > KEY_FILE_LEN_MAX {
            return Err(DeliveryError::Config(format!(
                "the Google service-account key file is larger than {KEY_FILE_LEN_MAX} bytes"
            )));
        }
        let key: ServiceAccountKey = serde_json::from_slice(key_json).map_err(|e| {
            DeliveryError::Config(format!(
                "the Google service-account key file (JSON with client_email, private_key, \
                 private_key_id): {e}"
            ))
        })?;
        let encoding = EncodingKey::from_rsa_pem(key.private_key.as_bytes()).map_err(|e| {
            DeliveryError::Config(format!("the service account's private_key: {e}"))
        })?;
        Ok(Self {
            issuer_id: issuer_id.to_owned(),
            issuer_name: issuer_name.to_owned(),
            origins,
            client_email: key.client_email,
            private_key_id: key.private_key_id,
            key: encoding,
        })
    }
}

/// A signed save link and the JWT in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveLink {
    pub save_url: String,
    pub jwt: String,
}

/// The JWT's claims, as Google's "save to wallet" documents them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SaveClaims {
    pub iss: String,
    pub aud: String,
    pub typ: String,
    pub iat: i64,
    pub origins: Vec<String>,
    pub payload: Value,
}

/// The save link of `ticket` (one of `order`'s), signed at `now`.
pub fn save_link(
    issuer: &GoogleWalletIssuer,
    order: &OrderSheet,
    ticket: &TicketSheet,
    now: OffsetDateTime,
) -> Result<SaveLink, DeliveryError> {
    let claims = SaveClaims {
        iss: issuer.client_email.clone(),
        aud: "google".into(),
        typ: "savetowallet".into(),
        iat: now.unix_timestamp(),
        origins: issuer.origins.clone(),
        payload: json!({
            "eventTicketClasses": [event_ticket_class(issuer, order)?],
            "eventTicketObjects": [event_ticket_object(issuer, order, ticket)],
        }),
    };
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(issuer.private_key_id.clone());
    let jwt = jsonwebtoken::encode(&header, &claims, &issuer.key)
        .map_err(|e| DeliveryError::Signing(e.to_string()))?;
    Ok(SaveLink {
        save_url: format!("{SAVE_URL_PREFIX}{jwt}"),
        jwt,
    })
}

/// `<issuer id>.<id>` with every character Google refuses in an id (it allows letters,
/// digits, `.`, `_` and `-`) replaced by `_`.
pub fn wallet_id(issuer_id: &str, id: &str) -> String {
    let suffix: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{issuer_id}.{suffix}")
}

fn localized(locale: &str, value: &str) -> Value {
    json!({ "defaultValue": { "language": locale, "value": value } })
}

/// The event's class: shared by every ticket of the event.
fn event_ticket_class(
    issuer: &GoogleWalletIssuer,
    order: &OrderSheet,
) -> Result<Value, DeliveryError> {
    let starts_at = order
        .starts_at
        .format(&Rfc3339)
        .map_err(|e| DeliveryError::Render(e.to_string()))?;
    Ok(json!({
        "id": wallet_id(&issuer.issuer_id, &order.event_id),
        "issuerName": issuer.issuer_name,
        "reviewStatus": "UNDER_REVIEW",
        "eventName": localized(&order.locale, &order.event_name),
        "dateTime": { "start": starts_at },
    }))
}

/// The ticket's object: ACTIVE, or INACTIVE once voided (Wallet then greys it out).
fn event_ticket_object(
    issuer: &GoogleWalletIssuer,
    order: &OrderSheet,
    ticket: &TicketSheet,
) -> Value {
    let locale = order.locale.as_str();
    let state = if ticket.status == "VOIDED" {
        "INACTIVE"
    } else {
        "ACTIVE"
    };
    let mut object = json!({
        "id": wallet_id(&issuer.issuer_id, &ticket.ticket_id),
        "classId": wallet_id(&issuer.issuer_id, &order.event_id),
        "state": state,
        "ticketNumber": ticket.ticket_id,
        "reservationInfo": { "confirmationCode": order.order_id },
        "barcode": {
            "type": "QR_CODE",
            "value": ticket.code,
        },
    });
    if let Some(name) = &ticket.holder_name {
        object["ticketHolderName"] = Value::String(name.clone());
    }
    if let Some(seat) = &ticket.seat_id {
        object["seatInfo"] = json!({ "seat": localized(locale, seat) });
    } else if let Some(tier) = &ticket.tier_id {
        object["ticketType"] = localized(locale, tier);
    }
    object
}

/// A service-account-like key file (JSON, as Google gives them: `type`, `project_id`,
/// `private_key_id`, `private_key` (RSA 2048, PKCS #8 PEM), `client_email`, `client_id`,
/// `token_uri`) for the demo and the tests. Google will not accept its links; everything
/// else treats it as a real key.
pub fn generate_service_account_key(client_email: &str) -> Result<String, DeliveryError> {
    let failed = |e: openssl::error::ErrorStack| DeliveryError::Signing(e.to_string());
    let key =
        PKey::from_rsa(Rsa::generate(SERVICE_ACCOUNT_KEY_BITS).map_err(failed)?).map_err(failed)?;
    let private_key =
        String::from_utf8_lossy(&key.private_key_to_pem_pkcs8().map_err(failed)?).into_owned();
    let public_der = key.public_key_to_der().map_err(failed)?;
    let private_key_id = hex::encode(openssl::sha::sha1(&public_der));
    let project_id = client_email
        .split('@')
        .nth(1)
        .and_then(|domain| domain.split('.').next())
        .unwrap_or("boxoffice-demo");
    let file = json!({
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": private_key_id,
        "private_key": private_key,
        "client_email": client_email,
        "client_id": private_key_id[..20].to_owned(),
        "token_uri": "https://oauth2.googleapis.com/token",
    });
    serde_json::to_string_pretty(&file).map_err(|e| DeliveryError::Render(e.to_string()))
}

/// The PEM public half of a key file's private key (for checking links in tests and tools).
pub fn service_account_public_pem(key_json: &[u8]) -> Result<String, DeliveryError> {
    let key: ServiceAccountKey = serde_json::from_slice(key_json)
        .map_err(|e| DeliveryError::Config(format!("the key file: {e}")))?;
    let private = PKey::private_key_from_pem(key.private_key.as_bytes())
        .map_err(|e| DeliveryError::Config(format!("the private_key: {e}")))?;
    let public = private
        .public_key_to_pem()
        .map_err(|e| DeliveryError::Config(e.to_string()))?;
    Ok(String::from_utf8_lossy(&public).into_owned())
}

/// The claims of `jwt` when `public_pem` verifies its RS256 signature and it is meant for
/// Google's save endpoint.
pub fn verify_save_jwt(jwt: &str, public_pem: &str) -> Result<SaveClaims, DeliveryError> {
    let key = jsonwebtoken::DecodingKey::from_rsa_pem(public_pem.as_bytes())
        .map_err(|e| DeliveryError::Config(e.to_string()))?;
    let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
    validation.set_audience(&["google"]);
    validation.validate_exp = false;
    validation.required_spec_claims.clear();
    jsonwebtoken::decode::<SaveClaims>(jwt, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| DeliveryError::Signing(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMAIL: &str = "wallet@boxoffice-test.iam.gserviceaccount.com";

    fn issuer(key_json: &str) -> GoogleWalletIssuer {
        GoogleWalletIssuer::from_key_json(
            "3388000000022222228",
            "Boxoffice Test",
            key_json.as_bytes(),
            vec!["https://tickets.example.com".into()],
        )
        .unwrap()
    }

    #[test]
    fn the_link_verifies_with_the_key_and_names_the_ticket() {
        let key_json = generate_service_account_key(EMAIL).unwrap();
        let issuer = issuer(&key_json);
        let order = crate::tests::sample_order();
        let now = time::macros::datetime!(2027-03-01 12:00 UTC);
        let link = save_link(&issuer, &order, &order.tickets[0], now).unwrap();
        assert_eq!(link.save_url, format!("{SAVE_URL_PREFIX}{}", link.jwt));

        let public = service_account_public_pem(key_json.as_bytes()).unwrap();
        let claims = verify_save_jwt(&link.jwt, &public).unwrap();
        assert_eq!(claims.iss, EMAIL);
        assert_eq!(claims.aud, "google");
        assert_eq!(claims.typ, "savetowallet");
        assert_eq!(claims.iat, now.unix_timestamp());
        assert_eq!(claims.origins, vec!["https://tickets.example.com"]);
        let object = &claims.payload["eventTicketObjects"][0];
        let ticket = &order.tickets[0];
        assert_eq!(
            object["id"],
            format!("3388000000022222228.{}", ticket.ticket_id)
        );
        assert_eq!(
            object["classId"],
            format!("3388000000022222228.{}", order.event_id)
        );
        assert_eq!(object["state"], "ACTIVE");
        assert_eq!(object["ticketHolderName"], "Zoë Müller");
        assert_eq!(
            object["seatInfo"]["seat"]["defaultValue"]["value"],
            "A-12-7"
        );
        assert_eq!(object["barcode"]["type"], "QR_CODE");
        assert_eq!(object["barcode"]["value"], ticket.code);
        let class = &claims.payload["eventTicketClasses"][0];
        assert_eq!(class["id"], object["classId"]);
        assert_eq!(
            class["eventName"]["defaultValue"]["value"],
            order.event_name
        );
        assert_eq!(class["dateTime"]["start"], "2027-03-14T20:00:00+01:00");

        let header = jsonwebtoken::decode_header(&link.jwt).unwrap();
        assert_eq!(header.alg, Algorithm::RS256);
        let file: Value = serde_json::from_str(&key_json).unwrap();
        assert_eq!(header.kid.as_deref(), file["private_key_id"].as_str());
    }

    #[test]
    fn another_key_does_not_verify_the_link() {
        let issuer = issuer(&generate_service_account_key(EMAIL).unwrap());
        let order = crate::tests::sample_order();
        let link = save_link(
            &issuer,
            &order,
            &order.tickets[1],
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        let other = generate_service_account_key(EMAIL).unwrap();
        let other_public = service_account_public_pem(other.as_bytes()).unwrap();
        assert!(matches!(
            verify_save_jwt(&link.jwt, &other_public),
            Err(DeliveryError::Signing(_))
        ));
    }

    #[test]
    fn a_voided_ticket_is_inactive_and_general_admission_has_a_ticket_type() {
        let key_json = generate_service_account_key(EMAIL).unwrap();
        let issuer = issuer(&key_json);
        let mut order = crate::tests::sample_order();
        order.tickets[1].status = "VOIDED".into();
        let link = save_link(
            &issuer,
            &order,
            &order.tickets[1],
            OffsetDateTime::now_utc(),
        )
        .unwrap();
        let public = service_account_public_pem(key_json.as_bytes()).unwrap();
        let claims = verify_save_jwt(&link.jwt, &public).unwrap();
        let object = &claims.payload["eventTicketObjects"][0];
        assert_eq!(object["state"], "INACTIVE");
        assert_eq!(object["ticketType"]["defaultValue"]["value"], "standing");
        assert!(object.get("seatInfo").is_none());
        assert!(object.get("ticketHolderName").is_none());
    }

    #[test]
    fn ids_keep_only_what_google_allows() {
        assert_eq!(wallet_id("123", "a-b_c.d"), "123.a-b_c.d");
        assert_eq!(wallet_id("123", "a b/c:é"), "123.a_b_c__");
    }

    #[test]
    fn refuses_bad_configuration() {
        let key_json = generate_service_account_key(EMAIL).unwrap();
        for issuer_id in ["", "12a", &"1".repeat(ISSUER_ID_LEN_MAX + 1)] {
            assert!(matches!(
                GoogleWalletIssuer::from_key_json(issuer_id, "x", key_json.as_bytes(), vec![]),
                Err(DeliveryError::Config(_))
            ));
        }
        for file in [
            "{}".to_owned(),
            "not json".to_owned(),
            key_json.replace("BEGIN PRIVATE KEY", "BEGIN NOTHING"),
        ] {
            assert!(matches!(
                GoogleWalletIssuer::from_key_json("123", "x", file.as_bytes(), vec![]),
                Err(DeliveryError::Config(_))
            ));
        }
    }
}
