//! One owner per event across nodes: the node's leases, their renewal, and forwarding.
//!
//! A node serves the writes of an event (holds, releases, checkouts, exchanges, transfer
//! acceptances) only while it
//! holds the event's lease in the store (`boxoffice_store::lease`). The first write request
//! for an event on any node looks the lease up: free or expired, the node takes it (the
//! epoch goes up by one) and its writer loads the event; live elsewhere, the request is
//! forwarded as it came (method, path, headers, body) to the owner's registered address
//! over kept-alive connections, and the owner's answer is relayed unchanged. A forward that
//! fails without an answer (the owner died) waits for the lease to expire, takes it, and
//! serves the request here: every write carries its idempotency key, so sending it again is
//! safe.
//!
//! The node renews what it holds every third of the TTL and refreshes its registration (a
//! heartbeat) at the same time, on a small pool of its own (`with_lease_store`: a crowd that
//! takes every connection of the requests' pool cannot make the node lose a lease mid-sale);
//! a lease found taken over is dropped at once, and the writer whose group the store fenced
//! stops writing the event. A writer idle for a while hands its lease back
//! ([`Cluster::let_go`], [`Cluster::hand_back`]), and a graceful stop hands every lease back. Reads (seat map,
//! orders, queue status) never forward.
//!
//! A node looks an event's lease up (a plain read) and takes it once per event at a time,
//! shared by every request and writer that asks meanwhile (`crate::coalesce`: the look-up
//! runs on its own task, each caller waits for it at most `LEASE_TURN_WAIT_MS`, no lock is
//! held across it). The lease row is only ever locked (`take_lease`, `SELECT … FOR UPDATE`,
//! which waits for the owner's groups in flight) after that read found it free, expired or
//! this node's: a lease live on another node is routed to (or stops a writer started here by
//! a webhook or the reconciler) from the read alone, so a non-owner never takes it and its
//! forwarding never waits behind a take.
//!
//! Architecture invariant: a node forwards a request at most once (a forwarded request is
//! served where it lands, or refused 503), so two nodes that disagree about an owner never
//! bounce a request between them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use boxoffice_store::lease::{Fence, Lease, Taken};
use boxoffice_store::{Store, StoreError, StoreResult};

use crate::AppState;
use crate::error::ApiError;

/// The header a forwarded request carries (the forwarding node's id): it is served where it
/// lands, never forwarded again.
pub const FORWARDED_HEADER: &str = "x-boxoffice-forwarded-by";
/// The header every write answer carries: the node that decided it.
pub const NODE_HEADER: &str = "x-boxoffice-node";
/// How long a forward may take before the owner is taken for dead.
pub const FORWARD_TIMEOUT_MS: u64 = 10_000;
/// Idle connections kept open per owner for forwarding: as many as requests forwarded at
/// once, so that a busy sale never closes and reopens connections (at 64, 256 clients
/// forwarding through one node kept reconnecting).
pub const FORWARD_IDLE_PER_HOST: usize = 1024;
/// How long a write waits for this node's look-up (or take) of its event's lease that
/// another request started: as long as a forward may take.
pub const LEASE_TURN_WAIT_MS: u64 = FORWARD_TIMEOUT_MS;
/// Event → hold, order and exchange look-ups cached (a write names a hold, an order or an
/// exchange; its event never changes). Cleared when full.
const EVENT_OF_CACHE_MAX: usize = 200_000;

/// How this node takes part in the cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// This node's id (1-64 characters), unique among the nodes of one store.
    pub node_id: String,
    /// Where the other nodes reach this one (`http://host:port`).
    pub advertise_url: String,
    /// The lease's TTL (`boxoffice_store::lease::LEASE_TTL_MS_DEFAULT`).
    pub lease_ttl_ms: u64,
}

impl ClusterConfig {
    /// Checks the id, the address and the TTL.
    pub fn checked(self) -> Result<Self, String> {
        if self.node_id.is_empty()
            || self.node_id.len() > 64
            || !self
                .node_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        {
            return Err(format!(
                "the node id must be 1-64 characters of A-Z a-z 0-9 - _ . :, not {:?}",
                self.node_id
            ));
        }
        if !(self.advertise_url.starts_with("http://")
            || self.advertise_url.starts_with("https://"))
            || self.advertise_url.len() > 255
        {
            return Err(format!(
                "the advertised URL must be http(s)://host:port (at most 255 characters), not {:?}",
                self.advertise_url
            ));
        }
        boxoffice_store::lease::check_ttl(self.lease_ttl_ms)?;
        Ok(self)
    }
}

