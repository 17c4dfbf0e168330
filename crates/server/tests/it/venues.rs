//! Venue charts over HTTP on both backends (issue 41, part 1): docs/VENUES.md's worked
//! example — a small curved hall with a gap, an aisle, a wheelchair space with its companion
//! and a standing area — imported as JSON and as CSV, read back as it was sent and listed
//! page by page; a replay of the same Idempotency-Key answered the same and another request
//! under it refused; bad charts refused with each problem's line (CSV) or path (JSON) and
//! nothing stored; the 50,000-seat demo stadium imported whole; a fan refused everywhere.

use crate::common::{Answer, Backend, TestApp, buy_captured, token};
use boxoffice_domain::venue::{STADIUM_SEATS, VenueChart, demo_stadium};
use reqwest::StatusCode;
use serde_json::{Value, json};

stories!(
    a_chart_is_imported_as_json_and_as_csv_read_back_and_listed,
    a_replay_answers_the_same_and_a_reused_key_is_refused,
    bad_charts_are_refused_with_their_lines_and_paths,
    the_demo_stadium_is_imported_whole,
    a_fan_is_refused,
    an_event_on_a_chart_sells_its_seats_by_their_labels,
    an_event_on_a_chart_is_refused_unless_priced_whole,
    an_event_on_the_demo_stadium_shows_its_map,
    trips_on_a_chart_each_keep_its_seats,
    a_companion_seat_is_held_only_with_its_wheelchair_space,
    kept_accessible_seats_go_to_fans_who_ask_then_to_everyone,
);

const CHARTS: &str = "/v1/admin/venue-charts";

/// docs/VENUES.md's worked example, as JSON.
fn hall() -> Value {
    json!({
        "name": "Small hall",
        "stage": {"x": 0, "y": 0},
        "categories": [
            {"key": "A", "name": "Front", "colour": "#C0392B"},
            {"key": "B", "name": "Back"},
            {"key": "STAND", "name": "Standing"}
        ],
        "sections": [
            {"name": "STALLS", "title": "Stalls", "kind": "reserved", "rows": [
                {"label": "A", "seats": [
                    {"label": "1", "x": -30, "y": 52, "category": "A"},
                    {"label": "2", "x": -20, "y": 56, "category": "A"},
                    {"label": "3", "x": -10, "y": 58, "category": "A", "kind": "aisle"},
                    {"label": "5", "x": 10, "y": 58, "category": "A", "kind": "aisle"},
                    {"label": "6", "x": 20, "y": 56, "category": "A", "quality": 900},
                    {"label": "7", "x": 30, "y": 52, "category": "A", "kind": "restricted_view"}
                ]},
                {"label": "B", "seats": [
                    {"label": "1", "x": -25, "y": 70, "category": "B", "kind": "wheelchair"},
                    {"label": "2", "x": -15, "y": 72, "category": "B", "kind": "companion"},
                    {"label": "3", "x": 15, "y": 72, "category": "B"}
                ]}
            ]},
            {"name": "BACK", "kind": "standing", "capacity": 120, "category": "STAND",
             "outline": [{"x": -40, "y": 90}, {"x": 40, "y": 90}, {"x": 40, "y": 120},
                         {"x": -40, "y": 120}]}
        ]
    })
}

/// The same hall as CSV (no stage, titles or colours: a CSV has seats and corners only).
const HALL_CSV: &str = "\
section,row,seat,x,y,category,kind,quality,capacity
STALLS,A,1,-30,52,A,standard,,
STALLS,A,2,-20,56,A,standard,,
STALLS,A,3,-10,58,A,aisle,,
STALLS,A,5,10,58,A,aisle,,
STALLS,A,6,20,56,A,standard,900,
STALLS,A,7,30,52,A,restricted_view,,
STALLS,B,1,-25,70,B,wheelchair,,
STALLS,B,2,-15,72,B,companion,,
STALLS,B,3,15,72,B,standard,,
BACK,,,-40,90,STAND,standing,,120
BACK,,,40,90,STAND,standing,,
BACK,,,40,120,STAND,standing,,
BACK,,,-40,120,STAND,standing,,
";

