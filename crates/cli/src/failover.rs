//! Failover of a local cluster's shard (issue 17): `boxoffice cluster failover` (by hand) and
//! `boxoffice cluster watch` (started by `cluster up`: the same step, driven by health
//! checks of every shard's primary).
//!
//! The step, in this order:
//!
//! 1. **Fence the old primary**: SIGKILL its postmaster and every process under it (on one
//!    machine this is STONITH; on real hosts it is the power switch or the firewall). It can
//!    take no write afterwards, whatever state it was in (running, paused, half dead). With a
//!    synchronous standby it could not have acknowledged a commit the standby did not have.
//! 2. **Promote the standby** (`pg_ctl promote -w`).
//! 3. **Let it commit alone**: `synchronous_standby_names = ''` (its standby is gone; left
//!    as it was, every commit would wait for ever).
//! 4. **Fence the writers**: every event lease on the shard gets epoch + 1 and expires now,
//!    each row locked `FOR UPDATE` first (so the groups already reading it finish first). An
//!    event writer's next group finds another epoch and writes nothing: the writer loads its
//!    event again from the new primary, taking the lease afresh.
//!
//! The nodes follow on their own: their shard URLs name both hosts, and each pool moves to
//! the one that is a writable primary (`boxoffice_store_postgres::hosts`).
//!
//! Then the watcher (and `cluster failover`) builds a new synchronous standby where the old
//! primary was ([`rebuild_standby`]: its data discarded, a base backup of the new primary,
//! `synchronous_standby_names` set again); until it streams, commits are acknowledged by
//! the new primary alone. So a shard can fail over again.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::chaos::{as_postgres, find_pg_bin, run_command};

/// How often the watcher checks every shard's primary.
pub const WATCH_EVERY: Duration = Duration::from_millis(500);
/// Checks that must fail in a row before the watcher fails a shard over.
pub const FAILED_CHECKS_MAX: u32 = 3;
/// How long one check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(1);

