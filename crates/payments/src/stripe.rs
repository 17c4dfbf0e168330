//! The Stripe adapter: [`StripeProvider`] speaks the PaymentIntents subset boxoffice needs
//! (create-and-confirm with manual capture, capture, cancel, retrieve), the Refunds subset
//! (`POST /v1/refunds` by `payment_intent` with the refund id as the `Idempotency-Key`,
//! `GET /v1/refunds/{id}`, `GET /v1/refunds?payment_intent=`) and verifies Stripe
//! webhooks. This module owns the mapping from Stripe's HTTP answers to
//! [`ProviderPayment`] / [`ProviderError`] and the `Stripe-Signature` scheme
//! ([`sign_webhook`], [`verify_signature`]), which the simulator reuses so both sides agree
//! byte for byte.
//!
//! How answers map ([`classify`]; the rule the rest of boxoffice builds on):
//!
//! | Stripe's answer | result | why |
//! | --- | --- | --- |
//! | 2xx | `Ok`, the PaymentIntent (the Refund, for refunds) | |
//! | 402 with `error.payment_intent` | `Ok`, [`ProviderStatus::Failed`] with the decline code | a decline is an answer |
//! | 5xx, 429 | [`ProviderError::Unavailable`] | the provider did nothing; ask again later |
//! | 401, 403 | [`ProviderError::Unavailable`] | our API key or its permissions were refused before anything was tried: the operator's mistake, never the fan's, so no order is cancelled for it; the operation stays open and is asked again, and Stripe stores no answer under the key for it |
//! | 409 | [`ProviderError::Unknown`] | another request with the key is still running |
//! | 400 `idempotency_error` | [`ProviderError::Unknown`] | an earlier request under the key differed, and it may have created a payment |
//! | any other 4xx with Stripe's error object (400, 402 without the payment, 404, ...) | [`ProviderError::Rejected`] | definitive: the provider replays the same 4xx for the key forever; for an authorization the payment failed |
//! | any other 4xx without it (a proxy's page) | [`ProviderError::Unavailable`] | not the provider's answer |
//! | a timeout, a connection lost after sending, an unreadable 2xx | [`ProviderError::Unknown`] | the payment may exist |
//!
//! Refunds follow the same table ([`classify_refund`]) without the 402 row: Stripe has no
//! refund decline; a refund that fails is a 2xx Refund with status `failed`.
//!
//! `Rejected`'s code is Stripe's `error.code`, else `resource_missing` for a 404 (localstripe
//! answers an unknown payment method 404 without a code where Stripe answers 400
//! `resource_missing`), else `error.type`.

use std::time::Duration;

use async_trait::async_trait;
use hmac::{Hmac, KeyInit, Mac};
use reqwest::StatusCode;
use serde_json::Value;
use sha2::Sha256;

use crate::{
    AuthorizeRequest, PaymentProvider, ProviderError, ProviderPayment, ProviderRefund,
    ProviderStatus, RefundRequest, RefundStatus, WEBHOOK_TOLERANCE_S, WebhookError, WebhookEvent,
};

/// Whole-request timeout of a provider call. Past it the outcome is unknown and settled by
/// retrying with the same idempotency key, by the reconciler, or by webhook.
pub const PROVIDER_TIMEOUT_MS: u64 = 5_000;
/// Time allowed to open a connection. A connect failure means nothing was sent, so it is
/// safely [`ProviderError::Unavailable`].
pub const PROVIDER_CONNECT_TIMEOUT_MS: u64 = 2_000;
/// Longest error text kept from a provider answer, in bytes (for logs, not for shoppers).
pub const ERROR_DETAIL_BYTES_MAX: usize = 512;
/// The header Stripe signs webhooks with.
pub const SIGNATURE_HEADER: &str = "Stripe-Signature";
/// Refunds asked per page when looking for one by our id (Stripe's largest page).
pub const REFUND_LIST_PAGE_LEN: usize = 100;
/// Pages read before [`PaymentProvider::find_refund`] gives up (a payment with thousands of
/// refunds is a bug elsewhere).
pub const REFUND_LIST_PAGES_MAX: usize = 10;

