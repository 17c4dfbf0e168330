//! A shard's primary and its standbys in one URL, followed through a failover (issue 17).
//!
//! sqlx takes one host per URL, so a URL that names several (`postgres://u@h1:5432,h2:5433/db`,
//! libpq's form) is handled here:
//!
//! - every new connection asks `pg_is_in_recovery()` and is refused when it reached a
//!   standby, so no write ever goes to a standby (libpq's `target_session_attrs=read-write`);
//! - one follower task per URL (shared by the process's pools of that URL) asks the current
//!   host every [`PROBE_EVERY`] whether it is still a writable primary; when it is not (gone,
//!   paused past [`PROBE_TIMEOUT`], or in recovery), it looks for the host that is and points
//!   every pool at it (`Pool::set_connect_options`), and the connections opened before the
//!   switch are closed instead of handed out.
//!
//! A statement on a connection to the old primary fails (answered 503, retried by the
//! caller): it never reaches the new one unless it is sent again. Which host is the primary is
//! decided by the promotion (`boxoffice cluster failover`), never here: this only follows.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use boxoffice_store::{StoreError, StoreResult};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};

/// How often the follower asks the current host whether it is still the primary.
pub const PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long a host may take to connect or answer before it is taken for gone.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The hosts of a multi-host URL and which one the pools use now.
pub struct Hosts {
    urls: Vec<String>,
    options: Vec<PgConnectOptions>,
    current: AtomicUsize,
    switched_at: Mutex<Option<Instant>>,
    pools: Mutex<Vec<PgPool>>,
    following: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts")
            .field("hosts", &self.options.len())
            .field("current", &self.current.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// One URL per host of `url` when it names several (`scheme://[user@]h1:p1,h2:p2/rest`),
/// else `None`.
pub fn split(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (user, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    if !hosts.contains(',') {
        return None;
    }
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{user}{host}{path}"))
            .collect(),
    )
}

fn registry() -> &'static Mutex<HashMap<String, Arc<Hosts>>> {
    static HOSTS: OnceLock<Mutex<HashMap<String, Arc<Hosts>>>> = OnceLock::new();
    HOSTS.get_or_init(Mutex::default)
}

impl Hosts {
    /// The hosts of a multi-host `url` (one per URL in the process), each with the
    /// session settings of every pool (`crate::configure`); `None` for a one-host URL.
    pub fn of(url: &str) -> StoreResult<Option<Arc<Self>>> {
        let Some(urls) = split(url) else {
            return Ok(None);
        };
        let mut known = registry().lock().expect("hosts registry");
        if let Some(hosts) = known.get(url) {
            return Ok(Some(hosts.clone()));
        }
        let options = urls
            .iter()
            .map(|one| {
                one.parse::<PgConnectOptions>()
                    .map(crate::configure)
                    .map_err(|e| StoreError::Internal(format!("bad database url: {e}")))
            })
            .collect::<StoreResult<Vec<_>>>()?;
        let hosts = Arc::new(Self {
            urls,
            options,
            current: AtomicUsize::new(0),
            switched_at: Mutex::new(None),
            pools: Mutex::default(),
            following: std::sync::atomic::AtomicBool::new(false),
        });
        known.insert(url.to_owned(), hosts.clone());
        Ok(Some(hosts))
    }

    /// The options of the host in use now.
    pub fn current_options(&self) -> PgConnectOptions {
        self.options[self.current.load(Ordering::Acquire)].clone()
    }

    /// The one-host URL of the host in use now.
    pub fn current_url(&self) -> &str {
        &self.urls[self.current.load(Ordering::Acquire)]
    }

    /// Whether a connection `age` old was opened before the last switch (then it goes to the
    /// former primary and is closed instead of used).
    pub fn stale(&self, age: Duration) -> bool {
        self.switched_at
            .lock()
            .expect("hosts switch")
            .is_some_and(|at| age > at.elapsed())
    }