fn since_ms(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

/// Fails `shard_name` of the cluster in `dir` over to its standby; the timeline (ms from the
/// start of the step), also kept in `cluster.json` under the shard's `failover`.
pub async fn failover(
    dir: &Path,
    shard_name: &str,
    detected: Option<Value>,
) -> anyhow::Result<Value> {
    let start = Instant::now();
    let started_at = time::OffsetDateTime::now_utc();
    let state = crate::local_cluster::load(dir)?;
    let index = state["shards"]
        .as_array()
        .and_then(|shards| shards.iter().position(|s| s["name"] == json!(shard_name)))
        .with_context(|| format!("no shard {shard_name:?} in this cluster"))?;
    let shard = state["shards"][index].clone();
    let (Some(old_data), Some(new_data), Some(new_port)) = (
        shard["primary"]["data"].as_str(),
        shard["standby"]["data"].as_str(),
        shard["standby"]["port"].as_u64(),
    ) else {
        bail!("shard {shard_name} has no standby left to promote");
    };
    let bin = find_pg_bin()?;

    // 1. Fence the old primary.
    let killed = kill_postmaster(Path::new(old_data));
    let fenced_ms = since_ms(start);

    // 2. Promote the standby.
    let mut promote = as_postgres(&bin.join("pg_ctl"));
    promote
        .arg("-D")
        .arg(new_data)
        .args(["-w", "-t", "30", "promote"]);
    run_command(&mut promote).context("promoting the standby")?;
    let promoted_ms = since_ms(start);

    // 3. Commit without the standby that is gone; 4. fence the writers.
    let url = format!("postgres://postgres@127.0.0.1:{new_port}/boxoffice");
    let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .context("connecting to the promoted standby")?;
    sqlx::query("ALTER SYSTEM SET synchronous_standby_names = ''")
        .execute(&mut connection)
        .await?;
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&mut connection)
        .await?;
    let writable_ms = since_ms(start);
    let mut tx = sqlx::Connection::begin(&mut connection).await?;
    sqlx::query("SET LOCAL synchronous_commit = local")
        .execute(&mut *tx)
        .await?;
    sqlx::query("SELECT 1 FROM event_lease ORDER BY event_id FOR UPDATE")
        .execute(&mut *tx)
        .await?;
    let leases = sqlx::query(
        "UPDATE event_lease SET epoch = epoch + 1,
                expires_at = least(expires_at, boxoffice_now())",
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    let _ = sqlx::Connection::close(connection).await;
    let leases_ms = since_ms(start);

    let timeline = json!({
        "startedAt": started_at.format(&time::format_description::well_known::Rfc3339)?,
        "detected": detected.unwrap_or(json!(null)),
        "oldPrimaryKilled": killed,
        "oldPrimaryFencedMs": fenced_ms,
        "promotedMs": promoted_ms,
        "writableAloneMs": writable_ms,
        "leasesFencedMs": leases_ms,
        "leasesFenced": leases,
    });
    // The roles move: the promoted standby is the primary, the old primary is kept only so
    // that `cluster down` can check its port.
    let mut state = crate::local_cluster::load(dir)?;
    let shard = &mut state["shards"][index];
    shard["former"] = shard["primary"].take();
    shard["primary"] = shard["standby"].take();
    shard["failover"] = timeline.clone();
    crate::local_cluster::save(dir, &state)?;
    Ok(timeline)
}

/// SIGKILLs the postmaster of `data` and every process under it; the pids killed.
pub(crate) fn kill_postmaster(data: &Path) -> Vec<u32> {
    let Some(postmaster) = std::fs::read_to_string(data.join("postmaster.pid"))
        .ok()
        .and_then(|text| {
            text.lines()
                .next()
                .and_then(|l| l.trim().parse::<u32>().ok())
        })
    else {
        return Vec::new();
    };
    let mut pids = children(postmaster);
    pids.push(postmaster);
    let _ = std::process::Command::new("kill")
        .arg("-KILL")
        .args(pids.iter().map(u32::to_string))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    pids
}

/// Whether `pid` has ended: gone, or a zombie its parent has not reaped yet.
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // `pid (comm) S ...`: the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

/// The killed postmaster's socket lock (`.s.PGSQL.<port>.lock`, beside the data directory)
/// names its PID. Until its parent reaps it, a SIGKILLed postmaster is a zombie that still
/// answers `kill(pid, 0)`, and a new server on the port refuses to start ("lock file already
/// exists"; seen in CI, where PID 1 reaps late). Once every killed process has ended, the
/// lock is stale and removed with its socket.
async fn remove_stale_socket_lock(data: &Path, port: u64, killed: &[u32]) -> anyhow::Result<()> {
    crate::local_cluster::wait_for(
        Duration::from_secs(10),
        "the old primary's processes to end",
        || killed.iter().all(|pid| ended(*pid)),
    )
    .await?;
    let Some(socket_dir) = data.parent() else {
        return Ok(());
    };
    let lock = socket_dir.join(format!(".s.PGSQL.{port}.lock"));
    let owner = std::fs::read_to_string(&lock).ok().and_then(|text| {
        text.lines()
            .next()
            .and_then(|line| line.trim().parse::<u32>().ok())
    });
    if owner.is_some_and(ended) {
        let _ = std::fs::remove_file(&lock);
        let _ = std::fs::remove_file(socket_dir.join(format!(".s.PGSQL.{port}")));
    }
    Ok(())
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// Whether the PostgreSQL at `port` answers a query within [`CHECK_TIMEOUT`].
async fn answers(port: u64) -> bool {
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    let check = async {
        let mut connection = <sqlx::PgConnection as sqlx::Connection>::connect(&url).await?;
        let one: i32 = sqlx::query_scalar("SELECT 1")
            .fetch_one(&mut connection)
            .await?;
        let _ = sqlx::Connection::close(connection).await;
        Ok::<_, sqlx::Error>(one == 1)
    };
    matches!(
        tokio::time::timeout(CHECK_TIMEOUT, check).await,
        Ok(Ok(true))
    )
}

/// `boxoffice cluster watch`: checks every shard's primary each [`WATCH_EVERY`]; after
/// [`FAILED_CHECKS_MAX`] failed checks in a row, fails that shard over. Runs until killed
/// (`cluster down` stops it first) or until the cluster's state is gone.
pub async fn watch(dir: &Path) -> anyhow::Result<()> {
    let mut failed: std::collections::HashMap<String, (u32, Option<Instant>)> = Default::default();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Ok(state) = crate::local_cluster::load(dir) else {
            return Ok(());
        };
        for shard in state["shards"].as_array().cloned().unwrap_or_default() {
            let (Some(name), Some(port)) =
                (shard["name"].as_str(), shard["primary"]["port"].as_u64())
            else {
                continue;
            };
            if shard["standby"]["port"].as_u64().is_none() {
                continue; // nothing to fail over to
            }
            let entry = failed.entry(name.to_owned()).or_default();
            if answers(port).await {
                *entry = (0, None);
                continue;
            }
            entry.0 += 1;
            let first = *entry.1.get_or_insert_with(Instant::now);
            eprintln!(
                "{} shard {name}: primary 127.0.0.1:{port} failed its check ({}/{FAILED_CHECKS_MAX})",
                now(),
                entry.0
            );
            if entry.0 >= FAILED_CHECKS_MAX {
                let detected =
                    json!({"firstFailedCheckMsBefore": since_ms(first), "failedChecks": entry.0});
                *entry = (0, None);
                match failover(dir, name, Some(detected)).await {
                    Ok(timeline) => {
                        eprintln!("{} shard {name}: failed over: {timeline}", now());
                        match rebuild_standby(dir, name).await {
                            Ok(ms) => eprintln!(
                                "{} shard {name}: a new synchronous standby streams ({ms} ms)",
                                now()
                            ),
                            Err(error) => eprintln!(
                                "{} shard {name}: rebuilding its standby failed: {error:#}",
                                now()
                            ),
                        }
                    }
                    Err(error) => eprintln!("{} shard {name}: failover failed: {error:#}", now()),
                }
            }
        }
    }
}

fn now() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Builds a new synchronous standby for `shard_name` after a failover, where its former
/// primary was (same directory and port, so the nodes' URLs still name it): the former
/// primary's data are removed (never started again as a primary), a base backup of the new
/// primary is taken, the standby started, and the primary waits for it again
/// (`synchronous_standby_names`). Until it streams, commits are acknowledged by the primary
/// alone. Returns the milliseconds it took.
pub async fn rebuild_standby(dir: &Path, shard_name: &str) -> anyhow::Result<u64> {
    let start = Instant::now();
    let state = crate::local_cluster::load(dir)?;
    let index = state["shards"]
        .as_array()
        .and_then(|shards| shards.iter().position(|s| s["name"] == json!(shard_name)))
        .with_context(|| format!("no shard {shard_name:?} in this cluster"))?;
    let shard = &state["shards"][index];
    let (Some(data), Some(port), Some(primary_port)) = (
        shard["former"]["data"].as_str(),
        shard["former"]["port"].as_u64(),
        shard["primary"]["port"].as_u64(),
    ) else {
        bail!("shard {shard_name} has no former primary to rebuild as its standby");
    };
    let bin = find_pg_bin()?;
    let data = Path::new(data);
    // Dead since the failover (SIGKILLed): its data may hold writes the new primary never
    // had (unacknowledged ones): they are discarded with it.
    let killed = kill_postmaster(data);
    remove_stale_socket_lock(data, port, &killed).await?;
    std::fs::remove_dir_all(data).with_context(|| format!("removing {}", data.display()))?;
    run_command(
        as_postgres(&bin.join("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &primary_port.to_string()])
            // A fast checkpoint: the default spreads it over minutes on a busy primary.
            .args(["-U", "postgres", "-X", "stream", "-R", "-c", "fast", "-D"])
            .arg(data),
    )
    .context("the base backup of the new primary")?;
    // The copy carries the primary's settings: its own port and name, and no standby of its
    // own to wait for.
    crate::local_cluster::append_conf(
        data,
        &format!(
            "port = {port}\ncluster_name = '{}'\nsynchronous_standby_names = ''\n",
            crate::local_cluster::STANDBY_NAME
        ),
    )?;
    crate::local_cluster::pg_ctl(&bin, data, "start")?;
    let primary_port = u16::try_from(primary_port)?;
    crate::local_cluster::psql(
        &bin,
        primary_port,
        &format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{}'",
            crate::local_cluster::STANDBY_NAME
        ),
    )?;
    crate::local_cluster::psql(&bin, primary_port, "SELECT pg_reload_conf()")?;
    crate::local_cluster::wait_for(
        Duration::from_secs(60),
        "the rebuilt standby to stream synchronously",
        || {
            crate::local_cluster::psql(
                &bin,
                primary_port,
                "SELECT sync_state FROM pg_stat_replication",
            )
            .is_ok_and(|out| out.trim() == "sync")
        },
    )
    .await?;
    let took = since_ms(start);
    let mut state = crate::local_cluster::load(dir)?;
    let shard = &mut state["shards"][index];
    shard["standby"] = shard["former"].take();
    if let Some(map) = shard.as_object_mut() {
        map.remove("former");
    }
    shard["failover"]["standbyRebuiltMs"] = json!(took);
    crate::local_cluster::save(dir, &state)?;
    Ok(took)
}