type HmacSha256 = Hmac<Sha256>;

/// A [`PaymentProvider`] for Stripe (or anything speaking its PaymentIntents API, such as
/// the [`crate::simulator`]).
#[derive(Clone)]
pub struct StripeProvider {
    /// Without a trailing slash, e.g. `https://api.stripe.com`.
    api_base: String,
    secret_key: String,
    webhook_secret: String,
    client: reqwest::Client,
    timeout: Duration,
}

impl std::fmt::Debug for StripeProvider {
    /// Never prints the secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeProvider")
            .field("api_base", &self.api_base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl StripeProvider {
    /// A provider calling `api_base` (`https://api.stripe.com`, or a simulator's base URL)
    /// with the API `secret_key`, verifying webhooks with `webhook_secret` (`whsec_...`).
    ///
    /// # Panics
    /// When the TLS backend cannot be initialised (as `reqwest::Client::new` does).
    pub fn new(api_base: String, secret_key: String, webhook_secret: String) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(PROVIDER_CONNECT_TIMEOUT_MS))
            .build()
            .expect("the HTTP client (TLS backend) failed to initialise");
        Self {
            api_base: api_base.trim_end_matches('/').to_owned(),
            secret_key,
            webhook_secret,
            client,
            timeout: Duration::from_millis(PROVIDER_TIMEOUT_MS),
        }
    }

    /// Replaces [`PROVIDER_TIMEOUT_MS`]; tests use a short one to see a lost response.
    #[must_use]
    pub fn with_timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout = Duration::from_millis(timeout_ms);
        self
    }

    pub fn api_base(&self) -> &str {
        &self.api_base
    }

    fn post_request(
        &self,
        path: &str,
        idempotency_key: &str,
        form: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.api_base))
            .timeout(self.timeout)
            .bearer_auth(&self.secret_key)
            .header("Idempotency-Key", idempotency_key)
            .form(form)
    }

    fn get_request(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.api_base))
            .timeout(self.timeout)
            .bearer_auth(&self.secret_key)
    }

    async fn post(
        &self,
        path: &str,
        idempotency_key: &str,
        form: &[(&str, &str)],
    ) -> Result<ProviderPayment, ProviderError> {
        let request = self.post_request(path, idempotency_key, form);
        answer(request.send().await, classify).await
    }
}

