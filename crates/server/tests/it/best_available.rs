//! Best available over HTTP, on PostgreSQL and SQLite: adjacent seats in one row, best row
//! and centre first, no stranded single seat when another choice exists, all or nothing
//! under concurrency, a clear 409 when nothing fits, idempotent replays; and the end game:
//! a party split as close as the house allows when no block is left (`together: prefer`),
//! refused with the largest block left when it must sit together, and what is left shown
//! per section on the event and the seat map.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::common::{Backend, TestApp};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    takes_the_centre_of_the_best_row,
    never_strands_a_single_seat_when_avoidable,
    concurrent_best_available_never_overlaps,
    nothing_fits_and_bad_requests,
    finds_the_pair_beyond_the_first_free_seats,
    a_party_of_four_with_only_pairs_left,
    a_split_party_sits_in_adjacent_rows,
    anywhere_takes_free_seats_across_sections,
);

fn seats_of(hold: &Value) -> Vec<String> {
    hold["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seatId"].as_str().unwrap().to_owned())
        .collect()
}

/// (section, row, number) of a seat id.
fn parts(seat_id: &str) -> (String, u32, u32) {
    let mut it = seat_id.split('-');
    let section = it.next().unwrap().to_owned();
    let row = it.next().unwrap().parse().unwrap();
    let number = it.next().unwrap().parse().unwrap();
    (section, row, number)
}

/// The seats are in one row and consecutive.
fn assert_adjacent(seats: &[String]) {
    let parsed: Vec<_> = seats.iter().map(|s| parts(s)).collect();
    for pair in parsed.windows(2) {
        assert_eq!(
            (&pair[0].0, pair[0].1),
            (&pair[1].0, pair[1].1),
            "{seats:?}"
        );
        assert_eq!(pair[0].2 + 1, pair[1].2, "{seats:?}");
    }
}

async fn best(
    app: &TestApp,
    account: &str,
    event_id: &str,
    key: &str,
    body: Value,
) -> common::Answer {
    app.hold(account, event_id, key, json!({"bestAvailable": body}))
        .await
}

async fn takes_the_centre_of_the_best_row(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [
                {"name": "A", "rows": 3, "seatsPerRow": 30, "priceMinor": 9900},
                {"name": "B", "rows": 3, "seatsPerRow": 30, "priceMinor": 4900},
            ],
        }))
        .await;
    let first = best(&app, "ann", &event_id, "k1", json!({"quantity": 4})).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.json());
    assert_eq!(
        seats_of(&first.json()),
        ["A-1-14", "A-1-15", "A-1-16", "A-1-17"]
    );
    assert_eq!(first.json()["totalMinor"], 4 * 9900);
    // The replay answers the same seats, byte for byte.
    let replay = best(&app, "ann", &event_id, "k1", json!({"quantity": 4})).await;
    assert_eq!(replay.bytes, first.bytes);
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    // A price cap picks the cheaper section; a section picks that one.
    let cheap = best(
        &app,
        "bob",
        &event_id,
        "k2",
        json!({"quantity": 2, "maxPriceMinor": 5000}),
    )
    .await;
    assert_eq!(parts(&seats_of(&cheap.json())[0]).0, "B");
    let in_a = best(
        &app,
        "cat",
        &event_id,
        "k3",
        json!({"quantity": 3, "section": "A"}),
    )
    .await;
    let seats = seats_of(&in_a.json());
    assert_adjacent(&seats);
    assert_eq!(parts(&seats[0]).1, 1, "row 1 still has room: {seats:?}");
    app.finish().await;
}

async fn never_strands_a_single_seat_when_avoidable(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 2, "seatsPerRow": 8, "priceMinor": 1000}],
        }))
        .await;
    // Row 1 keeps seats 1-3 free: a pair there would strand a single seat.
    for (i, seats) in [["A-1-4", "A-1-5", "A-1-6"], ["A-1-7", "A-1-8", "A-2-1"]]
        .iter()
        .enumerate()
    {
        let held = app
            .hold(
                &format!("taker-{i}"),
                &event_id,
                &format!("t{i}"),
                json!({"seatIds": seats}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED);
    }
    let pair = best(&app, "ann", &event_id, "k1", json!({"quantity": 2})).await;
    assert_eq!(pair.status, StatusCode::CREATED, "{:?}", pair.json());
    let seats = seats_of(&pair.json());
    assert_adjacent(&seats);
    // Row 2 has seats 2-8 free: a pair that leaves no single seat, nearest the centre.
    assert_eq!(
        parts(&seats[0]).1,
        2,
        "row 1 would strand a seat: {seats:?}"
    );
    let (_, _, first) = parts(&seats[0]);
    assert!(
        first != 3 && first != 7,
        "a pair at {first} strands a seat: {seats:?}"
    );
    app.finish().await;
}

