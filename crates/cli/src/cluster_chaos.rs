//! `boxoffice load onsale --cluster DIR --chaos` (issues 17 and 38): the on-sale on a
//! cluster that `boxoffice cluster up` started, with its parts breaking under it.
//!
//! Two events are sold at once through the balancer (each load creates its own; the
//! directory places them, on a fresh cluster one on each of two shards). While the fans
//! arrive, one action every `--chaos-interval-s`:
//!
//! 1. the payment provider (the cluster's simulator) turns slow and lossy;
//! 2. the node that owns the first event is SIGKILLed (its events move to another node once
//!    their leases lapse; HAProxy stops sending to it);
//! 3. the primary of the second event's shard dies with its keeper (the whole process
//!    group: postmaster, backends and `pg_autoctl`, as when its machine dies): the monitor
//!    promotes the secondary; the killed node is started again;
//! 4. the node that owns the second event is frozen with SIGSTOP past its lease, then resumed
//!    with SIGCONT (another node takes the event over; the frozen one's next group is
//!    fenced);
//! 5. the first event's shard loses its secondary (killed with its keeper): its primary
//!    goes on committing alone (`wait_primary`); the keeper killed in 3 is started again and
//!    rejoins as the secondary (`pg_rewind`);
//! 6. the monitor is frozen (SIGSTOP) for an interval, then resumed: no failover happens
//!    and no commit waits for it; then the secondary killed in 5 is started again;
//! 7. once the second event's shard commits synchronously again (its old primary rejoined),
//!    its primary is frozen (SIGSTOP, keeper and PostgreSQL) past the monitor's health
//!    checks, then resumed: the monitor promotes the secondary and the frozen one rejoins
//!    as the secondary;
//! 8. the provider recovers.
//!
//! The nodes' cluster counters (takeovers, leases lost, fenced groups and answers) are
//! read at the end and reported, with each shard's members as the monitor sees them.
//!
//! Then: both events converge (no hold `HELD` or `PAYMENT_PENDING`, no order
//! `PENDING_PAYMENT`), and `boxoffice check` runs on every shard. The run fails on any
//! violation, on no convergence, or on an answer the contract does not allow.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::chaos::ChaosOutcome;
use crate::local_cluster;

/// A slow, lossy provider (as in the one-node chaos run).
const DEGRADED: &str = r#"{"authLatencyMs": [300, 1500], "fail5xxShare": 0.15, "loseShare": 0.1}"#;
const HEALTHY: &str = r#"{"authLatencyMs": [20, 80], "fail5xxShare": 0.0, "loseShare": 0.0}"#;
/// How long a frozen node stays stopped beyond the nodes' lease TTL (3 s by default).
const FREEZE_PAST_LEASE: Duration = Duration::from_secs(2);
const LEASE_TTL: Duration = Duration::from_millis(3_000);
/// How long a frozen primary stays stopped: past the monitor's health checks, its unhealthy
/// timeout and its wait for the primary to demote itself (`autofailover::MONITOR_SETTINGS`).
const FREEZE_PRIMARY: Duration = Duration::from_secs(15);

/// Settings of a cluster chaos run.
#[derive(Debug, Clone)]
pub struct ClusterChaosOptions {
    pub dir: PathBuf,
    pub interval_s: f64,
    /// This binary (a killed node is started again from it).
    pub boxoffice: PathBuf,
}

/// What a cluster chaos run found: one outcome per event.
#[derive(Debug)]
pub struct ClusterChaosOutcome {
    pub events: Vec<ChaosOutcome>,
    pub check_output: String,
}

fn secret(dir: &Path) -> anyhow::Result<String> {
    if let Ok(secret) = std::fs::read_to_string(dir.join("jwt-secret")) {
        return Ok(secret.trim().to_owned());
    }
    std::env::var("BOXOFFICE_JWT_SECRET")
        .ok()
        .filter(|s| !s.is_empty())
        .context("the cluster's JWT secret: set BOXOFFICE_JWT_SECRET as for `cluster up`")
}