#[async_trait]
impl PaymentProvider for StripeProvider {
    fn name(&self) -> &'static str {
        "stripe"
    }

    async fn authorize(
        &self,
        request: &AuthorizeRequest,
    ) -> Result<ProviderPayment, ProviderError> {
        let amount = request.amount_minor.to_string();
        let currency = request.currency.to_ascii_lowercase();
        let form = [
            ("amount", amount.as_str()),
            ("currency", currency.as_str()),
            ("payment_method", request.payment_method_token.as_str()),
            ("capture_method", "manual"),
            ("confirm", "true"),
            ("metadata[operation_id]", request.operation_id.as_str()),
            ("metadata[order_id]", request.order_id.as_str()),
        ];
        self.post("/v1/payment_intents", &request.operation_id, &form)
            .await
    }

    async fn capture(
        &self,
        operation_id: &str,
        provider_ref: &str,
    ) -> Result<ProviderPayment, ProviderError> {
        let path = format!(
            "/v1/payment_intents/{}/capture",
            path_segment(provider_ref)?
        );
        self.post(&path, &format!("{operation_id}-capture"), &[])
            .await
    }

    async fn void(
        &self,
        operation_id: &str,
        provider_ref: &str,
    ) -> Result<ProviderPayment, ProviderError> {
        let path = format!("/v1/payment_intents/{}/cancel", path_segment(provider_ref)?);
        self.post(&path, &format!("{operation_id}-void"), &[]).await
    }

    async fn retrieve(&self, provider_ref: &str) -> Result<ProviderPayment, ProviderError> {
        let path = format!("/v1/payment_intents/{}", path_segment(provider_ref)?);
        answer(self.get_request(&path).send().await, classify).await
    }

    async fn refund(&self, request: &RefundRequest) -> Result<ProviderRefund, ProviderError> {
        let amount = request.amount_minor.to_string();
        let mut form = vec![
            ("payment_intent", path_segment(&request.provider_ref)?),
            ("amount", amount.as_str()),
            ("metadata[refund_id]", request.refund_id.as_str()),
            ("metadata[order_id]", request.order_id.as_str()),
        ];
        // Only when asked: localstripe refuses the parameter (400 "Unexpected reason").
        if let Some(reason) = request.reason {
            form.push(("reason", reason.as_stripe()));
        }
        let sent = self
            .post_request("/v1/refunds", &request.refund_id, &form)
            .send()
            .await;
        answer(sent, classify_refund).await
    }

    async fn retrieve_refund(
        &self,
        provider_refund_ref: &str,
    ) -> Result<ProviderRefund, ProviderError> {
        let path = format!("/v1/refunds/{}", path_segment(provider_refund_ref)?);
        answer(self.get_request(&path).send().await, classify_refund).await
    }

    async fn find_refund(
        &self,
        provider_ref: &str,
        refund_id: &str,
    ) -> Result<Option<ProviderRefund>, ProviderError> {
        let provider_ref = path_segment(provider_ref)?;
        let mut starting_after: Option<String> = None;
        for _ in 0..REFUND_LIST_PAGES_MAX {
            let mut path =
                format!("/v1/refunds?payment_intent={provider_ref}&limit={REFUND_LIST_PAGE_LEN}");
            if let Some(last) = &starting_after {
                path.push_str("&starting_after=");
                path.push_str(last);
            }
            let page = answer(self.get_request(&path).send().await, classify_refund_list).await?;
            if let Some(found) = page
                .refunds
                .iter()
                .find(|refund| refund.refund_id.as_deref() == Some(refund_id))
            {
                return Ok(Some(found.clone()));
            }
            match page.refunds.last() {
                Some(last) if page.has_more => {
                    starting_after = Some(path_segment(&last.provider_refund_ref)?.to_owned());
                }
                _ => return Ok(None),
            }
        }
        Err(ProviderError::Unknown(format!(
            "more than {} refunds of {provider_ref}: refund {refund_id} not found in them",
            REFUND_LIST_PAGES_MAX * REFUND_LIST_PAGE_LEN
        )))
    }

    fn verify_webhook(
        &self,
        signature_header: Option<&str>,
        body: &[u8],
        now_unix_s: i64,
    ) -> Result<WebhookEvent, WebhookError> {
        verify_signature(&self.webhook_secret, signature_header, body, now_unix_s)?;
        parse_event(body)
    }
}

/// Refuses a provider reference that would change the request path.
fn path_segment(provider_ref: &str) -> Result<&str, ProviderError> {
    let valid = !provider_ref.is_empty()
        && provider_ref
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if valid {
        Ok(provider_ref)
    } else {
        Err(ProviderError::Rejected {
            code: "invalid_provider_reference".to_owned(),
            message: format!("invalid provider reference {provider_ref:?}"),
        })
    }
}