async fn concurrent_best_available_never_overlaps(backend: Backend) {
    let app = Arc::new(TestApp::spawn(backend).await);
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 10, "seatsPerRow": 20, "priceMinor": 1000}],
        }))
        .await;
    let mut tasks = Vec::new();
    for i in 0..80 {
        let (app, event_id) = (app.clone(), event_id.clone());
        tasks.push(tokio::spawn(async move {
            let quantity = 1 + i % 4;
            let answer = best(
                &app,
                &format!("fan-{i}"),
                &event_id,
                "k",
                json!({"quantity": quantity, "section": "A"}),
            )
            .await;
            (quantity, answer)
        }));
    }
    let mut taken = BTreeSet::new();
    let mut granted = 0;
    for task in tasks {
        let (quantity, answer) = task.await.unwrap();
        match answer.status {
            StatusCode::CREATED => {
                let seats = seats_of(&answer.json());
                assert_eq!(seats.len(), quantity as usize);
                // The last parties may be split (`together` defaults to prefer) and say so.
                if answer.json()["split"] != true {
                    assert_adjacent(&seats);
                }
                for seat in seats {
                    assert!(taken.insert(seat.clone()), "{seat} granted twice");
                }
                granted += 1;
            }
            StatusCode::CONFLICT => assert_eq!(answer.code(), "SEATS_UNAVAILABLE"),
            other => panic!("unexpected {other}: {:?}", answer.json()),
        }
    }
    // 200 seats, 80 requests of 1-4 (200 seats in all): room for nearly everyone.
    assert!(granted >= 60, "only {granted} of 80 granted");
    let app = Arc::into_inner(app).unwrap();
    app.finish().await;
}

async fn nothing_fits_and_bad_requests(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 1, "seatsPerRow": 3, "priceMinor": 1000}],
        }))
        .await;
    let too_many = best(&app, "ann", &event_id, "k1", json!({"quantity": 4})).await;
    assert_eq!(too_many.status, StatusCode::CONFLICT);
    assert_eq!(too_many.code(), "SEATS_UNAVAILABLE");
    let too_dear = best(
        &app,
        "ann",
        &event_id,
        "k2",
        json!({"quantity": 1, "maxPriceMinor": 999}),
    )
    .await;
    assert_eq!(too_dear.code(), "SEATS_UNAVAILABLE");
    for (body, field) in [
        (json!({"quantity": 0}), "bestAvailable.quantity"),
        (json!({"quantity": 7}), "bestAvailable.quantity"),
        (
            json!({"quantity": 1, "section": "Z"}),
            "bestAvailable.section",
        ),
        (
            json!({"quantity": 1, "maxPriceMinor": -1}),
            "bestAvailable.maxPriceMinor",
        ),
        (json!({"quantity": 1, "extra": true}), "bestAvailable"),
        (
            json!({"quantity": 1, "together": "yes"}),
            "bestAvailable.together",
        ),
        (
            json!({"quantity": 1, "together": true}),
            "bestAvailable.together",
        ),
    ] {
        let answer = best(
            &app,
            "ann",
            &event_id,
            &format!("bad-{field}"),
            body.clone(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(answer.code(), "VALIDATION");
        assert!(
            answer.json()["detail"].as_str().unwrap().contains(field),
            "{body}: {:?}",
            answer.json()
        );
    }
    let both = app
        .hold(
            "ann",
            &event_id,
            "k3",
            json!({"seatIds": ["A-1-1"], "bestAvailable": {"quantity": 1}}),
        )
        .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
    let fits = best(&app, "ann", &event_id, "k4", json!({"quantity": 3})).await;
    assert_eq!(fits.status, StatusCode::CREATED);
    assert_eq!(seats_of(&fits.json()), ["A-1-1", "A-1-2", "A-1-3"]);
    app.finish().await;
}

/// PostgreSQL reads a section's first few hundred free seats for best available and reads
/// the rest only when nothing fits in them: here rows 1-9 have only every other seat free
/// (450 free seats, no two adjacent), so the pair is found in row 10 by the second read.
async fn finds_the_pair_beyond_the_first_free_seats(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 10, "seatsPerRow": 100, "priceMinor": 5000}],
            "maxSeatsPerHold": 10,
            "maxTicketsPerAccount": 10,
        }))
        .await;
    let taken: Vec<String> = (1..=9)
        .flat_map(|row| (1..=100).step_by(2).map(move |n| format!("A-{row}-{n}")))
        .collect();
    for (i, chunk) in taken.chunks(10).enumerate() {
        let held = app
            .hold(
                &format!("f{i}"),
                &event_id,
                &format!("k{i}"),
                json!({"seatIds": chunk}),
            )
            .await;
        assert_eq!(held.status, StatusCode::CREATED, "{:?}", held.json());
    }
    let pair = best(
        &app,
        "ann",
        &event_id,
        "pair",
        json!({"quantity": 2, "section": "A"}),
    )
    .await;
    assert_eq!(pair.status, StatusCode::CREATED, "{:?}", pair.json());
    let seats = seats_of(&pair.json());
    assert_adjacent(&seats);
    assert!(seats.iter().all(|s| parts(s).1 == 10), "{seats:?}");
    // A single seat needs no second read: the best row's first free seat.
    let one = best(
        &app,
        "bob",
        &event_id,
        "one",
        json!({"quantity": 1, "section": "A"}),
    )
    .await;
    assert_eq!(one.status, StatusCode::CREATED, "{:?}", one.json());
    assert_eq!(parts(&seats_of(&one.json())[0]).1, 1);
    app.finish().await;
}

