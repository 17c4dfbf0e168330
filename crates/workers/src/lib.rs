//! Background reconcilers. Each has no input, is idempotent, runs on a timer and when poked,
//! and reports what it did. Start with [`expiry`].

pub mod expiry;
