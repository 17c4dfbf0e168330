//! `boxoffice simulate`: a whole on-sale in simulated time.

use anyhow::{Context, bail};

#[derive(Debug, clap::Args)]
pub(crate) struct SimulateArgs {
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
}

impl SimulateArgs {
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            seed,
            scale,
            faults,
            plant_double_grant,
            hold_ttl_follows_sale,
            report,
        } = self;
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
}
