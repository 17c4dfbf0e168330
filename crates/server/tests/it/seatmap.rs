//! The live seat map over HTTP, on PostgreSQL and SQLite: after a random run of holds,
//! releases, expiries (swept and unswept), sales and declined payments, a snapshot plus the
//! changes since equals the store's truth; a stream that reconnects with `Last-Event-ID`
//! (even to a restarted server) misses nothing; a version the log no longer reaches gets 410
//! and `event: reset`; ETag, 304 and gzip. Exchanges join the random run with issue 7.

use crate::common;

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Duration;

use crate::common::{Backend, TestApp, token};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    snapshot_plus_changes_equals_the_store_after_random_operations,
    a_stream_that_reconnects_with_last_event_id_misses_nothing,
    a_version_too_old_gets_410_and_reset,
    snapshot_etag_gzip_and_expired_holds,
    sold_seats_are_refused_from_the_map_without_a_store_write,
);

/// A seat as a client keeps it: status and hold deadline (RFC 3339), if held.
type ClientSeat = (String, Option<String>);

/// What a fan sees at `now` for a seat kept as (status, holdExpiresAt).
fn effective(seat: &ClientSeat, now: time::OffsetDateTime) -> String {
    match (seat.0.as_str(), &seat.1) {
        ("HELD", Some(until)) => {
            let until =
                time::OffsetDateTime::parse(until, &time::format_description::well_known::Rfc3339)
                    .unwrap();
            if until > now { "HELD" } else { "AVAILABLE" }.to_owned()
        }
        (status, _) => status.to_owned(),
    }
}

/// A client's copy of the map: built from a snapshot, advanced by changes.
#[derive(Debug, Clone)]
struct ClientMap {
    version: u64,
    seats: BTreeMap<String, ClientSeat>,
    tiers: BTreeMap<String, i64>,
}

impl ClientMap {
    fn from_snapshot(snapshot: &Value) -> Self {
        let seats = snapshot["seats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["seatId"].as_str().unwrap().to_owned(),
                    (
                        s["status"].as_str().unwrap().to_owned(),
                        s["holdExpiresAt"].as_str().map(str::to_owned),
                    ),
                )
            })
            .collect();
        let tiers = snapshot["tiers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["tierId"].as_str().unwrap().to_owned(),
                    t["available"].as_i64().unwrap(),
                )
            })
            .collect();
        Self {
            version: snapshot["version"].as_u64().unwrap(),
            seats,
            tiers,
        }
    }

    /// Applies one changes answer (or stream message); they must continue this version.
    fn apply(&mut self, changes: &Value) {
        assert_eq!(
            changes["fromVersion"].as_u64().unwrap(),
            self.version,
            "changes must continue the client's version: {changes}"
        );
        let mut last = self.version;
        for change in changes["changes"].as_array().unwrap() {
            let version = change["version"].as_u64().unwrap();
            assert!(version > self.version && version >= last, "version order");
            last = version;
            let seat_id = change["seatId"].as_str().unwrap();
            assert!(self.seats.contains_key(seat_id), "unknown seat {seat_id}");
            self.seats.insert(
                seat_id.to_owned(),
                (
                    change["status"].as_str().unwrap().to_owned(),
                    change["holdExpiresAt"].as_str().map(str::to_owned),
                ),
            );
        }
        for tier in changes["tiers"].as_array().unwrap() {
            self.tiers.insert(
                tier["tierId"].as_str().unwrap().to_owned(),
                tier["available"].as_i64().unwrap(),
            );
        }
        self.version = changes["toVersion"].as_u64().unwrap();
    }

    fn effective(&self, now: time::OffsetDateTime) -> BTreeMap<String, String> {
        self.seats
            .iter()
            .map(|(id, seat)| (id.clone(), effective(seat, now)))
            .collect()
    }
}

/// The store's truth at `now`, read straight from the store, with its version.
async fn store_truth(
    app: &TestApp,
    event_id: &str,
    now: time::OffsetDateTime,
) -> (u64, BTreeMap<String, String>, BTreeMap<String, i64>) {
    let snapshot = app.db.store.seat_map(event_id).await.unwrap().unwrap();
    let now_ms = i64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap();
    let seats = snapshot
        .seats
        .iter()
        .map(|(id, seat)| {
            let status = match (seat.status.as_str(), seat.held_until_ms) {
                ("HELD", Some(until)) if until <= now_ms => "AVAILABLE",
                (status, _) => status,
            };
            (id.clone(), status.to_owned())
        })
        .collect();
    (
        snapshot.version,
        seats,
        snapshot.tiers.into_iter().collect(),
    )
}

