//! The checkout story at the store level, against a temporary SQLite file: begin, settle
//! (confirm and cancel), webhooks, tickets, check-in, the sweeper's grace expiry, and the
//! outbox relay's claim/finish/retry.

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::event::{EventSpec, Section, Tier, WaitingRoomSettings};
use boxoffice_domain::hold::{HoldStatus, SeatStatus};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_domain::order::{OrderStatus, PaymentStatus};
use boxoffice_store::OneShot as _;
use boxoffice_store::checkout::{
    CheckoutBegun, CheckoutStart, OrderView, ProviderVerdict, TicketDraft, topic,
};
use boxoffice_store::{EventRecord, ReadStore, ReleaseOutcome, Store, WorkerStore};
use boxoffice_store_sqlite::SqliteStore;

fn temp_url() -> (String, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("boxoffice-checkout-{}.db", uuid::Uuid::now_v7()));
    (format!("sqlite://{}", path.display()), path)
}

fn remove(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn spec(hold_ttl_s: u32, payment_grace_s: u32) -> EventSpec {
    EventSpec {
        name: "Checkout".into(),
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s,
        payment_grace_s,
        max_seats_per_hold: 4,
        max_tickets_per_account: 6,
        exchange_cutoff_s: 0,
        transfer_cutoff_s: 0,
        waitlist_offer_ttl_s: 600,
        refund_policy: None,
        holder_policy: None,
        sale: Default::default(),
        chart: None,
        waiting_room: WaitingRoomSettings::default(),
        sections: vec![Section {
            name: "A".into(),
            rows: 2,
            seats_per_row: 3,
            price_minor: 5_000,
            row_lengths: Vec::new(),
        }],
        tiers: vec![Tier {
            tier_id: "GA".into(),
            name: "General admission".into(),
            capacity: 10,
            price_minor: 2_000,
        }],
    }
}

fn render_event(record: &EventRecord) -> StoredResponse {
    StoredResponse {
        status: 201,
        body: record.event_id.clone().into_bytes(),
    }
}

fn render_hold(outcome: &HoldOutcome) -> StoredResponse {
    match outcome {
        HoldOutcome::Held(hold) => StoredResponse {
            status: 201,
            body: hold.hold_id.clone().into_bytes(),
        },
        other => StoredResponse {
            status: 409,
            body: format!("{other:?}").into_bytes(),
        },
    }
}

fn render_order(order: &OrderView) -> StoredResponse {
    StoredResponse {
        status: 201,
        body: format!(
            "{} {} {}",
            order.order_id,
            order.status.as_str(),
            order.payment_status.as_str()
        )
        .into_bytes(),
    }
}

fn sign(draft: &TicketDraft) -> String {
    format!("code-{}-{}", draft.order_id, draft.unit)
}

async fn create(store: &SqliteStore, event_id: &str, spec: &EventSpec) -> EventRecord {
    let scope = IdempotencyScope {
        account_id: "op".into(),
        endpoint: "POST /v1/events".into(),
        key: format!("create-{event_id}"),
    };
    let created = store
        .create_event(&scope, "digest", event_id, spec, &render_event)
        .await
        .unwrap();
    assert!(matches!(created, Idempotent::Fresh(_)), "{created:?}");
    store.get_event(event_id).await.unwrap().unwrap()
}

/// Holds `shape` for `account` as `hold_id`; panics unless granted.
async fn hold(
    store: &SqliteStore,
    event: &EventRecord,
    account: &str,
    hold_id: &str,
    shape: HoldShape,
) {
    let request = HoldRequest {
        account_id: account.into(),
        idempotency_key: format!("key-{hold_id}"),
        request_digest: format!("{shape:?}"),
        new_hold_id: hold_id.into(),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    };
    let endpoint = format!("POST /v1/events/{}/holds", event.event_id);
    let answers = store
        .hold_batch(event, &endpoint, &[request], &render_hold)
        .await
        .unwrap();
    assert!(
        matches!(answers.as_slice(), [Idempotent::Fresh(r)] if r.status == 201),
        "{answers:?}"
    );
}

fn seats(ids: &[&str]) -> HoldShape {
    HoldShape::Seats {
        seat_ids: ids.iter().map(|s| (*s).to_owned()).collect(),
    }
}

fn scope(account: &str, hold_id: &str, key: &str) -> IdempotencyScope {
    IdempotencyScope {
        account_id: account.into(),
        endpoint: format!("POST /v1/holds/{hold_id}/checkout"),
        key: key.into(),
    }
}

fn start(
    scope: &IdempotencyScope,
    hold_id: &str,
    order_id: &str,
    operation_id: &str,
) -> CheckoutStart {
    CheckoutStart {
        scope: scope.clone(),
        request_digest: format!("digest-{hold_id}"),
        hold_id: hold_id.into(),
        order_id: order_id.into(),
        operation_id: operation_id.into(),
        provider: "fake".into(),
        payment_method: "card".into(),
    }
}

fn authorized(provider_ref: &str) -> ProviderVerdict {
    ProviderVerdict::Authorized {
        provider_ref: provider_ref.into(),
    }
}

async fn assert_sound(store: &SqliteStore, event_id: &str) {
    let inventory = store.load_inventory(event_id).await.unwrap().unwrap();
    let violations = inventory.invariants();
    assert!(violations.is_empty(), "{violations:?}");
}

async fn topics_of(store: &SqliteStore, needle: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT topic FROM outbox WHERE instr(payload, ?1) > 0 ORDER BY id")
        .bind(needle)
        .fetch_all(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn checkout_story() {
    let (url, path) = temp_url();
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let event = create(&store, "ev", &spec(600, 60)).await;
    assert_eq!(event.payment_grace_s, 60);

    // ----- begin checkout -----
    hold(&store, &event, "alice", "h1", seats(&["A-1-1", "A-1-2"])).await;
    let before = store.get_hold("h1").await.unwrap().unwrap();
    assert_eq!(before.status, HoldStatus::Held);
    let s1 = scope("alice", "h1", "c1");
    let begun = store
        .begin_checkout(&start(&s1, "h1", "o1", "op1"), &render_order)
        .await
        .unwrap();
    let CheckoutBegun::Started { order, operation } = begun else {
        panic!("{begun:?}");
    };
    assert_eq!(order.order_id, "o1");
    assert_eq!(order.status, OrderStatus::PendingPayment);
    assert_eq!(order.payment_status, PaymentStatus::Authorizing);
    assert_eq!(order.seats.len(), 2);
    assert_eq!(order.total_minor, 10_000);
    assert_eq!(order.currency, "EUR");
    assert!(order.tickets.is_empty());
    assert_eq!(operation.operation_id, "op1");
    assert_eq!(operation.status, PaymentStatus::Authorizing);
    assert_eq!(operation.amount_minor, 10_000);
    assert_eq!(operation.n_attempts, 0);
    let in_checkout = store.get_hold("h1").await.unwrap().unwrap();
    assert_eq!(in_checkout.status, HoldStatus::PaymentPending);
    assert_eq!(
        in_checkout.expires_at,
        before.expires_at + time::Duration::seconds(60),
        "one grace extension"
    );
    let inventory = store.load_inventory("ev").await.unwrap().unwrap();
    for seat in inventory
        .seats
        .iter()
        .filter(|s| s.hold_id.as_deref() == Some("h1"))
    {
        assert_eq!(seat.status, SeatStatus::Held);
        assert_eq!(seat.hold_expires_at, Some(in_checkout.expires_at));
    }
    assert_sound(&store, "ev").await;
    // A checkout in progress cannot be released by the buyer.
    assert!(matches!(
        store.release_hold("alice", "h1").await.unwrap(),
        ReleaseOutcome::InCheckout(_)
    ));

    // The same key and request replays; another request under it is refused.
    let replay = store
        .begin_checkout(&start(&s1, "h1", "o1-again", "op1-again"), &render_order)
        .await
        .unwrap();
    assert_eq!(replay, CheckoutBegun::Replayed(render_order(&order)));
    let mut other = start(&s1, "h1", "o1x", "op1x");
    other.request_digest = "another".into();
    assert_eq!(
        store.begin_checkout(&other, &render_order).await.unwrap(),
        CheckoutBegun::KeyReusedWithOtherRequest
    );
    // Another key on the same hold: already in checkout.
    assert_eq!(
        store
            .begin_checkout(
                &start(&scope("alice", "h1", "c1-other"), "h1", "o1y", "op1y"),
                &render_order
            )
            .await
            .unwrap(),
        CheckoutBegun::HoldInCheckout
    );
    // Unknown hold, and someone else's hold.
    assert_eq!(
        store
            .begin_checkout(
                &start(&scope("alice", "nope", "c0"), "nope", "o0", "op0"),
                &render_order
            )
            .await
            .unwrap(),
        CheckoutBegun::HoldNotFound
    );
    assert_eq!(
        store
            .begin_checkout(
                &start(&scope("bob", "h1", "c0"), "h1", "o0", "op0"),
                &render_order
            )
            .await
            .unwrap(),
        CheckoutBegun::HoldNotFound
    );

    // ----- settle: authorized -----
    let settled = store
        .settle_payment("op1", &authorized("ref1"), None, Some((&s1, &render_order)))
        .await
        .unwrap()
        .unwrap();
    assert!(settled.changed);
    assert_eq!(settled.order.status, OrderStatus::Confirmed);
    assert_eq!(settled.order.payment_status, PaymentStatus::Authorized);
    let hold1 = store.get_hold("h1").await.unwrap().unwrap();
    assert_eq!(hold1.status, HoldStatus::Confirmed);
    let inventory = store.load_inventory("ev").await.unwrap().unwrap();
    let sold: Vec<_> = inventory
        .seats
        .iter()
        .filter(|s| s.status == SeatStatus::Sold)
        .collect();
    assert_eq!(sold.len(), 2);
    assert!(sold.iter().all(|s| s.order_id.as_deref() == Some("o1")));
    assert_eq!(
        topics_of(&store, "\"o1\"").await,
        [topic::TICKETS_ISSUE, topic::ORDER_CONFIRMED]
    );
    assert_eq!(topics_of(&store, "\"op1\"").await, [topic::PAYMENT_CAPTURE]);
    // The replay now answers with the settled order.
    let replay = store
        .begin_checkout(&start(&s1, "h1", "o1", "op1"), &render_order)
        .await
        .unwrap();
    assert_eq!(
        replay,
        CheckoutBegun::Replayed(render_order(&settled.order))
    );
    assert_ne!(replay, CheckoutBegun::Replayed(render_order(&order)));
    // A duplicated verdict changes nothing.
    let again = store
        .settle_payment("op1", &authorized("ref1"), None, None)
        .await
        .unwrap()
        .unwrap();
    assert!(!again.changed);
    assert_eq!(again.order.status, OrderStatus::Confirmed);
    assert_eq!(
        store
            .settle_payment("nope", &authorized("x"), None, None)
            .await
            .unwrap(),
        None
    );
    let by_ref = store
        .payment_operation_by_ref("fake", "ref1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_ref.operation_id, "op1");
    assert_eq!(by_ref.provider_ref.as_deref(), Some("ref1"));
    assert_eq!(
        store
            .payment_operation("op1")
            .await
            .unwrap()
            .unwrap()
            .status,
        PaymentStatus::Authorized
    );

    // A webhook event is applied once.
    let captured = ProviderVerdict::Captured {
        provider_ref: "ref1".into(),
    };
    let first = store
        .settle_payment("op1", &captured, Some(("fake", "evt-1")), None)
        .await
        .unwrap()
        .unwrap();
    assert!(first.changed);
    assert_eq!(first.order.payment_status, PaymentStatus::Captured);
    assert_eq!(
        store
            .settle_payment("op1", &captured, Some(("fake", "evt-1")), None)
            .await
            .unwrap(),
        None
    );

    // ----- tickets -----
    assert_eq!(store.issue_tickets("o1", &sign).await.unwrap(), 2);
    assert_eq!(store.issue_tickets("o1", &sign).await.unwrap(), 0);
    let o1 = store.get_order("o1").await.unwrap().unwrap();
    assert_eq!(o1.tickets.len(), 2);
    assert_eq!(o1.tickets[0].unit, 1);
    assert_eq!(o1.tickets[0].code, "code-o1-1");
    assert_eq!(
        o1.tickets[0].seat_id.as_deref(),
        Some(o1.seats[0].seat_id.as_str())
    );
    let ticket_id = o1.tickets[0].ticket_id.clone();
    let ticket = store.get_ticket(&ticket_id).await.unwrap().unwrap();
    assert_eq!(ticket.status, "VALID");
    assert_eq!(ticket.account_id, "alice");
    assert_eq!(
        store.check_in(&ticket_id).await.unwrap(),
        Some((true, "CHECKED_IN".to_owned()))
    );
    assert_eq!(
        store.check_in(&ticket_id).await.unwrap(),
        Some((false, "CHECKED_IN".to_owned()))
    );
    assert_eq!(store.check_in("no-such-ticket").await.unwrap(), None);
    assert_eq!(store.get_ticket("no-such-ticket").await.unwrap(), None);

    // ----- settle: failed -----
    hold(&store, &event, "alice", "h2", seats(&["A-2-1"])).await;
    let s2 = scope("alice", "h2", "c2");
    let begun = store
        .begin_checkout(&start(&s2, "h2", "o2", "op2"), &render_order)
        .await
        .unwrap();
    assert!(matches!(begun, CheckoutBegun::Started { .. }), "{begun:?}");
    let failed = ProviderVerdict::Failed {
        provider_ref: Some("ref2".into()),
        reason: "declined".into(),
    };
    let settled = store
        .settle_payment("op2", &failed, None, Some((&s2, &render_order)))
        .await
        .unwrap()
        .unwrap();
    assert!(settled.changed);
    assert_eq!(settled.order.status, OrderStatus::Cancelled);
    assert_eq!(settled.order.payment_status, PaymentStatus::Failed);
    assert_eq!(
        settled.order.cancel_reason.as_deref(),
        Some("PAYMENT_FAILED")
    );
    assert_eq!(
        store.get_hold("h2").await.unwrap().unwrap().status,
        HoldStatus::Released
    );
    let inventory = store.load_inventory("ev").await.unwrap().unwrap();
    let seat = inventory
        .seats
        .iter()
        .find(|s| s.seat_id == "A-2-1")
        .unwrap();
    assert_eq!(seat.status, SeatStatus::Available);
    assert_eq!(seat.hold_id, None);
    assert_eq!(topics_of(&store, "\"o2\"").await, [topic::ORDER_CANCELLED]);
    // Failed is terminal: a late authorization changes nothing.
    let late = store
        .settle_payment("op2", &authorized("ref2"), None, None)
        .await
        .unwrap()
        .unwrap();
    assert!(!late.changed);
    assert_eq!(late.order.status, OrderStatus::Cancelled);

    // A released hold cannot go to checkout.
    hold(&store, &event, "alice", "h3", seats(&["A-2-2"])).await;
    assert!(matches!(
        store.release_hold("alice", "h3").await.unwrap(),
        ReleaseOutcome::Released(_)
    ));
    assert_eq!(
        store
            .begin_checkout(
                &start(&scope("alice", "h3", "c3"), "h3", "o3", "op3"),
                &render_order
            )
            .await
            .unwrap(),
        CheckoutBegun::HoldExpired
    );

    // ----- a tier hold, through the reconciler's work list -----
    hold(
        &store,
        &event,
        "alice",
        "h4",
        HoldShape::Tier {
            tier_id: "GA".into(),
            quantity: 2,
        },
    )
    .await;
    let begun = store
        .begin_checkout(
            &start(&scope("alice", "h4", "c4"), "h4", "o4", "op4"),
            &render_order,
        )
        .await
        .unwrap();
    assert!(matches!(begun, CheckoutBegun::Started { .. }), "{begun:?}");
    let due = store.due_payment_operations(10).await.unwrap();
    assert!(
        due.iter().all(|op| op.operation_id != "op4"),
        "not due yet: {due:?}"
    );
    store
        .postpone_payment_operation("op4", 0.0, "timeout")
        .await
        .unwrap();
    let due = store.due_payment_operations(10).await.unwrap();
    let op4 = due
        .iter()
        .find(|op| op.operation_id == "op4")
        .expect("due now");
    assert_eq!(op4.n_attempts, 1);
    let unknown = ProviderVerdict::Unknown {
        reason: "timeout".into(),
    };
    let settled = store
        .settle_payment("op4", &unknown, None, None)
        .await
        .unwrap()
        .unwrap();
    assert!(settled.changed);
    assert_eq!(settled.order.status, OrderStatus::PendingPayment);
    assert_eq!(settled.order.payment_status, PaymentStatus::Unknown);
    let settled = store
        .settle_payment("op4", &authorized("ref4"), None, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(settled.order.status, OrderStatus::Confirmed);
    assert_eq!(store.issue_tickets("o4", &sign).await.unwrap(), 2);
    let counts = store.event_counts(&event).await.unwrap();
    assert_eq!(counts.tiers[0].1.sold, 2);
    assert_eq!(counts.tiers[0].1.held, 0);
    assert_eq!(counts.tiers[0].1.available, 8);
    assert_eq!(counts.sections[0].1.sold, 2);

    let orders = store.list_orders("alice", None, 10).await.unwrap();
    let ids: Vec<&str> = orders.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids, ["o4", "o2", "o1"]);
    let older = store.list_orders("alice", Some("o2"), 10).await.unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].order_id, "o1");
    assert!(store.list_orders("bob", None, 10).await.unwrap().is_empty());
    assert_sound(&store, "ev").await;

    // ----- the outbox relay -----
    let claimed = store.claim_outbox(1_000, 30.0).await.unwrap();
    assert!(claimed.len() >= 10, "{claimed:?}");
    assert!(claimed.windows(2).all(|w| w[0].id < w[1].id));
    assert!(claimed.iter().all(|m| m.n_attempts == 1));
    // The oldest undelivered message's age, in seconds by the store's clock (written by this
    // test moments ago: not milliseconds, not a clock from another epoch).
    let lag = store.outbox_lag_s().await.unwrap();
    assert!((0.0..60.0).contains(&lag), "lag {lag}");
    // Leased: a second relay finds nothing.
    assert!(store.claim_outbox(1_000, 30.0).await.unwrap().is_empty());
    let (first, second) = (&claimed[0], &claimed[1]);
    for message in &claimed[2..] {
        store.finish_outbox(&[message.id]).await.unwrap();
    }
    store
        .retry_outbox(first.id, 0.0, "broker down")
        .await
        .unwrap();
    store
        .retry_outbox(second.id, 60.0, "broker down")
        .await
        .unwrap();
    let again = store.claim_outbox(1_000, 0.0).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].id, first.id);
    assert_eq!(again[0].n_attempts, 2);
    assert_eq!(again[0].payload, first.payload);
    // A lease of zero ends at once.
    let once_more = store.claim_outbox(1_000, 30.0).await.unwrap();
    assert_eq!(once_more.len(), 1);
    assert_eq!(once_more[0].n_attempts, 3);
    store.finish_outbox(&[first.id, second.id]).await.unwrap();
    assert!(store.claim_outbox(1_000, 0.0).await.unwrap().is_empty());
    assert_eq!(store.outbox_lag_s().await.unwrap(), 0.0);
    // A finished row is never retried.
    store.retry_outbox(first.id, 0.0, "late").await.unwrap();
    assert!(store.claim_outbox(1_000, 0.0).await.unwrap().is_empty());

    assert_sound(&store, "ev").await;
    drop(store);
    remove(&path);
}

