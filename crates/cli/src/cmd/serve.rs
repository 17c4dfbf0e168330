//! `boxoffice serve`: the HTTP API on the store a URL names, with the pools, payment
//! provider, waiting-room state, keys and cluster settings it needs. `demo` serves
//! through [`serve_with`] too.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use boxoffice_server::auth::DEV_JWT_SECRET;
use boxoffice_store::Store;

use crate::shards;
use crate::stores::{is_postgres, open_stores};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
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
    #[command(flatten)]
    writer: WriterArgs,
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
    /// lapsed-holds-per-account, cancellation-refunds-per-second); repeat or separate with
    /// commas. Defaults: holds 10/s:40, joins 2/s:10, checkouts 5/s:20 per account, sign-ins
    /// 5/s:20 per address, per-address holds and joins off, 8 live holds per account, a wait
    /// after 3 lapses, 100 refunds of cancelled events a second (each one provider call).
    #[arg(long, env = "BOXOFFICE_LIMITS", value_delimiter = ',')]
    limit: Vec<String>,
    #[command(flatten)]
    rollover: RolloverArgs,
    /// A proxy (address or block: `10.0.0.0/8`) whose `X-Forwarded-For` names the
    /// client, for per-address limits behind a balancer; repeat or separate with
    /// commas. From any other peer the header is ignored.
    #[arg(long, env = "BOXOFFICE_TRUSTED_PROXIES", value_delimiter = ',')]
    trusted_proxy: Vec<String>,
    // Boxed, as the wallet's: the command enum keeps its variants of similar sizes.
    #[command(flatten)]
    mail: Box<MailArgs>,
    // Boxed: the command enum keeps its variants of similar sizes.
    #[command(flatten)]
    wallet: Box<crate::cmd::wallet::WalletArgs>,
}

/// Where fans' mail goes.
#[derive(Debug, clap::Args)]
pub(crate) struct MailArgs {
    /// The SMTP server fans' mail goes through: `smtp://host:port` (plain, or
    /// `?tls=required` for STARTTLS), `smtps://host:port` (TLS), with `user:password@`
    /// when it asks for a login. Unset (and no --mail-dir): no mail is sent.
    #[arg(
        long,
        env = "BOXOFFICE_SMTP_URL",
        hide_env_values = true,
        conflicts_with = "mail_dir"
    )]
    smtp_url: Option<String>,
    /// Write each mail to DIR/<mailId>.eml instead of sending it (the demo's way).
    #[arg(long, env = "BOXOFFICE_MAIL_DIR")]
    mail_dir: Option<std::path::PathBuf>,
    /// The sender of fans' mail: `tickets@example.org` or `Box Office <tickets@example.org>`.
    #[arg(long, env = "BOXOFFICE_MAIL_FROM", default_value = boxoffice_workers::mail::DEFAULT_MAIL_FROM)]
    mail_from: String,
}

impl MailArgs {
    /// The mail configuration these flags name.
    pub(crate) fn config(&self) -> anyhow::Result<Option<boxoffice_workers::mail::MailConfig>> {
        use boxoffice_workers::mail::MailConfig;
        let config = match (&self.smtp_url, &self.mail_dir) {
            (Some(url), _) => Some(MailConfig::smtp(url, &self.mail_from)),
            (None, Some(dir)) => Some(MailConfig::folder(dir.clone(), &self.mail_from)),
            (None, None) => None,
        };
        config.transpose().map_err(anyhow::Error::msg)
    }
}

