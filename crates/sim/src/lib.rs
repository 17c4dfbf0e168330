//! `boxoffice-sim`: a deterministic simulation of a whole on-sale, running the real decision
//! code under simulated fans, a simulated payment provider, simulated store latency and
//! simulated time, in the manner of FoundationDB's simulation testing and TigerBeetle's VOPR.
//!
//! The real code: `boxoffice_domain::pipeline::Pipeline`, the server's event writer
//! pipeline, groups the commands, decides what to load, commit, answer and decide again;
//! `boxoffice_domain::engine::EventEngine` decides every hold, checkout, payment verdict,
//! release and waiting-list offer in those groups; `boxoffice_waitroom::room::Room` keeps the
//! queue and the active shoppers; `boxoffice_waitroom::controller::ReleaseController`
//! decides the release rate once a second from signals the simulation measures in simulated
//! time. Around them, simulated: the fans (`fans.rs`), the store's commit latency, failures,
//! loads and the writer's crash (`writer.rs`), the store's rows and waiting list
//! (`store.rs`), and time (`world.rs`: one binary heap of events).
//!
//! One seeded PRNG ([`rng::SplitMix64`]) drives everything, so a seed fixes the run: the
//! report's trace hash (SHA-256 over one line per event processed) is the same for the same
//! seed and build. With `faults`, the seed also picks the faults ([`config::FaultPlan`]): a
//! slow or failing provider, a writer crash and reload, commit failures, the store down.
//!
//! Checks: after each committed group the simulation's own ledger (`ledger.rs`) checks every
//! seat taken, freed and sold against who owns it, independently of the engine; the engine's
//! and the room's `invariants()` run after every group and tick (less often on large runs,
//! as the config says); at the end every fan has exactly one [`Ending`] and the seats sold
//! are exactly those of the confirmed holds. A planted bug
//! ([`SimConfig::plant_double_grant`]) proves the ledger can fail.
//!
//! Start reading at [`run`], then `world.rs`.
//!
//! Architecture invariant: no IO but [`write_report`], no clock, no OS randomness, no async
//! runtime.

pub mod config;
mod fans;
mod ledger;
pub mod report;
pub mod rng;
mod store;
mod world;
mod writer;

pub use config::{ArrivalShape, FaultPlan, SeatLayout, SimConfig};
pub use report::{
    Ending, Latency, Report, SecondSample, Violation, ViolationKind, WaitlistFigures, summary,
    write_report,
};

/// Runs one simulation to its end (every fan's story ended, every hold settled or lapsed).
pub fn run(config: &SimConfig) -> Report {
    world::Sim::new(config.clone()).run()
}
