//! The `boxoffice` binary: `serve`, `demo`, `migrate`, `token`, `check`, `load`, `simulate`.
//!
//! Each subcommand is a thin shell over the library crates: it parses flags, opens the store
//! named by the URL (`postgres://…` or `sqlite://…`) and calls into `boxoffice-server` or the
//! store. Start with [`Command`].

mod chaos;
mod check;
mod cluster_chaos;
mod demo;
mod failover;
mod local_cluster;
mod shards;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use boxoffice_domain::ids::AccountId;
use boxoffice_server::auth::{DEV_JWT_SECRET, mint_token};
use boxoffice_store::Store;
use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "boxoffice",
    version,
    about = "Ticket reservation for on-sales where demand crushes supply"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum ClusterAction {
    /// Start it: prints `balancer http://HOST:PORT` and `admin-token TOKEN`, then returns
    /// (everything keeps running until `cluster down`).
    Up {
        /// Where the cluster's data, logs and state (`cluster.json`) go.
        #[arg(long)]
        dir: std::path::PathBuf,
        /// `boxoffice serve` nodes behind the balancer (1-8).
        #[arg(long, default_value_t = 2)]
        nodes: u32,
        /// PostgreSQL shards (1-4), each a primary and a synchronous standby; the first holds
        /// the shard directory.
        #[arg(long, default_value_t = 1)]
        shards: u32,
        /// PostgreSQL's `bin` directory (`initdb`, `pg_ctl`, `pg_basebackup`); found under
        /// /usr/lib/postgresql when unset.
        #[arg(long)]
        pg_bin: Option<std::path::PathBuf>,
        /// The nodes' JWT secret (a random one, kept in DIR/jwt-secret, when unset).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
    },
    /// Stop everything `cluster up` started in DIR and check that its ports are free.
    Down {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// Fail a shard over to its standby now: kill the old primary, promote the standby, fence
    /// the shard's event leases (prints the timeline as JSON), then build a new synchronous
    /// standby where the old primary was.
    Failover {
        #[arg(long)]
        dir: std::path::PathBuf,
        /// The shard's name (`main`, `s1`, …).
        #[arg(long, default_value = "main")]
        shard: String,
    },
    /// The failover watcher `up` starts: checks every shard's primary twice a second and
    /// fails a shard over after three failed checks in a row.
    #[command(hide = true)]
    Watch {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
enum ShardAction {
    /// Name a PostgreSQL database as a new shard (created and migrated when needed). Nodes
    /// connect to it when they next start.
    Add {
        /// The home database (the directory).
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// 1-32 of a-z, 0-9 and '-' (`main` is the home shard).
        #[arg(long)]
        name: String,
        /// The shard's database, `postgres://…`.
        #[arg(long)]
        url: String,
    },
    /// The shards, the events placed on each, and the placement rule.
    List {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// How new events are placed: `least-events` (the default) or `pinned:NAME`.
    Place {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        #[arg(long)]
        rule: String,
    },
    /// Move an event's rows to another shard: its writes stop (the lease is fenced), the
    /// source shard's writes wait for the copy, then the directory names the new shard and
    /// the nodes follow within seconds. Safe to run again if it stopped.
    Move {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// The event's id.
        #[arg(long)]
        event: String,
        /// The shard to move it to (`main` is the home shard).
        #[arg(long)]
        to: String,
    },
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Events spread over PostgreSQL shards: the directory in the home database.
    Shard {
        #[command(subcommand)]
        action: ShardAction,
    },
    /// Serve the HTTP API (migrations run first).
    Serve {
        /// `postgres://user@host/db` or `sqlite://path/to/file.db`.
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        #[arg(long, env = "BOXOFFICE_LISTEN", default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// HS256 secret that signs account tokens.
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Use the built-in development secret when no secret is configured. Never in production.
        #[arg(long)]
        dev_auth: bool,
        #[command(flatten)]
        payments: PaymentsArgs,
        /// Ed25519 key (PKCS#8 PEM) that signs ticket codes; created when missing.
        #[arg(
            long,
            env = "BOXOFFICE_TICKET_KEY",
            default_value = "./data/ticket-key.pem"
        )]
        ticket_key: std::path::PathBuf,
        #[command(flatten)]
        waitroom: WaitroomArgs,
        #[command(flatten)]
        node: NodeArgs,
        /// Connections accepted at once; more wait in the accept queue. 0: three quarters
        /// of the process's open-file limit.
        #[arg(long, env = "BOXOFFICE_MAX_CONNECTIONS", default_value_t = 0)]
        max_connections: usize,
        /// An origin (`https://shop.example`) whose pages may call the API from a browser;
        /// repeat or separate with commas. None: the same origin only.
        #[arg(long, env = "BOXOFFICE_CORS_ORIGINS", value_delimiter = ',')]
        cors_allow_origin: Vec<String>,
        /// An abuse limit, `NAME=RATE/s:BURST` or `NAME=off` (holds-per-account,
        /// holds-per-address, joins-per-account, joins-per-address, checkouts-per-account,
        /// signins-per-address; `all=off`), or `NAME=COUNT` (live-holds-per-account,
        /// lapsed-holds-per-account); repeat or separate with commas. Defaults: holds
        /// 10/s:40, joins 2/s:10, checkouts 5/s:20 per account, sign-ins 5/s:20 per address,
        /// per-address holds and joins off, 8 live holds per account, a wait after 3 lapses.
        #[arg(long, env = "BOXOFFICE_LIMITS", value_delimiter = ',')]
        limit: Vec<String>,
        #[command(flatten)]
        rollover: RolloverArgs,
        /// A proxy (address or block: `10.0.0.0/8`) whose `X-Forwarded-For` names the
        /// client, for per-address limits behind a balancer; repeat or separate with
        /// commas. From any other peer the header is ignored.
        #[arg(long, env = "BOXOFFICE_TRUSTED_PROXIES", value_delimiter = ',')]
        trusted_proxy: Vec<String>,
    },
    /// Run the payment provider simulator (a Stripe-like HTTP subset with test cards).
    Paysim {
        #[arg(long, default_value = "127.0.0.1:12111")]
        listen: SocketAddr,
        /// Where to POST signed webhooks, e.g. http://127.0.0.1:8080/v1/payments/webhooks/stripe
        #[arg(long)]
        webhook_url: Option<String>,
        /// Seed of every random choice (latency, webhook duplicates and delays).
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Run the demo: embedded SQLite under ./data, a 50,000-seat stadium, dev auth.
    Demo {
        #[arg(long, default_value = "./data")]
        data_dir: std::path::PathBuf,
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
    /// Apply migrations and exit.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// Print the OpenAPI document the server serves at /openapi.json.
    Openapi,
    /// Print a signed account token (JWT, HS256).
    Token {
        #[arg(long)]
        account: String,
        /// Mark the token as an operator's (`role: "admin"`).
        #[arg(long)]
        admin: bool,
        /// Lifetime: `90s`, `30m`, `1h`, `7d`.
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Defaults to the development secret when unset.
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
    },
    /// Drive a running server with load and report throughput and latency
    /// (`boxoffice load --scenario NAME` is the same as `boxoffice load NAME`).
    Load {
        #[command(subcommand)]
        scenario: LoadScenario,
    },
    /// A cluster on this machine: a PostgreSQL primary with a synchronous standby, a Redis,
    /// nodes and HAProxy in front, each its own process on a free port below 32768.
    Cluster {
        #[command(subcommand)]
        action: ClusterAction,
    },
    /// Check the invariants (DESIGN.md I1-I7) on a live database; exit 1 on any violation.
    Check {
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
    },
    /// Simulate a whole on-sale in simulated time: the real event engine, waiting room and
    /// release controller under simulated fans, payments, store latency and faults. Prints a
    /// summary (first line `trace <sha256>`); exits 1 on any violation.
    Simulate {
        /// Fixes the run: the same seed (and build) gives the same trace hash.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// 1 = 2,000,000 fans over 300 s for 50,000 seats and 10,000 shoppers at once;
        /// 0.002 = 4,000 fans for 400 seats.
        #[arg(long, default_value_t = 0.002)]
        scale: f64,
        /// Faults drawn from the seed: the payment provider slow or failing, a writer crash
        /// and reload, store commit failures, the store down for a while.
        #[arg(long)]
        faults: bool,
        /// Once, feed the engine a lying change (a sold seat shown available): the run must
        /// report the double grant that follows (and exit 1).
        #[arg(long)]
        plant_double_grant: bool,
        /// Let the hold TTL follow the sale (the event's `waitingRoom.holdTtlFollowsSale`):
        /// while fans wait in the queue, new holds last the measured p99 of grant to checkout
        /// plus 30 s (at least 60 s, at most the 300 s TTL).
        #[arg(long)]
        hold_ttl_follows_sale: bool,
        /// Write the HTML report (figures, inline SVG plots, the IO model) here.
        #[arg(long)]
        report: Option<std::path::PathBuf>,
    },
    /// A plain axum hello-world (`GET /`), the baseline of bench/waitroom.sh.
    #[command(hide = true)]
    Hello {
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
    },
}

/// Which payment provider `serve` talks to.
#[derive(Debug, clap::Args)]
struct PaymentsArgs {
    /// `sim`: the built-in simulator, in process (test cards, no network). `stripe`: the
    /// Stripe adapter against `--stripe-api-base` with STRIPE_SECRET_KEY and
    /// STRIPE_WEBHOOK_SECRET.
    #[arg(long, default_value = "sim", value_parser = ["sim", "stripe"])]
    payments: String,
    #[arg(
        long,
        env = "STRIPE_API_BASE",
        default_value = "https://api.stripe.com"
    )]
    stripe_api_base: String,
    #[arg(long, env = "STRIPE_SECRET_KEY", hide_env_values = true)]
    stripe_secret_key: Option<String>,
    #[arg(long, env = "STRIPE_WEBHOOK_SECRET", hide_env_values = true)]
    stripe_webhook_secret: Option<String>,
    /// With `--payments sim`: latency of every authorization, `MIN-MAX` ms (uniform), as a
    /// real provider has (e.g. `150-400`).
    #[arg(long, default_value = "0-0", value_parser = parse_latency_ms)]
    sim_auth_latency_ms: (u64, u64),
}

/// Parses `MIN-MAX` (or a single value) milliseconds.
fn parse_latency_ms(raw: &str) -> Result<(u64, u64), String> {
    let parse = |v: &str| {
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|ms| *ms <= 60_000)
            .ok_or_else(|| format!("{raw:?}: use MIN-MAX milliseconds, each at most 60000"))
    };
    let (min, max) = match raw.split_once('-') {
        Some((min, max)) => (parse(min)?, parse(max)?),
        None => (parse(raw)?, parse(raw)?),
    };
    if min > max {
        return Err(format!("{raw:?}: MIN is above MAX"));
    }
    Ok((min, max))
}

/// How a `serve` process takes part in a cluster of nodes on one store: each event is
/// written by the node holding its lease, the others forward its writes there.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct NodeArgs {
    /// This node's id, unique among the nodes of one store and kept across restarts (a
    /// restarted node takes its leases back at once). Default: HOSTNAME:PORT.
    #[arg(long, env = "BOXOFFICE_NODE_ID")]
    node_id: Option<String>,
    /// Where the other nodes reach this one. Default: http://LISTEN-ADDRESS (the hostname
    /// when listening on every interface).
    #[arg(long, env = "BOXOFFICE_ADVERTISE_URL")]
    advertise_url: Option<String>,
    /// An event's lease lifetime: a dead node's events are taken over this long after its
    /// last renewal (renewed every third of it).
    #[arg(long, env = "BOXOFFICE_LEASE_TTL_MS", default_value_t = boxoffice_store::lease::LEASE_TTL_MS_DEFAULT)]
    lease_ttl_ms: u64,
}