/// Turns a sent request's result into the trait's answer (see the module docs for the table);
/// `classify` reads a complete HTTP answer.
async fn answer<T>(
    sent: Result<reqwest::Response, reqwest::Error>,
    classify: fn(StatusCode, &[u8]) -> Result<T, ProviderError>,
) -> Result<T, ProviderError> {
    let response = match sent {
        Ok(response) => response,
        // A connect error happens before any byte of the request is written.
        Err(error) if error.is_connect() => {
            return Err(ProviderError::Unavailable(error_chain(&error)));
        }
        Err(error) => return Err(ProviderError::Unknown(error_chain(&error))),
    };
    let status = response.status();
    match response.bytes().await {
        Ok(body) => classify(status, &body),
        Err(error) => Err(ProviderError::Unknown(error_chain(&error))),
    }
}

/// What a complete HTTP answer of the provider means (the module docs' table).
pub fn classify(status: StatusCode, body: &[u8]) -> Result<ProviderPayment, ProviderError> {
    classify_with(status, body, parse_payment_intent, |status, error| {
        if status != StatusCode::PAYMENT_REQUIRED || !error["payment_intent"].is_object() {
            return None;
        }
        let payment = parse_payment_intent(&error["payment_intent"]).map(|mut payment| {
            if payment.decline_code.is_none() {
                payment.decline_code = error["decline_code"]
                    .as_str()
                    .or_else(|| error["code"].as_str())
                    .map(str::to_owned);
            }
            payment
        });
        Some(payment.map_err(ProviderError::Unknown))
    })
}

/// What a complete HTTP answer to a refund call means: the module docs' table, without the
/// decline row.
pub fn classify_refund(status: StatusCode, body: &[u8]) -> Result<ProviderRefund, ProviderError> {
    classify_with(status, body, parse_refund, |_, _| None)
}

fn classify_refund_list(status: StatusCode, body: &[u8]) -> Result<RefundPage, ProviderError> {
    classify_with(status, body, parse_refund_list, |_, _| None)
}

