//! The pure core of boxoffice: identifiers, the seat and hold state machines, the batch
//! decision that grants or refuses hold requests, request digests for idempotency, and the
//! invariants that every store state must satisfy.
//!
//! Nothing here does IO: no clock, no database, no network. The store loads rows, calls
//! [`decide::decide_holds`] with the store's clock reading, and writes what it returns. Start
//! reading at [`decide`]; [`inventory::Inventory::invariants`] is what tests and
//! `boxoffice check` assert after every transition.
//!
//! Architecture invariant: this crate depends on no async runtime, no database driver and no
//! web framework (CI checks `cargo tree`).

pub mod best;
pub mod decide;
pub mod engine;
pub mod event;
pub mod hold;
pub mod hold_ttl;
pub mod idempotency;
pub mod ids;
pub mod inventory;
pub mod order;
pub mod pipeline;
pub mod seatmap;
pub mod settlement;

pub use time::OffsetDateTime;
