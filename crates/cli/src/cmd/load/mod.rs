//! `boxoffice load NAME`: drives a running server with one load scenario of
//! `boxoffice-load` and reports it; `onsale` (with its chaos runs) is in [`onsale`].

mod onsale;

use std::net::SocketAddr;

use anyhow::{Context, bail};
use boxoffice_server::auth::DEV_JWT_SECRET;
use clap::Subcommand;

pub(crate) use onsale::OnsaleArgs;

// The command line, parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum LoadScenario {
    /// Hold requests only: 1-6 adjacent seats, hot-skewed, fresh account per request.
    Holds(HoldsArgs),
    /// Waiting-room joins: fills one event's (paused) queue with N accounts and writes a
    /// sample of `<bearer token> <queueTicket>` lines for a status-poll load tool.
    Queue(QueueArgs),
    /// Seat-map snapshots: closed-loop (or, with --rate, fixed-rate) GETs of one event's
    /// snapshot (a new 50,000-seat stadium unless --event-id), every body read to its end;
    /// requests/s, latency, bytes/s.
    Seatmap(SeatmapArgs),
    /// Seat-map change propagation: opens N Server-Sent-Events streams of one event's map,
    /// holds distinct seats at a fixed rate, and times each hold's arrival on every stream.
    Sse(SseArgs),
    /// The on-sale simulator (open loop): N accounts arrive over T seconds, wait in the
    /// room, hold 1-6 best-available seats (hot-skewed), abandon a share, pay with a mix of
    /// test cards and follow their orders; a summary table and a JSON report at the end.
    Onsale(OnsaleArgs),
    /// Hold requests only, open loop: a fixed offered rate (fresh account and key each,
    /// 1-6 adjacent seats, hot-skewed or uniform), latency from when each was due.
    HoldsOpen(HoldsOpenArgs),
    /// Attempts after sell-out: sells a small section out (held and paid), then fires hold
    /// attempts at it from closed-loop clients; each must be refused (409).
    Sellout(SelloutArgs),
    /// Order status reads, open loop: makes N confirmed orders, then GETs them at a fixed rate.
    OrderStatus(OrderStatusArgs),
    /// Checkouts on one event, open loop: holds one seat for each of rate × duration
    /// accounts, then checks the holds out with pm_card_visa at a fixed rate (start and
    /// settlement: run the server with the simulator at zero latency).
    Checkouts(CheckoutsArgs),
    /// Exchanges (rebooking) on one hot trip, open loop: N owners each buy one seat, then
    /// their tickets are exchanged for free seats at a fixed rate, each new order rejoining
    /// the rotation once ticketed.
    Exchanges(ExchangesArgs),
    /// The baseline of bench/seatmap.sh: a bare tokio HTTP/1.1 server serving a copy of a
    /// real snapshot (--from) and turning each `POST …/holds` into one broadcast stream message.
    #[command(hide = true)]
    SeatmapMirror(SeatmapMirrorArgs),
}

impl LoadScenario {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        match self {
            Self::Holds(args) => args.run().await,
            Self::Queue(args) => args.run().await,
            Self::Seatmap(args) => args.run().await,
            Self::Sse(args) => args.run().await,
            Self::Onsale(args) => args.run().await,
            Self::HoldsOpen(args) => args.run().await,
            Self::Sellout(args) => args.run().await,
            Self::OrderStatus(args) => args.run().await,
            Self::Checkouts(args) => args.run().await,
            Self::Exchanges(args) => args.run().await,
            Self::SeatmapMirror(args) => args.run().await,
        }
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct HoldsArgs {
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
}

impl HoldsArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            clients,
            duration_s,
            sections,
            hot_share,
            hold_ttl_s,
            holds_via,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct QueueArgs {
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
}

impl QueueArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            accounts,
            clients,
            sample,
            sample_out,
            event_id,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct SeatmapArgs {
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
}

impl SeatmapArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
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
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct SseArgs {
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
}

impl SseArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            event_id,
            clients,
            changes,
            rate,
            settle_s,
            connect_concurrency,
            connect_timeout_s,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct HoldsOpenArgs {
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
}

impl HoldsOpenArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
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
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct SelloutArgs {
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
}

impl SelloutArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            seats,
            clients,
            duration_s,
            best_available_share,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct OrderStatusArgs {
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
}

impl OrderStatusArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            orders,
            rate,
            duration_s,
            max_in_flight,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct CheckoutsArgs {
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
}

impl CheckoutsArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            rate,
            duration_s,
            max_in_flight,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExchangesArgs {
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
}

impl ExchangesArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            base_url,
            jwt_secret,
            orders,
            rate,
            duration_s,
            max_in_flight,
            json,
        } = self;
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
}

#[derive(Debug, clap::Args)]
pub(crate) struct SeatmapMirrorArgs {
    /// A real `/v1/events/{id}/seatmap` URL to copy (identity and gzip bodies, ETag).
    #[arg(long)]
    from: String,
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Set TCP_NODELAY on accepted sockets (`boxoffice serve` does not).
    #[arg(long)]
    nodelay: bool,
}

impl SeatmapMirrorArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            from,
            listen,
            nodelay,
        } = self;
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
}