/// A hold in checkout past its grace deadline is expired by the sweeper, which cancels its
/// order; an authorization that arrives afterwards is voided, never confirmed.
#[tokio::test]
async fn grace_deadline_expires_checkout() {
    let (url, path) = temp_url();
    let store = SqliteStore::connect(&url).await.unwrap();
    store.migrate().await.unwrap();
    let event = create(&store, "short", &spec(2, 3)).await;
    hold(&store, &event, "dave", "h1", seats(&["A-1-1"])).await;
    let s1 = scope("dave", "h1", "c1");
    let begun = store
        .begin_checkout(&start(&s1, "h1", "o1", "op1"), &render_order)
        .await
        .unwrap();
    assert!(matches!(begun, CheckoutBegun::Started { .. }), "{begun:?}");
    // Past the hold's own deadline but within grace (the store's clock moved forward):
    // still in checkout.
    store
        .advance_clock(std::time::Duration::from_millis(2_100))
        .await
        .unwrap();
    assert_eq!(
        store.expire_due_holds(100, 0).await.unwrap().holds_expired,
        0
    );
    store
        .advance_clock(std::time::Duration::from_millis(3_000))
        .await
        .unwrap();
    let report = store.expire_due_holds(100, 0).await.unwrap();
    assert_eq!(report.holds_expired, 1);
    assert_eq!(report.seats_freed, 1);
    assert_eq!(
        store.get_hold("h1").await.unwrap().unwrap().status,
        HoldStatus::Expired
    );
    let order = store.get_order("o1").await.unwrap().unwrap();
    assert_eq!(order.status, OrderStatus::Cancelled);
    assert_eq!(order.cancel_reason.as_deref(), Some("HOLD_EXPIRED"));
    assert_eq!(topics_of(&store, "\"o1\"").await, [topic::ORDER_CANCELLED]);
    assert_sound(&store, "short").await;

    let late = store
        .settle_payment("op1", &authorized("ref1"), None, Some((&s1, &render_order)))
        .await
        .unwrap()
        .unwrap();
    assert!(late.changed);
    assert_eq!(late.order.status, OrderStatus::Cancelled);
    assert_eq!(late.order.payment_status, PaymentStatus::Authorized);
    assert_eq!(topics_of(&store, "\"op1\"").await, [topic::PAYMENT_VOID]);
    // The reconciler keeps an authorization open on a cancelled order on its list.
    store
        .postpone_payment_operation("op1", 0.0, "void pending")
        .await
        .unwrap();
    let due = store.due_payment_operations(10).await.unwrap();
    assert!(due.iter().any(|op| op.operation_id == "op1"), "{due:?}");
    let inventory = store.load_inventory("short").await.unwrap().unwrap();
    assert!(
        inventory
            .seats
            .iter()
            .all(|s| s.status == SeatStatus::Available)
    );
    // Until the void is delivered the open authorization is a reported violation (I8);
    // once the relay (played here) voids it, the inventory is sound.
    let open = store
        .load_inventory("short")
        .await
        .unwrap()
        .unwrap()
        .invariants();
    assert!(open.iter().any(|v| v.invariant == "I8"), "{open:?}");
    let voided = ProviderVerdict::Voided {
        provider_ref: "pi_1".into(),
    };
    store
        .settle_payment("op1", &voided, None, None)
        .await
        .unwrap();
    assert_sound(&store, "short").await;
    drop(store);
    remove(&path);
}