impl NodeArgs {
    /// The cluster settings for a server bound to `addr`.
    fn config(&self, addr: SocketAddr) -> boxoffice_server::cluster::ClusterConfig {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".to_owned());
        let host = if addr.ip().is_unspecified() {
            hostname.clone()
        } else {
            addr.ip().to_string()
        };
        let host = if addr.is_ipv6() && !addr.ip().is_unspecified() {
            format!("[{host}]")
        } else {
            host
        };
        boxoffice_server::cluster::ClusterConfig {
            node_id: self
                .node_id
                .clone()
                .unwrap_or_else(|| format!("{hostname}:{}", addr.port())),
            advertise_url: self
                .advertise_url
                .clone()
                .unwrap_or_else(|| format!("http://{host}:{}", addr.port())),
            lease_ttl_ms: if self.lease_ttl_ms == 0 {
                boxoffice_store::lease::LEASE_TTL_MS_DEFAULT
            } else {
                self.lease_ttl_ms
            },
        }
    }
}

/// Keys that still verify during a key rollover (docs/DEPLOY.md, "Rotating keys"); they
/// never sign.
#[derive(Clone, Default, clap::Args)]
pub(crate) struct RolloverArgs {
    /// Previous account-token secrets, comma-separated: tokens they signed are accepted until
    /// they are removed from here.
    #[arg(
        long,
        env = "BOXOFFICE_JWT_PREVIOUS_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    jwt_previous_secrets: Vec<String>,
    /// Previous waiting-room secrets, comma-separated (with BOXOFFICE_WAITROOM_SECRET set;
    /// without it, they are derived from the previous account-token secrets).
    #[arg(
        long,
        env = "BOXOFFICE_WAITROOM_PREVIOUS_SECRETS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    waitroom_previous_secrets: Vec<String>,
    /// Previous ticket keys (PEM files: the retired private key or its public key),
    /// comma-separated: the codes they signed still verify at the door.
    #[arg(long, env = "BOXOFFICE_TICKET_PREVIOUS_KEYS", value_delimiter = ',')]
    ticket_previous_keys: Vec<std::path::PathBuf>,
}

impl std::fmt::Debug for RolloverArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets: how many there are, and the key files' paths.
        f.debug_struct("RolloverArgs")
            .field("jwt_previous_secrets", &self.jwt_previous_secrets.len())
            .field(
                "waitroom_previous_secrets",
                &self.waitroom_previous_secrets.len(),
            )
            .field("ticket_previous_keys", &self.ticket_previous_keys)
            .finish()
    }
}

/// Where the waiting rooms live.
#[derive(Debug, Clone, clap::Args)]
struct WaitroomArgs {
    /// A directory (in process, journaled there: one node) or `redis://host:port` (several
    /// API nodes share one queue per event).
    #[arg(
        long,
        env = "BOXOFFICE_WAITROOM_STATE",
        default_value = "./data/waitroom"
    )]
    waitroom_state: String,
    /// Signs queue tickets and admission tokens (every node of a deployment the same);
    /// derived from the JWT secret when unset.
    #[arg(long, env = "BOXOFFICE_WAITROOM_SECRET", hide_env_values = true)]
    waitroom_secret: Option<String>,
}

