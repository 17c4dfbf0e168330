//! One module per subcommand of `boxoffice`: its flags (a clap `Args` struct or
//! `Subcommand` enum) and `run`, what it does with them. `main.rs` only dispatches.
//!
//! `serve` also holds what `demo` shares with it (the payment provider, the waiting-room
//! state, the side pools, the abuse limits); opening a store is `crate::stores`.

pub(crate) mod check;
pub(crate) mod cluster;
pub(crate) mod demo;
pub(crate) mod hello;
pub(crate) mod load;
pub(crate) mod migrate;
pub(crate) mod openapi;
pub(crate) mod paysim;
pub(crate) mod serve;
pub(crate) mod shard;
pub(crate) mod simulate;
pub(crate) mod token;
pub(crate) mod wallet;
