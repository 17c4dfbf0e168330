//! The tests every [`Store`] backend must pass, written once (as
//! `boxoffice_waitroom_state::conformance` is for the room). Each backend's test file calls
//! them (`store-postgres/tests/conformance.rs`, `store-sqlite/tests/conformance.rs`). Every
//! function creates its own event, so they may share one store.
//!
//! The strongest is [`matches_the_model`]: a random sequence of holds (by seat, best
//! available, tier units), releases and expiries is decided by an [`EventEngine`] kept in
//! memory (the model) and each group persisted with the backend's `apply_group`; after every
//! group, the engine's rows loaded back from the store must equal the model's, the store's
//! inventory must keep its invariants, and a group persisted twice must be refused the second
//! time with the store unchanged.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Not;
use std::time::Duration;

use boxoffice_domain::OffsetDateTime;
use boxoffice_domain::best::Together;
use boxoffice_domain::decide::{HoldOutcome, HoldRequest, HoldShape};
use boxoffice_domain::engine::{Command, Decision, EngineSnapshot, EventEngine};
use boxoffice_domain::event::{EventSpec, Section, Tier, WaitingRoomSettings};
use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
use boxoffice_store::engine::{FirstInLine, GroupWrite};
use boxoffice_store::{EventRecord, NewRecord, Store};

/// The endpoint the suite's hold records are stored under.
const ENDPOINT: &str = "POST /v1/events/{eventId}/holds";

/// A small house: two sections of 3 × 4 seats and a tier of 10 units, holds of up to 4, at
/// most 6 tickets an account.
fn spec(hold_ttl_s: u32) -> EventSpec {
    EventSpec {
        name: "Conformance".into(),
        starts_at: OffsetDateTime::now_utc() + time::Duration::days(30),
        on_sale_at: None,
        currency: "EUR".into(),
        hold_ttl_s,
        payment_grace_s: 60,
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
        sections: ["A", "B"]
            .into_iter()
            .map(|name| Section {
                name: name.into(),
                rows: 3,
                seats_per_row: 4,
                price_minor: 5_000,
                row_lengths: Vec::new(),
            })
            .collect(),
        tiers: vec![Tier {
            tier_id: "GA".into(),
            name: "General admission".into(),
            capacity: 10,
            price_minor: 2_000,
        }],
    }
}

/// Creates a fresh event on `store`.
pub async fn create_event(store: &dyn Store, tag: &str, hold_ttl_s: u32) -> EventRecord {
    let event_id = format!("evt-{tag}-{}", uuid::Uuid::now_v7().simple());
    let scope = IdempotencyScope {
        account_id: "operator".into(),
        endpoint: "POST /v1/events".into(),
        key: event_id.clone(),
    };
    let render = |record: &EventRecord| StoredResponse {
        status: 201,
        body: record.event_id.clone().into_bytes(),
    };
    let created = store
        .create_event(&scope, "digest", &event_id, &spec(hold_ttl_s), &render)
        .await
        .expect("create the event");
    assert!(matches!(created, Idempotent::Fresh(_)), "{created:?}");
    store
        .get_event(&event_id)
        .await
        .expect("read the event")
        .expect("the event just created")
}

/// A small deterministic generator (xorshift64*), so that a failing seed replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// One random command: mostly holds of every shape, some releases of live holds.
fn command(rng: &mut Rng, step: u64, live: &[(String, String)]) -> Command {
    let account = format!("fan-{}", rng.below(5));
    if !live.is_empty() && rng.below(4) == 0 {
        let (hold_id, account_id) = &live[rng.below(live.len() as u64) as usize];
        return Command::Release {
            account_id: account_id.clone(),
            hold_id: hold_id.clone(),
        };
    }
    let shape = match rng.below(3) {
        0 => HoldShape::Seats {
            seat_ids: (0..=rng.below(2))
                .map(|_| {
                    let section = if rng.below(2) == 0 { "A" } else { "B" };
                    format!("{section}-{}-{}", rng.below(3) + 1, rng.below(4) + 1)
                })
                .collect(),
        },
        1 => HoldShape::BestAvailable {
            quantity: rng.below(4) as u32 + 1,
            section: None,
            max_price_minor: None,
            together: Together::Prefer,
        },
        _ => HoldShape::Tier {
            tier_id: "GA".into(),
            quantity: rng.below(3) as u32 + 1,
        },
    };
    // Now and then a key used before, to exercise replays and refused reuses.
    let key = if rng.below(8) == 0 && step > 0 {
        format!("key-{}", rng.below(step))
    } else {
        format!("key-{step}")
    };
    Command::Hold(HoldRequest {
        account_id: account,
        request_digest: format!("{shape:?}"),
        idempotency_key: key,
        new_hold_id: format!("hold-{step}-{}", uuid::Uuid::now_v7().simple()),
        shape,
        phase_id: None,
        ticket_types: Default::default(),
        accessible: false,
    })
}

