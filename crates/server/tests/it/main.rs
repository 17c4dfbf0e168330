//! The server's tests over HTTP and through the writer, on both backends: one test binary
//! with a module per story (a binary per file linked the whole server twenty-two times, which
//! was most of CI's build). `common` is the harness every module shares: a fresh store per
//! test, the app served on port 0, tokens and small HTTP helpers.

#[macro_use]
mod common;

mod allocations;
mod api_doc;
mod best_available;
mod cancellation;
mod checkout;
mod delivery;
mod door;
mod engine;
mod exchanges;
mod forget;
mod holders;
mod mail;
mod phases;
mod pricing;
mod refunds;
mod reports;
mod seatmap;
mod stories;
mod transfers;
mod venues;
mod waitlist;
mod waitroom;
mod webhooks;