/// Opens the waiting-room state `args` names.
async fn waitroom_state(
    args: &WaitroomArgs,
) -> anyhow::Result<Arc<dyn boxoffice_waitroom_state::RoomStore>> {
    let location = args.waitroom_state.as_str();
    if location.starts_with("redis://") || location.starts_with("rediss://") {
        let rooms = boxoffice_waitroom_state::redis::RedisRooms::connect(location, "bo:wr:")
            .await
            .with_context(|| format!("connecting to the waiting-room Redis {location}"))?;
        return Ok(Arc::new(rooms));
    }
    let rooms = boxoffice_waitroom_state::memory::MemoryRooms::open(std::path::Path::new(location))
        .with_context(|| format!("opening the waiting-room journal in {location}"))?;
    Ok(Arc::new(rooms))
}

/// Builds the provider `serve` uses. The simulator runs in this process and sends its
/// webhooks to this server at `listen_addr`.
/// Also gives the provider's origin, whose 3-D Secure page the storefront fetches.
async fn payment_provider(
    args: &PaymentsArgs,
    listen_addr: SocketAddr,
) -> anyhow::Result<(Arc<dyn boxoffice_payments::PaymentProvider>, Option<String>)> {
    use boxoffice_payments::simulator::{
        DEFAULT_SECRET_KEY, DEFAULT_WEBHOOK_SECRET, SimulatorConfig, spawn,
    };
    if args.payments == "stripe" {
        let secret = args
            .stripe_secret_key
            .clone()
            .context("--payments stripe needs STRIPE_SECRET_KEY")?;
        let webhook = args
            .stripe_webhook_secret
            .clone()
            .context("--payments stripe needs STRIPE_WEBHOOK_SECRET")?;
        // A simulator run on its own (`boxoffice paysim`) serves its 3-D Secure page at the
        // API base; Stripe's own is a page the fan is sent to, which CSP does not restrict.
        let origin = boxoffice_server::policy::origin_of_url(&args.stripe_api_base).ok();
        return Ok((
            Arc::new(boxoffice_payments::StripeProvider::new(
                args.stripe_api_base.clone(),
                secret,
                webhook,
            )),
            origin,
        ));
    }
    let config = SimulatorConfig {
        webhook_url: Some(format!("http://{listen_addr}/v1/payments/webhooks/stripe")),
        auth_latency_ms: args.sim_auth_latency_ms,
        ..SimulatorConfig::default()
    };
    let sim = spawn(config)
        .await
        .context("starting the payment simulator")?;
    tracing::info!(base_url = %sim.base_url, "payment simulator running in process");
    let origin =
        boxoffice_server::policy::origin_of_url(&sim.base_url).map_err(|e| anyhow::anyhow!(e))?;
    Ok((
        Arc::new(boxoffice_payments::StripeProvider::new(
            sim.base_url.clone(),
            DEFAULT_SECRET_KEY.to_owned(),
            DEFAULT_WEBHOOK_SECRET.to_owned(),
        )),
        Some(origin),
    ))
}

/// Binds `listen` and serves with the simulator or Stripe, printing the bound address.
async fn serve_with(
    store: Arc<dyn Store>,
    side: SideStores,
    jwt_secret: String,
    listen: SocketAddr,
    payments: &PaymentsArgs,
    ticket_key: &std::path::Path,
    waitroom: &WaitroomArgs,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr()?;
    let mut previous_ticket_keys = Vec::new();
    for path in &side.rollover.ticket_previous_keys {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("reading the previous ticket key {}", path.display()))?;
        previous_ticket_keys.push(
            boxoffice_tickets::TicketVerifier::from_pem(&pem)
                .with_context(|| format!("the previous ticket key {}", path.display()))?,
        );
    }
    let ticket_signer = boxoffice_tickets::TicketSigner::load_or_create(ticket_key)
        .with_context(|| format!("loading the ticket key {}", ticket_key.display()))?
        .with_previous(&previous_ticket_keys)?;
    let (provider, provider_origin) = payment_provider(payments, addr).await?;
    let config = boxoffice_server::ServerConfig {
        jwt_secret,
        jwt_previous_secrets: side.rollover.jwt_previous_secrets.clone(),
        provider,
        ticket_signer,
        waitroom_state: waitroom_state(waitroom).await?,
        waitroom_secret: waitroom.waitroom_secret.clone(),
        waitroom_previous_secrets: side.rollover.waitroom_previous_secrets.clone(),
        waitroom_options: boxoffice_server::waitroom::WaitingRoomOptions::default(),
        workers_store: side.workers,
        writer_store: side.writers,
        max_connections: side.max_connections,
        cluster: Some(
            side.node
                .config(addr)
                .checked()
                .map_err(|e| anyhow::anyhow!(e))?,
        ),
        web: boxoffice_server::policy::WebPolicy {
            cors_origins: side.cors_origins,
            // The storefront fetches the provider's 3-D Secure page (the simulator's).
            connect_origins: provider_origin.into_iter().collect(),
        },
        limits: side.limits,
        trusted_proxies: side.trusted_proxies,
    };
    tracing::info!(%addr, "listening");
    // Test harnesses read this line to learn the port when listening on port 0.
    println!("listening on http://{addr}");
    boxoffice_server::serve(store, &config, listener).await?;
    Ok(())
}