/// Each section's `largestBlock` on the event's body, by name.
async fn largest_blocks(app: &TestApp, event_id: &str) -> Vec<(String, u64)> {
    let event = app
        .get(&common::token("reader"), &format!("/v1/events/{event_id}"))
        .await;
    assert_eq!(event.status, StatusCode::OK);
    event.json()["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["largestBlock"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn blocks(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(n, b)| ((*n).to_owned(), *b)).collect()
}

async fn a_party_of_four_with_only_pairs_left(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [
                {"name": "A", "rows": 2, "seatsPerRow": 5, "priceMinor": 1000},
                {"name": "B", "rows": 1, "seatsPerRow": 6, "priceMinor": 500},
            ],
        }))
        .await;
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 5), ("B", 6)])
    );
    // The middle seat of each row of A goes: only pairs are left there.
    let middle = app
        .hold("x", &event_id, "x", json!({"seatIds": ["A-1-3", "A-2-3"]}))
        .await;
    assert_eq!(middle.status, StatusCode::CREATED);
    assert_eq!(
        middle.json().get("split"),
        None,
        "named seats are never split"
    );
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 2), ("B", 6)])
    );
    // Together required: refused, saying what would succeed.
    let required = best(
        &app,
        "ann",
        &event_id,
        "k1",
        json!({"quantity": 4, "section": "A", "together": "required"}),
    )
    .await;
    assert_eq!(
        required.status,
        StatusCode::CONFLICT,
        "{:?}",
        required.json()
    );
    assert_eq!(required.code(), "SEATS_UNAVAILABLE");
    assert_eq!(required.json()["largestBlock"], 2);
    assert_eq!(required.json()["unavailableSeatIds"], json!([]));
    // Prefer (the default): two pairs of the same row, and the answer says it is split.
    let prefer = best(
        &app,
        "bob",
        &event_id,
        "k1",
        json!({"quantity": 4, "section": "A"}),
    )
    .await;
    assert_eq!(prefer.status, StatusCode::CREATED, "{:?}", prefer.json());
    assert_eq!(prefer.json()["split"], true);
    assert_eq!(
        seats_of(&prefer.json()),
        ["A-1-1", "A-1-2", "A-1-4", "A-1-5"]
    );
    assert_eq!(prefer.json()["totalMinor"], 4 * 1000);
    let replay = best(
        &app,
        "bob",
        &event_id,
        "k1",
        json!({"quantity": 4, "section": "A"}),
    )
    .await;
    assert_eq!(replay.bytes, prefer.bytes);
    // Row 2 still has its pairs; B is untouched.
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 2), ("B", 6)])
    );
    let explicit = best(
        &app,
        "cat",
        &event_id,
        "k1",
        json!({"quantity": 4, "section": "A", "together": "prefer"}),
    )
    .await;
    assert_eq!(
        explicit.status,
        StatusCode::CREATED,
        "{:?}",
        explicit.json()
    );
    assert_eq!(
        seats_of(&explicit.json()),
        ["A-2-1", "A-2-2", "A-2-4", "A-2-5"]
    );
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 0), ("B", 6)])
    );
    // Nothing left in A at all: largestBlock 0. B still seats a block, not split.
    let none = best(
        &app,
        "dan",
        &event_id,
        "k1",
        json!({"quantity": 1, "section": "A", "together": "no"}),
    )
    .await;
    assert_eq!(none.status, StatusCode::CONFLICT);
    assert_eq!(none.json()["largestBlock"], 0);
    let in_b = best(
        &app,
        "dan",
        &event_id,
        "k2",
        json!({"quantity": 2, "together": "no"}),
    )
    .await;
    assert_eq!(in_b.status, StatusCode::CREATED, "{:?}", in_b.json());
    assert_eq!(in_b.json().get("split"), None);
    assert_adjacent(&seats_of(&in_b.json()));
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 0), ("B", 2)])
    );
    // The seat map says the same.
    let map = app
        .get(
            &common::token("reader"),
            &format!("/v1/events/{event_id}/seatmap"),
        )
        .await;
    assert_eq!(map.status, StatusCode::OK);
    assert_eq!(
        map.json()["sections"],
        json!([{"name": "A", "largestBlock": 0}, {"name": "B", "largestBlock": 2}])
    );
    app.finish().await;
}

