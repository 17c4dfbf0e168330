//! The `boxoffice` binary: `serve`, `demo`, `migrate`, `token`, `check`, `load`, `simulate`,
//! `cluster`, `shard`, `paysim`, `openapi`.
//!
//! Each subcommand is a thin shell over the library crates: it parses flags, opens the store
//! named by the URL (`postgres://…` or `sqlite://…`, [`stores`]) and calls into
//! `boxoffice-server`, the store or the load and simulation crates. [`Command`] lists them;
//! each lives in its own module under [`cmd`] (flags and what it runs). The machinery some of
//! them share stays beside: [`chaos`] and [`cluster_chaos`] (`load onsale --chaos`),
//! [`local_cluster`] and [`failover`] (`cluster`), [`shards`] (`shard`, and every store
//! opened on a sharded database).

mod autofailover;
mod chaos;
mod cluster_chaos;
mod cmd;
mod local_cluster;
mod shards;
mod stores;

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
enum Command {
    /// Events spread over PostgreSQL shards: the directory in the home database.
    Shard {
        #[command(subcommand)]
        action: cmd::shard::ShardAction,
    },
    /// Serve the HTTP API (migrations run first).
    Serve(cmd::serve::ServeArgs),
    /// Run the payment provider simulator (a Stripe-like HTTP subset with test cards).
    Paysim(cmd::paysim::PaysimArgs),
    /// Run the demo: embedded SQLite under ./data, a 50,000-seat stadium, dev auth.
    Demo(cmd::demo::DemoArgs),
    /// Apply migrations and exit.
    Migrate(cmd::migrate::MigrateArgs),
    /// Print the OpenAPI document the server serves at /openapi.json.
    Openapi,
    /// Print a signed account token (JWT, HS256).
    Token(cmd::token::TokenArgs),
    /// Drive a running server with load and report throughput and latency
    /// (`boxoffice load --scenario NAME` is the same as `boxoffice load NAME`).
    Load {
        #[command(subcommand)]
        scenario: cmd::load::LoadScenario,
    },
    /// A cluster on this machine: a PostgreSQL primary with a synchronous standby, a Redis,
    /// nodes and HAProxy in front, each its own process on a free port below 32768.
    Cluster {
        #[command(subcommand)]
        action: cmd::cluster::ClusterAction,
    },
    /// Check the invariants (DESIGN.md I1-I7) on a live database; exit 1 on any violation.
    Check(cmd::check::CheckArgs),
    /// Simulate a whole on-sale in simulated time: the real event engine, waiting room and
    /// release controller under simulated fans, payments, store latency and faults. Prints a
    /// summary (first line `trace <sha256>`); exits 1 on any violation.
    Simulate(cmd::simulate::SimulateArgs),
    /// A plain axum hello-world (`GET /`), the baseline of bench/waitroom.sh.
    #[command(hide = true)]
    Hello(cmd::hello::HelloArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse_from(scenario_flag_as_subcommand(std::env::args_os().collect()));
    init_tracing();
    match cli.command {
        Command::Shard { action } => action.run().await,
        Command::Serve(args) => args.run().await,
        Command::Paysim(args) => args.run().await,
        Command::Demo(args) => args.run().await,
        Command::Migrate(args) => args.run().await,
        Command::Openapi => cmd::openapi::run(),
        Command::Token(args) => args.run().await,
        Command::Load { scenario } => scenario.run().await,
        Command::Cluster { action } => action.run().await,
        Command::Check(args) => args.run().await,
        Command::Simulate(args) => args.run().await,
        Command::Hello(args) => args.run().await,
    }
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

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[cfg(test)]
mod tests {
    use super::scenario_flag_as_subcommand;

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
}