// The command line, parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum LoadScenario {
    /// Hold requests only: 1-6 adjacent seats, hot-skewed, fresh account per request.
    Holds {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Concurrent closed-loop clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 20)]
        duration_s: u64,
        /// Sections of 50 x 100 seats in the generated venue.
        #[arg(long, default_value_t = 20)]
        sections: u32,
        /// Share of requests aimed at the two best sections.
        #[arg(long, default_value_t = 0.8)]
        hot_share: f64,
        /// Short, so seats recycle and the venue never sells out.
        #[arg(long, default_value_t = 1)]
        hold_ttl_s: u32,
        /// Send the holds to this node (another `serve` on the same store) instead: it
        /// forwards them to the owner, the node at --base-url.
        #[arg(long)]
        holds_via: Option<String>,
    },
    /// Waiting-room joins: fills one event's (paused) queue with N accounts and writes a
    /// sample of `<bearer token> <queueTicket>` lines for a status-poll load tool.
    Queue {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and account tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Accounts to join (`q-0` …).
        #[arg(long, default_value_t = 2_000_000)]
        accounts: u64,
        /// Concurrent closed-loop clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Accounts written to --sample-out, spread uniformly over the joined ones.
        #[arg(long, default_value_t = 10_000)]
        sample: u64,
        #[arg(long)]
        sample_out: std::path::PathBuf,
        /// Join this event's queue instead of creating a new event with a paused queue.
        #[arg(long)]
        event_id: Option<String>,
    },
    /// Seat-map snapshots: closed-loop (or, with --rate, fixed-rate) GETs of one event's
    /// snapshot (a new 50,000-seat stadium unless --event-id), every body read to its end;
    /// requests/s, latency, bytes/s.
    Seatmap {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Read this event's map instead of creating a stadium.
        #[arg(long)]
        event_id: Option<String>,
        /// GET this URL instead of a seat map (a baseline: `boxoffice hello`, the mirror).
        #[arg(long, conflicts_with = "event_id")]
        url: Option<String>,
        /// Concurrent closed-loop clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        /// Ask for gzip (`Accept-Encoding: gzip`); bytes are counted compressed.
        #[arg(long)]
        gzip: bool,
        /// Revalidate with the last ETag seen (`If-None-Match`: 304 while unchanged).
        #[arg(long)]
        etag: bool,
        /// Seats held per second meanwhile, so the map changes and is rendered again.
        #[arg(long, default_value_t = 0.0)]
        hold_rate: f64,
        /// Open loop: requests per second whatever the answers' pace, at most --clients in
        /// flight; latency counts from when each request was due. 0: closed loop.
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
    },
    /// Seat-map change propagation: opens N Server-Sent-Events streams of one event's map,
    /// holds distinct seats at a fixed rate, and times each hold's arrival on every stream.
    Sse {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Watch this event instead of creating a stadium.
        #[arg(long)]
        event_id: Option<String>,
        /// Streams held open.
        #[arg(long, default_value_t = 1000)]
        clients: usize,
        /// Holds made, one distinct seat each.
        #[arg(long, default_value_t = 200)]
        changes: usize,
        /// Holds per second (open loop).
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
        /// After the last hold, how long to wait for every stream to deliver every hold.
        #[arg(long, default_value_t = 10)]
        settle_s: u64,
        /// Streams being opened at once.
        #[arg(long, default_value_t = 100)]
        connect_concurrency: usize,
        /// Fail when not every stream is open after this many seconds.
        #[arg(long, default_value_t = 120)]
        connect_timeout_s: u64,
    },
    /// The on-sale simulator (open loop): N accounts arrive over T seconds, wait in the
    /// room, hold 1-6 best-available seats (hot-skewed), abandon a share, pay with a mix of
    /// test cards and follow their orders; a summary table and a JSON report at the end.
    Onsale {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Multiplies the full on-sale: 2,000,000 accounts over 300 s.
        #[arg(long, default_value_t = 0.01)]
        scale: f64,
        /// Accounts (overrides 2,000,000 x scale).
        #[arg(long)]
        accounts: Option<u64>,
        /// Arrival window in seconds (overrides 300 x scale).
        #[arg(long)]
        arrival_s: Option<f64>,
        /// Share of holds abandoned: half released, half left to expire.
        #[arg(long, default_value_t = 0.2)]
        abandon: f64,
        /// Test-card mix at checkout, name=weight (visa, declined, 3ds, slow, timeout).
        #[arg(long, default_value = "visa=70,declined=10,3ds=10,slow=5,timeout=5")]
        cards: boxoffice_load::CardMix,
        /// Sections of 50 x 100 seats in the generated stadium.
        #[arg(long, default_value_t = 10)]
        sections: u32,
        /// Accounts in progress at once; arrivals beyond wait (counted as delayed_by_cap).
        #[arg(long, default_value_t = 2000)]
        max_in_flight: usize,
        /// The created event's maxActiveShoppers (default clamp(100,000 x scale, 200, 10,000)).
        #[arg(long)]
        max_active: Option<u32>,
        /// Sell this event (waiting room enabled, reserved sections) instead of creating one.
        #[arg(long)]
        event_id: Option<String>,
        /// Hold TTL of the created event, seconds (abandoned holds come back after it).
        #[arg(long, default_value_t = boxoffice_load::onsale::HOLD_TTL_S)]
        hold_ttl_s: u32,
        /// Create the event without a waiting room: fans go straight to the seats.
        #[arg(long)]
        no_waiting_room: bool,
        /// Fans refused seats go home at once instead of waiting on the event's waiting list
        /// (the load tool's fans before issue 35: an A/B of what the waiting fans cost).
        #[arg(long)]
        refused_fans_leave: bool,
        /// The created event's queue is `random`: it goes on sale when the last fan has
        /// arrived, and the fans who joined before are shuffled once (default `fifo`, on
        /// sale at once).
        #[arg(long)]
        random_queue: bool,
        /// The created event's `waitingRoom.startReleasePerSecond` (default the API's).
        #[arg(long)]
        start_release: Option<u32>,
        /// The created event's `waitingRoom.maxReleasePerSecond` (default the API's).
        #[arg(long)]
        max_release: Option<u32>,
        /// The created event's `waitingRoom.targetHoldP99Ms` (default the API's).
        #[arg(long)]
        target_hold_p99_ms: Option<u32>,
        /// Where the JSON report goes.
        #[arg(long, default_value = "onsale-report.json")]
        report: std::path::PathBuf,
        /// Where the HTML report (tables and plots) goes.
        #[arg(long, default_value = "onsale-report.html")]
        html_report: std::path::PathBuf,
        /// Break things during the run: this tool starts its own server (and, unless
        /// --database-url, a private PostgreSQL cluster) and payment simulator, SIGKILLs and
        /// restarts the server, crash-restarts PostgreSQL, makes the provider slow and lossy;
        /// then waits for convergence and runs `boxoffice check`. Exit 1 on any violation.
        #[arg(long)]
        chaos: bool,
        /// With --chaos: seconds between two chaos actions (five actions in all).
        #[arg(long, default_value_t = 4.0, requires = "chaos")]
        chaos_interval_s: f64,
        /// With --chaos: run on the cluster `boxoffice cluster up --dir DIR` started
        /// instead: two events at once through its balancer, a node SIGKILLed, a shard's
        /// primary killed (failover), a node frozen past its lease, the provider slow; then
        /// `boxoffice check` on every shard. The second event's reports get `-2` in their
        /// names.
        #[arg(long, requires = "chaos", conflicts_with_all = ["database_url", "chaos_nodes"])]
        cluster: Option<std::path::PathBuf>,
        /// With --chaos: the store the started server uses (default: a private PostgreSQL).
        #[arg(long, requires = "chaos")]
        database_url: Option<String>,
        /// With --chaos: PostgreSQL's bin directory (default: newest /usr/lib/postgresql/*/bin).
        #[arg(long, requires = "chaos")]
        pg_bin: Option<std::path::PathBuf>,
        /// With --chaos: `serve` processes on the one store (1-3); the fans are spread over
        /// them and the first is the one SIGKILLed.
        #[arg(long, default_value_t = 1, requires = "chaos")]
        chaos_nodes: u32,
        /// With --chaos-nodes 2 or 3: the Redis the nodes share their waiting rooms in.
        #[arg(
            long,
            env = "BOXOFFICE_CHAOS_REDIS_URL",
            default_value = "redis://127.0.0.1:6379"
        )]
        chaos_redis_url: String,
        /// More nodes of the same store (without --chaos): each fan talks to one of
        /// --base-url and these.
        #[arg(long = "also-base-url")]
        also_base_urls: Vec<String>,
    },
    /// Hold requests only, open loop: a fixed offered rate (fresh account and key each,
    /// 1-6 adjacent seats, hot-skewed or uniform), latency from when each was due.
    HoldsOpen {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Holds offered per second.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        /// Requests in flight at most; a request due beyond it waits (counted as delayed).
        #[arg(long, default_value_t = 1024)]
        max_in_flight: usize,
        /// Sections of 50 x 100 seats in the generated venue.
        #[arg(long, default_value_t = 4)]
        sections: u32,
        /// Share aimed at the two best sections (0: uniform over the sections).
        #[arg(long, default_value_t = 0.8)]
        hot_share: f64,
        /// Short, so seats recycle and the venue never sells out.
        #[arg(long, default_value_t = 1)]
        hold_ttl_s: u32,
        /// Send the holds to this node (another `serve` on the same store) instead: it
        /// forwards them to the owner, the node at --base-url.
        #[arg(long)]
        holds_via: Option<String>,
        /// Also print the answers per tenth of a second (`t=SECONDS STATUS=COUNT …`; 0: no
        /// answer): what an outage or a failover looked like from the clients.
        #[arg(long)]
        timeline: bool,
    },
    /// Attempts after sell-out: sells a small section out (held and paid), then fires hold
    /// attempts at it from closed-loop clients; each must be refused (409).
    Sellout {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Seats of the section sold out first (1-100, or a multiple of 100 up to 10,000).
        #[arg(long, default_value_t = 600)]
        seats: u32,
        #[arg(long, default_value_t = 64)]
        clients: usize,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        /// Share of attempts asking for best available (the rest name seats).
        #[arg(long, default_value_t = 0.5)]
        best_available_share: f64,
    },
    /// Order status reads, open loop: makes N confirmed orders, then GETs them at a fixed rate.
    OrderStatus {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        #[arg(long, default_value_t = 200)]
        orders: usize,
        /// Reads offered per second.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        #[arg(long, default_value_t = 1024)]
        max_in_flight: usize,
    },
    /// Checkouts on one event, open loop: holds one seat for each of rate × duration
    /// accounts, then checks the holds out with pm_card_visa at a fixed rate (start and
    /// settlement: run the server with the simulator at zero latency).
    Checkouts {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Checkouts offered per second.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        #[arg(long, default_value_t = 4096)]
        max_in_flight: usize,
    },
    /// Exchanges (rebooking) on one hot trip, open loop: N owners each buy one seat, then
    /// their tickets are exchanged for free seats at a fixed rate, each new order rejoining
    /// the rotation once ticketed.
    Exchanges {
        #[arg(long, default_value = "http://127.0.0.1:8080")]
        base_url: String,
        /// The server's JWT secret (to mint the admin and fan tokens).
        #[arg(long, env = "BOXOFFICE_JWT_SECRET", hide_env_values = true)]
        jwt_secret: Option<String>,
        /// Owners, one ticketed order each, exchanged in rotation (at most 20,000).
        #[arg(long, default_value_t = 8_000)]
        orders: usize,
        /// Exchanges offered per second.
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        #[arg(long, default_value_t = 10)]
        duration_s: u64,
        #[arg(long, default_value_t = 1024)]
        max_in_flight: usize,
        /// Print the report as one JSON object instead of a line.
        #[arg(long)]
        json: bool,
    },
    /// The baseline of bench/seatmap.sh: a bare tokio HTTP/1.1 server serving a copy of a
    /// real snapshot (--from) and turning each `POST …/holds` into one broadcast stream message.
    #[command(hide = true)]
    SeatmapMirror {
        /// A real `/v1/events/{id}/seatmap` URL to copy (identity and gzip bodies, ETag).
        #[arg(long)]
        from: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Set TCP_NODELAY on accepted sockets (`boxoffice serve` does not).
        #[arg(long)]
        nodelay: bool,
    },
}