async fn a_split_party_sits_in_adjacent_rows(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [{"name": "A", "rows": 3, "seatsPerRow": 4, "priceMinor": 1000}],
        }))
        .await;
    // Seats 3 and 4 of every row go: one pair is left per row.
    for row in 1..=3 {
        let taken = app
            .hold(
                &format!("x{row}"),
                &event_id,
                "x",
                json!({"seatIds": [format!("A-{row}-3"), format!("A-{row}-4")]}),
            )
            .await;
        assert_eq!(taken.status, StatusCode::CREATED);
    }
    let four = best(&app, "ann", &event_id, "k1", json!({"quantity": 4})).await;
    assert_eq!(four.status, StatusCode::CREATED, "{:?}", four.json());
    assert_eq!(four.json()["split"], true);
    assert_eq!(seats_of(&four.json()), ["A-1-1", "A-1-2", "A-2-1", "A-2-2"]);
    // A pair still fits together in row 3: not split, whatever the mode.
    let pair = best(
        &app,
        "bob",
        &event_id,
        "k1",
        json!({"quantity": 2, "together": "required"}),
    )
    .await;
    assert_eq!(pair.status, StatusCode::CREATED, "{:?}", pair.json());
    assert_eq!(seats_of(&pair.json()), ["A-3-1", "A-3-2"]);
    assert_eq!(pair.json().get("split"), None);
    assert_eq!(largest_blocks(&app, &event_id).await, blocks(&[("A", 0)]));
    app.finish().await;
}

async fn anywhere_takes_free_seats_across_sections(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let event_id = app
        .create_event(json!({
            "sections": [
                {"name": "A", "rows": 1, "seatsPerRow": 3, "priceMinor": 1000},
                {"name": "B", "rows": 1, "seatsPerRow": 3, "priceMinor": 1000},
            ],
        }))
        .await;
    let middles = app
        .hold("x", &event_id, "x", json!({"seatIds": ["A-1-2", "B-1-2"]}))
        .await;
    assert_eq!(middles.status, StatusCode::CREATED);
    // Two free seats per section: a party of three fits in no one section.
    for (key, together) in [("k1", json!("prefer")), ("k2", json!(null))] {
        let refused = best(
            &app,
            "ann",
            &event_id,
            key,
            json!({"quantity": 3, "together": together}),
        )
        .await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{:?}", refused.json());
        assert_eq!(refused.json()["largestBlock"], 1);
    }
    let anywhere = best(
        &app,
        "ann",
        &event_id,
        "k3",
        json!({"quantity": 3, "together": "no"}),
    )
    .await;
    assert_eq!(
        anywhere.status,
        StatusCode::CREATED,
        "{:?}",
        anywhere.json()
    );
    assert_eq!(anywhere.json()["split"], true);
    assert_eq!(seats_of(&anywhere.json()), ["A-1-1", "A-1-3", "B-1-1"]);
    assert_eq!(
        largest_blocks(&app, &event_id).await,
        blocks(&[("A", 0), ("B", 1)])
    );
    app.finish().await;
}