/// Where a write for an event is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Here: this node holds the lease.
    Local(Fence),
    /// At the owner.
    Remote { node_id: String, url: String },
}

#[derive(Debug, Clone)]
struct Held {
    epoch: u64,
}

#[derive(Debug, Clone)]
struct Remote {
    node_id: String,
    url: String,
    /// Trusted until then (the lease's expiry as read, at most one TTL).
    until: Instant,
}

/// This node's view of the cluster. Cloning copies one pointer.
#[derive(Clone)]
pub struct Cluster(Arc<Inner>);

struct Inner {
    config: ClusterConfig,
    /// The requests' store: lease reads and takes (on a request's way).
    store: Arc<dyn Store>,
    /// Where the node's registration, its renewals and its hand-backs go: a pool of their
    /// own in `serve` (the requests' store in tests).
    leases: Arc<dyn Store>,
    held: Mutex<HashMap<String, Held>>,
    remote: Mutex<HashMap<String, Remote>>,
    /// Hold, order and exchange ids to their event (immutable).
    event_of: Mutex<HashMap<String, String>>,
    /// Per event: this node's look-up (and take) of the lease, one in flight, shared by the
    /// callers that ask meanwhile.
    lookups: crate::coalesce::Coalesced<Result<Fence, Lease>>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node_id", &self.0.config.node_id)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    pub fn new(config: ClusterConfig, store: Arc<dyn Store>) -> Result<Self, String> {
        Self::with_lease_store(config, store.clone(), store)
    }

    /// A node whose registration, renewals and hand-backs go through `leases` (a small pool
    /// of their own), its lease reads and takes through `store`.
    pub fn with_lease_store(
        config: ClusterConfig,
        store: Arc<dyn Store>,
        leases: Arc<dyn Store>,
    ) -> Result<Self, String> {
        let config = config.checked()?;
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(FORWARD_IDLE_PER_HOST)
            .timeout(Duration::from_millis(FORWARD_TIMEOUT_MS))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| format!("building the forwarding client: {e}"))?;
        Ok(Self(Arc::new(Inner {
            config,
            store,
            leases,
            held: Mutex::default(),
            remote: Mutex::default(),
            event_of: Mutex::default(),
            lookups: crate::coalesce::Coalesced::new(
                "event lease",
                Duration::from_millis(LEASE_TURN_WAIT_MS),
            ),
            client,
        })))
    }

    pub fn node_id(&self) -> &str {
        &self.0.config.node_id
    }

    /// Registers this node's address (and heartbeat) in the store.
    pub async fn register(&self) -> StoreResult<()> {
        self.0
            .leases
            .register_node(&self.0.config.node_id, &self.0.config.advertise_url)
            .await
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.0.config.lease_ttl_ms)
    }

    /// The fence of the lease this node holds on `event_id`, if it believes it holds one.
    pub fn held(&self, event_id: &str) -> Option<Fence> {
        lock(&self.0.held).get(event_id).map(|held| Fence {
            node_id: self.0.config.node_id.clone(),
            epoch: held.epoch,
        })
    }

    /// Where writes for `event_id` are served: here if this node holds the lease or takes it
    /// now (free or expired), else at the live owner.
    pub async fn route(&self, event_id: &str) -> StoreResult<Route> {
        if let Some(route) = self.known_route(event_id) {
            return Ok(route);
        }
        match self.look_up(event_id).await? {
            Ok(fence) => Ok(Route::Local(fence)),
            Err(lease) => self.remote_route(&lease),
        }
    }

    /// The lease of `event_id` for this node, or the live lease of its owner: one look-up per
    /// event in flight, shared by the requests and writers that ask meanwhile (a crowd
    /// arriving at once waits for the first, at most LEASE_TURN_WAIT_MS, then 503 with
    /// Retry-After: two takes by one node would each bump the epoch). A plain read first: a
    /// lease live on another node is answered from it; only one read free, expired or this
    /// node's own is taken.
    async fn look_up(&self, event_id: &str) -> StoreResult<Result<Fence, Lease>> {
        let cluster = self.clone();
        let key = event_id.to_owned();
        self.0
            .lookups
            .load(event_id, move || async move {
                // A look-up that finished just before this one started may have taken it.
                if let Some(fence) = cluster.held(&key) {
                    return Ok(Ok(fence));
                }
                match cluster.0.store.lease(&key).await? {
                    Some(lease) if lease.live() && lease.node_id != cluster.0.config.node_id => {
                        Ok(Err(lease))
                    }
                    _ => cluster.take(&key).await,
                }
            })
            .await
    }

    /// The route this node knows without the store: its own lease, or the owner as last read
    /// while that lease is live.
    fn known_route(&self, event_id: &str) -> Option<Route> {
        if let Some(fence) = self.held(event_id) {
            return Some(Route::Local(fence));
        }
        let remote = lock(&self.0.remote);
        let remote = remote.get(event_id)?;
        (remote.until > Instant::now()).then(|| Route::Remote {
            node_id: remote.node_id.clone(),
            url: remote.url.clone(),
        })
    }

    fn remote_route(&self, lease: &Lease) -> StoreResult<Route> {
        let Some(url) = lease.owner_url.clone() else {
            return Err(StoreError::Fenced(format!(
                "event {} is owned by node {}, which registered no address",
                lease.event_id, lease.node_id
            )));
        };
        let until = Instant::now() + lease.remaining().min(self.ttl());
        lock(&self.0.remote).insert(
            lease.event_id.clone(),
            Remote {
                node_id: lease.node_id.clone(),
                url: url.clone(),
                until,
            },
        );
        Ok(Route::Remote {
            node_id: lease.node_id.clone(),
            url,
        })
    }

    /// The lease of `event_id` for this node: the one it holds, or taken now. `Err(lease)`:
    /// another node holds it. A writer started here for an event another node owns (a
    /// provider's webhook or the reconciler's verdict landed here) learns it from the plain
    /// read and stops, without locking the lease row.
    pub async fn acquire(&self, event_id: &str) -> StoreResult<Result<Fence, Lease>> {
        if let Some(fence) = self.held(event_id) {
            return Ok(Ok(fence));
        }
        let looked_up = self.look_up(event_id).await?;
        if let Err(lease) = &looked_up {
            // Remembered for this node's forwarding too.
            let _ = self.remote_route(lease);
        }
        Ok(looked_up)
    }

    /// Takes the lease (the caller is this node's one look-up of the event in flight).
    async fn take(&self, event_id: &str) -> StoreResult<Result<Fence, Lease>> {
        let taken = self
            .0
            .store
            .take_lease(event_id, &self.0.config.node_id, self.0.config.lease_ttl_ms)
            .await?;
        match taken {
            Taken::Mine(lease) => {
                if lease.epoch > 1 {
                    metrics::counter!("boxoffice_cluster_takeovers_total").increment(1);
                }
                tracing::info!(event_id, epoch = lease.epoch, "took the event's lease");
                lock(&self.0.remote).remove(event_id);
                let mut held = lock(&self.0.held);
                held.insert(event_id.to_owned(), Held { epoch: lease.epoch });
                metrics::gauge!("boxoffice_cluster_leases_held").set(held.len() as f64);
                Ok(Ok(lease.fence()))
            }
            Taken::Elsewhere(lease) => Ok(Err(lease)),
        }
    }

    /// The store refused a group of `fence` (or a renewal found the lease gone): this node no
    /// longer holds the event.
    pub fn lost(&self, event_id: &str, fence: &Fence) {
        let mut held = lock(&self.0.held);
        if held.get(event_id).is_some_and(|h| h.epoch == fence.epoch) {
            held.remove(event_id);
            metrics::counter!("boxoffice_cluster_leases_lost_total").increment(1);
            tracing::warn!(event_id, epoch = fence.epoch, "lost the event's lease");
        }
        metrics::gauge!("boxoffice_cluster_leases_held").set(held.len() as f64);
    }

    /// Forgets where `event_id` was owned (its owner did not answer).
    fn forget_remote(&self, event_id: &str) {
        lock(&self.0.remote).remove(event_id);
    }

    /// Registers this node, then every third of the TTL renews its leases and its heartbeat.
    pub async fn run(self) {
        let every = self.ttl() / 3;
        let mut interval = tokio::time::interval(every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            if let Err(error) = self.register().await {
                tracing::warn!(%error, "could not refresh this node's registration");
            }
            self.renew().await;
        }
    }

    /// Renews every lease held; drops those taken over.
    pub async fn renew(&self) {
        let held: Vec<(String, u64)> = lock(&self.0.held)
            .iter()
            .map(|(event_id, held)| (event_id.clone(), held.epoch))
            .collect();
        if held.is_empty() {
            return;
        }
        match self
            .0
            .leases
            .renew_leases(&self.0.config.node_id, &held, self.0.config.lease_ttl_ms)
            .await
        {
            Ok(renewed) => {
                for (event_id, epoch) in &held {
                    if !renewed.contains(event_id) {
                        self.lost(
                            event_id,
                            &Fence {
                                node_id: self.0.config.node_id.clone(),
                                epoch: *epoch,
                            },
                        );
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "could not renew the event leases"),
        }
    }

    /// Stops holding `event_id`'s lease at `fence`'s epoch (the writer of an idle event
    /// unloads): no longer renewed, and the next command for the event takes it again (a new
    /// epoch). `false`: this node did not hold it at that epoch.
    pub fn let_go(&self, event_id: &str, fence: &Fence) -> bool {
        let mut held = lock(&self.0.held);
        if held.get(event_id).is_none_or(|h| h.epoch != fence.epoch) {
            return false;
        }
        held.remove(event_id);
        metrics::gauge!("boxoffice_cluster_leases_held").set(held.len() as f64);
        true
    }

    /// Hands the lease row of `event_id` back (expired now) only if it is still this node's
    /// at `fence`'s epoch: a hand-back that comes after a takeover, or after this node took
    /// the lease again, finds nothing to do. Call [`Cluster::let_go`] first. `true`: handed
    /// back.
    pub async fn hand_back(&self, event_id: &str, fence: &Fence) -> StoreResult<bool> {
        let released = self.0.leases.release_lease(event_id, fence).await?;
        if released {
            tracing::debug!(
                event_id,
                epoch = fence.epoch,
                "handed the idle event's lease back"
            );
        }
        Ok(released)
    }

    /// Hands every lease back (a graceful stop): another node takes each at once.
    pub async fn release_all(&self) {
        let held: Vec<(String, u64)> = lock(&self.0.held)
            .drain()
            .map(|(event_id, held)| (event_id, held.epoch))
            .collect();
        metrics::gauge!("boxoffice_cluster_leases_held").set(0.0);
        for (event_id, epoch) in held {
            let fence = Fence {
                node_id: self.0.config.node_id.clone(),
                epoch,
            };
            match self.0.leases.release_lease(&event_id, &fence).await {
                Ok(_) => tracing::info!(%event_id, epoch, "handed the event's lease back"),
                Err(error) => tracing::warn!(%error, %event_id, "could not hand the lease back"),
            }
        }
    }

    /// The event a write request is for, when it is one a writer decides.
    async fn event_of(
        &self,
        state: &AppState,
        method: &Method,
        path: &str,
        body: &Bytes,
    ) -> StoreResult<Option<String>> {
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let cached = |key: &str| lock(&self.0.event_of).get(key).cloned();
        let remember = |key: String, event_id: &str| {
            let mut map = lock(&self.0.event_of);
            if map.len() >= EVENT_OF_CACHE_MAX {
                map.clear();
            }
            map.insert(key, event_id.to_owned());
        };
        match (method, parts.as_slice()) {
            (&Method::POST, ["v1", "events", event_id, "holds"]) => {
                Ok(Some((*event_id).to_owned()))
            }
            (&Method::POST, ["v1", "holds", hold_id, "checkout"])
            | (&Method::DELETE, ["v1", "holds", hold_id]) => {
                let key = format!("hold {hold_id}");
                if let Some(event_id) = cached(&key) {
                    return Ok(Some(event_id));
                }
                let Some(hold) = state.store.get_hold(hold_id).await? else {
                    return Ok(None);
                };
                remember(key, &hold.event_id);
                Ok(Some(hold.event_id))
            }
            (&Method::POST, ["v1", "orders", order_id, "exchanges"]) => {
                let target = serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| {
                        v.get("toEventId")
                            .and_then(|t| t.as_str().map(str::to_owned))
                    });
                if let Some(target) = target {
                    return Ok(Some(target));
                }
                let key = format!("order {order_id}");
                if let Some(event_id) = cached(&key) {
                    return Ok(Some(event_id));
                }
                let Some(order) = state.store.order_head(order_id).await? else {
                    return Ok(None);
                };
                remember(key, &order.event_id);
                Ok(Some(order.event_id))
            }
            (&Method::POST, ["v1", "events", event_id, "waitlist"])
            | (&Method::POST, ["v1", "events", event_id, "phases", _, "access"])
            | (&Method::DELETE, ["v1", "events", event_id, "waitlist", _]) => {
                Ok(Some((*event_id).to_owned()))
            }
            (&Method::POST, ["v1", "transfers", transfer_id, "accept"]) => {
                let key = format!("transfer {transfer_id}");
                if let Some(event_id) = cached(&key) {
                    return Ok(Some(event_id));
                }
                let Some(transfer) = state.store.get_transfer(transfer_id).await? else {
                    return Ok(None);
                };
                remember(key, &transfer.event_id);
                Ok(Some(transfer.event_id))
            }
            (&Method::POST, ["v1", "exchanges", exchange_id, "checkout"]) => {
                let key = format!("exchange {exchange_id}");
                if let Some(event_id) = cached(&key) {
                    return Ok(Some(event_id));
                }
                let Some(exchange) = state.store.get_exchange(exchange_id).await? else {
                    return Ok(None);
                };
                remember(key, &exchange.to_event_id);
                Ok(Some(exchange.to_event_id))
            }
            _ => Ok(None),
        }
    }

    /// Remembers the event of a hold or exchange that `answer` (a 201 to a hold or exchange
    /// request for `event_id`) created, so that its checkout or release needs no look-up.
    async fn learn(
        &self,
        parts: &axum::http::request::Parts,
        event_id: &str,
        answer: Response,
    ) -> Response {
        let path = parts.uri.path();
        let (kind, member) = if path.ends_with("/holds") {
            ("hold", "holdId")
        } else if path.ends_with("/exchanges") {
            ("exchange", "exchangeId")
        } else {
            return answer;
        };
        if answer.status() != StatusCode::CREATED {
            return answer;
        }
        let (head, body) = answer.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, crate::body::BODY_BYTES_MAX * 4).await else {
            return (StatusCode::BAD_GATEWAY, head.headers).into_response();
        };
        if let Ok(created) = serde_json::from_slice::<serde_json::Value>(&bytes)
            && let Some(id) = created.get(member).and_then(|id| id.as_str())
        {
            let mut map = lock(&self.0.event_of);
            if map.len() >= EVENT_OF_CACHE_MAX {
                map.clear();
            }
            map.insert(format!("{kind} {id}"), event_id.to_owned());
        }
        Response::from_parts(head, Body::from(bytes))
    }

    /// Sends the request to the owner at `url` and returns its answer as it came; `None`
    /// when no answer came (the owner is unreachable or timed out).
    async fn forward(
        &self,
        url: &str,
        parts: &axum::http::request::Parts,
        body: &Bytes,
    ) -> Option<Response> {
        let started = Instant::now();
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path(), |p| p.as_str());
        let mut request = self
            .0
            .client
            .request(
                parts.method.clone(),
                format!("{}{path}", url.trim_end_matches('/')),
            )
            .header(FORWARDED_HEADER, self.node_id())
            .body(body.clone());
        for (name, value) in &parts.headers {
            if !hop_by_hop(name) {
                request = request.header(name, value);
            }
        }
        let answered = request.send().await;
        let answer = match answered {
            Ok(answer) => answer,
            Err(error) => {
                metrics::counter!("boxoffice_cluster_forward_failures_total").increment(1);
                tracing::warn!(%error, url, "forward got no answer");
                return None;
            }
        };
        let status = answer.status();
        let headers = answer.headers().clone();
        let bytes = match answer.bytes().await {
            Ok(bytes) => bytes,
            Err(error) => {
                metrics::counter!("boxoffice_cluster_forward_failures_total").increment(1);
                tracing::warn!(%error, url, "forward's answer was cut off");
                return None;
            }
        };
        let mut response = Response::new(Body::from(bytes));
        *response.status_mut() = status;
        for (name, value) in &headers {
            if !hop_by_hop(name) {
                response.headers_mut().append(name, value.clone());
            }
        }
        metrics::counter!("boxoffice_cluster_forwarded_total").increment(1);
        metrics::histogram!("boxoffice_cluster_forward_seconds")
            .record(started.elapsed().as_secs_f64());
        Some(response)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Headers that belong to one connection, not to the request or answer.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "transfer-encoding"
            | "te"
            | "trailer"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