/// The rows of `snapshot` that the model must have as they are.
fn assert_model_has(model: &EventEngine, snapshot: &EngineSnapshot, live: &[(String, String)]) {
    for seat in &snapshot.seats {
        assert_eq!(
            model.seat(&seat.seat_id),
            Some(seat),
            "seat {}",
            seat.seat_id
        );
    }
    for tier in &snapshot.tiers {
        assert_eq!(
            model.tier(&tier.tier_id),
            Some(tier),
            "tier {}",
            tier.tier_id
        );
    }
    for hold in &snapshot.holds {
        assert_eq!(
            model.hold(&hold.hold_id),
            Some(hold),
            "hold {}",
            hold.hold_id
        );
    }
    let stored: std::collections::BTreeSet<&str> =
        snapshot.holds.iter().map(|h| h.hold_id.as_str()).collect();
    for (hold_id, _) in live {
        assert!(
            stored.contains(hold_id.as_str()),
            "the store lost hold {hold_id}"
        );
    }
    assert_eq!(snapshot.version, model.version(), "map version");
    assert_eq!(snapshot.writer_seq, model.writer_seq(), "writer sequence");
}

/// See the module documentation. `advance` moves the store's clock forward (each backend's
/// `advance_clock`), so that holds expire without waiting.
pub async fn matches_the_model<F, Fut>(store: &dyn Store, seed: u64, steps: u64, advance: F)
where
    F: Fn(Duration) -> Fut,
    Fut: Future<Output = boxoffice_store::StoreResult<()>>,
{
    let hold_ttl_s = 60;
    let event = create_event(store, "model", hold_ttl_s).await;
    let (snapshot, now) = store.engine_load(&event, ENDPOINT).await.expect("load");
    let mut model = EventEngine::load(event.rules(), snapshot, now);
    let mut rng = Rng(seed.max(1));
    // Live holds, (hold id, account), as the model decided them.
    let mut live: Vec<(String, String)> = Vec::new();
    // (created, released, expired, refused) over the run: the sequence must have done each.
    let mut seen = (0, 0, 0, 0);
    let mut step = 0;
    while step < steps {
        if rng.below(10) == 0 {
            // Past every deadline: the next group expires what is live.
            advance(Duration::from_secs(u64::from(hold_ttl_s) + 1))
                .await
                .expect("move the store's clock");
        }
        let now = store.now().await.expect("the store's clock");
        let commands: Vec<Command> = (0..=rng.below(4))
            .map(|_| {
                step += 1;
                command(&mut rng, step, &live)
            })
            .collect();
        let mut first_try = true;
        let (decisions, effects) = loop {
            let (decisions, effects) = model.decide(now, &commands);
            let mut records = Vec::new();
            for (command, decision) in commands.iter().zip(&decisions) {
                if let (Command::Hold(request), Decision::Hold(outcome)) = (command, decision)
                    && outcome.is_recorded()
                {
                    records.push(NewRecord {
                        account_id: request.account_id.clone(),
                        key: request.idempotency_key.clone(),
                        request_digest: request.request_digest.clone(),
                        response: StoredResponse {
                            status: 201,
                            body: format!("{outcome:?}").into_bytes(),
                        },
                    });
                }
            }
            let group = GroupWrite {
                event: &event,
                endpoint: ENDPOINT,
                now,
                writer_seq: model.writer_seq() + 1,
                fence: None,
                effects: &effects,
                records,
                commands: BTreeMap::new(),
                turn: &FirstInLine,
            };
            let committed = match store.apply_group(&group).await {
                Ok(committed) => committed,
                // A key the engine forgot (older than the hold TTL and its margin, the
                // clock having moved on) is decided as new and refused by the store's
                // unique key: as the writer does, load the engine again (it reads the key
                // back) and decide once more, which replays it.
                Err(boxoffice_store::StoreError::Conflict(why)) if first_try => {
                    assert!(why.contains("idempotency"), "seed {seed}: {why}");
                    let (snapshot, now) = store.engine_load(&event, ENDPOINT).await.expect("load");
                    model = EventEngine::load(event.rules(), snapshot, now);
                    first_try = false;
                    continue;
                }
                Err(e) => panic!("seed {seed}: the store refused the model's group: {e}"),
            };
            assert_eq!(
                committed.expiries_skipped, 0,
                "seed {seed}: nothing else ends holds"
            );
            model.committed(committed.version, group.writer_seq);
            // The same group again: its writer sequence is used (and its holds' keys, its
            // conditions), so the store refuses it whole; the rows below must show it wrote
            // nothing.
            let again = store.apply_group(&group).await;
            assert!(again.is_err(), "seed {seed}: a group persisted twice");
            break (decisions, effects);
        };
        seen.0 += effects.holds_created().count();
        seen.1 += effects.holds_released().count();
        seen.2 += effects.holds_expired().count();
        seen.3 += decisions
            .iter()
            .filter(|d| matches!(d, Decision::Hold(HoldOutcome::Held(_))).not())
            .count();
        for hold in effects.holds_expired().chain(effects.holds_released()) {
            live.retain(|(id, _)| *id != hold.hold_id);
        }
        for decision in &decisions {
            if let Decision::Hold(HoldOutcome::Held(hold)) = decision {
                live.push((hold.hold_id.clone(), hold.account_id.clone()));
            }
        }
        let (snapshot, _) = store.engine_load(&event, ENDPOINT).await.expect("load");
        assert_model_has(&model, &snapshot, &live);
        let violations = model.invariants();
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
        let inventory = store
            .load_inventory(&event.event_id)
            .await
            .expect("inventory")
            .expect("the event's inventory");
        let violations = inventory.invariants();
        assert!(violations.is_empty(), "seed {seed}: {violations:?}");
    }
    let (created, released, expired, other) = seen;
    assert!(
        created > 0 && released > 0 && expired > 0 && other > 0,
        "seed {seed}: the sequence must create, release, expire and refuse: {seen:?}"
    );
}

