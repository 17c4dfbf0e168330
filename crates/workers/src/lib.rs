//! Background reconcilers. Each has no input, is idempotent, runs on a timer and when poked,
//! and reports what it did: [`expiry`] (holds past their deadline), [`relay`] (the outbox),
//! [`reconciler`] (payments whose outcome is unknown), [`exchanges`] (exchanges across shards
//! left open), [`webhooks`] (integrators' webhook deliveries), [`mail`] (fans' mail, at most once). [`payment`] holds the verdict
//! mapping they share with checkout; [`crash`] the named crash points tests use.

pub mod cancellation;
pub mod crash;
pub mod exchanges;
pub mod expiry;
pub mod mail;
pub mod payment;
pub mod reconciler;
pub mod relay;
pub mod webhooks;