/// Forwards a write for an event owned by another node to its owner (see the module's
/// documentation); serves it here otherwise.
pub async fn forward_writes(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(cluster) = state.cluster.clone() else {
        return next.run(request).await;
    };
    // Reads are answered here; so is a request without a token (its handler says 401): no
    // store look-up for it.
    if !matches!(request.method(), &Method::POST | &Method::DELETE)
        || !request
            .headers()
            .contains_key(axum::http::header::AUTHORIZATION)
    {
        return next.run(request).await;
    }
    // An operator's request is never an event writer's command (`event_of` forwards none),
    // and some carry bodies far over a fan's 64 KiB (a venue chart, access codes to import):
    // served here, its body unread, under its route's own limit.
    if request.uri().path().starts_with("/v1/admin/") {
        let mut response = next.run(request).await;
        if let Ok(node) = HeaderValue::from_str(cluster.node_id()) {
            response.headers_mut().insert(NODE_HEADER, node);
        }
        return response;
    }
    let forwarded = request.headers().contains_key(FORWARDED_HEADER);
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, crate::body::BODY_BYTES_MAX).await {
        Ok(body) => body,
        Err(_) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!(
                    "request bodies are limited to {} bytes",
                    crate::body::BODY_BYTES_MAX
                ),
            )
            .into_response();
        }
    };
    if forwarded {
        // Served here whatever this node believes: a forward is never forwarded again.
        let creates = creates_for(&parts);
        return local(next, parts, body, &cluster, creates).await;
    }
    let event_id = match cluster
        .event_of(&state, &parts.method, parts.uri.path(), &body)
        .await
    {
        Ok(Some(event_id)) => event_id,
        // Not a writer's request, or for nothing that exists (the handler says 404).
        Ok(None) => return local(next, parts, body, &cluster, None).await,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let deadline = Instant::now() + cluster.ttl() + Duration::from_secs(1);
    let mut tried: Option<String> = None;
    loop {
        match cluster.route(&event_id).await {
            Ok(Route::Local(_)) => {
                return local(next, parts, body, &cluster, Some(event_id)).await;
            }
            Ok(Route::Remote { node_id, url }) => {
                if tried.as_deref() != Some(node_id.as_str())
                    && let Some(answer) = cluster.forward(&url, &parts, &body).await
                {
                    if answer.status() == StatusCode::SERVICE_UNAVAILABLE {
                        // The node may no longer own the event (its lease taken over since
                        // this node read it): the next request reads the lease again.
                        cluster.forget_remote(&event_id);
                    }
                    return cluster.learn(&parts, &event_id, answer).await;
                }
                // No answer: the owner may be dead. Its lease lapses within a TTL; then this
                // node (or another) takes it, and the request is served there.
                cluster.forget_remote(&event_id);
                tried = Some(node_id);
                if Instant::now() >= deadline {
                    return ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "UNAVAILABLE",
                        "the event's owner does not answer; retry shortly",
                    )
                    .into_response();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            // An event that does not exist has no lease to take (the store refuses one for
            // it; found by schemathesis as a 500): the handler answers 404. Asked only when
            // routing failed, never on the way of a request that routes.
            // (Only an internal error is looked at: a busy or unavailable store is answered
            // as such, without one more call to it.)
            Err(error) => {
                if matches!(error, boxoffice_store::StoreError::Internal(_))
                    && let Ok(None) = state.store.get_event(&event_id).await
                {
                    return local(next, parts, body, &cluster, None).await;
                }
                return ApiError::from(error).into_response();
            }
        }
    }
}

/// Serves the request here. `event_id`: the event it writes, so that a hold or exchange it
/// creates is remembered with its event (its checkout then needs no look-up).
async fn local(
    next: Next,
    parts: axum::http::request::Parts,
    body: Bytes,
    cluster: &Cluster,
    event_id: Option<String>,
) -> Response {
    let request = Request::from_parts(parts.clone(), Body::from(body));
    let mut response = next.run(request).await;
    if let Ok(node) = HeaderValue::from_str(cluster.node_id()) {
        response.headers_mut().insert(NODE_HEADER, node);
    }
    match event_id {
        Some(event_id) => cluster.learn(&parts, &event_id, response).await,
        None => response,
    }
}

/// The event a forwarded request creates something in, when its path names it.
fn creates_for(parts: &axum::http::request::Parts) -> Option<String> {
    let path: Vec<&str> = parts
        .uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .collect();
    match (&parts.method, path.as_slice()) {
        (&Method::POST, ["v1", "events", event_id, "holds"]) => Some((*event_id).to_owned()),
        _ => None,
    }
}