async fn snapshot(app: &TestApp, event_id: &str) -> Value {
    let answer = app
        .send(
            app.http
                .get(format!("{}/v1/events/{event_id}/seatmap", app.base)),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    answer.json()
}

async fn changes_since(app: &TestApp, event_id: &str, since: u64) -> common::Answer {
    app.send(app.http.get(format!(
        "{}/v1/events/{event_id}/seatmap/changes?since={since}",
        app.base
    )))
    .await
}

/// Waits until the server's map reaches the store's current version (the feeder polls).
async fn caught_up(app: &TestApp, event_id: &str) -> u64 {
    let target = app
        .db
        .store
        .seat_map(event_id)
        .await
        .unwrap()
        .unwrap()
        .version;
    for _ in 0..200 {
        let answer = changes_since(app, event_id, target).await;
        if answer.status == StatusCode::OK {
            return target;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the seat map never reached version {target}");
}

async fn checkout(app: &TestApp, account: &str, hold_id: &str, card: &str) -> common::Answer {
    app.post(
        &token(account),
        &format!("/v1/holds/{hold_id}/checkout"),
        Some(&uuid::Uuid::now_v7().to_string()),
        &json!({"paymentMethodToken": card}),
    )
    .await
}

fn now() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

async fn snapshot_plus_changes_equals_the_store_after_random_operations(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "holdTtlSeconds": 2,
            "maxTicketsPerAccount": 50,
            "sections": [{"name": "A", "rows": 3, "seatsPerRow": 8, "priceMinor": 1000}],
            "tiers": [{"tierId": "GA", "name": "Floor", "capacity": 20, "priceMinor": 500}],
        }))
        .await;
    let seat_ids: Vec<String> = (1..=3)
        .flat_map(|row| (1..=8).map(move |n| format!("A-{row}-{n}")))
        .collect();
    let first = ClientMap::from_snapshot(&snapshot(&app, &event_id).await);
    assert_eq!(first.seats.len(), 24);
    assert_eq!(first.tiers["GA"], 20);
    let mut midway = Vec::new();
    let mut rng = StdRng::seed_from_u64(match backend {
        Backend::Postgres => 5,
        Backend::Sqlite => 6,
    });
    let accounts = ["ann", "bob", "cy", "dee"];
    let mut live: Vec<(String, String)> = Vec::new(); // (account, hold id)
    let mut kinds = BTreeMap::<&str, u32>::new();
    for step in 0..70 {
        let account = accounts[rng.random_range(0..accounts.len())];
        match rng.random_range(0..10) {
            0..=3 => {
                let start = rng.random_range(0..seat_ids.len());
                let n = rng.random_range(1..=3).min(seat_ids.len() - start);
                let held = app
                    .hold(
                        account,
                        &event_id,
                        &format!("k{step}"),
                        json!({"seatIds": &seat_ids[start..start + n]}),
                    )
                    .await;
                if held.status == StatusCode::CREATED {
                    live.push((
                        account.into(),
                        held.json()["holdId"].as_str().unwrap().into(),
                    ));
                    *kinds.entry("seat hold").or_default() += 1;
                }
            }
            4 => {
                let held = app
                    .hold(
                        account,
                        &event_id,
                        &format!("k{step}"),
                        json!({"tierId": "GA", "quantity": rng.random_range(1..=3)}),
                    )
                    .await;
                if held.status == StatusCode::CREATED {
                    live.push((
                        account.into(),
                        held.json()["holdId"].as_str().unwrap().into(),
                    ));
                    *kinds.entry("tier hold").or_default() += 1;
                }
            }
            5 if !live.is_empty() => {
                let (owner, hold_id) = live.swap_remove(rng.random_range(0..live.len()));
                let released = app
                    .delete(&token(&owner), &format!("/v1/holds/{hold_id}"))
                    .await;
                assert!(released.status == StatusCode::OK || released.status.is_client_error());
                *kinds.entry("release").or_default() += 1;
            }
            6 | 7 if !live.is_empty() => {
                let (owner, hold_id) = live.swap_remove(rng.random_range(0..live.len()));
                let card = if rng.random_bool(0.7) {
                    "pm_card_visa"
                } else {
                    "pm_card_chargeDeclined"
                };
                let paid = checkout(&app, &owner, &hold_id, card).await;
                if paid.status == StatusCode::CREATED {
                    *kinds.entry(card).or_default() += 1;
                }
            }
            8 => {
                // Let holds run out (the store's clock moves past some deadlines): some are
                // swept, others stay unswept (shown available).
                app.db.advance_clock(1_100).await;
                if rng.random_bool(0.5) {
                    let swept = app.db.store.expire_due_holds(100, 0).await.unwrap();
                    if swept.holds_expired > 0 {
                        *kinds.entry("swept expiry").or_default() += 1;
                    }
                }
            }
            _ => {
                midway.push(ClientMap::from_snapshot(&snapshot(&app, &event_id).await));
            }
        }
    }
    assert!(
        kinds.len() >= 5,
        "the random run must mix kinds of change: {kinds:?}"
    );
    // Every hold runs out and the event's writer ends each at its deadline (its own timer):
    // after that the map stops moving.
    app.db.advance_clock(2_100).await;
    let mut ended = false;
    for _ in 0..100 {
        let inventory = app
            .db
            .store
            .load_inventory(&event_id)
            .await
            .unwrap()
            .unwrap();
        let held = inventory
            .holds
            .iter()
            .any(|h| h.status == boxoffice_domain::hold::HoldStatus::Held);
        if !held {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ended, "the writer ends every hold past its deadline");
    let target = caught_up(&app, &event_id).await;
    assert!(target > 10, "the run changed the map: version {target}");

    // Every client (from the first snapshot or any midway one) catches up to the truth.
    midway.push(first);
    for mut client in midway {
        let answer = changes_since(&app, &event_id, client.version).await;
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json());
        client.apply(&answer.json());
        assert_eq!(client.version, target);
        let at = now();
        let (version, seats, tiers) = store_truth(&app, &event_id, at).await;
        assert_eq!(version, target, "nothing was written after catching up");
        assert_eq!(client.effective(at), seats, "seats after replay");
        assert_eq!(client.tiers, tiers, "tiers after replay");
    }
    // A fresh snapshot (rendered at most 200 ms ago, so possibly an older version) plus
    // its changes equals the truth too.
    let mut fresh = ClientMap::from_snapshot(&snapshot(&app, &event_id).await);
    fresh.apply(&changes_since(&app, &event_id, fresh.version).await.json());
    let at = now();
    let (_, seats, tiers) = store_truth(&app, &event_id, at).await;
    assert_eq!(fresh.effective(at), seats);
    assert_eq!(fresh.tiers, tiers);
    app.finish().await;
}