impl ServeArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            database_url,
            listen,
            jwt_secret,
            dev_auth,
            payments,
            ticket_key,
            waitroom,
            node,
            writer,
            max_connections,
            cors_allow_origin,
            limit,
            rollover,
            trusted_proxy,
            mail,
            wallet,
        } = self;
        let secret = match (jwt_secret, dev_auth) {
            (Some(secret), _) => secret,
            (None, true) => {
                tracing::warn!("dev auth: tokens are signed with the public development secret");
                DEV_JWT_SECRET.to_owned()
            }
            (None, false) => {
                bail!("set BOXOFFICE_JWT_SECRET (or pass --dev-auth for local development)")
            }
        };
        let (store, places) = open_stores(&database_url).await?;
        store.migrate().await?;
        // The pages of these origins may show Google's "save" button for a link.
        let cors_origins_for_wallet = cors_allow_origin.clone();
        let side = SideStores {
            max_connections,
            node,
            writer_limits: writer.limits()?,
            cors_origins: cors_allow_origin,
            limits: limits_of(&limit)?,
            rollover,
            trusted_proxies: trusted_proxy,
            mail: mail.config()?,
            wallet: wallet.config(&cors_origins_for_wallet)?,
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct PaymentsArgs {
    /// `sim`: the built-in simulator, in process (test cards, no network). `stripe`: the
    /// Stripe adapter against `--stripe-api-base` with STRIPE_SECRET_KEY and
    /// STRIPE_WEBHOOK_SECRET.
    #[arg(long, default_value = "sim", value_parser = ["sim", "stripe"])]
    pub(crate) payments: String,
    #[arg(
        long,
        env = "STRIPE_API_BASE",
        default_value = "https://api.stripe.com"
    )]
    pub(crate) stripe_api_base: String,
    #[arg(long, env = "STRIPE_SECRET_KEY", hide_env_values = true)]
    pub(crate) stripe_secret_key: Option<String>,
    #[arg(long, env = "STRIPE_WEBHOOK_SECRET", hide_env_values = true)]
    pub(crate) stripe_webhook_secret: Option<String>,
    /// With `--payments sim`: latency of every authorization, `MIN-MAX` ms (uniform), as a
    /// real provider has (e.g. `150-400`).
    #[arg(long, default_value = "0-0", value_parser = parse_latency_ms)]
    pub(crate) sim_auth_latency_ms: (u64, u64),
    /// With `--payments sim`: latency of every refund (and void of a refund), `MIN-MAX` ms.
    #[arg(long, default_value = "0-0", value_parser = parse_latency_ms)]
    pub(crate) sim_refund_latency_ms: (u64, u64),
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
    fn config(&self, addr: SocketAddr) -> boxoffice_server::runtime::cluster::ClusterConfig {
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
        boxoffice_server::runtime::cluster::ClusterConfig {
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

/// How long an event's writer stays loaded without commands, and how many engines a node
/// loads at once.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct WriterArgs {
    /// An event's writer with no command for this long hands the event's lease back and
    /// drops its engine (the next command loads it again); it stays while a hold it granted
    /// is still HELD or the event has a waiting list. 0: never; at most 604800 (a week).
    #[arg(long, env = "BOXOFFICE_WRITER_IDLE_UNLOAD_S", default_value_t = boxoffice_server::runtime::writer::WRITER_IDLE_UNLOAD_S_DEFAULT)]
    writer_idle_unload_s: u64,
    /// Engine loads this node runs at once (1-64): after a failover the events' writers
    /// load again in turns of this many, not all at once.
    #[arg(long, env = "BOXOFFICE_WRITER_LOADS_MAX", default_value_t = boxoffice_server::runtime::writer::WRITER_LOADS_MAX_DEFAULT)]
    writer_loads_max: usize,
}

/// The longest idle time accepted: a week.
const WRITER_IDLE_UNLOAD_S_MAX: u64 = 7 * 24 * 3600;

impl WriterArgs {
    fn limits(&self) -> anyhow::Result<boxoffice_server::runtime::writer::WriterLimits> {
        if self.writer_idle_unload_s > WRITER_IDLE_UNLOAD_S_MAX {
            bail!(
                "--writer-idle-unload-s must be 0-{WRITER_IDLE_UNLOAD_S_MAX}, not {}",
                self.writer_idle_unload_s
            );
        }
        if !(1..=64).contains(&self.writer_loads_max) {
            bail!(
                "--writer-loads-max must be 1-64, not {}",
                self.writer_loads_max
            );
        }
        Ok(boxoffice_server::runtime::writer::WriterLimits {
            idle_unload_s: self.writer_idle_unload_s,
            loads_max: self.writer_loads_max,
        })
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
pub(crate) struct WaitroomArgs {
    /// A directory (in process, journaled there: one node) or `redis://host:port` (several
    /// API nodes share one queue per event).
    #[arg(
        long,
        env = "BOXOFFICE_WAITROOM_STATE",
        default_value = "./data/waitroom"
    )]
    pub(crate) waitroom_state: String,
    /// Signs queue tickets and admission tokens (every node of a deployment the same);
    /// derived from the JWT secret when unset.
    #[arg(long, env = "BOXOFFICE_WAITROOM_SECRET", hide_env_values = true)]
    pub(crate) waitroom_secret: Option<String>,
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
        refund_latency_ms: args.sim_refund_latency_ms,
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
pub(crate) async fn serve_with(
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
        waitroom_options: boxoffice_server::runtime::waitroom::WaitingRoomOptions::default(),
        workers_store: side.workers,
        writer_store: side.writers,
        lease_store: side.leases,
        writer_limits: side.writer_limits,
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
        mail: side.mail,
        wallet: side.wallet,
    };
    tracing::info!(%addr, "listening");
    // Test harnesses read this line to learn the port when listening on port 0.
    println!("listening on http://{addr}");
    boxoffice_server::serve(store, &config, listener).await?;
    Ok(())
}

/// The pools beside the requests' on PostgreSQL: the background workers' small one, the
/// event writers' and the lease renewals' (all `None` on SQLite: one writer connection is shared by design); with
/// shards, one of each per shard, routed by `places`.
async fn open_side_stores(
    url: &str,
    places: Option<Arc<boxoffice_store::shard::Places>>,
) -> anyhow::Result<SideStores> {
    if let Some(places) = places {
        let shards = shards::directory(url).await?;
        let (workers, writers) = shards::open_side(&shards, places).await?;
        let (leases, _) = shards::open(
            &shards,
            boxoffice_store_postgres::LEASE_POOL_CONNECTIONS_MAX,
        )
        .await
        .context("the lease renewals' pools")?;
        return Ok(SideStores {
            workers: Some(workers),
            writers: Some(writers),
            leases: Some(Arc::new(leases)),
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
        let leases = boxoffice_store_postgres::PgStore::connect_with(
            url,
            boxoffice_store_postgres::LEASE_POOL_CONNECTIONS_MAX,
        )
        .await
        .context("connecting the lease renewals' pool to PostgreSQL")?;
        Ok(SideStores {
            workers: Some(Arc::new(workers)),
            writers: Some(Arc::new(writers)),
            leases: Some(Arc::new(leases)),
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
    pub(crate) workers: Option<Arc<dyn Store>>,
    pub(crate) writers: Option<Arc<dyn boxoffice_store::engine::EngineStore>>,
    /// The lease renewals' own small pool (and the registration's, the hand-backs').
    pub(crate) leases: Option<Arc<dyn Store>>,
    /// How long writers stay loaded idle, and how many load at once.
    pub(crate) writer_limits: boxoffice_server::runtime::writer::WriterLimits,
    pub(crate) max_connections: usize,
    /// How the server takes part in a cluster (its id, address and lease TTL).
    pub(crate) node: NodeArgs,
    /// Origins whose pages may call the API (CORS).
    pub(crate) cors_origins: Vec<String>,
    /// The abuse limits.
    pub(crate) limits: boxoffice_server::limits::LimitsConfig,
    /// Keys of a rollover that still verify.
    pub(crate) rollover: RolloverArgs,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub(crate) trusted_proxies: Vec<String>,
    /// Where fans' mail goes; `None`: no mail.
    pub(crate) mail: Option<boxoffice_workers::mail::MailConfig>,
    /// The keys that sign wallet passes (none by default).
    pub(crate) wallet: boxoffice_server::WalletConfig,
}

/// `BOXOFFICE_LIMITS` (comma-separated `NAME=RATE`), for commands without `--limit`.
pub(crate) fn limits_from_env() -> Vec<String> {
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
pub(crate) fn limits_of(
    assignments: &[String],
) -> anyhow::Result<boxoffice_server::limits::LimitsConfig> {
    let mut limits = boxoffice_server::limits::LimitsConfig::default();
    for assignment in assignments {
        limits
            .set(assignment)
            .map_err(|e| anyhow::anyhow!("--limit: {e}"))?;
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::parse_latency_ms;

    #[test]
    fn latencies() {
        assert_eq!(parse_latency_ms("150-400"), Ok((150, 400)));
        assert_eq!(parse_latency_ms("80"), Ok((80, 80)));
        for bad in ["", "400-150", "a-b", "1-60001", "-5"] {
            assert!(parse_latency_ms(bad).is_err(), "{bad}");
        }
    }
}