async fn post_csv(app: &TestApp, path: &str, key: Option<&str>, csv: &str) -> Answer {
    let mut request = app
        .http
        .post(format!("{}{path}", app.base))
        .bearer_auth(&app.admin)
        .header("content-type", "text/csv")
        .body(csv.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    app.send(request).await
}

fn chart_of(value: &Value) -> VenueChart {
    serde_json::from_value(value.clone()).expect("a chart")
}

async fn a_chart_is_imported_as_json_and_as_csv_read_back_and_listed(backend: Backend) {
    let app = TestApp::spawn(backend).await;

    let created = app
        .post(&app.admin, CHARTS, Some("hall-json"), &hall())
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let summary = created.json();
    assert_eq!(summary["name"], "Small hall");
    assert_eq!(summary["seatCount"], 9);
    assert_eq!(summary["standingCapacity"], 120);
    assert_eq!(summary["sectionCount"], 2);
    let json_id = summary["chartId"].as_str().unwrap().to_owned();

    // Read back as it was sent: curved row A skipping seat 4, its aisle seats, the
    // wheelchair space and its companion, the standing area's outline.
    let read = app.get(&app.admin, &format!("{CHARTS}/{json_id}")).await;
    assert_eq!(read.status, StatusCode::OK);
    let read = read.json();
    assert_eq!(read["chartId"], json_id.as_str());
    assert_eq!(read["seatCount"], 9);
    assert_eq!(chart_of(&read["chart"]), chart_of(&hall()));
    let row_a = &read["chart"]["sections"][0]["rows"][0]["seats"];
    assert_eq!(row_a[3]["label"], "5");
    assert_eq!(row_a[3]["kind"], "aisle");
    assert_eq!(
        read["chart"]["sections"][1]["outline"]
            .as_array()
            .unwrap()
            .len(),
        4
    );

    let created = post_csv(
        &app,
        &format!("{CHARTS}?name=Small%20hall%20(CSV)"),
        Some("hall-csv"),
        HALL_CSV,
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    assert_eq!(created.json()["seatCount"], 9);
    assert_eq!(created.json()["standingCapacity"], 120);
    let csv_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let from_csv = chart_of(
        &app.get(&app.admin, &format!("{CHARTS}/{csv_id}"))
            .await
            .json()["chart"],
    );
    assert_eq!(from_csv.name, "Small hall (CSV)");
    let mut expected = chart_of(&hall());
    expected.name = from_csv.name.clone();
    expected.stage = None;
    expected.sections[0].title = None;
    for category in &mut expected.categories {
        category.name = category.key.clone();
        category.colour = None;
    }
    assert_eq!(from_csv, expected);

    // Listed oldest first, a page at a time.
    let page = app.get(&app.admin, CHARTS).await.json();
    let ids: Vec<&str> = page["charts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["chartId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [json_id.as_str(), csv_id.as_str()]);
    assert!(page.get("nextCursor").is_none(), "{page}");
    assert!(
        page["charts"][0].get("chart").is_none(),
        "a list has no seats"
    );
    let first = app
        .get(&app.admin, &format!("{CHARTS}?limit=1"))
        .await
        .json();
    assert_eq!(first["charts"][0]["chartId"], json_id.as_str());
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a next page")
        .to_owned();
    let second = app
        .get(&app.admin, &format!("{CHARTS}?limit=1&cursor={cursor}"))
        .await
        .json();
    assert_eq!(second["charts"][0]["chartId"], csv_id.as_str());
    assert!(second.get("nextCursor").is_none(), "{second}");
    let refused = app.get(&app.admin, &format!("{CHARTS}?limit=0")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let refused = app.get(&app.admin, &format!("{CHARTS}?cursor=nope")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);

    let missing = app
        .get(&app.admin, &format!("{CHARTS}/{}", uuid::Uuid::now_v7()))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    app.finish().await;
}

async fn a_replay_answers_the_same_and_a_reused_key_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let first = app
        .post(&app.admin, CHARTS, Some("same-key"), &hall())
        .await;
    assert_eq!(first.status, StatusCode::CREATED);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = app
        .post(&app.admin, CHARTS, Some("same-key"), &hall())
        .await;
    assert_eq!(again.status, StatusCode::CREATED);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.bytes, first.bytes, "a replay answers byte for byte");
    let mut other = hall();
    other["name"] = json!("Another hall");
    let reused = app.post(&app.admin, CHARTS, Some("same-key"), &other).await;
    assert_eq!(reused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(reused.code(), "IDEMPOTENCY_KEY_REUSED");
    // The CSV form replays the same way, under its own key.
    let path = format!("{CHARTS}?name=Hall");
    let csv = post_csv(&app, &path, Some("csv-key"), HALL_CSV).await;
    let csv_again = post_csv(&app, &path, Some("csv-key"), HALL_CSV).await;
    assert_eq!(csv_again.headers["idempotent-replayed"], "true");
    assert_eq!(csv_again.bytes, csv.bytes);
    let renamed = post_csv(
        &app,
        &format!("{CHARTS}?name=Hall2"),
        Some("csv-key"),
        HALL_CSV,
    )
    .await;
    assert_eq!(renamed.code(), "IDEMPOTENCY_KEY_REUSED");
    // No key: refused before anything is read.
    let keyless = app.post(&app.admin, CHARTS, None, &hall()).await;
    assert_eq!(keyless.status, StatusCode::BAD_REQUEST);
    assert_eq!(keyless.code(), "IDEMPOTENCY_KEY_REQUIRED");
    // One chart per request made, not per request sent.
    let page = app.get(&app.admin, CHARTS).await.json();
    assert_eq!(page["charts"].as_array().unwrap().len(), 2, "{page}");
    app.finish().await;
}

async fn bad_charts_are_refused_with_their_lines_and_paths(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    // Line 3: x is no number; line 9: a companion in a row without its wheelchair space
    // (line 8's space made standard); line 5: seat 1 of row A twice.
    let bad = HALL_CSV
        .replace("STALLS,A,2,-20,56", "STALLS,A,2,west,56")
        .replace("B,1,-25,70,B,wheelchair", "B,1,-25,70,B,standard")
        .replace("STALLS,A,5,10,58", "STALLS,A,1,10,58");
    // Reading fails first (line 3), so only the lines that cannot be read are named.
    let refused = post_csv(&app, &format!("{CHARTS}?name=Bad"), Some("bad-1"), &bad).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.code(), "INVALID_CHART");
    let problem = refused.json();
    assert_eq!(problem["line"], 3, "{problem}");
    assert_eq!(problem["field"], "x");
    assert_eq!(problem["problemsTotal"], 1);
    // Once every line reads, each broken rule names its line.
    let bad = bad.replace("STALLS,A,2,west,56", "STALLS,A,2,-20,56");
    let refused = post_csv(&app, &format!("{CHARTS}?name=Bad"), Some("bad-2"), &bad).await;
    assert_eq!(refused.code(), "INVALID_CHART");
    let problem = refused.json();
    let lines: Vec<(i64, &str)> = problem["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["line"].as_i64().unwrap(), p["field"].as_str().unwrap()))
        .collect();
    assert_eq!(lines, [(5, "seat"), (9, "kind")], "{problem}");
    assert_eq!(problem["problemsTotal"], 2);
    assert!(
        problem["detail"].as_str().unwrap().contains("line 5"),
        "{problem}"
    );
    // A JSON chart's problems name their paths.
    let mut bad_json = hall();
    bad_json["sections"][0]["rows"][1]["label"] = json!("A");
    bad_json["sections"][1]["category"] = json!("VIP");
    let refused = app.post(&app.admin, CHARTS, Some("bad-3"), &bad_json).await;
    assert_eq!(refused.code(), "INVALID_CHART");
    let refusal = refused.json();
    let fields: Vec<&str> = refusal["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["sections[0].rows[1].label", "sections[1].category"],
        "{}",
        refused.json()
    );
    // What JSON itself cannot carry is a VALIDATION of its path, as for every body.
    let mut unknown = hall();
    unknown["sections"][0]["rows"][0]["seats"][0]["colour"] = json!("red");
    let refused = app.post(&app.admin, CHARTS, Some("bad-4"), &unknown).await;
    assert_eq!(refused.code(), "VALIDATION");
    assert_eq!(
        refused.json()["field"],
        "sections[0].rows[0].seats[0].colour"
    );
    // A CSV needs its name; a JSON chart has its own.
    let refused = post_csv(&app, CHARTS, Some("bad-5"), HALL_CSV).await;
    assert_eq!(refused.code(), "VALIDATION");
    assert_eq!(refused.json()["field"], "name");
    let refused = app
        .post(
            &app.admin,
            &format!("{CHARTS}?name=X"),
            Some("bad-6"),
            &hall(),
        )
        .await;
    assert_eq!(refused.json()["field"], "name");
    // Nothing was stored; the same keys may be used again for a good chart.
    let page = app.get(&app.admin, CHARTS).await.json();
    assert!(page["charts"].as_array().unwrap().is_empty(), "{page}");
    let good = post_csv(
        &app,
        &format!("{CHARTS}?name=Good"),
        Some("bad-2"),
        HALL_CSV,
    )
    .await;
    assert_eq!(good.status, StatusCode::CREATED);

    // The editor's check answers the same, and stores nothing.
    let checked = post_csv(&app, &format!("{CHARTS}/validate?name=Bad"), None, &bad).await;
    assert_eq!(checked.code(), "INVALID_CHART");
    assert_eq!(checked.json()["problems"], problem["problems"]);
    let checked = app
        .post(&app.admin, &format!("{CHARTS}/validate"), None, &hall())
        .await;
    assert_eq!(checked.status, StatusCode::OK);
    assert_eq!(
        checked.json(),
        json!({"valid": true, "seatCount": 9, "standingCapacity": 120, "sectionCount": 2})
    );
    let page = app.get(&app.admin, CHARTS).await.json();
    assert_eq!(page["charts"].as_array().unwrap().len(), 1, "{page}");
    app.finish().await;
}

async fn the_demo_stadium_is_imported_whole(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let stadium = serde_json::to_value(demo_stadium()).unwrap();
    let created = app
        .post(&app.admin, CHARTS, Some("stadium"), &stadium)
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    assert_eq!(created.json()["seatCount"], STADIUM_SEATS);
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let read = app.get(&app.admin, &format!("{CHARTS}/{chart_id}")).await;
    assert_eq!(chart_of(&read.json()["chart"]), demo_stadium());
    app.finish().await;
}

async fn a_fan_is_refused(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let fan = token("fan");
    let created = app.post(&app.admin, CHARTS, Some("k"), &hall()).await;
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    for answer in [
        app.post(&fan, CHARTS, Some("k"), &hall()).await,
        app.post(&fan, &format!("{CHARTS}/validate"), None, &hall())
            .await,
        app.get(&fan, CHARTS).await,
        app.get(&fan, &format!("{CHARTS}/{chart_id}")).await,
    ] {
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        assert_eq!(answer.code(), "FORBIDDEN");
    }
    let anonymous = app
        .send(app.http.get(format!("{}{CHARTS}", app.base)))
        .await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    app.finish().await;
}

/// The hall's prices: front 50.00, back 30.00, standing 20.00.
fn hall_prices() -> Value {
    json!({"A": 5000, "B": 3000, "STAND": 2000})
}

/// Imports the hall and creates an event on it; (chart id, event id).
async fn hall_event(app: &TestApp) -> (String, String) {
    let created = app.post(&app.admin, CHARTS, Some("hall"), &hall()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let event_id = app
        .create_event(json!({
            "name": "Hall night",
            "sections": [],
            "tiers": [],
            "chart": {"chartId": chart_id, "categoryPrices": hall_prices()},
        }))
        .await;
    (chart_id, event_id)
}

/// The seat map's entry for one seat.
fn map_seat<'a>(map: &'a Value, seat_id: &str) -> &'a Value {
    map["seats"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["seatId"] == seat_id)
        .unwrap_or_else(|| panic!("{seat_id} is on the map"))
}

async fn an_event_on_a_chart_sells_its_seats_by_their_labels(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (chart_id, event_id) = hall_event(&app).await;

    // The event: the stalls' two rows of 6 and 3 seats (row A curves, skips number 4 at its
    // aisle), priced from the cheapest category; the standing area as a tier; the chart's
    // categories with their prices and the standing area's outline.
    let event = app
        .get(&token("fan"), &format!("/v1/events/{event_id}"))
        .await;
    assert_eq!(event.status, StatusCode::OK);
    let event = event.json();
    let stalls = &event["sections"][0];
    assert_eq!(stalls["name"], "STALLS");
    assert_eq!(stalls["title"], "Stalls");
    assert_eq!(
        (stalls["rows"].clone(), stalls["seatsPerRow"].clone()),
        (json!(2), json!(6))
    );
    assert_eq!(stalls["rowLengths"], json!([6, 3]));
    assert_eq!(stalls["priceMinor"], 3000);
    assert_eq!(stalls["available"], 9);
    assert_eq!(stalls["largestBlock"], 6);
    let back = &event["tiers"][0];
    assert_eq!(back["tierId"], "BACK");
    assert_eq!(back["capacity"], 120);
    assert_eq!(back["priceMinor"], 2000);
    assert_eq!(event["chart"]["chartId"], chart_id.as_str());
    assert_eq!(event["chart"]["stage"], json!({"x": 0.0, "y": 0.0}));
    let categories = event["chart"]["categories"].as_array().unwrap();
    let keys: Vec<(&str, i64)> = categories
        .iter()
        .map(|c| {
            (
                c["key"].as_str().unwrap(),
                c["priceMinor"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(keys, [("A", 5000), ("B", 3000), ("STAND", 2000)]);
    assert_eq!(categories[0]["colour"], "#C0392B");
    assert_eq!(categories[0]["allInPriceMinor"], 5000);
    let area = &event["chart"]["standingAreas"][0];
    assert_eq!(area["tierId"], "BACK");
    assert_eq!(area["category"], "STAND");
    assert_eq!(area["outline"].as_array().unwrap().len(), 4);
    assert_eq!(area["outline"][2], json!({"x": 40.0, "y": 120.0}));

    // The seat map: the 9 seats only, each with its labels, position, category and kind.
    let map = app
        .get(&token("fan"), &format!("/v1/events/{event_id}/seatmap"))
        .await
        .json();
    let ids: Vec<&str> = map["seats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["seatId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "STALLS-1-1",
            "STALLS-1-2",
            "STALLS-1-3",
            "STALLS-1-4",
            "STALLS-1-5",
            "STALLS-1-6",
            "STALLS-2-1",
            "STALLS-2-2",
            "STALLS-2-3"
        ]
    );
    assert_eq!(
        *map_seat(&map, "STALLS-1-4"),
        json!({"seatId": "STALLS-1-4", "status": "AVAILABLE", "rowLabel": "A",
               "seatLabel": "5", "x": 10, "y": 58, "category": "A", "kind": "aisle"})
    );
    assert_eq!(
        *map_seat(&map, "STALLS-2-3"),
        json!({"seatId": "STALLS-2-3", "status": "AVAILABLE", "rowLabel": "B",
               "seatLabel": "3", "x": 15, "y": 72, "category": "B"})
    );
    assert_eq!(map_seat(&map, "STALLS-2-1")["kind"], "wheelchair");
    assert_eq!(map_seat(&map, "STALLS-2-2")["kind"], "companion");

    // A place the chart does not have (beyond short row B, beyond row A's end, a third
    // row) is refused as any unknown seat, before the writer.
    for (i, unknown) in ["STALLS-2-4", "STALLS-1-7", "STALLS-3-1"]
        .iter()
        .enumerate()
    {
        let refused = app
            .hold(
                "fan",
                &event_id,
                &format!("unknown-{i}"),
                json!({"seatIds": [unknown]}),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{unknown}"
        );
        assert_eq!(refused.code(), "VALIDATION");
        assert!(
            refused.json()["detail"]
                .as_str()
                .unwrap()
                .contains("unknown seat")
        );
    }

    // Seat A5 (the fourth place of row A) bought at its category's price; its ticket names
    // it by its labels, and it checks in.
    let (order_id, tickets) =
        buy_captured(&app, "fan", &event_id, json!({"seatIds": ["STALLS-1-4"]})).await;
    let order = app
        .get(&token("fan"), &format!("/v1/orders/{order_id}"))
        .await
        .json();
    assert_eq!(order["totalMinor"], 5000, "{order}");
    let ticket_id = tickets[0]["ticketId"].as_str().unwrap();
    let ticket = app
        .get(&token("fan"), &format!("/v1/tickets/{ticket_id}"))
        .await;
    assert_eq!(ticket.status, StatusCode::OK);
    let ticket = ticket.json();
    assert_eq!(ticket["seatId"], "STALLS-1-4");
    assert_eq!(
        ticket["seatPlace"],
        json!({"sectionTitle": "Stalls", "rowLabel": "A", "seatLabel": "5", "category": "A",
               "kind": "aisle"})
    );
    let checked_in = app.check_in(&ticket).await;
    assert_eq!(checked_in.status, StatusCode::OK, "{}", checked_in.json());
    // The live seat map follows the store's changes a moment after each commit.
    let mut status = Value::Null;
    for _ in 0..200 {
        let map = app
            .get(&token("fan"), &format!("/v1/events/{event_id}/seatmap"))
            .await
            .json();
        status = map_seat(&map, "STALLS-1-4")["status"].clone();
        if status == "SOLD" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(status, "SOLD");

    // Row B's B3 at the back category's price; best available seats two together in row A
    // (the known gap: adjacency is by place, so A3 and A5 count as neighbours across the
    // aisle); the standing area by quantity at its category's price.
    let b3 = app
        .hold("other", &event_id, "b3", json!({"seatIds": ["STALLS-2-3"]}))
        .await;
    assert_eq!(b3.status, StatusCode::CREATED, "{}", b3.json());
    assert_eq!(b3.json()["totalMinor"], 3000);
    let best = app
        .hold(
            "third",
            &event_id,
            "best",
            json!({"bestAvailable": {"quantity": 2}}),
        )
        .await;
    assert_eq!(best.status, StatusCode::CREATED, "{}", best.json());
    assert_eq!(best.json()["totalMinor"], 10_000);
    let standing = app
        .hold(
            "fourth",
            &event_id,
            "stand",
            json!({"tierId": "BACK", "quantity": 3}),
        )
        .await;
    assert_eq!(standing.status, StatusCode::CREATED, "{}", standing.json());
    assert_eq!(standing.json()["totalMinor"], 6000);
    let event = app
        .get(&token("fan"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    assert_eq!(event["sections"][0]["sold"], 1);
    assert_eq!(event["sections"][0]["held"], 3);
    assert_eq!(event["sections"][0]["available"], 5);
    assert_eq!(event["tiers"][0]["held"], 3);
    // `finish` runs `boxoffice check`'s invariants over the event.
    app.finish().await;
}

async fn an_event_on_a_chart_is_refused_unless_priced_whole(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app.post(&app.admin, CHARTS, Some("hall"), &hall()).await;
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let event = |chart: Value| {
        json!({"name": "Hall night", "startsAt": "2027-01-01T20:00:00Z", "currency": "EUR",
               "chart": chart})
    };
    let cases = [
        (
            event(json!({"chartId": chart_id, "categoryPrices": {"A": 5000, "STAND": 2000}})),
            "chart.categoryPrices.B",
        ),
        (
            event(json!({"chartId": chart_id,
                         "categoryPrices": {"A": 1, "B": 1, "STAND": 1, "VIP": 1}})),
            "chart.categoryPrices.VIP",
        ),
        (
            event(json!({"chartId": chart_id,
                         "categoryPrices": {"A": -1, "B": 1, "STAND": 1}})),
            "chart.categoryPrices.A",
        ),
        (
            event(json!({"chartId": "no-such-chart", "categoryPrices": hall_prices()})),
            "chart.chartId",
        ),
        (
            {
                let mut body = event(json!({"chartId": chart_id, "categoryPrices": hall_prices()}));
                body["sections"] =
                    json!([{"name": "A", "rows": 1, "seatsPerRow": 1, "priceMinor": 1}]);
                body
            },
            "chart",
        ),
    ];
    for (i, (body, field)) in cases.iter().enumerate() {
        let refused = app
            .post(
                &app.admin,
                "/v1/admin/events",
                Some(&format!("bad-{i}")),
                body,
            )
            .await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{field}");
        assert_eq!(refused.code(), "VALIDATION", "{field}");
        assert_eq!(refused.json()["field"], *field, "{}", refused.json());
    }
    // Unknown members of the chart part are refused as in every body.
    let unknown = app
        .post(
            &app.admin,
            "/v1/admin/events",
            Some("bad-member"),
            &event(json!({"chartId": chart_id, "categoryPrices": hall_prices(), "x": 1})),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    // Nothing was created.
    let events = app.get(&token("fan"), "/v1/events").await.json();
    assert_eq!(events["events"].as_array().unwrap().len(), 0, "{events}");
    app.finish().await;
}

/// The 50,000-seat stadium as an event: every seat on the map with its labels. Prints the
/// snapshot's size and the time of its first read (load, layout and render); a benchmark's
/// number, not an assertion.
async fn an_event_on_the_demo_stadium_shows_its_map(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let stadium = serde_json::to_value(demo_stadium()).unwrap();
    let created = app
        .post(&app.admin, CHARTS, Some("stadium"), &stadium)
        .await;
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let event_id = app
        .create_event(json!({
            "name": "Stadium night",
            "sections": [],
            "tiers": [],
            "chart": {"chartId": chart_id,
                      "categoryPrices": {"CAT1": 9000, "CAT2": 7000, "CAT3": 5000, "FLOOR": 6000}},
        }))
        .await;
    let created_ms = started.elapsed().as_millis();
    let started = std::time::Instant::now();
    let map = app
        .get(&token("fan"), &format!("/v1/events/{event_id}/seatmap"))
        .await;
    let first_ms = started.elapsed().as_millis();
    assert_eq!(map.status, StatusCode::OK);
    let bytes = map.bytes.len();
    let map = map.json();
    let seats = map["seats"].as_array().unwrap();
    assert_eq!(seats.len(), STADIUM_SEATS);
    assert!(
        seats
            .iter()
            .all(|s| s["rowLabel"].is_string() && s["x"].is_number())
    );
    let gzip = app
        .send(
            app.http
                .get(format!("{}/v1/events/{event_id}/seatmap", app.base))
                .header("accept-encoding", "gzip")
                .bearer_auth(token("fan")),
        )
        .await
        .bytes
        .len();
    eprintln!(
        "{backend:?} stadium event: created in {created_ms} ms; seat map {bytes} bytes \
         ({gzip} bytes gzip), first read (load + layout + render) {first_ms} ms"
    );
    let event = app
        .get(&token("fan"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    let total: u64 = event["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["available"].as_u64().unwrap())
        .sum();
    assert_eq!(total, STADIUM_SEATS as u64);
    assert_eq!(event["tiers"][0]["tierId"], "FLOOR");
    app.finish().await;
}

async fn trips_on_a_chart_each_keep_its_seats(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, one) = hall_event(&app).await;
    let seats_of = |event: &Value| -> u64 {
        event["sections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                s["rowLengths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|n| n.as_u64().unwrap())
                    .sum::<u64>()
            })
            .sum()
    };
    let single = app
        .get(&app.admin, &format!("/v1/events/{one}"))
        .await
        .json();
    let created = app
        .post(&app.admin, CHARTS, Some("hall-trips"), &hall())
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    let trips = app
        .post(
            &app.admin,
            "/v1/admin/trips",
            Some("trips"),
            &json!({
                "trip": {
                    "name": "Hall tour", "startsAt": "2031-03-01T19:00:00Z", "currency": "EUR",
                    "chart": {"chartId": chart_id, "categoryPrices": hall_prices()},
                },
                "everySeconds": 86_400,
                "count": 2,
            }),
        )
        .await;
    assert_eq!(trips.status, StatusCode::CREATED, "{}", trips.json());
    let trips = trips.json()["trips"].as_array().unwrap().clone();
    assert_eq!(trips.len(), 2);
    for trip in &trips {
        assert_eq!(seats_of(trip), seats_of(&single), "{trip}");
        assert_eq!(trip["tiers"], single["tiers"]);
        let event_id = trip["eventId"].as_str().unwrap();
        let hold = app
            .hold(
                "fan",
                event_id,
                &format!("t-{event_id}"),
                json!({"seatIds": ["STALLS-1-4"]}),
            )
            .await;
        assert_eq!(hold.status, StatusCode::CREATED, "{}", hold.json());
    }
    // A trip gives sections or a chart, not both; an unknown chart is named under trip.chart.
    let both = app
        .post(
            &app.admin,
            "/v1/admin/trips",
            Some("trips-both"),
            &json!({
                "trip": {
                    "name": "Hall tour", "startsAt": "2031-03-01T19:00:00Z", "currency": "EUR",
                    "sections": [{"name": "A", "rows": 1, "seatsPerRow": 2, "priceMinor": 100}],
                    "chart": {"chartId": chart_id, "categoryPrices": hall_prices()},
                },
                "everySeconds": 86_400, "count": 2,
            }),
        )
        .await;
    assert_eq!(both.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(both.json()["field"], "trip.chart");
    let unknown = app
        .post(
            &app.admin,
            "/v1/admin/trips",
            Some("trips-unknown"),
            &json!({
                "trip": {
                    "name": "Hall tour", "startsAt": "2031-03-01T19:00:00Z", "currency": "EUR",
                    "chart": {"chartId": "no-such-chart", "categoryPrices": hall_prices()},
                },
                "everySeconds": 86_400, "count": 2,
            }),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(unknown.json()["field"], "trip.chart.chartId");
    app.finish().await;
}

/// Issue 41, item 3: the hall's companion seat B2 (`STALLS-2-2`) is held only with its
/// wheelchair space B1 (`STALLS-2-1`) in the same hold (and an exchange may not take it
/// alone); sold so, `boxoffice check` is clean.
async fn a_companion_seat_is_held_only_with_its_wheelchair_space(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let (_, event_id) = hall_event(&app).await;
    for (i, seats) in [
        json!(["STALLS-2-2"]),
        json!(["STALLS-2-2", "STALLS-2-3"]),
        json!(["STALLS-1-1", "STALLS-2-2"]),
    ]
    .into_iter()
    .enumerate()
    {
        let alone = app
            .hold(
                "fan",
                &event_id,
                &format!("alone-{i}"),
                json!({"seatIds": seats}),
            )
            .await;
        assert_eq!(alone.status, StatusCode::CONFLICT, "{}", alone.json());
        assert_eq!(alone.code(), "COMPANION_SEAT_ALONE");
        assert_eq!(alone.json()["seatId"], "STALLS-2-2");
    }
    // Nothing was held: the seat map still shows B2 available.
    let map = app
        .get(&token("fan"), &format!("/v1/events/{event_id}/seatmap"))
        .await
        .json();
    assert_eq!(map_seat(&map, "STALLS-2-2")["status"], "AVAILABLE");
    // An exchange into the companion seat alone is refused the same way.
    let (order_id, _) =
        buy_captured(&app, "other", &event_id, json!({"seatIds": ["STALLS-2-3"]})).await;
    let exchange = app
        .post(
            &token("other"),
            &format!("/v1/orders/{order_id}/exchanges"),
            Some("to-companion"),
            &json!({"fromSeatIds": ["STALLS-2-3"], "toSeatIds": ["STALLS-2-2"]}),
        )
        .await;
    assert_eq!(exchange.status, StatusCode::CONFLICT, "{}", exchange.json());
    assert_eq!(exchange.code(), "COMPANION_SEAT_ALONE");
    assert_eq!(exchange.json()["seatId"], "STALLS-2-2");
    // With its wheelchair space in the same hold, granted and sold.
    let (_, tickets) = buy_captured(
        &app,
        "fan",
        &event_id,
        json!({"seatIds": ["STALLS-2-1", "STALLS-2-2"]}),
    )
    .await;
    assert_eq!(tickets.len(), 2);
    let violations = app.db.violations().await;
    assert!(violations.is_empty(), "{violations:?}");
    app.finish().await;
}

/// Issue 41, item 3: an event on the hall keeping its accessible seats (B1, B2) for fans
/// who ask for them until `accessibleReleaseAt`, by the store's clock; from then, anyone's.
async fn kept_accessible_seats_go_to_fans_who_ask_then_to_everyone(backend: Backend) {
    let app = TestApp::spawn(backend).await;
    let created = app.post(&app.admin, CHARTS, Some("hall"), &hall()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.json());
    let chart_id = created.json()["chartId"].as_str().unwrap().to_owned();
    // Ten minutes ahead of this machine's clock, which the store's follows.
    let release_at = time::OffsetDateTime::now_utc() + time::Duration::minutes(10);
    let release_at = time::OffsetDateTime::from_unix_timestamp(release_at.unix_timestamp())
        .unwrap()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let event_id = app
        .create_event(json!({
            "name": "Hall night",
            "sections": [],
            "tiers": [],
            "holdTtlSeconds": 120,
            "chart": {"chartId": chart_id, "categoryPrices": hall_prices(),
                      "accessibleReleaseAt": release_at},
        }))
        .await;
    let event = app
        .get(&token("fan"), &format!("/v1/events/{event_id}"))
        .await
        .json();
    let shown = time::OffsetDateTime::parse(
        event["chart"]["accessibleReleaseAt"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    assert_eq!(
        shown,
        time::OffsetDateTime::parse(&release_at, &time::format_description::well_known::Rfc3339)
            .unwrap()
    );

    // Before the release time: a fan who does not ask is refused the kept seats...
    let both = json!(["STALLS-2-1", "STALLS-2-2"]);
    let kept = app
        .hold("fan", &event_id, "kept", json!({"seatIds": both}))
        .await;
    assert_eq!(kept.status, StatusCode::CONFLICT, "{}", kept.json());
    assert_eq!(kept.code(), "SEAT_KEPT_ACCESSIBLE");
    assert_eq!(kept.json()["unavailableSeatIds"], both);
    assert!(kept.json()["releaseAt"].is_string());
    let space = app
        .hold(
            "fan",
            &event_id,
            "kept-space",
            json!({"seatIds": ["STALLS-2-1", "STALLS-2-3"], "accessible": false}),
        )
        .await;
    assert_eq!(space.code(), "SEAT_KEPT_ACCESSIBLE");
    assert_eq!(space.json()["unavailableSeatIds"], json!(["STALLS-2-1"]));
    // ... but not the other seats, and the companion rule comes first.
    let standard = app
        .hold(
            "fan",
            &event_id,
            "standard",
            json!({"seatIds": ["STALLS-2-3"]}),
        )
        .await;
    assert_eq!(standard.status, StatusCode::CREATED, "{}", standard.json());
    let alone = app
        .hold(
            "fan",
            &event_id,
            "alone",
            json!({"seatIds": ["STALLS-2-2"]}),
        )
        .await;
    assert_eq!(alone.code(), "COMPANION_SEAT_ALONE");
    // A fan who asks for accessible places gets them.
    let asks = app
        .hold(
            "wheels",
            &event_id,
            "asks",
            json!({"seatIds": both, "accessible": true}),
        )
        .await;
    assert_eq!(asks.status, StatusCode::CREATED, "{}", asks.json());

    // Past the release time (the store's clock moved eleven minutes; the hold above lapsed
    // after its 120 s), anyone: the fan refused before buys them.
    app.db.advance_clock(11 * 60 * 1000).await;
    let (_, tickets) = buy_captured(&app, "fan", &event_id, json!({"seatIds": both})).await;
    assert_eq!(tickets.len(), 2);
    let violations = app.db.violations().await;
    assert!(violations.is_empty(), "{violations:?}");
    app.finish().await;
}
