//! Route handlers, one module per resource.

pub mod checkout;
pub mod cluster;
pub mod dev;
pub mod door;
pub mod events;
pub mod exchanges;
pub mod health;
pub mod holds;
pub mod queue;
pub mod reports;
pub mod seatmap;
pub mod tickets;
pub mod transfers;
pub mod waitlist;
pub mod webhooks;
