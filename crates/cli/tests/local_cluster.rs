//! `boxoffice cluster up` / `down` (issue 17): two shards, each a primary with a synchronous
//! standby, a Redis, two nodes and HAProxy come up on free ports below 32768; two events are
//! placed one on each shard; holds sent through the balancer are decided by each event's one
//! owner whichever node HAProxy picked, committed on its shard's primary (none on the other)
//! and present on that shard's standby; `boxoffice check` over both shards is clean;
//! `cluster down` leaves no process and no port.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::BIN;

const SECRET: &str = "local-cluster-test-secret-0123456789";

fn boxoffice(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .env("BOXOFFICE_JWT_SECRET", SECRET)
        .output()
        .expect("running boxoffice")
}

fn line_value(stdout: &str, key: &str) -> String {
    stdout
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no `{key}` line in {stdout:?}"))
        .trim()
        .to_owned()
}

/// Holds of `event_id` on the PostgreSQL at `port`.
async fn holds_on(port: u64, event_id: &str) -> i64 {
    let url = format!("postgres://postgres@127.0.0.1:{port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connecting to the shard");
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM hold WHERE event_id = $1")
        .bind(event_id)
        .fetch_one(&mut connection)
        .await
        .expect("counting holds")
}

fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_comes_up_sells_through_the_balancer_and_goes_down_clean() {
    let dir = std::env::temp_dir().join(format!("boxoffice-cluster-{}", uuid::Uuid::now_v7()));
    let dir_arg = dir.display().to_string();
    let up = boxoffice(&[
        "cluster", "up", "--dir", &dir_arg, "--nodes", "2", "--shards", "2",
    ]);
    let stdout = String::from_utf8_lossy(&up.stdout).into_owned();
    assert!(
        up.status.success(),
        "cluster up failed: {stdout}{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let balancer = line_value(&stdout, "balancer");
    let admin = line_value(&stdout, "admin-token");
    let database_url = line_value(&stdout, "database-url");
    assert!(balancer.starts_with("http://127.0.0.1:"));
    let state: Value =
        serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).expect("cluster.json"))
            .expect("cluster state");

    // Every part on a port below the client range.
    let mut ports = vec![state["balancer"]["port"].as_u64().unwrap()];
    ports.push(state["redis"]["port"].as_u64().unwrap());
    for shard in 0..2 {
        ports.push(state["shards"][shard]["primary"]["port"].as_u64().unwrap());
        ports.push(state["shards"][shard]["standby"]["port"].as_u64().unwrap());
    }
    for node in state["nodes"].as_array().unwrap() {
        ports.push(node["port"].as_u64().unwrap());
    }
    assert_eq!(ports.len(), 8);
    assert!(ports.iter().all(|p| *p < 32_768), "{ports:?}");

    let http = reqwest::Client::new();
    // Two events: the directory places them by the fewest events, one on each shard.
    let mut events = Vec::new();
    for n in 0..2 {
        let created: Value = http
            .post(format!("{balancer}/v1/admin/events"))
            .bearer_auth(&admin)
            .header("idempotency-key", format!("cluster-event-{n}"))
            .json(&json!({
                "name": format!("Cluster night {n}"), "startsAt": "2030-01-01T20:00:00Z",
                "currency": "EUR", "holdTtlSeconds": 120, "maxSeatsPerHold": 6,
                "maxTicketsPerAccount": 6,
                "sections": [{"name": "A", "rows": 5, "seatsPerRow": 20, "priceMinor": 5000}],
            }))
            .send()
            .await
            .expect("creating the event")
            .json()
            .await
            .expect("event body");
        events.push(created["eventId"].as_str().expect("eventId").to_owned());
    }
    // The same request again answers the same event (its shard has the stored answer).
    let replay: Value = http
        .post(format!("{balancer}/v1/admin/events"))
        .bearer_auth(&admin)
        .header("idempotency-key", "cluster-event-1")
        .json(&json!({
            "name": "Cluster night 1", "startsAt": "2030-01-01T20:00:00Z",
            "currency": "EUR", "holdTtlSeconds": 120, "maxSeatsPerHold": 6,
            "maxTicketsPerAccount": 6,
            "sections": [{"name": "A", "rows": 5, "seatsPerRow": 20, "priceMinor": 5000}],
        }))
        .send()
        .await
        .expect("creating the event again")
        .json()
        .await
        .expect("event body");
    assert_eq!(
        replay["eventId"],
        json!(events[1]),
        "a replay answers as before"
    );

    // Ten holds per event through the balancer (round robin: both nodes receive some); one
    // node decides each event's holds, its owner.
    for (n, event_id) in events.iter().enumerate() {
        let mut deciders = std::collections::BTreeSet::new();
        let mut hold_ids = Vec::new();
        for i in 0..10 {
            let token = boxoffice_server::auth::mint_token(
                SECRET,
                &boxoffice_domain::ids::AccountId::parse(&format!("cluster-fan-{i}")).unwrap(),
                false,
                3600,
            )
            .unwrap();
            let answer = http
                .post(format!("{balancer}/v1/events/{event_id}/holds"))
                .bearer_auth(&token)
                .header("idempotency-key", format!("cluster-hold-{n}-{i}"))
                .json(&json!({"bestAvailable": {"quantity": 2}}))
                .send()
                .await
                .expect("a hold through the balancer");
            assert_eq!(answer.status().as_u16(), 201, "event {n} hold {i}");
            deciders.insert(
                answer
                    .headers()
                    .get("x-boxoffice-node")
                    .and_then(|v| v.to_str().ok())
                    .expect("x-boxoffice-node")
                    .to_owned(),
            );
            let body: Value = answer.json().await.expect("hold body");
            hold_ids.push((token, body["holdId"].as_str().expect("holdId").to_owned()));
        }
        assert_eq!(deciders.len(), 1, "one owner decides: {deciders:?}");
        // A hold is found by its id through any node, whichever shard it is on.
        for (token, hold_id) in hold_ids.iter().take(4) {
            let answer = http
                .get(format!("{balancer}/v1/holds/{hold_id}"))
                .bearer_auth(token)
                .send()
                .await
                .expect("reading a hold");
            assert_eq!(answer.status().as_u16(), 200, "hold {hold_id}");
        }
    }

    // Each event's holds are on its own shard's primary, none on the other.
    let primaries: Vec<u64> = (0..2)
        .map(|shard| state["shards"][shard]["primary"]["port"].as_u64().unwrap())
        .collect();
    for (n, event_id) in events.iter().enumerate() {
        assert_eq!(holds_on(primaries[n], event_id).await, 10, "event {n}");
        assert_eq!(holds_on(primaries[1 - n], event_id).await, 0, "event {n}");
    }
    let listed = boxoffice(&["shard", "list", "--database-url", &database_url]);
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.contains("placement least-events"), "{listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("main ") && l.ends_with("events placed 1")),
        "{listed}"
    );
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("s1 ") && l.ends_with("events placed 1")),
        "{listed}"
    );

    // Committed on the primaries, streamed synchronously to the standbys.
    for (n, event_id) in events.iter().enumerate() {
        let standby = state["shards"][n]["standby"]["port"].as_u64().unwrap();
        let url = format!("postgres://postgres@127.0.0.1:{}/postgres", primaries[n]);
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
            .await
            .unwrap();
        let sync: String = sqlx::query_scalar("SELECT sync_state FROM pg_stat_replication")
            .fetch_one(&mut connection)
            .await
            .expect("a standby streams");
        assert_eq!(sync, "sync");
        // The standby has flushed every commit before it was acknowledged; replaying it for
        // reads may take a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut on_standby = holds_on(standby, event_id).await;
        while on_standby != 10 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            on_standby = holds_on(standby, event_id).await;
        }
        assert_eq!(on_standby, 10, "shard {n}'s standby has every hold");
    }

    // The invariants hold on both shards, and each event is where the directory says.
    let check = boxoffice(&["check", "--database-url", &database_url]);
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    assert!(
        check.status.success(),
        "check: {said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        said.contains("shard main:") && said.contains("shard s1:"),
        "{said}"
    );
    assert_eq!(said.matches("checked 1 events").count(), 2, "{said}");

    // A second `up` into the same directory is refused.
    let again = boxoffice(&["cluster", "up", "--dir", &dir_arg]);
    assert!(!again.status.success());

    let down = boxoffice(&["cluster", "down", "--dir", &dir_arg]);
    assert!(
        down.status.success(),
        "cluster down failed: {}{}",
        String::from_utf8_lossy(&down.stdout),
        String::from_utf8_lossy(&down.stderr)
    );
    for port in &ports {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", *port as u16)).is_ok(),
            "port {port} still bound"
        );
    }
    for node in state["nodes"].as_array().unwrap() {
        assert!(!alive(node["pid"].as_u64().unwrap()), "a node still runs");
    }
    for file in [
        state["redis"]["pidFile"].as_str().unwrap(),
        state["balancer"]["pidFile"].as_str().unwrap(),
    ] {
        if let Ok(pid) = std::fs::read_to_string(file) {
            assert!(!alive(pid.trim().parse().unwrap()), "{file}: still runs");
        }
    }
    for shard in ["shard-0", "shard-1"] {
        assert!(!dir.join(format!("{shard}/primary/postmaster.pid")).exists());
        assert!(!dir.join(format!("{shard}/standby/postmaster.pid")).exists());
    }
    // Down twice: nothing to stop, said plainly.
    assert!(
        !boxoffice(&["cluster", "down", "--dir", &dir_arg])
            .status
            .success()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