fn signal(pid: u64, name: &str) {
    let _ = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

pub async fn run(
    scenario: boxoffice_load::OnsaleScenario,
    options: &ClusterChaosOptions,
) -> anyhow::Result<ClusterChaosOutcome> {
    if !(options.interval_s >= 0.5 && options.interval_s <= 600.0) {
        bail!("chaos-interval-s must be between 0.5 and 600");
    }
    let dir = &options.dir;
    let state = local_cluster::load(dir)?;
    let balancer = state["balancer"]["url"]
        .as_str()
        .context("the cluster's balancer")?
        .to_owned();
    let home_url = state["shards"][0]["databaseUrl"]
        .as_str()
        .context("the cluster's home shard")?
        .to_owned();
    let paysim = state["paysim"]["url"]
        .as_str()
        .context("the cluster's payment simulator (a cluster from an older `cluster up`?)")?
        .to_owned();
    let secret = secret(dir)?;
    let (store, places) = crate::stores::open_stores(&home_url).await?;
    let before: BTreeSet<String> = store.list_event_ids().await?.into_iter().collect();

    let mut scenario = scenario;
    scenario.base_url = balancer.clone();
    scenario.other_base_urls.clear();
    scenario.jwt_secret = secret.clone();
    scenario.event_id = None;
    let loads: Vec<_> = (0..2)
        .map(|_| {
            let scenario = scenario.clone();
            tokio::spawn(async move { boxoffice_load::run_onsale(&scenario).await })
        })
        .collect();
    let started = Instant::now();

    // The two events the loads created.
    let mut events: Vec<String> = Vec::new();
    while events.len() < 2 {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "the loads did not create their events"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        events = store
            .list_event_ids()
            .await?
            .into_iter()
            .filter(|id| !before.contains(id))
            .collect();
    }
    let mut shards = Vec::new();
    for event in &events {
        let index = match &places {
            Some(places) => places.event(event).await?,
            None => 0,
        };
        shards.push(index);
        eprintln!(
            "cluster chaos: event {event} on shard {}",
            local_cluster::shard_name(index)
        );
    }

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let conditions = |body: &'static str| {
        let http = http.clone();
        let url = format!("{paysim}/sim/conditions");
        async move {
            http.post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .and_then(|r| r.error_for_status())
                .map(drop)
        }
    };
    let owner = |event: String| {
        let store = store.clone();
        async move {
            store
                .lease(&event)
                .await
                .ok()
                .flatten()
                .map(|lease| lease.node_id)
        }
    };
    let node_of = |state: &Value, id: &str| -> Option<Value> {
        state["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["id"] == json!(id))
            .cloned()
    };

    let mut marks: Vec<(f64, String)> = Vec::new();
    let interval = Duration::from_secs_f64(options.interval_s);
    let mut killed: Option<Value> = None;
    // The keepers killed, to start again later (shard, member), and the watch of the
    // promotion that follows the primary's death.
    let mut rejoin: Vec<(usize, String)> = Vec::new();
    let mut secondary_killed: Option<(usize, String)> = None;
    let mut failover: Option<tokio::task::JoinHandle<Value>> = None;
    for step in 1..=8u32 {
        tokio::time::sleep_until((started + interval * step).into()).await;
        let at_s = started.elapsed().as_secs_f64();
        let action = match step {
            1 => {
                conditions(DEGRADED).await?;
                "payment provider slow and lossy".to_owned()
            }
            2 => {
                let state = local_cluster::load(dir)?;
                let id = owner(events[0].clone())
                    .await
                    .unwrap_or_else(|| "node-1".to_owned());
                match node_of(&state, &id) {
                    Some(node) => {
                        signal(node["pid"].as_u64().unwrap_or(0), "KILL");
                        killed = Some(node);
                        format!("{id} (owner of event {}) SIGKILLed", events[0])
                    }
                    None => format!("no node {id} to kill"),
                }
            }
            3 => {
                let state = local_cluster::load(dir)?;
                let name = local_cluster::shard_name(shards[1]);
                let primary = match local_cluster::primary_of(&state, shards[1])? {
                    Some(member) => {
                        local_cluster::signal_group(
                            member["pid"].as_u64().unwrap_or(0) as u32,
                            "KILL",
                        );
                        let killed_name = member["name"].as_str().unwrap_or("?").to_owned();
                        failover = Some(tokio::spawn(watch_promotion(
                            state.clone(),
                            shards[1],
                            killed_name.clone(),
                        )));
                        rejoin.push((shards[1], killed_name.clone()));
                        format!(
                            "shard {name}'s primary {killed_name} SIGKILLed with its keeper; the monitor fails it over"
                        )
                    }
                    None => format!("shard {name} has no primary now: none killed"),
                };
                // The killed node comes back (its events have moved by now: the interval
                // is longer than the lease), so that the frozen node of the next step has
                // a live one to lose its event to.
                match killed.take() {
                    Some(node) => {
                        let child = local_cluster::spawn_node(&options.boxoffice, &node, &secret)?;
                        let mut state = local_cluster::load(dir)?;
                        if let Some(entry) = state["nodes"]
                            .as_array_mut()
                            .and_then(|nodes| nodes.iter_mut().find(|n| n["id"] == node["id"]))
                        {
                            entry["pid"] = json!(child.id());
                        }
                        local_cluster::save(dir, &state)?;
                        format!(
                            "{primary}; {} started again",
                            node["id"].as_str().unwrap_or("?")
                        )
                    }
                    None => primary,
                }
            }
            4 => {
                let state = local_cluster::load(dir)?;
                let target = match owner(events[1].clone()).await {
                    Some(id) => node_of(&state, &id),
                    None => state["nodes"].as_array().and_then(|n| n.first()).cloned(),
                };
                match target {
                    Some(node) => {
                        let pid = node["pid"].as_u64().unwrap_or(0);
                        signal(pid, "STOP");
                        tokio::time::sleep(LEASE_TTL + FREEZE_PAST_LEASE).await;
                        signal(pid, "CONT");
                        format!(
                            "{} (owner of event {}) frozen (SIGSTOP) for {:.1} s, past its lease, then resumed",
                            node["id"].as_str().unwrap_or("?"),
                            events[1],
                            (LEASE_TTL + FREEZE_PAST_LEASE).as_secs_f64()
                        )
                    }
                    None => "no node left to freeze".to_owned(),
                }
            }
            5 => {
                let state = local_cluster::load(dir)?;
                let name = local_cluster::shard_name(shards[0]);
                let mut said = match local_cluster::secondary_of(&state, shards[0])? {
                    Some(member) => {
                        local_cluster::signal_group(
                            member["pid"].as_u64().unwrap_or(0) as u32,
                            "KILL",
                        );
                        let killed_name = member["name"].as_str().unwrap_or("?").to_owned();
                        secondary_killed = Some((shards[0], killed_name.clone()));
                        format!(
                            "shard {name}'s secondary {killed_name} SIGKILLed with its keeper; its primary commits alone"
                        )
                    }
                    None => format!("shard {name} has no streaming secondary now: none killed"),
                };
                for (shard, member) in rejoin.drain(..) {
                    local_cluster::restart_member(dir, shard, &member)?;
                    said.push_str(&format!(
                        "; {member}'s keeper started again (it rejoins as the secondary)"
                    ));
                }
                said
            }
            6 => {
                let state = local_cluster::load(dir)?;
                let monitor = state["monitor"]["pid"].as_u64().unwrap_or(0) as u32;
                local_cluster::signal_group(monitor, "STOP");
                tokio::time::sleep(interval).await;
                local_cluster::signal_group(monitor, "CONT");
                let mut said = format!(
                    "the monitor frozen (SIGSTOP) for {:.1} s, then resumed",
                    interval.as_secs_f64()
                );
                if let Some((shard, member)) = secondary_killed.take() {
                    local_cluster::restart_member(dir, shard, &member)?;
                    said.push_str(&format!("; {member}'s keeper started again"));
                }
                said
            }
            7 => {
                let state = local_cluster::load(dir)?;
                let name = local_cluster::shard_name(shards[1]);
                // The shard failed over in step 3 and its old primary rejoins: freeze the
                // primary once the shard commits synchronously again (at most two
                // minutes). Frozen while it still commits alone (`wait_primary`), the
                // monitor may promote a secondary that lacks commits already answered: a
                // second failure inside the first one's window, which loses sales
                // (docs/DEPLOY.md); this run checks one failure at a time.
                let waited = Instant::now();
                let mut streaming = local_cluster::synchronous(&state, shards[1])?;
                while !streaming && waited.elapsed() < Duration::from_secs(120) {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    streaming = local_cluster::synchronous(&state, shards[1])?;
                }
                let primary = if streaming {
                    local_cluster::primary_of(&state, shards[1])?
                } else {
                    None
                };
                match primary {
                    Some(member) => {
                        let group = member["pid"].as_u64().unwrap_or(0) as u32;
                        local_cluster::signal_group(group, "STOP");
                        tokio::time::sleep(FREEZE_PRIMARY).await;
                        local_cluster::signal_group(group, "CONT");
                        format!(
                            "shard {name}'s primary {} frozen (SIGSTOP, keeper and PostgreSQL) for {:.0} s, then resumed ({})",
                            member["name"].as_str().unwrap_or("?"),
                            FREEZE_PRIMARY.as_secs_f64(),
                            "its secondary streamed synchronously: the monitor promotes it"
                        )
                    }
                    None => format!(
                        "shard {name} did not commit synchronously again within {:.0} s: no primary frozen",
                        waited.elapsed().as_secs_f64()
                    ),
                }
            }
            _ => {
                conditions(HEALTHY).await?;
                "payment provider recovered".to_owned()
            }
        };
        eprintln!("cluster chaos: t={at_s:.1}s {action}");
        marks.push((at_s, action));
    }

    let mut reports = Vec::new();
    for load in loads {
        reports.push(load.await.context("a load task")??);
    }
    conditions(HEALTHY).await?;
    eprintln!("cluster chaos: fans done; waiting for both events to converge");
    let mut outcomes = Vec::new();
    let converge_started = Instant::now();
    let mut pendings = Vec::new();
    for report in &reports {
        pendings.push(crate::chaos::converge(store.as_ref(), &report.event_id).await?);
    }
    let converge_s = converge_started.elapsed().as_secs_f64();
    let (check_ok, check_output) = crate::chaos::check(&options.boxoffice, &home_url).await?;
    print!("{check_output}");
    let failover = match failover {
        Some(watch) => watch.await.unwrap_or(Value::Null),
        None => Value::Null,
    };
    // Every shard back to a primary and a streaming secondary (the keepers started again
    // rejoin), at most a minute.
    let state = local_cluster::load(dir)?;
    let healed_started = Instant::now();
    let mut members = local_cluster::shard_states(&state)?;
    while !healed(&members) && healed_started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        members = local_cluster::shard_states(&state)?;
    }
    eprintln!(
        "cluster chaos: shards {} after {:.1} s: {members}",
        if healed(&members) {
            "healed"
        } else {
            "NOT healed"
        },
        healed_started.elapsed().as_secs_f64()
    );
    let counters = cluster_counters(&http, &state).await;
    eprintln!("cluster chaos: the nodes' counters {counters}");
    for (mut report, pending) in reports.into_iter().zip(pendings) {
        // The loads finish in their own order: each report names its event.
        let shard = &shards[events
            .iter()
            .position(|e| *e == report.event_id)
            .context("a load's event is not one of the two found")?];
        let converged = pending.is_empty();
        report.json["scenario"]["chaos"] = json!({
            "cluster": dir.display().to_string(),
            "intervalSeconds": options.interval_s,
            "shard": local_cluster::shard_name(*shard),
            "convergeSeconds": converge_s,
            "converged": converged,
            "pendingAtEnd": pending,
            "failover": failover,
            "shardMembers": members,
            "nodeCounters": counters,
        });
        report.json["chaos"] = Value::Array(
            marks
                .iter()
                .map(|(at_s, action)| json!({"atSeconds": at_s, "action": action}))
                .collect(),
        );
        report.json["check"] = json!({"ok": check_ok, "output": check_output});
        let mut table = std::mem::take(&mut report.table);
        table.push_str(&format!("shard {}\n", local_cluster::shard_name(*shard)));
        for (at_s, action) in &marks {
            table.push_str(&format!("chaos t={at_s:.1}s {action}\n"));
        }
        if !failover.is_null() {
            table.push_str(&format!("failover {failover}\n"));
        }
        table.push_str(&format!("node counters {counters}\n"));
        table.push_str(&format!(
            "converged={converged} after {converge_s:.1} s; check {}\n",
            if check_ok { "passed" } else { "FAILED" }
        ));
        report.table = table;
        outcomes.push(ChaosOutcome {
            report,
            check_ok,
            converged,
        });
    }
    Ok(ClusterChaosOutcome {
        events: outcomes,
        check_output,
    })
}

