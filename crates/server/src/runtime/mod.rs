//! The event runtime: what runs beside the requests on this node and owns an event's live
//! state, apart from the HTTP helpers around it (bodies, errors, limits, the listener).
//!
//! - [`writer`]: one writer per event, the task through which every hold, release, checkout
//!   start, checkout payment verdict, compensation and exchange into the event passes (and
//!   transfer acceptances and the waiting list). It drives the domain's pipeline
//!   (`boxoffice_domain::pipeline`) over the event's engine and does the IO the pipeline asks
//!   for: load (under the event's lease when the node has one), catch up from the change
//!   feed, write a group in one transaction, answer after the commit. Start reading here.
//! - [`threads`]: the writers' own thread and runtime, so their groups never wait behind
//!   the request tasks.
//! - [`cluster`]: this node's event leases (take, renew, hand back) and the forwarding of a
//!   write for an event another node owns.
//! - [`seatmap`]: the live seat maps (a read model), advanced only from the store's change
//!   rows; never consulted to grant a hold.
//! - [`waitroom`]: the waiting rooms as the server runs them (cached views for polls, the
//!   admission check, the release ticker, slot returns).
//! - [`ledger`]: each account's live holds and lapses on this node, told by the writers
//!   after each commit and asked by the hold route.
//!
//! The routes (`crate::routes`) reach the runtime through [`crate::AppState`]; the runtime
//! answers them through the channels each writer command carries.

pub mod cluster;
pub mod ledger;
pub mod seatmap;
pub mod threads;
pub mod waitroom;
pub mod writer;
