//! The pure core of boxoffice: identifiers, the seat, hold and order state machines, the
//! event engine that decides a group of commands, the event writer's pipeline, request
//! digests for idempotency, and the invariants that every store state must satisfy.
//!
//! Nothing here does IO: no clock, no database, no network. The entry point is the event
//! engine, [`engine::EventEngine`]: the event's writer (`server/src/runtime/writer.rs`, and
//! the simulation's in `sim/src/writer.rs`) loads an [`engine::EngineSnapshot`] from the
//! store and drives a [`pipeline::Pipeline`], which hands the engine each group of commands
//! with the store's clock ([`engine::EventEngine::decide_within`]; tools and store tests
//! decide one command on a freshly loaded engine, `boxoffice_store::engine`'s `*_once`); the
//! store writes the group's [`engine::Effects`] in one transaction. Start reading at [`engine`], then
//! [`pipeline`]. The rules the engine applies live beside it: [`decide`] for a hold (with
//! [`best`] for best-available seats), [`settlement`] for a payment verdict.
//! [`inventory::Inventory::invariants`] is what tests and `boxoffice check` assert after
//! every transition.
//!
//! Architecture invariant: this crate depends on no async runtime, no database driver and no
//! web framework (CI checks `cargo tree`).

pub mod accessibility;
pub mod allocation;
pub mod best;
pub mod decide;
pub mod engine;
pub mod event;
pub mod event_chart;
pub mod hold;
pub mod hold_ttl;
pub mod holder;
pub mod idempotency;
pub mod ids;
pub mod inventory;
pub mod order;
pub mod phase;
pub mod pipeline;
pub mod pricing;
pub mod sale;
pub mod seatmap;
pub mod settlement;
pub mod venue;

pub use time::OffsetDateTime;