/// Whether every shard has a primary and a streaming secondary (`shard_states`).
fn healed(shards: &Value) -> bool {
    shards.as_array().is_some_and(|shards| {
        shards.iter().all(|shard| {
            let members = shard["members"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            members.iter().any(|m| m["primary"] == json!(true))
                && members
                    .iter()
                    .any(|m| m["currentState"] == "secondary" && m["assignedState"] == "secondary")
        })
    })
}

/// Waits (at most two minutes) until a member of shard `index` other than `killed` is its
/// primary: the promotion's timeline from the kill, in ms.
async fn watch_promotion(state: Value, index: usize, killed: String) -> Value {
    let started = Instant::now();
    let mut unhealthy_ms = None;
    while started.elapsed() < Duration::from_secs(120) {
        if let Ok(shards) = local_cluster::shard_states(&state) {
            let members = shards[index]["members"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if unhealthy_ms.is_none()
                && members
                    .iter()
                    .any(|m| m["name"] == json!(killed) && m["healthy"] == json!(false))
            {
                unhealthy_ms = Some(started.elapsed().as_millis() as u64);
            }
            if let Some(promoted) = members
                .iter()
                .find(|m| m["name"] != json!(killed) && m["primary"] == json!(true))
            {
                return json!({
                    "killed": killed,
                    "promoted": promoted["name"],
                    "unhealthyMs": unhealthy_ms,
                    "promotedMs": started.elapsed().as_millis() as u64,
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    json!({"killed": killed, "unhealthyMs": unhealthy_ms, "promotedMs": null})
}

/// The cluster counters of every node, summed (a node restarted during the run counts from
/// its restart).
async fn cluster_counters(http: &reqwest::Client, state: &Value) -> Value {
    const NAMES: [&str; 5] = [
        "boxoffice_cluster_takeovers_total",
        "boxoffice_cluster_leases_lost_total",
        "boxoffice_cluster_fenced_groups_total",
        "boxoffice_cluster_fenced_answers_total",
        "boxoffice_cluster_forwarded_total",
    ];
    let mut sums = [0.0f64; 5];
    for node in state["nodes"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let Some(port) = node["port"].as_u64() else {
            continue;
        };
        let Ok(answer) = http
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
        else {
            continue;
        };
        let text = answer.text().await.unwrap_or_default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for (sum, name) in sums.iter_mut().zip(NAMES) {
                if line.starts_with(name)
                    && line[name.len()..].starts_with([' ', '{'])
                    && let Some(value) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
                {
                    *sum += value;
                }
            }
        }
    }
    let mut counters = serde_json::Map::new();
    for (name, sum) in NAMES.iter().zip(sums) {
        counters.insert(
            name.trim_start_matches("boxoffice_cluster_").to_owned(),
            json!(sum),
        );
    }
    Value::Object(counters)
}
