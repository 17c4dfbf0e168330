//! The Stripe adapter against localstripe (PyPI `localstripe`, a fake Stripe that boxoffice
//! did not write), each test on its own localstripe on a free port below 32768, killed at
//! the end. The scenarios shared with the simulator run first; then what localstripe does
//! differently from Stripe, pinned so that ARCHITECTURE.md's "What localstripe cannot do"
//! stays true. A missing localstripe fails these tests, naming how to install it.

mod scenarios;

use boxoffice_payments::{
    PaymentProvider, ProviderError, ProviderStatus, RefundReason, RefundRequest, RefundStatus,
};
use scenarios::{Backend, Server, authorize_request, operation_id, refund_id, refund_request};

scenarios!(
    crate::scenarios::Backend::localstripe;
    authorize_capture_retrieve,
    authorize_then_void,
    retrieving_an_unknown_payment_is_refused,
    a_declining_card_fails_with_its_code,
    an_unknown_payment_method_is_refused_for_good,
    a_capture_is_told_by_a_signed_webhook,
    a_captured_payment_is_refunded_in_part_then_in_full,
);

fn base_url(backend: &Backend) -> &str {
    match &backend.server {
        Server::LocalStripe(started) => &started.base_url,
        Server::Simulator(_) => unreachable!("a localstripe backend"),
    }
}

/// localstripe ignores `Idempotency-Key`: the same authorization sent twice creates two
/// payments (Stripe and the simulator replay the first). So a lost answer retried by the
/// reconciler could authorize twice there; the replay tests run against the simulator.
#[tokio::test]
async fn localstripe_does_not_replay_an_idempotency_key() {
    let backend = Backend::localstripe().await;
    let request = authorize_request(&operation_id("replay"), "pm_card_visa");
    let first = backend.provider.authorize(&request).await.expect("first");
    let second = backend.provider.authorize(&request).await.expect("second");
    assert_eq!(first.status, ProviderStatus::Authorized);
    assert_eq!(second.status, ProviderStatus::Authorized);
    assert_ne!(
        first.provider_ref, second.provider_ref,
        "localstripe now replays idempotency keys: update ARCHITECTURE.md and test replays here"
    );
}

/// 3-D Secure: localstripe has no `pm_card_threeDSecure2Required`; it asks for
/// authentication only for a PaymentMethod made from one of its 3-D Secure card numbers,
/// as a `use_stripe_sdk` next action (no `redirect_to_url`, so no URL to send the fan to),
/// completed through its own `/_authenticate` endpoint, not by a redirect.
#[tokio::test]
async fn localstripe_asks_three_d_secure_without_a_redirect() {
    let backend = Backend::localstripe().await;
    let unknown = backend
        .provider
        .authorize(&authorize_request(
            &operation_id("3ds_id"),
            "pm_card_threeDSecure2Required",
        ))
        .await;
    assert!(
        scenarios::failure_code(&unknown) == Some("resource_missing"),
        "{unknown:?}"
    );
    let made: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/v1/payment_methods", base_url(&backend)))
        .bearer_auth(boxoffice_payments::localstripe::SECRET_KEY)
        .form(&[
            ("type", "card"),
            ("card[number]", "4000002500003155"),
            ("card[exp_month]", "12"),
            ("card[exp_year]", "2030"),
            ("card[cvc]", "123"),
        ])
        .send()
        .await
        .expect("payment method")
        .json()
        .await
        .expect("json");
    let payment_method = made["id"].as_str().expect("a payment method id");
    let pending = backend
        .provider
        .authorize(&authorize_request(&operation_id("3ds"), payment_method))
        .await
        .expect("authorize");
    assert_eq!(pending.status, ProviderStatus::RequiresAction);
    assert_eq!(pending.next_action_url, None, "no redirect URL for the fan");
}

/// localstripe accepts any key shaped `sk_...`: a wrong key cannot be tried against it (the
/// simulator's test `a_wrong_api_key_is_unavailable_not_a_failure` covers 401).
#[tokio::test]
async fn localstripe_accepts_any_secret_key() {
    let backend = Backend::localstripe().await;
    let provider = boxoffice_payments::StripeProvider::new(
        backend.proxy.base_url.clone(),
        "sk_test_not_the_configured_one".to_owned(),
        "whsec_x".to_owned(),
    );
    let authorized = provider
        .authorize(&authorize_request(&operation_id("any_key"), "pm_card_visa"))
        .await
        .expect("authorize");
    assert_eq!(authorized.status, ProviderStatus::Authorized);
}

/// localstripe refunds without Stripe's checks: an authorization not yet captured is
/// refunded (Stripe refuses; boxoffice voids it instead), refunds past the captured amount
/// are made (Stripe: 400 `amount_too_large`), and the same refund id sent twice makes two
/// refunds (it ignores `Idempotency-Key`). So refusals, replays and lost refund answers are
/// tested on the simulator only.
#[tokio::test]
async fn localstripe_refunds_without_checking_what_was_captured() {
    let backend = Backend::localstripe().await;
    let operation_id = operation_id("refund_uncaptured");
    let authorized = backend
        .provider
        .authorize(&authorize_request(&operation_id, "pm_card_visa"))
        .await
        .expect("authorize");
    let uncaptured = backend
        .provider
        .refund(&refund_request(
            &refund_id("uncaptured"),
            &authorized.provider_ref,
            1_000,
        ))
        .await
        .expect("localstripe refunds an uncaptured authorization");
    assert_eq!(
        uncaptured.status,
        RefundStatus::Succeeded,
        "localstripe now refuses to refund an uncaptured payment: update ARCHITECTURE.md"
    );

    let payment = scenarios::captured_payment(&backend, "refund_over").await;
    let request = refund_request(&refund_id("over"), &payment.provider_ref, 4_000);
    let first = backend.provider.refund(&request).await.expect("first");
    let second = backend.provider.refund(&request).await.expect("second");
    assert_eq!(first.status, RefundStatus::Succeeded);
    assert_eq!(
        second.status,
        RefundStatus::Succeeded,
        "8,000 of a 4,500 payment: localstripe now checks the amount; update ARCHITECTURE.md"
    );
    assert_ne!(
        first.provider_refund_ref, second.provider_refund_ref,
        "localstripe now replays idempotency keys: update ARCHITECTURE.md"
    );
    assert_eq!(backend.proxy.refunds_sent(&request.refund_id), 2);
}

/// localstripe refuses Stripe's `reason` parameter (400 "Unexpected reason", so the adapter
/// sends it only when asked) and answers an unknown refund 404 without a code.
#[tokio::test]
async fn localstripe_refuses_a_refund_reason() {
    let backend = Backend::localstripe().await;
    let payment = scenarios::captured_payment(&backend, "refund_reason").await;
    let with_reason = RefundRequest {
        reason: Some(RefundReason::RequestedByCustomer),
        ..refund_request(&refund_id("reason"), &payment.provider_ref, 1_000)
    };
    let refused = backend.provider.refund(&with_reason).await;
    assert!(
        matches!(&refused, Err(ProviderError::Rejected { message, .. }) if message.contains("Unexpected reason")),
        "{refused:?}"
    );
    let missing = backend.provider.retrieve_refund("re_does_not_exist").await;
    assert!(
        matches!(&missing, Err(ProviderError::Rejected { code, .. }) if code == "resource_missing"),
        "{missing:?}"
    );
}
