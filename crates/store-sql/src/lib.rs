//! The boxoffice [`Store`](boxoffice_store::Store)'s statements, written once over the two
//! dialects it runs on: PostgreSQL (production, `boxoffice-store-postgres`) and SQLite (the
//! embedded default, `boxoffice-store-sqlite`). Each module is one part of the store; its
//! functions take the store's [`Db`](db::Db) (or a [`Conn`](db::Conn) inside a transaction
//! the caller holds) and run the same statements on either, with [`db`] supplying what
//! differs. The two backend crates keep what only one of them has (PostgreSQL's hosts, moves
//! and shard directory; SQLite's file setup) and the parts not yet moved here.
//!
//! Architecture invariant: a rule of the store (a statement, its conditions, the order of a
//! transaction's writes, the decoding of a row) is written in this crate once; a backend
//! crate may say how to connect, never what to write.

pub mod db;
pub mod door;
pub mod engine;
pub mod event;
pub mod hold;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod outbox;
pub mod report;
pub mod seatmap;
pub mod transfer;
pub mod waitlist;
pub mod webhook;

#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use boxoffice_domain::OffsetDateTime;
}

/// Implements, for a backend's store type with a `db: Db` field, the store traits whose
/// statements this crate holds whole: one mechanism for both backends, so no trait method is
/// written twice.
#[macro_export]
macro_rules! impl_shared_traits {
    ($store:ty) => {
        #[$crate::__private::async_trait]
        impl ::boxoffice_store::door::DoorStore for $store {
            async fn door_lists(
                &self,
                event_id: &str,
            ) -> ::boxoffice_store::StoreResult<::boxoffice_store::door::DoorLists> {
                $crate::door::lists(&self.db, event_id).await
            }
        }

        #[$crate::__private::async_trait]
        impl ::boxoffice_store::lease::LeaseStore for $store {
            async fn register_node(
                &self,
                node_id: &str,
                advertise_url: &str,
            ) -> ::boxoffice_store::StoreResult<()> {
                $crate::lease::register_node(&self.db, node_id, advertise_url).await
            }

            async fn nodes(
                &self,
            ) -> ::boxoffice_store::StoreResult<Vec<::boxoffice_store::lease::NodeRecord>> {
                $crate::lease::nodes(&self.db).await
            }

            async fn take_lease(
                &self,
                event_id: &str,
                node_id: &str,
                ttl_ms: u64,
            ) -> ::boxoffice_store::StoreResult<::boxoffice_store::lease::Taken> {
                $crate::lease::take(&self.db, event_id, node_id, ttl_ms).await
            }

            async fn renew_leases(
                &self,
                node_id: &str,
                held: &[(String, u64)],
                ttl_ms: u64,
            ) -> ::boxoffice_store::StoreResult<Vec<String>> {
                $crate::lease::renew(&self.db, node_id, held, ttl_ms).await
            }

            async fn release_lease(
                &self,
                event_id: &str,
                fence: &::boxoffice_store::lease::Fence,
            ) -> ::boxoffice_store::StoreResult<bool> {
                $crate::lease::release(&self.db, event_id, fence).await
            }

            async fn lease(
                &self,
                event_id: &str,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::lease::Lease>> {
                $crate::lease::lease(&self.db, event_id).await
            }
        }

        #[$crate::__private::async_trait]
        impl ::boxoffice_store::report::ReportStore for $store {
            async fn report_rows(
                &self,
                event: &::boxoffice_store::EventRecord,
            ) -> ::boxoffice_store::StoreResult<::boxoffice_store::report::ReportRows> {
                $crate::report::report_rows(&self.db, event).await
            }

            async fn timeline_rows(
                &self,
                event: &::boxoffice_store::EventRecord,
                bucket_s: u32,
            ) -> ::boxoffice_store::StoreResult<::boxoffice_store::report::TimelineRows> {
                $crate::report::timeline_rows(&self.db, event, bucket_s).await
            }
        }

        #[$crate::__private::async_trait]
        impl ::boxoffice_store::waitlist::WaitlistStore for $store {
            async fn get_waitlist_entry(
                &self,
                waitlist_id: &str,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::waitlist::WaitlistView>>
            {
                $crate::waitlist::entry(&self.db, waitlist_id).await
            }
        }

        #[$crate::__private::async_trait]
        impl ::boxoffice_store::webhook::WebhookStore for $store {
            async fn create_webhook_endpoint(
                &self,
                new: &::boxoffice_store::webhook::NewEndpoint,
            ) -> ::boxoffice_store::StoreResult<::boxoffice_store::webhook::EndpointCreated> {
                $crate::webhook::create_endpoint(&self.db, new).await
            }

            async fn get_webhook_endpoint(
                &self,
                endpoint_id: &str,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::webhook::WebhookEndpoint>>
            {
                $crate::webhook::endpoint(&self.db, endpoint_id).await
            }

            async fn list_webhook_endpoints(
                &self,
            ) -> ::boxoffice_store::StoreResult<Vec<::boxoffice_store::webhook::WebhookEndpoint>>
            {
                $crate::webhook::endpoints(&self.db).await
            }

            async fn set_webhook_endpoint_enabled(
                &self,
                endpoint_id: &str,
                enabled: bool,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::webhook::WebhookEndpoint>>
            {
                $crate::webhook::set_enabled(&self.db, endpoint_id, enabled).await
            }

            async fn delete_webhook_endpoint(
                &self,
                endpoint_id: &str,
            ) -> ::boxoffice_store::StoreResult<bool> {
                $crate::webhook::delete_endpoint(&self.db, endpoint_id).await
            }

            async fn fan_out_webhooks(
                &self,
                events: &[::boxoffice_store::webhook::WebhookEvent],
            ) -> ::boxoffice_store::StoreResult<u64> {
                $crate::webhook::fan_out(&self.db, events).await
            }

            async fn claim_webhook_deliveries(
                &self,
                limit: u32,
                lease_s: f64,
            ) -> ::boxoffice_store::StoreResult<Vec<::boxoffice_store::webhook::DueDelivery>> {
                $crate::webhook::claim(&self.db, limit, lease_s).await
            }

            async fn record_webhook_attempt(
                &self,
                delivery_id: i64,
                attempt: &::boxoffice_store::webhook::Attempt,
            ) -> ::boxoffice_store::StoreResult<()> {
                $crate::webhook::record_attempt(&self.db, delivery_id, attempt).await
            }

            async fn list_webhook_deliveries(
                &self,
                endpoint_id: &str,
                before: Option<i64>,
                limit: u32,
            ) -> ::boxoffice_store::StoreResult<Vec<::boxoffice_store::webhook::WebhookDelivery>>
            {
                $crate::webhook::deliveries(&self.db, endpoint_id, before, limit).await
            }

            async fn replay_webhook_delivery(
                &self,
                endpoint_id: &str,
                delivery_id: i64,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::webhook::WebhookDelivery>>
            {
                $crate::webhook::replay(&self.db, endpoint_id, delivery_id).await
            }
        }

        #[$crate::__private::async_trait]
        impl ::boxoffice_store::transfer::TransferStore for $store {
            async fn offer_transfer(
                &self,
                offer: &::boxoffice_store::transfer::TransferOffer,
                closes_at: $crate::__private::OffsetDateTime,
            ) -> ::boxoffice_store::StoreResult<
                Result<
                    ::boxoffice_store::transfer::Offered,
                    ::boxoffice_store::transfer::OfferRefused,
                >,
            > {
                $crate::transfer::offer(&self.db, offer, closes_at).await
            }

            async fn get_transfer(
                &self,
                transfer_id: &str,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::transfer::TransferView>>
            {
                $crate::transfer::get(&self.db, transfer_id).await
            }

            async fn list_transfers(
                &self,
                account_id: &str,
                role: ::boxoffice_store::transfer::TransferRole,
                limit: u32,
            ) -> ::boxoffice_store::StoreResult<Vec<::boxoffice_store::transfer::TransferView>>
            {
                $crate::transfer::list(&self.db, account_id, role, limit).await
            }

            async fn end_transfer(
                &self,
                transfer_id: &str,
                account_id: &str,
                to: ::boxoffice_store::transfer::TransferStatus,
            ) -> ::boxoffice_store::StoreResult<Option<::boxoffice_store::transfer::TransferView>>
            {
                $crate::transfer::end(&self.db, transfer_id, account_id, to).await
            }
        }
    };
}