    /// Points `pool` at the current host from now on, and starts the follower (once).
    pub fn register(self: &Arc<Self>, pool: &PgPool) {
        self.pools.lock().expect("hosts pools").push(pool.clone());
        if !self.following.swap(true, Ordering::AcqRel) {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(follow(self.clone()));
                }
                Err(_) => self.following.store(false, Ordering::Release),
            }
        }
    }

    fn switch(&self, to: usize) {
        let from = self.current.swap(to, Ordering::AcqRel);
        *self.switched_at.lock().expect("hosts switch") = Some(Instant::now());
        for pool in self.pools.lock().expect("hosts pools").iter() {
            pool.set_connect_options(self.options[to].clone());
        }
        metrics::counter!("boxoffice_store_primary_switches_total").increment(1);
        tracing::warn!(
            from = %host_of(&self.urls[from]),
            to = %host_of(&self.urls[to]),
            "the shard's primary moved: new connections go to the new one"
        );
    }

    /// Moves to the host that is the writable primary now, if it is not the current one (a
    /// process that starts after a failover: its URL still names the former primary first).
    /// Returns the options to connect with.
    pub async fn settle(&self) -> PgConnectOptions {
        if let Some((index, connection)) = self.find_primary().await {
            let _ = connection.close().await;
            if index != self.current.load(Ordering::Acquire) {
                self.switch(index);
            }
        }
        self.current_options()
    }

    /// Finds the host that is a writable primary now (current first), connected.
    pub async fn find_primary(&self) -> Option<(usize, PgConnection)> {
        let current = self.current.load(Ordering::Acquire);
        let order =
            std::iter::once(current).chain((0..self.options.len()).filter(|i| *i != current));
        for index in order {
            if let Some(mut connection) = connect(&self.options[index]).await {
                if writable(&mut connection).await {
                    return Some((index, connection));
                }
                let _ = connection.close().await;
            }
        }
        None
    }
}

fn host_of(url: &str) -> &str {
    url.split_once("://")
        .map(|(_, rest)| rest.rsplit_once('@').map_or(rest, |(_, host)| host))
        .unwrap_or(url)
}

async fn connect(options: &PgConnectOptions) -> Option<PgConnection> {
    tokio::time::timeout(PROBE_TIMEOUT, options.connect())
        .await
        .ok()?
        .ok()
}

/// Whether `connection` reaches a primary that takes writes and answers within
/// [`PROBE_TIMEOUT`] (libpq's `target_session_attrs=read-write`: not in recovery, and not
/// read-only, as pg_auto_failover holds a primary while it promotes or demotes it).
pub async fn writable(connection: &mut PgConnection) -> bool {
    matches!(
        tokio::time::timeout(
            PROBE_TIMEOUT,
            sqlx::query_scalar::<_, bool>(
                "SELECT NOT pg_is_in_recovery()
                    AND NOT current_setting('transaction_read_only')::bool"
            )
            .fetch_one(connection),
        )
        .await,
        Ok(Ok(true))
    )
}

async fn follow(hosts: Arc<Hosts>) {
    let mut probe: Option<PgConnection> = None;
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        if let Some(connection) = probe.as_mut()
            && writable(connection).await
        {
            continue;
        }
        probe = None;
        if let Some((index, connection)) = hosts.find_primary().await {
            if index != hosts.current.load(Ordering::Acquire) {
                hosts.switch(index);
            }
            probe = Some(connection);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{host_of, split};

    #[test]
    fn a_url_with_several_hosts_is_one_url_per_host() {
        assert_eq!(split("postgres://u@h1:5432/db"), None);
        assert_eq!(
            split("postgres://postgres@127.0.0.1:5001,127.0.0.1:5002/boxoffice?sslmode=disable"),
            Some(vec![
                "postgres://postgres@127.0.0.1:5001/boxoffice?sslmode=disable".to_owned(),
                "postgres://postgres@127.0.0.1:5002/boxoffice?sslmode=disable".to_owned(),
            ])
        );
        assert_eq!(
            split("postgresql://a:b@x,y:6/db"),
            Some(vec![
                "postgresql://a:b@x/db".to_owned(),
                "postgresql://a:b@y:6/db".to_owned()
            ])
        );
        assert_eq!(host_of("postgres://a:secret@h1:5/db"), "h1:5/db");
    }
}