/// Reads SSE messages from a streaming response until `done` says stop. Returns (id, event
/// type, data) of each message.
async fn read_events(
    response: &mut reqwest::Response,
    buffer: &mut String,
    mut done: impl FnMut(&[(Option<u64>, String, Value)]) -> bool,
) -> Vec<(Option<u64>, String, Value)> {
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !done(&events) {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut id = None;
            let mut kind = "message".to_owned();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    kind = v.trim().to_owned();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            if !data.is_empty() {
                events.push((id, kind, serde_json::from_str(&data).unwrap()));
            }
        }
        if done(&events) {
            break;
        }
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .expect("stream messages arrive in time")
            .expect("stream readable");
        match chunk {
            Some(bytes) => buffer.push_str(&String::from_utf8_lossy(&bytes)),
            None => break,
        }
    }
    events
}

async fn open_stream(
    app: &TestApp,
    event_id: &str,
    last_event_id: Option<u64>,
    since: Option<u64>,
) -> reqwest::Response {
    let mut url = format!("{}/v1/events/{event_id}/seatmap/stream", app.base);
    if let Some(since) = since {
        url.push_str(&format!("?since={since}"));
    }
    let mut request = app.http.get(url);
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id.to_string());
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    response
}

async fn a_stream_that_reconnects_with_last_event_id_misses_nothing(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 50})).await;
    let mut client = ClientMap::from_snapshot(&snapshot(&app, &event_id).await);
    let start = client.version;
    let mut stream = open_stream(&app, &event_id, None, Some(start)).await;
    let mut buffer = String::new();
    for n in 1..=3 {
        let held = app
            .hold(
                "ann",
                &event_id,
                &format!("a{n}"),
                json!({"seatIds": [format!("A-1-{n}")]}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED);
    }
    let seen = read_events(&mut stream, &mut buffer, |events| events.len() >= 3).await;
    for (id, kind, data) in &seen {
        assert_eq!(kind, "message");
        assert_eq!(*id, data["toVersion"].as_u64());
        client.apply(data);
    }
    let last_id = seen.last().unwrap().0.unwrap();
    drop(stream);

    // While the client is away: more holds, a release, a tier hold; then the server restarts.
    for n in 4..=6 {
        let held = app
            .hold(
                "bob",
                &event_id,
                &format!("b{n}"),
                json!({"seatIds": [format!("A-2-{n}")]}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED);
    }
    let tier = app
        .hold(
            "bob",
            &event_id,
            "t",
            json!({"tierId": "GA", "quantity": 2}),
        )
        .await;
    let tier_hold = tier.json()["holdId"].as_str().unwrap().to_owned();
    let released = app
        .delete(&token("bob"), &format!("/v1/holds/{tier_hold}"))
        .await;
    assert_eq!(released.status, StatusCode::OK);
    let target = caught_up(&app, &event_id).await;
    let store = app.stop();
    let app = TestApp::spawn_full(
        store,
        Default::default(),
        common::RoomSetup::default(),
        false,
    )
    .await;

    // The browser's reconnect: Last-Event-ID wins over the stale `since` in the URL.
    let mut stream = open_stream(&app, &event_id, Some(last_id), Some(start)).await;
    let mut buffer = String::new();
    let rest = read_events(&mut stream, &mut buffer, |events| {
        events.last().is_some_and(|(id, _, _)| *id == Some(target))
    })
    .await;
    for (expected, (id, kind, data)) in (last_id + 1..).zip(&rest) {
        assert_eq!(kind, "message", "no reset for a version the log reaches");
        assert_eq!(*id, Some(expected), "one message per version, none skipped");
        client.apply(data);
    }
    let at = now();
    let (version, seats, tiers) = store_truth(&app, &event_id, at).await;
    assert_eq!(client.version, version);
    assert_eq!(client.effective(at), seats);
    assert_eq!(client.tiers, tiers);

    // A live change reaches the open stream.
    let held = app
        .hold("cy", &event_id, "c", json!({"seatIds": ["A-3-3"]}))
        .await;
    assert_eq!(held.status, StatusCode::CREATED);
    let live = read_events(&mut stream, &mut buffer, |events| !events.is_empty()).await;
    assert_eq!(live[0].0, Some(target + 1));
    assert_eq!(live[0].2["changes"][0]["seatId"], "A-3-3");
    assert_eq!(live[0].2["changes"][0]["status"], "HELD");
    drop(stream);
    app.finish().await;
}

async fn a_version_too_old_gets_410_and_reset(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    app.state.seatmaps.set_log_changes_max(3);
    let event_id = app.create_event(json!({"maxTicketsPerAccount": 50})).await;
    let first = snapshot(&app, &event_id).await;
    let start = first["version"].as_u64().unwrap();
    for n in 1..=6 {
        let held = app
            .hold(
                "ann",
                &event_id,
                &format!("k{n}"),
                json!({"seatIds": [format!("A-1-{n}")]}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED);
    }
    let target = caught_up(&app, &event_id).await;
    assert_eq!(target, start + 6);

    let old = changes_since(&app, &event_id, start).await;
    assert_eq!(old.status, StatusCode::GONE);
    assert_eq!(old.code(), "SNAPSHOT_TOO_OLD");
    // The log still reaches the last three versions.
    let recent = changes_since(&app, &event_id, target - 3).await;
    assert_eq!(recent.status, StatusCode::OK);
    assert_eq!(recent.json()["changes"].as_array().unwrap().len(), 3);
    let none = changes_since(&app, &event_id, target).await;
    assert_eq!(none.json()["changes"], json!([]));
    assert_eq!(none.json()["toVersion"], target);
    // A version from the future (another map, a client bug) is refetched too.
    let ahead = changes_since(&app, &event_id, target + 5).await;
    assert_eq!(ahead.status, StatusCode::GONE);
    assert_eq!(ahead.code(), "SNAPSHOT_TOO_OLD");
    for bad in ["abc", "-1", ""] {
        let answer = app
            .send(app.http.get(format!(
                "{}/v1/events/{event_id}/seatmap/changes?since={bad}",
                app.base
            )))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "since={bad}"
        );
        assert_eq!(answer.code(), "VALIDATION");
    }
    let missing = app
        .send(
            app.http
                .get(format!("{}/v1/events/{event_id}/seatmap/changes", app.base)),
        )
        .await;
    assert_eq!(missing.status, StatusCode::UNPROCESSABLE_ENTITY);
    for path in ["seatmap", "seatmap/changes?since=0", "seatmap/stream"] {
        let answer = app
            .send(
                app.http
                    .get(format!("{}/v1/events/no-such-event/{path}", app.base)),
            )
            .await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{path}");
    }

    // The stream resets a client whose Last-Event-ID the log no longer reaches...
    let mut stream = open_stream(&app, &event_id, Some(start), None).await;
    let mut buffer = String::new();
    let events = read_events(&mut stream, &mut buffer, |events| !events.is_empty()).await;
    assert_eq!(events[0].1, "reset");
    assert_eq!(events[0].2["version"], target);
    // ...and the stream ends after the reset.
    assert!(stream.chunk().await.unwrap().is_none());
    // A Last-Event-ID that is not a version resets too.
    let mut request = app
        .http
        .get(format!("{}/v1/events/{event_id}/seatmap/stream", app.base));
    request = request.header("last-event-id", "garbage");
    let mut stream = request.send().await.unwrap();
    let mut buffer = String::new();
    let events = read_events(&mut stream, &mut buffer, |events| !events.is_empty()).await;
    assert_eq!(events[0].1, "reset");
    drop(stream);
    app.finish().await;
}

async fn snapshot_etag_gzip_and_expired_holds(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({"holdTtlSeconds": 30, "maxTicketsPerAccount": 50}))
        .await;
    let url = format!("{}/v1/events/{event_id}/seatmap", app.base);
    let first = app.send(app.http.get(&url)).await;
    let version = first.json()["version"].as_u64().unwrap();
    assert_eq!(first.headers["etag"], format!("\"{version}\"").as_str());
    assert_eq!(first.json()["seats"].as_array().unwrap().len(), 600);
    assert_eq!(
        first.json()["seats"][0],
        json!({"seatId": "A-1-1", "status": "AVAILABLE"})
    );
    assert_eq!(
        first.json()["tiers"],
        json!([{"tierId": "GA", "available": 100}])
    );
    let same = app
        .send(
            app.http
                .get(&url)
                .header("if-none-match", format!("\"{version}\"")),
        )
        .await;
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    assert!(same.bytes.is_empty());

    let held = app
        .hold("ann", &event_id, "k", json!({"seatIds": ["A-1-1"]}))
        .await;
    assert_eq!(held.status, StatusCode::CREATED);
    let target = caught_up(&app, &event_id).await;
    // A changed map is sent again (the render is at most 200 ms old).
    let mut changed = None;
    for _ in 0..40 {
        let answer = app
            .send(
                app.http
                    .get(&url)
                    .header("if-none-match", format!("\"{version}\"")),
            )
            .await;
        if answer.status == StatusCode::OK {
            changed = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let changed = changed.expect("the new version is served");
    assert_eq!(changed.headers["etag"], format!("\"{target}\"").as_str());
    let seat = &changed.json()["seats"][0];
    // Held, with its deadline (30 s away by the store's clock, which only this test moves).
    assert_eq!(seat["status"], "HELD", "{seat}");
    assert_eq!(seat["holdExpiresAt"], held.json()["expiresAt"]);

    // Gzip when asked, and the same document.
    let zipped = app
        .send(app.http.get(&url).header("accept-encoding", "gzip"))
        .await;
    assert_eq!(zipped.headers["content-encoding"], "gzip");
    let mut plain = String::new();
    flate2::read::GzDecoder::new(zipped.bytes.as_slice())
        .read_to_string(&mut plain)
        .unwrap();
    let unzipped: Value = serde_json::from_str(&plain).unwrap();
    assert_eq!(unzipped["eventId"], event_id);
    assert!(zipped.bytes.len() * 4 < plain.len());

    // The hold runs out: the map shows the seat available whether or not the store's row
    // has been ended yet (the event's writer ends it at its deadline; nothing else sweeps).
    // The store's clock moves past the deadline.
    app.db.advance_clock(30_500).await;
    let mut shown = Value::Null;
    for _ in 0..20 {
        shown = app.send(app.http.get(&url)).await.json();
        if shown["seats"][0]["status"] == "AVAILABLE" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        shown["seats"][0],
        json!({"seatId": "A-1-1", "status": "AVAILABLE"})
    );
    let stored = app
        .db
        .store
        .seat_map(&event_id)
        .await
        .unwrap()
        .unwrap()
        .seats
        .iter()
        .find(|(id, _)| id == "A-1-1")
        .unwrap()
        .1
        .status;
    assert!(
        matches!(
            stored,
            boxoffice_domain::hold::SeatStatus::Held
                | boxoffice_domain::hold::SeatStatus::Available
        ),
        "held past its deadline, or ended by the writer: {stored:?}"
    );
    app.finish().await;
}

/// After sell-out, hold attempts are refused from the seat map: the same 409 the hold
/// transaction gives, but nothing is recorded; a retry of a granted request still replays
/// its 201.
async fn sold_seats_are_refused_from_the_map_without_a_store_write(backend: Backend) {
    use boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 1, "seatsPerRow": 4, "priceMinor": 1000}],
            "tiers": [],
        }))
        .await;
    let ann_body = json!({"seatIds": ["A-1-1", "A-1-2"]});
    let ann = app.hold("ann", &event_id, "k-ann", ann_body.clone()).await;
    assert_eq!(ann.status, StatusCode::CREATED);
    let bob = app
        .hold(
            "bob",
            &event_id,
            "k-bob",
            json!({"seatIds": ["A-1-3", "A-1-4"]}),
        )
        .await;
    assert_eq!(bob.status, StatusCode::CREATED);
    for (account, hold) in [("ann", &ann), ("bob", &bob)] {
        let paid = checkout(
            &app,
            account,
            hold.json()["holdId"].as_str().unwrap(),
            "pm_card_visa",
        )
        .await;
        assert_eq!(paid.json()["orderStatus"], "CONFIRMED", "{:?}", paid.json());
    }
    let scope = |account: &str, key: &str| IdempotencyScope {
        account_id: account.to_owned(),
        endpoint: format!("POST /v1/events/{event_id}/holds"),
        key: key.to_owned(),
    };
    // No map is loaded yet: the hold transaction decides, and records its refusal.
    let by_store = app
        .hold("dan", &event_id, "k-dan", json!({"seatIds": ["A-1-1"]}))
        .await;
    assert_eq!(by_store.status, StatusCode::CONFLICT);
    assert!(
        app.db
            .store
            .stored_answer(&scope("dan", "k-dan"), "")
            .await
            .unwrap()
            .is_some()
    );

    snapshot(&app, &event_id).await;
    let version = caught_up(&app, &event_id).await;
    let early = app
        .hold("carl", &event_id, "k-carl-1", json!({"seatIds": ["A-1-1"]}))
        .await;
    assert_eq!(early.status, StatusCode::CONFLICT);
    assert_eq!(
        early.json(),
        by_store.json(),
        "the same refusal as the store's"
    );
    let best = app
        .hold(
            "carl",
            &event_id,
            "k-carl-2",
            json!({"bestAvailable": {"quantity": 2}}),
        )
        .await;
    assert_eq!(best.status, StatusCode::CONFLICT);
    assert_eq!(best.json()["code"], "SEATS_UNAVAILABLE");
    for key in ["k-carl-1", "k-carl-2"] {
        assert!(
            app.db
                .store
                .stored_answer(&scope("carl", key), "")
                .await
                .unwrap()
                .is_none(),
            "an early refusal writes nothing ({key})"
        );
    }
    let map_version = app
        .db
        .store
        .seat_map(&event_id)
        .await
        .unwrap()
        .unwrap()
        .version;
    assert_eq!(map_version, version, "no transaction ran");
    // A retry of ann's granted hold replays it, although every seat shows sold.
    let replay = app.hold("ann", &event_id, "k-ann", ann_body).await;
    assert_eq!(replay.status, StatusCode::CREATED);
    assert_eq!(replay.json()["holdId"], ann.json()["holdId"]);
    // Looked up together (one query), each answer in its place.
    let together = app
        .db
        .store
        .stored_answers(&[
            (scope("carl", "k-carl-1"), String::new()),
            (scope("dan", "k-dan"), "other digest".to_owned()),
            (scope("nobody", "k"), String::new()),
        ])
        .await
        .unwrap();
    assert!(matches!(
        together.as_slice(),
        [None, Some(Idempotent::KeyReusedWithOtherRequest), None]
    ));
    match app
        .db
        .store
        .stored_answer(&scope("ann", "k-ann"), "other digest")
        .await
        .unwrap()
    {
        Some(Idempotent::KeyReusedWithOtherRequest) => {}
        other => panic!("a different request under ann's key: {other:?}"),
    }
    app.finish().await;
}