/// Opens the store a URL names (on PostgreSQL a pool of `SERVE_POOL_CONNECTIONS_MAX`, opened
/// as they are needed), with its calls in flight bounded by the pool's size
/// ([`boxoffice_store::gate::Gated`]: past the bound a call is refused as busy at once).
/// PostgreSQL databases are created when missing. On PostgreSQL with shards in the directory
/// (`boxoffice shard add`), a pool per shard behind one [`Sharded`] store.
///
/// [`Sharded`]: boxoffice_store::shard::Sharded
async fn open_store(url: &str) -> anyhow::Result<Arc<dyn Store>> {
    Ok(open_stores(url).await?.0)
}

/// [`open_store`], and the directory's places when the store has shards (the side stores of
/// `serve` route by the same ones).
async fn open_stores(
    url: &str,
) -> anyhow::Result<(Arc<dyn Store>, Option<Arc<boxoffice_store::shard::Places>>)> {
    use boxoffice_store::gate::Gated;
    if is_postgres(url) {
        let shards = shards::directory(url).await?;
        if shards.len() > 1 {
            let (sharded, places) = shards::open(
                &shards,
                boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
            )
            .await?;
            let connections =
                boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX * shards.len() as u32;
            return Ok((
                Arc::new(Gated::for_pool(Arc::new(sharded), connections)),
                Some(places),
            ));
        }
    }
    let (store, connections) = open_pool(url).await?;
    Ok((Arc::new(Gated::for_pool(store, connections)), None))
}

/// `path` with `suffix` before its extension (`report.json` → `report-2.json`).
fn with_suffix(path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}{suffix}.{}", ext.to_string_lossy()),
        None => format!("{stem}{suffix}"),
    };
    path.with_file_name(name)
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// [`open_store`] without the bound, and the size of its pool.
async fn open_pool(url: &str) -> anyhow::Result<(Arc<dyn Store>, u32)> {
    if is_postgres(url) {
        boxoffice_store_postgres::PgStore::create_database_if_missing(url)
            .await
            .context("creating the PostgreSQL database")?;
        let store = boxoffice_store_postgres::PgStore::connect_with(
            url,
            boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
        )
        .await
        .context("connecting to PostgreSQL")?;
        Ok((
            Arc::new(store),
            boxoffice_store_postgres::SERVE_POOL_CONNECTIONS_MAX,
        ))
    } else if url.starts_with("sqlite:") {
        let store = boxoffice_store_sqlite::SqliteStore::connect(url)
            .await
            .context("opening SQLite")?;
        Ok((
            Arc::new(store),
            boxoffice_store_sqlite::READER_CONNECTIONS_MAX + 1,
        ))
    } else {
        bail!("unsupported database url {url:?}: use postgres://… or sqlite://…")
    }
}

/// The pools beside the requests' on PostgreSQL: the background workers' small one and the
/// event writers' (both `None` on SQLite: one writer connection is shared by design); with
/// shards, one of each per shard, routed by `places`.
async fn open_side_stores(
    url: &str,
    places: Option<Arc<boxoffice_store::shard::Places>>,
) -> anyhow::Result<SideStores> {
    if let Some(places) = places {
        let shards = shards::directory(url).await?;
        let (workers, writers) = shards::open_side(&shards, places).await?;
        return Ok(SideStores {
            workers: Some(workers),
            writers: Some(writers),
            ..SideStores::default()
        });
    }
    if is_postgres(url) {
        let workers = boxoffice_store_postgres::PgStore::connect_with(
            url,
            boxoffice_store_postgres::WORKERS_POOL_CONNECTIONS_MAX,
        )
        .await
        .context("connecting the workers' pool to PostgreSQL")?;
        // Lazily: its connections open on the writers' own thread, which drives them.
        let writers = boxoffice_store_postgres::PgStore::connect_lazy_with(
            url,
            boxoffice_store_postgres::WRITER_POOL_CONNECTIONS_MAX,
        )
        .context("the event writers' pool")?;
        Ok(SideStores {
            workers: Some(Arc::new(workers)),
            writers: Some(Arc::new(writers)),
            ..SideStores::default()
        })
    } else {
        Ok(SideStores::default())
    }
}

