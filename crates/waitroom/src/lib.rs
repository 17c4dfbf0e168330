//! The virtual waiting room of one boxoffice deployment, as pure synchronous state: who waits
//! in which order, who is shopping now, the signed tokens that prove both, and how fast the
//! queue is released.
//!
//! Start reading at [`queue::EventQueue`] (one per event: pre-queue, the shuffle at on-sale,
//! positions and the serving counter). [`admission::ActiveShoppers`] caps how many released
//! accounts shop at once. [`token::TokenKeys`] signs and verifies queue tickets and admission
//! tokens. [`controller::ReleaseController`] decides, once per second, how many positions to
//! release from [`controller::Signals`] the server measures.
//!
//! Nothing here reads a clock or does IO: every call that depends on time takes `now_ms`
//! (unix milliseconds) or `now_s` (unix seconds), so tests control time. Where rooms are kept
//! (in process with a journal, or Redis) is `boxoffice-waitroom-state`; the HTTP layer and the
//! ticker are `server/src/runtime/waitroom.rs` and `server/src/routes/queue.rs`.
//!
//! Architecture invariant: this crate depends on no async runtime, no database driver and no
//! web framework.

pub mod admission;
pub mod controller;
pub mod permutation;
pub mod queue;
pub mod room;
pub mod token;