/// The table for any object: `parse` reads a 2xx, `declined` may turn a 4xx's error object
/// into an answer (a decline with its payment).
fn classify_with<T>(
    status: StatusCode,
    body: &[u8],
    parse: fn(&Value) -> Result<T, String>,
    declined: impl FnOnce(StatusCode, &Value) -> Option<Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return Err(ProviderError::Unavailable(format!(
            "HTTP {status}: {}",
            detail(body)
        )));
    }
    let json: Value = match serde_json::from_slice(body) {
        Ok(json) => json,
        Err(error) if status.is_success() => {
            return Err(ProviderError::Unknown(format!(
                "unreadable HTTP {status} answer: {error}"
            )));
        }
        Err(_) => Value::Null,
    };
    if status.is_success() {
        return parse(&json).map_err(ProviderError::Unknown);
    }
    let error = &json["error"];
    if let Some(answer) = declined(status, error) {
        return answer;
    }
    let error_type = error["type"].as_str();
    let code = error["code"]
        .as_str()
        .or((status == StatusCode::NOT_FOUND).then_some("resource_missing"))
        .or(error_type);
    let message = match (code, error["message"].as_str()) {
        (Some(code), Some(message)) => format!("HTTP {status}: {code}: {message}"),
        (None, Some(message)) => format!("HTTP {status}: {message}"),
        (Some(code), None) => format!("HTTP {status}: {code}"),
        (None, None) => format!("HTTP {status}: {}", detail(body)),
    };
    if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        return Err(ProviderError::Unavailable(format!(
            "{message} (our API key or its permissions were refused: nothing was tried)"
        )));
    }
    if status == StatusCode::CONFLICT || error_type == Some("idempotency_error") {
        // Another request with the same idempotency key is still running, or an earlier one
        // under it differed: a payment may exist, its outcome is not known.
        return Err(ProviderError::Unknown(message));
    }
    match (error.is_object(), code) {
        (true, Some(code)) => Err(ProviderError::Rejected {
            code: code.to_owned(),
            message,
        }),
        _ => Err(ProviderError::Unavailable(format!(
            "{message} (not the payment provider's error)"
        ))),
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn detail(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(ERROR_DETAIL_BYTES_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Maps a Stripe PaymentIntent status. `requires_payment_method` and `requires_confirmation`
/// both mean "no authorization exists" after a confirming create, hence `Failed`.
pub fn map_status(status: &str) -> Option<ProviderStatus> {
    Some(match status {
        "requires_action" => ProviderStatus::RequiresAction,
        "requires_capture" => ProviderStatus::Authorized,
        "succeeded" => ProviderStatus::Captured,
        "canceled" => ProviderStatus::Voided,
        "requires_payment_method" | "requires_confirmation" => ProviderStatus::Failed,
        "processing" => ProviderStatus::Processing,
        _ => return None,
    })
}

/// Reads the fields boxoffice uses from a Stripe PaymentIntent object.
pub fn parse_payment_intent(intent: &Value) -> Result<ProviderPayment, String> {
    let provider_ref = intent["id"]
        .as_str()
        .ok_or("payment intent without an id")?
        .to_owned();
    let status_text = intent["status"]
        .as_str()
        .ok_or("payment intent without a status")?;
    let status = map_status(status_text)
        .ok_or_else(|| format!("unknown payment intent status {status_text:?}"))?;
    let amount_minor = intent["amount"]
        .as_i64()
        .ok_or("payment intent without an amount")?;
    let currency = intent["currency"]
        .as_str()
        .ok_or("payment intent without a currency")?
        .to_ascii_uppercase();
    let operation_id = intent["metadata"]["operation_id"]
        .as_str()
        .map(str::to_owned);
    let last_error = &intent["last_payment_error"];
    let decline_code = last_error["decline_code"]
        .as_str()
        .or_else(|| {
            // A failed payment always says why, even when the processor gave no decline code.
            (status == ProviderStatus::Failed)
                .then(|| last_error["code"].as_str())
                .flatten()
        })
        .map(str::to_owned);
    let next_action_url = intent["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .map(str::to_owned);
    Ok(ProviderPayment {
        provider_ref,
        status,
        amount_minor,
        currency,
        operation_id,
        decline_code,
        next_action_url,
    })
}

/// Maps a Stripe Refund status (`failure_reason` completes a failure).
pub fn map_refund_status(status: &str, failure_reason: Option<&str>) -> Option<RefundStatus> {
    Some(match status {
        "pending" | "requires_action" => RefundStatus::Pending,
        "succeeded" => RefundStatus::Succeeded,
        "failed" => RefundStatus::Failed {
            reason: failure_reason.unwrap_or("unknown").to_owned(),
        },
        "canceled" => RefundStatus::Canceled,
        _ => return None,
    })
}

/// Reads the fields boxoffice uses from a Stripe Refund object.
pub fn parse_refund(refund: &Value) -> Result<ProviderRefund, String> {
    let provider_refund_ref = refund["id"]
        .as_str()
        .ok_or("refund without an id")?
        .to_owned();
    let status_text = refund["status"].as_str().ok_or("refund without a status")?;
    let status = map_refund_status(status_text, refund["failure_reason"].as_str())
        .ok_or_else(|| format!("unknown refund status {status_text:?}"))?;
    let amount_minor = refund["amount"]
        .as_i64()
        .ok_or("refund without an amount")?;
    let currency = refund["currency"]
        .as_str()
        .ok_or("refund without a currency")?
        .to_ascii_uppercase();
    Ok(ProviderRefund {
        provider_refund_ref,
        provider_ref: refund["payment_intent"].as_str().map(str::to_owned),
        refund_id: refund["metadata"]["refund_id"].as_str().map(str::to_owned),
        amount_minor,
        currency,
        status,
    })
}

/// One page of `GET /v1/refunds`.
#[derive(Debug)]
struct RefundPage {
    refunds: Vec<ProviderRefund>,
    has_more: bool,
}

fn parse_refund_list(list: &Value) -> Result<RefundPage, String> {
    let data = list["data"].as_array().ok_or("refund list without data")?;
    Ok(RefundPage {
        refunds: data.iter().map(parse_refund).collect::<Result<_, _>>()?,
        has_more: list["has_more"].as_bool().unwrap_or(false),
    })
}

fn mac_for(secret: &str, timestamp_unix_s: i64, body: &[u8]) -> HmacSha256 {
    // HMAC accepts a key of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(timestamp_unix_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `Stripe-Signature` header value for `body` sent at `timestamp_unix_s`:
/// `t=<unix>,v1=<hex hmac_sha256(secret, "<t>.<body>")>`.
pub fn sign_webhook(secret: &str, timestamp_unix_s: i64, body: &[u8]) -> String {
    let signature = mac_for(secret, timestamp_unix_s, body)
        .finalize()
        .into_bytes();
    format!("t={timestamp_unix_s},v1={}", hex::encode(signature))
}

/// Checks a `Stripe-Signature` header the way Stripe's libraries do: any `v1` entry that
/// matches (compared in constant time) is enough, then the timestamp must be within
/// [`WEBHOOK_TOLERANCE_S`] of `now_unix_s` either way.
pub fn verify_signature(
    secret: &str,
    signature_header: Option<&str>,
    body: &[u8],
    now_unix_s: i64,
) -> Result<(), WebhookError> {
    let header = signature_header
        .filter(|header| !header.trim().is_empty())
        .ok_or(WebhookError::MissingSignature)?;
    let mut timestamp_unix_s = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => timestamp_unix_s = value.parse::<i64>().ok(),
            Some(("v1", value)) => signatures.push(value),
            _ => {}
        }
    }
    let timestamp_unix_s = timestamp_unix_s.ok_or(WebhookError::BadSignature)?;
    let expected = mac_for(secret, timestamp_unix_s, body);
    let matches = signatures.iter().any(|signature| {
        hex::decode(signature)
            .is_ok_and(|signature| expected.clone().verify_slice(&signature).is_ok())
    });
    if !matches {
        return Err(WebhookError::BadSignature);
    }
    if now_unix_s.abs_diff(timestamp_unix_s) > WEBHOOK_TOLERANCE_S.unsigned_abs() {
        return Err(WebhookError::StaleTimestamp);
    }
    Ok(())
}

/// Parses a Stripe event `{id, type, created, data: {object: <PaymentIntent>}}`.
pub fn parse_event(body: &[u8]) -> Result<WebhookEvent, WebhookError> {
    let event: Value = serde_json::from_slice(body)
        .map_err(|error| WebhookError::Malformed(format!("not JSON: {error}")))?;
    let field = |name: &str| {
        event[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| WebhookError::Malformed(format!("event without {name}")))
    };
    let event_id = field("id")?;
    let kind = field("type")?;
    let created_unix_s = event["created"]
        .as_i64()
        .ok_or_else(|| WebhookError::Malformed("event without created".to_owned()))?;
    let object = &event["data"]["object"];
    if object["object"]
        .as_str()
        .is_some_and(|o| o != "payment_intent")
    {
        return Err(WebhookError::Malformed(format!(
            "event {event_id} ({kind}) is not about a payment intent"
        )));
    }
    let payment = parse_payment_intent(object).map_err(WebhookError::Malformed)?;
    Ok(WebhookEvent {
        event_id,
        kind,
        payment,
        created_unix_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_like_stripe() {
        assert_eq!(
            map_status("requires_capture"),
            Some(ProviderStatus::Authorized)
        );
        assert_eq!(map_status("succeeded"), Some(ProviderStatus::Captured));
        assert_eq!(map_status("canceled"), Some(ProviderStatus::Voided));
        assert_eq!(
            map_status("requires_action"),
            Some(ProviderStatus::RequiresAction)
        );
        assert_eq!(
            map_status("requires_payment_method"),
            Some(ProviderStatus::Failed)
        );
        assert_eq!(map_status("processing"), Some(ProviderStatus::Processing));
        assert_eq!(map_status("bogus"), None);
    }

    #[test]
    fn signature_round_trip_and_second_v1_entry() {
        let body = br#"{"id":"evt_1"}"#;
        let good = sign_webhook("whsec_a", 1_000, body);
        assert_eq!(
            verify_signature("whsec_a", Some(&good), body, 1_000),
            Ok(())
        );
        let other = sign_webhook("whsec_b", 1_000, body);
        let other_v1 = other
            .split_once(",v1=")
            .map(|(_, v1)| v1)
            .unwrap_or_default();
        let both = format!("{good},v1={other_v1}");
        assert_eq!(
            verify_signature("whsec_b", Some(&both), body, 1_000),
            Ok(())
        );
        assert_eq!(
            verify_signature("whsec_c", Some(&both), body, 1_000),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature("whsec_a", Some("v1=00"), body, 1_000),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            verify_signature("whsec_a", Some(""), body, 1_000),
            Err(WebhookError::MissingSignature)
        );
        assert_eq!(
            verify_signature(
                "whsec_a",
                Some(&good),
                body,
                1_000 + WEBHOOK_TOLERANCE_S + 1
            ),
            Err(WebhookError::StaleTimestamp)
        );
        assert_eq!(
            verify_signature("whsec_a", Some(&good), body, 1_000 - WEBHOOK_TOLERANCE_S),
            Ok(())
        );
    }

    #[test]
    fn failed_intent_reports_a_decline_code() {
        let intent = serde_json::json!({
            "id": "pi_1", "status": "requires_payment_method", "amount": 500,
            "currency": "eur", "metadata": {"operation_id": "op_1"},
            "last_payment_error": {"code": "card_declined", "decline_code": "insufficient_funds"}
        });
        let payment = parse_payment_intent(&intent).expect("valid intent");
        assert_eq!(payment.status, ProviderStatus::Failed);
        assert_eq!(payment.currency, "EUR");
        assert_eq!(payment.operation_id.as_deref(), Some("op_1"));
        assert_eq!(payment.decline_code.as_deref(), Some("insufficient_funds"));
    }

    /// The 4xx rule, one row per kind of answer (the module docs' table).
    #[test]
    fn answers_are_classified_by_the_4xx_rule() {
        let stripe_error =
            |error: Value| serde_json::to_vec(&serde_json::json!({"error": error})).expect("json");
        let refused = |status: u16, body: &[u8]| match classify(
            StatusCode::from_u16(status).expect("status"),
            body,
        ) {
            Err(ProviderError::Rejected { code, .. }) => Some(code),
            _ => None,
        };
        // Stripe: an unknown payment method.
        let missing = stripe_error(serde_json::json!({
            "type": "invalid_request_error", "code": "resource_missing",
            "message": "No such PaymentMethod: 'pm_x'"}));
        assert_eq!(refused(400, &missing).as_deref(), Some("resource_missing"));
        // localstripe: the same, as a 404 without a code.
        let not_found = stripe_error(
            serde_json::json!({"type": "invalid_request_error", "message": "Not Found"}),
        );
        assert_eq!(
            refused(404, &not_found).as_deref(),
            Some("resource_missing")
        );
        // localstripe: a decline without its payment intent.
        let declined = stripe_error(serde_json::json!({
            "type": "invalid_request_error", "code": "card_declined", "charge": "ch_1"}));
        assert_eq!(refused(402, &declined).as_deref(), Some("card_declined"));
        // A bad request without a code keeps the error's type.
        let bad = stripe_error(
            serde_json::json!({"type": "invalid_request_error", "message": "Bad request"}),
        );
        assert_eq!(refused(400, &bad).as_deref(), Some("invalid_request_error"));

        let unauthorized = stripe_error(serde_json::json!({
            "type": "invalid_request_error", "message": "Invalid API Key provided"}));
        for status in [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN] {
            assert!(matches!(
                classify(status, &unauthorized),
                Err(ProviderError::Unavailable(_))
            ));
        }
        let in_progress = stripe_error(serde_json::json!({"type": "idempotency_error"}));
        assert!(matches!(
            classify(StatusCode::CONFLICT, &in_progress),
            Err(ProviderError::Unknown(_))
        ));
        assert!(matches!(
            classify(StatusCode::BAD_REQUEST, &in_progress),
            Err(ProviderError::Unknown(_))
        ));
        for status in [StatusCode::TOO_MANY_REQUESTS, StatusCode::BAD_GATEWAY] {
            assert!(matches!(
                classify(status, &bad),
                Err(ProviderError::Unavailable(_))
            ));
        }
        // A 404 page from something in between is not the provider refusing the payment.
        assert!(matches!(
            classify(StatusCode::NOT_FOUND, b"<html>Not Found</html>"),
            Err(ProviderError::Unavailable(_))
        ));
        assert!(matches!(
            classify(StatusCode::OK, b"<html>"),
            Err(ProviderError::Unknown(_))
        ));
    }

    #[test]
    fn refunds_parse_and_map_like_stripe() {
        let refund = serde_json::json!({
            "id": "re_1", "object": "refund", "status": "failed", "amount": 1_500,
            "currency": "eur", "payment_intent": "pi_1", "failure_reason": "lost_or_stolen_card",
            "metadata": {"refund_id": "rf_1", "order_id": "ord_1"}
        });
        let parsed = parse_refund(&refund).expect("valid refund");
        assert_eq!(parsed.provider_refund_ref, "re_1");
        assert_eq!(parsed.provider_ref.as_deref(), Some("pi_1"));
        assert_eq!(parsed.refund_id.as_deref(), Some("rf_1"));
        assert_eq!(parsed.amount_minor, 1_500);
        assert_eq!(parsed.currency, "EUR");
        assert_eq!(
            parsed.status,
            RefundStatus::Failed {
                reason: "lost_or_stolen_card".to_owned()
            }
        );
        assert!(parsed.status.is_failed());
        assert_eq!(
            map_refund_status("failed", None),
            Some(RefundStatus::Failed {
                reason: "unknown".to_owned()
            })
        );
        assert_eq!(
            map_refund_status("succeeded", None),
            Some(RefundStatus::Succeeded)
        );
        assert_eq!(
            map_refund_status("pending", None),
            Some(RefundStatus::Pending)
        );
        assert_eq!(
            map_refund_status("requires_action", None),
            Some(RefundStatus::Pending)
        );
        assert_eq!(
            map_refund_status("canceled", None),
            Some(RefundStatus::Canceled)
        );
        assert!(RefundStatus::Canceled.is_failed());
        assert_eq!(map_refund_status("bogus", None), None);

        // A refund refused for good keeps Stripe's code; a 402 is no decline for a refund.
        let too_large = serde_json::to_vec(&serde_json::json!({"error": {
            "type": "invalid_request_error", "code": "amount_too_large",
            "message": "Refund amount is greater than unrefunded amount on charge"}}))
        .expect("json");
        assert!(matches!(
            classify_refund(StatusCode::BAD_REQUEST, &too_large),
            Err(ProviderError::Rejected { code, .. }) if code == "amount_too_large"
        ));
        assert!(matches!(
            classify_refund(StatusCode::PAYMENT_REQUIRED, &too_large),
            Err(ProviderError::Rejected { .. })
        ));
        assert!(matches!(
            classify_refund(StatusCode::OK, br#"{"id": "re_1"}"#),
            Err(ProviderError::Unknown(_))
        ));
    }

    #[test]
    fn provider_refs_cannot_change_the_path() {
        assert!(path_segment("pi_123").is_ok());
        assert!(path_segment("../v1/x").is_err());
        assert!(path_segment("").is_err());
    }
}