/// The pools of [`open_side_stores`], and the connection limit (0: from the open-file
/// limit).
#[derive(Default)]
pub(crate) struct SideStores {
    workers: Option<Arc<dyn Store>>,
    writers: Option<Arc<dyn boxoffice_store::engine::EngineStore>>,
    max_connections: usize,
    /// How the server takes part in a cluster (its id, address and lease TTL).
    node: NodeArgs,
    /// Origins whose pages may call the API (CORS).
    cors_origins: Vec<String>,
    /// The abuse limits.
    limits: boxoffice_server::limits::LimitsConfig,
    /// Keys of a rollover that still verify.
    rollover: RolloverArgs,
    /// Proxies whose `X-Forwarded-For` names the client.
    trusted_proxies: Vec<String>,
}

/// `BOXOFFICE_LIMITS` (comma-separated `NAME=RATE`), for commands without `--limit`.
fn limits_from_env() -> Vec<String> {
    std::env::var("BOXOFFICE_LIMITS")
        .map(|v| {
            v.split(',')
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `--limit` assignments over the default limits.
fn limits_of(assignments: &[String]) -> anyhow::Result<boxoffice_server::limits::LimitsConfig> {
    let mut limits = boxoffice_server::limits::LimitsConfig::default();
    for assignment in assignments {
        limits
            .set(assignment)
            .map_err(|e| anyhow::anyhow!("--limit: {e}"))?;
    }
    Ok(limits)
}

/// `boxoffice load --scenario NAME …` (or `--scenario=NAME`) is `boxoffice load NAME …`.
fn scenario_flag_as_subcommand(mut args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    if args.get(1).is_some_and(|a| a == "load")
        && let Some(flag) = args.get(2).and_then(|a| a.to_str()).map(str::to_owned)
    {
        if flag == "--scenario" && args.len() > 3 {
            args.remove(2);
        } else if let Some(name) = flag.strip_prefix("--scenario=") {
            args[2] = name.into();
        }
    }
    args
}

/// Parses `90s`, `30m`, `1h`, `7d` (or bare seconds) into seconds.
fn parse_ttl_s(raw: &str) -> anyhow::Result<u64> {
    let raw = raw.trim();
    let (digits, unit_s) = match raw.char_indices().last() {
        Some((i, 's')) => (&raw[..i], 1),
        Some((i, 'm')) => (&raw[..i], 60),
        Some((i, 'h')) => (&raw[..i], 3600),
        Some((i, 'd')) => (&raw[..i], 86_400),
        _ => (raw, 1),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("bad ttl {raw:?}: use 90s, 30m, 1h or 7d"))?;
    let ttl_s = n.checked_mul(unit_s).context("ttl too large")?;
    if ttl_s == 0 || ttl_s > 366 * 86_400 {
        bail!("ttl must be between 1s and 366d");
    }
    Ok(ttl_s)
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse_from(scenario_flag_as_subcommand(std::env::args_os().collect()));
    init_tracing();
    match cli.command {
        Command::Serve {
            database_url,
            listen,
            jwt_secret,
            dev_auth,
            payments,
            ticket_key,
            waitroom,
            node,
            max_connections,
            cors_allow_origin,
            limit,
            rollover,
            trusted_proxy,
        } => {
            let secret = match (jwt_secret, dev_auth) {
                (Some(secret), _) => secret,
                (None, true) => {
                    tracing::warn!(
                        "dev auth: tokens are signed with the public development secret"
                    );
                    DEV_JWT_SECRET.to_owned()
                }
                (None, false) => {
                    bail!("set BOXOFFICE_JWT_SECRET (or pass --dev-auth for local development)")
                }
            };
            let (store, places) = open_stores(&database_url).await?;
            store.migrate().await?;
            let side = SideStores {
                max_connections,
                node,
                cors_origins: cors_allow_origin,
                limits: limits_of(&limit)?,
                rollover,
                trusted_proxies: trusted_proxy,
                ..open_side_stores(&database_url, places).await?
            };
            serve_with(
                store,
                side,
                secret,
                listen,
                &payments,
                &ticket_key,
                &waitroom,
            )
            .await
        }
        Command::Paysim {
            listen,
            webhook_url,
            seed,
        } => {
            let config = boxoffice_payments::simulator::SimulatorConfig {
                seed,
                webhook_url,
                ..Default::default()
            };
            let listener = tokio::net::TcpListener::bind(listen).await?;
            println!("payment simulator on http://{}", listener.local_addr()?);
            boxoffice_payments::simulator::serve(config, listener).await?;
            Ok(())
        }
        Command::Demo { data_dir, listen } => demo::run(&data_dir, listen).await,
        Command::Migrate { database_url } => {
            let store = open_store(&database_url).await?;
            store.migrate().await?;
            println!("migrations applied ({})", store.backend());
            Ok(())
        }
        Command::Openapi => {
            use std::io::Write as _;
            let document = boxoffice_server::openapi()
                .to_pretty_json()
                .context("rendering the OpenAPI document")?;
            // A reader that stops early (`| head`) is not an error.
            match writeln!(std::io::stdout().lock(), "{document}") {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Command::Token {
            account,
            admin,
            ttl,
            jwt_secret,
        } => {
            let account =
                AccountId::parse(&account).map_err(|e| anyhow::anyhow!("--account: {e}"))?;
            let secret = jwt_secret.unwrap_or_else(|| {
                eprintln!(
                    "note: BOXOFFICE_JWT_SECRET is not set; signing with the development secret"
                );
                DEV_JWT_SECRET.to_owned()
            });
            let token = mint_token(&secret, &account, admin, parse_ttl_s(&ttl)?)
                .map_err(anyhow::Error::msg)?;
            println!("{token}");
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Holds {
                    base_url,
                    jwt_secret,
                    clients,
                    duration_s,
                    sections,
                    hot_share,
                    hold_ttl_s,
                    holds_via,
                },
        } => {
            if !(0.0..=1.0).contains(&hot_share) {
                bail!("--hot-share must be between 0 and 1");
            }
            let scenario = boxoffice_load::HoldsScenario {
                base_url,
                jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
                clients,
                duration_s,
                sections,
                hot_share,
                hold_ttl_s,
                holds_via,
            };
            let report = boxoffice_load::run_holds(&scenario).await?;
            println!("holds {report}");
            if report.errors > 0 {
                bail!(
                    "{} requests were answered neither 201 nor 409",
                    report.errors
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Queue {
                    base_url,
                    jwt_secret,
                    accounts,
                    clients,
                    sample,
                    sample_out,
                    event_id,
                },
        } => {
            let scenario = boxoffice_load::QueueScenario {
                base_url,
                jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
                accounts,
                clients,
                sample,
                sample_out,
                event_id,
            };
            let report = boxoffice_load::run_queue(&scenario).await?;
            println!("queue {report}");
            println!("event {}", report.event_id);
            if report.errors > 0 {
                bail!("{} joins were never answered 201", report.errors);
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Seatmap {
                    base_url,
                    jwt_secret,
                    event_id,
                    url,
                    clients,
                    duration_s,
                    gzip,
                    etag,
                    hold_rate,
                    rate,
                },
        } => {
            let scenario = boxoffice_load::SnapshotScenario {
                base_url,
                jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
                event_id,
                url,
                clients,
                duration_s,
                gzip,
                etag,
                hold_rate,
                rate,
            };
            let report = boxoffice_load::run_snapshot(&scenario).await?;
            println!("seatmap {report}");
            if let Some(event_id) = &report.event_id {
                println!("event {event_id}");
            }
            if report.failed + report.other_status > 0 || report.holds_failed > 0 {
                bail!(
                    "{} requests failed or were answered neither 200 nor 304; {} holds failed",
                    report.failed + report.other_status,
                    report.holds_failed
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Sse {
                    base_url,
                    jwt_secret,
                    event_id,
                    clients,
                    changes,
                    rate,
                    settle_s,
                    connect_concurrency,
                    connect_timeout_s,
                },
        } => {
            let scenario = boxoffice_load::SseScenario {
                base_url,
                jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
                event_id,
                clients,
                changes,
                rate,
                settle_s,
                connect_concurrency,
                connect_timeout_s,
            };
            let report = boxoffice_load::run_sse(&scenario).await?;
            println!("sse {report}");
            println!("event {}", report.event_id);
            if report.missed() > 0 || report.hold_errors > 0 || report.connect_failures > 0 {
                bail!(
                    "{} deliveries missed, {} holds not granted, {} stream opens failed",
                    report.missed(),
                    report.hold_errors,
                    report.connect_failures
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::HoldsOpen {
                    base_url,
                    jwt_secret,
                    rate,
                    duration_s,
                    max_in_flight,
                    sections,
                    hot_share,
                    hold_ttl_s,
                    holds_via,
                    timeline,
                },
        } => {
            let secret = jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned());
            let scenario = boxoffice_load::HoldsOpenScenario {
                holds_via,
                rate,
                duration_s,
                max_in_flight,
                sections,
                hot_share,
                hold_ttl_s,
                ..boxoffice_load::HoldsOpenScenario::new(&base_url, &secret)
            };
            let report = boxoffice_load::run_holds_open(&scenario).await?;
            println!("{report}");
            if timeline {
                println!("{}", report.timeline());
            }
            if report.errors > 0 {
                bail!("{} requests were not answered 201 or 409", report.errors);
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Sellout {
                    base_url,
                    jwt_secret,
                    seats,
                    clients,
                    duration_s,
                    best_available_share,
                },
        } => {
            let secret = jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned());
            let scenario = boxoffice_load::SelloutScenario {
                seats,
                clients,
                duration_s,
                best_available_share,
                ..boxoffice_load::SelloutScenario::new(&base_url, &secret)
            };
            let report = boxoffice_load::run_sellout(&scenario).await?;
            println!("{report}");
            if report.errors > 0 {
                bail!("{} attempts were not refused with 409", report.errors);
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::OrderStatus {
                    base_url,
                    jwt_secret,
                    orders,
                    rate,
                    duration_s,
                    max_in_flight,
                },
        } => {
            let secret = jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned());
            let scenario = boxoffice_load::OrderStatusScenario {
                orders,
                rate,
                duration_s,
                max_in_flight,
                ..boxoffice_load::OrderStatusScenario::new(&base_url, &secret)
            };
            let report = boxoffice_load::run_order_status(&scenario).await?;
            println!("{report}");
            if report.errors > 0 {
                bail!("{} reads were not answered 200 CONFIRMED", report.errors);
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Checkouts {
                    base_url,
                    jwt_secret,
                    rate,
                    duration_s,
                    max_in_flight,
                },
        } => {
            let secret = jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned());
            let scenario = boxoffice_load::CheckoutsScenario {
                rate,
                duration_s,
                max_in_flight,
                ..boxoffice_load::CheckoutsScenario::new(&base_url, &secret)
            };
            let report = boxoffice_load::run_checkouts(&scenario).await?;
            println!("{report}");
            for error in &report.first_errors {
                eprintln!("error: {error}");
            }
            if report.errors > 0 {
                bail!(
                    "{} checkouts were neither confirmed nor shed with 429",
                    report.errors
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Exchanges {
                    base_url,
                    jwt_secret,
                    orders,
                    rate,
                    duration_s,
                    max_in_flight,
                    json,
                },
        } => {
            let secret = jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned());
            let scenario = boxoffice_load::ExchangesScenario {
                orders,
                rate,
                duration_s,
                max_in_flight,
                ..boxoffice_load::ExchangesScenario::new(&base_url, &secret)
            };
            let report = boxoffice_load::run_exchanges(&scenario).await?;
            if json {
                println!("{}", report.to_json());
            } else {
                println!("{report}");
            }
            if report.errors > 0 {
                bail!(
                    "{} exchanges were answered neither 201 nor a 409 refusal",
                    report.errors
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::Onsale {
                    base_url,
                    jwt_secret,
                    scale,
                    accounts,
                    arrival_s,
                    abandon,
                    cards,
                    sections,
                    max_in_flight,
                    max_active,
                    event_id,
                    hold_ttl_s,
                    no_waiting_room,
                    refused_fans_leave,
                    random_queue,
                    start_release,
                    max_release,
                    target_hold_p99_ms,
                    report,
                    html_report,
                    chaos,
                    chaos_interval_s,
                    database_url,
                    pg_bin,
                    chaos_nodes,
                    chaos_redis_url,
                    also_base_urls,
                    cluster,
                },
        } => {
            let scenario = boxoffice_load::OnsaleScenario {
                base_url,
                other_base_urls: also_base_urls,
                jwt_secret: jwt_secret.unwrap_or_else(|| DEV_JWT_SECRET.to_owned()),
                scale,
                accounts,
                arrival_s,
                abandon,
                cards,
                sections,
                max_in_flight,
                max_active,
                event_id,
                hold_ttl_s,
                waiting_room: !no_waiting_room,
                refused_fans_wait: !refused_fans_leave,
                report,
                door: boxoffice_load::DoorSettings {
                    random: random_queue,
                    start_release_per_s: start_release,
                    max_release_per_s: max_release,
                    target_hold_p99_ms,
                },
            };
            if let Some(dir) = cluster {
                let options = cluster_chaos::ClusterChaosOptions {
                    dir,
                    interval_s: chaos_interval_s,
                    boxoffice: std::env::current_exe().context("finding this binary")?,
                };
                let outcome = cluster_chaos::run(scenario.clone(), &options).await?;
                let mut failed = Vec::new();
                for (n, event) in outcome.events.iter().enumerate() {
                    let report = &event.report;
                    let (json_path, html_path) = if n == 0 {
                        (scenario.report.clone(), html_report.clone())
                    } else {
                        (
                            with_suffix(&scenario.report, "-2"),
                            with_suffix(&html_report, "-2"),
                        )
                    };
                    report.write_files(&json_path, Some(&html_path))?;
                    print!("{report}");
                    println!(
                        "reports written to {} and {}",
                        json_path.display(),
                        html_path.display()
                    );
                    if !event.converged {
                        failed.push(format!("event {} did not converge", report.event_id));
                    }
                    if report.unexpected > 0 || report.unsettled > 0 {
                        failed.push(format!(
                            "event {}: {} answers the contract does not allow and {} orders not final",
                            report.event_id, report.unexpected, report.unsettled
                        ));
                    }
                }
                if outcome.events.iter().any(|e| !e.check_ok) {
                    failed.push("boxoffice check found violations".to_owned());
                }
                if !failed.is_empty() {
                    bail!("the cluster chaos run failed: {}", failed.join("; "));
                }
                println!(
                    "cluster chaos run passed: both events converged, all invariants hold on every shard"
                );
                let _ = &outcome.check_output;
                return Ok(());
            }
            if chaos {
                let options = chaos::ChaosOptions {
                    database_url,
                    interval_s: chaos_interval_s,
                    pg_bin,
                    boxoffice: std::env::current_exe().context("finding this binary")?,
                    nodes: chaos_nodes,
                    redis_url: chaos_redis_url,
                };
                let outcome = chaos::run(scenario.clone(), &options).await?;
                let report = &outcome.report;
                report.write_files(&scenario.report, Some(&html_report))?;
                print!("{report}");
                println!(
                    "reports written to {} and {}",
                    scenario.report.display(),
                    html_report.display()
                );
                if !outcome.check_ok {
                    bail!("boxoffice check found violations after the chaos run");
                }
                if !outcome.converged {
                    bail!("the store did not converge after the chaos run");
                }
                if report.unexpected > 0 || report.unsettled > 0 {
                    bail!(
                        "{} answers the contract does not allow and {} orders not final (listed above)",
                        report.unexpected,
                        report.unsettled
                    );
                }
                println!(
                    "chaos run passed: {} failed attempts retried, store converged, all invariants hold",
                    report.errors
                );
                return Ok(());
            }
            let report = boxoffice_load::run_onsale(&scenario).await?;
            report.write_files(&scenario.report, Some(&html_report))?;
            print!("{report}");
            println!(
                "reports written to {} and {}",
                scenario.report.display(),
                html_report.display()
            );
            if report.unexpected > 0 || report.unsettled > 0 {
                eprintln!(
                    "note: {} unexpected answers and {} orders not final after {} s (listed above)",
                    report.unexpected,
                    report.unsettled,
                    boxoffice_load::onsale::ORDER_WAIT_MAX.as_secs()
                );
            }
            if report.errors > 0 {
                bail!(
                    "{} requests failed with a 5xx answer or a transport error (listed above)",
                    report.errors
                );
            }
            Ok(())
        }
        Command::Load {
            scenario:
                LoadScenario::SeatmapMirror {
                    from,
                    listen,
                    nodelay,
                },
        } => {
            let source = boxoffice_load::MirrorSource::fetch(&from)
                .await
                .with_context(|| format!("copying the snapshot at {from}"))?;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("binding {listen}"))?;
            println!(
                "copied {} bytes ({} gzip, ETag {})",
                source.identity.len(),
                source.gzip.len(),
                source.etag
            );
            println!("listening on http://{}", listener.local_addr()?);
            boxoffice_load::serve_mirror(listener, source, nodelay).await?;
            Ok(())
        }
        Command::Simulate {
            seed,
            scale,
            faults,
            plant_double_grant,
            hold_ttl_follows_sale,
            report,
        } => {
            if !(scale > 0.0 && scale <= boxoffice_sim::config::SCALE_MAX) {
                bail!(
                    "--scale must be above 0 and at most {}",
                    boxoffice_sim::config::SCALE_MAX
                );
            }
            let config = boxoffice_sim::SimConfig::scale(scale)
                .with_seed(seed)
                .with_faults(faults)
                .with_planted_double_grant(plant_double_grant)
                .with_hold_ttl_following_the_sale(hold_ttl_follows_sale);
            // Seconds to minutes of CPU: off the runtime's workers.
            let outcome = tokio::task::spawn_blocking(move || boxoffice_sim::run(&config)).await?;
            print!("{}", boxoffice_sim::summary(&outcome));
            if let Some(path) = report {
                boxoffice_sim::write_report(&outcome, &path)
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("report: {}", path.display());
            }
            if !outcome.is_clean() {
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Hello { listen } => {
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("binding {listen}"))?;
            println!("listening on http://{}", listener.local_addr()?);
            boxoffice_load::hello::serve_hello(listener).await?;
            Ok(())
        }
        Command::Cluster {
            action:
                ClusterAction::Up {
                    dir,
                    nodes,
                    shards,
                    pg_bin,
                    jwt_secret,
                },
        } => {
            let state = local_cluster::up(&local_cluster::UpOptions {
                dir,
                nodes,
                shards,
                pg_bin,
                boxoffice: std::env::current_exe().context("finding this binary")?,
                jwt_secret,
            })
            .await?;
            println!(
                "balancer {}",
                state["balancer"]["url"].as_str().unwrap_or("?")
            );
            println!(
                "admin-token {}",
                state["adminToken"].as_str().unwrap_or("?")
            );
            println!(
                "database-url {}",
                state["shards"][0]["databaseUrl"].as_str().unwrap_or("?")
            );
            Ok(())
        }
        Command::Cluster {
            action: ClusterAction::Down { dir },
        } => {
            println!("{}", local_cluster::down(&dir).await?);
            Ok(())
        }
        Command::Cluster {
            action: ClusterAction::Failover { dir, shard },
        } => {
            println!("{}", failover::failover(&dir, &shard, None).await?);
            let ms = failover::rebuild_standby(&dir, &shard).await?;
            println!("a new synchronous standby streams ({ms} ms)");
            Ok(())
        }
        Command::Cluster {
            action: ClusterAction::Watch { dir },
        } => failover::watch(&dir).await,
        Command::Shard { action } => {
            let said = match action {
                ShardAction::Add {
                    database_url,
                    name,
                    url,
                } => shards::add(&database_url, &name, &url).await?,
                ShardAction::List { database_url } => shards::list(&database_url).await?,
                ShardAction::Place { database_url, rule } => {
                    shards::place(&database_url, &rule).await?
                }
                ShardAction::Move {
                    database_url,
                    event,
                    to,
                } => shards::move_event(&database_url, &event, &to).await?,
            };
            println!("{said}");
            Ok(())
        }
        Command::Check { database_url } => {
            let clean = if is_postgres(&database_url)
                && shards::directory(&database_url).await?.len() > 1
            {
                check::run_shards(&database_url).await?
            } else {
                let store = open_store(&database_url).await?;
                check::run(store.as_ref()).await?
            };
            if !clean {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_latency_ms, parse_ttl_s, scenario_flag_as_subcommand};

    #[test]
    fn latencies() {
        assert_eq!(parse_latency_ms("150-400"), Ok((150, 400)));
        assert_eq!(parse_latency_ms("80"), Ok((80, 80)));
        for bad in ["", "400-150", "a-b", "1-60001", "-5"] {
            assert!(parse_latency_ms(bad).is_err(), "{bad}");
        }
    }

    fn argv(line: &str) -> Vec<std::ffi::OsString> {
        line.split_whitespace().map(Into::into).collect()
    }

    #[test]
    fn scenario_flag_names_the_subcommand() {
        let want = argv("boxoffice load onsale --scale 0.01 --chaos");
        assert_eq!(
            scenario_flag_as_subcommand(argv(
                "boxoffice load --scenario onsale --scale 0.01 --chaos"
            )),
            want
        );
        assert_eq!(
            scenario_flag_as_subcommand(argv(
                "boxoffice load --scenario=onsale --scale 0.01 --chaos"
            )),
            want
        );
        assert_eq!(scenario_flag_as_subcommand(want.clone()), want);
        // Only right after `load`; elsewhere clap judges the flag.
        let other = argv("boxoffice serve --scenario onsale");
        assert_eq!(scenario_flag_as_subcommand(other.clone()), other);
    }

    #[test]
    fn ttls() {
        assert_eq!(parse_ttl_s("90s").unwrap(), 90);
        assert_eq!(parse_ttl_s("30m").unwrap(), 1800);
        assert_eq!(parse_ttl_s("1h").unwrap(), 3600);
        assert_eq!(parse_ttl_s("7d").unwrap(), 604_800);
        assert_eq!(parse_ttl_s("45").unwrap(), 45);
        for bad in ["", "h", "0s", "-1h", "1y", "99999999999999999999d"] {
            assert!(parse_ttl_s(bad).is_err(), "{bad}");
        }
    }
}