/// A phase's access codes (issue 40): a batch is inserted all or nothing, a retry of it
/// answers its codes, its key with another request is refused, a code the phase has already
/// refuses the batch, and a phase never holds more codes than its maximum.
pub async fn access_code_batches(store: &dyn Store) {
    use boxoffice_store::phase::{AccessCodeRow, CodeBatch, CodesInserted};

    let event = create_event(store, "codes", 300).await;
    let batch = |key: &str, digest: &str, codes: &[(&str, u32)], max: u64| CodeBatch {
        event_id: event.event_id.clone(),
        phase_id: "fanclub".into(),
        batch_key: format!("ops:{key}"),
        batch_digest: digest.into(),
        codes: codes.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
        phase_codes_max: max,
    };
    let row = |code: &str, max_uses: u32| AccessCodeRow {
        code: code.into(),
        max_uses,
        uses: 0,
    };
    let first = batch("k1", "d1", &[("BBBB0001", 1), ("AAAA0001", 2)], 3);
    let inserted = store.insert_access_codes(&first).await.expect("insert");
    assert_eq!(
        inserted,
        CodesInserted::Inserted(vec![row("BBBB0001", 1), row("AAAA0001", 2)])
    );
    let replayed = store.insert_access_codes(&first).await.expect("replay");
    assert_eq!(
        replayed,
        CodesInserted::Replayed(vec![row("AAAA0001", 2), row("BBBB0001", 1)])
    );
    let reused = batch("k1", "d2", &[("CCCC0001", 1)], 3);
    assert_eq!(
        store.insert_access_codes(&reused).await.expect("reuse"),
        CodesInserted::KeyReused
    );
    let duplicate = batch("k2", "d3", &[("CCCC0001", 1), ("BBBB0001", 1)], 10);
    assert_eq!(
        store
            .insert_access_codes(&duplicate)
            .await
            .expect("duplicate"),
        CodesInserted::Duplicate("BBBB0001".into())
    );
    let too_many = batch("k3", "d4", &[("CCCC0001", 1), ("DDDD0001", 1)], 3);
    assert_eq!(
        store
            .insert_access_codes(&too_many)
            .await
            .expect("too many"),
        CodesInserted::TooMany { held: 2 }
    );
    // Nothing of the refused batches was written.
    let listed = store
        .access_codes(&event.event_id, "fanclub", 10)
        .await
        .expect("list");
    assert_eq!(listed, vec![row("AAAA0001", 2), row("BBBB0001", 1)]);
    let one = store
        .access_code(&event.event_id, "fanclub", "AAAA0001")
        .await
        .expect("get");
    assert_eq!(one, Some(row("AAAA0001", 2)));
    let none = store
        .access_code(&event.event_id, "other", "AAAA0001")
        .await
        .expect("get in another phase");
    assert_eq!(none, None);
    let redeemed = store
        .access_redeemed(&event.event_id, "fanclub", "ann")
        .await
        .expect("redeemed");
    assert!(!redeemed);
}
