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

pub mod checkout;
pub mod conformance;
pub mod db;
pub mod door;
pub mod engine;
pub mod event;
pub mod exchange;
pub mod expiry;
pub mod group;
pub mod hold;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod outbox;
pub mod report;
pub mod seatmap;
pub mod settle;
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

/// Implements, for a backend's store type with a `db: Db` field, the store traits written
/// whole in this crate: the store itself, the read side, the workers' side and the event
/// writer's side. The type provides what only a backend knows, as inherent methods:
/// `run_migrations` (its dialect's migrations), `event_created` (after an event is created:
/// PostgreSQL refreshes its planner statistics), `group_committed` (after each committed
/// group: the same), and the legs of an exchange across shards (`mark_out`, `in_fate`,
/// `finish_out`, `open_out`: PostgreSQL's; SQLite has no shards).
#[macro_export]
macro_rules! impl_store_traits {
    ($store:ty, $backend:literal) => {
        const _: () = {
            #[allow(unused_imports)]
            use ::boxoffice_domain::OffsetDateTime;
            #[allow(unused_imports)]
            use ::boxoffice_domain::engine::{EngineRows, EngineSnapshot};
            #[allow(unused_imports)]
            use ::boxoffice_domain::event::EventSpec;
            #[allow(unused_imports)]
            use ::boxoffice_domain::idempotency::StoredResponse;
            #[allow(unused_imports)]
            use ::boxoffice_domain::idempotency::{IdempotencyScope, Idempotent};
            #[allow(unused_imports)]
            use ::boxoffice_domain::inventory::Inventory;
            #[allow(unused_imports)]
            use ::boxoffice_store::engine::{EngineStore, GroupCommitted, GroupWrite};
            #[allow(unused_imports)]
            use ::boxoffice_store::exchange::{
                ExchangeOut, ExchangeRefused, ExchangeStatus, InFate,
            };
            #[allow(unused_imports)]
            use ::boxoffice_store::{
                EventCounts, EventRecord, HoldView, ReadStore, RenderEvent, Store, StoreResult,
                SweepReport, WorkerStore, retrying,
            };
            use $crate::__private::async_trait;

            #[async_trait]
            impl Store for $store {
                fn backend(&self) -> &'static str {
                    $backend
                }

                async fn migrate(&self) -> StoreResult<()> {
                    self.run_migrations().await
                }

                async fn ping(&self) -> StoreResult<()> {
                    $crate::outbox::ping(&self.db).await
                }

                async fn now(&self) -> StoreResult<OffsetDateTime> {
                    $crate::outbox::now(&self.db).await
                }

                async fn create_event(
                    &self,
                    scope: &IdempotencyScope,
                    request_digest: &str,
                    event_id: &str,
                    spec: &EventSpec,
                    render: &RenderEvent,
                ) -> StoreResult<Idempotent> {
                    let created = retrying(|| {
                        $crate::event::create(
                            &self.db,
                            scope,
                            request_digest,
                            event_id,
                            spec,
                            render,
                        )
                    })
                    .await?;
                    self.event_created(spec, &created).await;
                    Ok(created)
                }

                async fn replace_answer(
                    &self,
                    scope: &IdempotencyScope,
                    response: &StoredResponse,
                ) -> StoreResult<bool> {
                    retrying(|| $crate::idempotency::replace(&self.db, scope, response)).await
                }

                async fn check_in(&self, ticket_id: &str) -> StoreResult<Option<(bool, String)>> {
                    $crate::checkout::check_in(&self.db, ticket_id).await
                }

                async fn mark_exchange_out(
                    &self,
                    out: &ExchangeOut,
                    closes_at: OffsetDateTime,
                ) -> StoreResult<Result<(), ExchangeRefused>> {
                    self.mark_out(out, closes_at).await
                }

                async fn exchange_in_fate(
                    &self,
                    out: &ExchangeOut,
                    abort_if_missing: bool,
                ) -> StoreResult<Option<InFate>> {
                    self.in_fate(out, abort_if_missing).await
                }

                async fn finish_exchange_out(
                    &self,
                    _from_event_id: &str,
                    exchange_id: &str,
                    fate: &InFate,
                ) -> StoreResult<Option<ExchangeStatus>> {
                    self.finish_out(exchange_id, fate).await
                }

                async fn open_exchanges_out(
                    &self,
                    older_than_s: f64,
                    limit: u32,
                ) -> StoreResult<Vec<ExchangeOut>> {
                    self.open_out(older_than_s, limit).await
                }
            }

            #[async_trait]
            impl ReadStore for $store {
                async fn get_event(&self, event_id: &str) -> StoreResult<Option<EventRecord>> {
                    $crate::event::load(&self.db, event_id).await
                }

                async fn list_events(
                    &self,
                    after_event_id: Option<&str>,
                    limit: u32,
                ) -> StoreResult<Vec<EventRecord>> {
                    $crate::event::list(&self.db, after_event_id, limit).await
                }

                async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
                    $crate::event::counts(&self.db, event, self.now().await?).await
                }

                async fn get_hold(&self, hold_id: &str) -> StoreResult<Option<HoldView>> {
                    $crate::hold::get(&self.db, hold_id).await
                }

                async fn stored_answers(
                    &self,
                    asked: &[(IdempotencyScope, String)],
                ) -> StoreResult<Vec<Option<Idempotent>>> {
                    $crate::idempotency::stored_answers(&self.db, asked).await
                }

                async fn list_event_ids(&self) -> StoreResult<Vec<String>> {
                    $crate::event::ids(&self.db).await
                }

                async fn load_inventory(&self, event_id: &str) -> StoreResult<Option<Inventory>> {
                    $crate::inventory::load(&self.db, event_id).await
                }

                async fn get_order(
                    &self,
                    order_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::checkout::OrderView>> {
                    $crate::checkout::order(&self.db, order_id).await
                }

                async fn list_orders(
                    &self,
                    account_id: &str,
                    before_order_id: Option<&str>,
                    limit: u32,
                ) -> StoreResult<Vec<::boxoffice_store::checkout::OrderView>> {
                    $crate::checkout::orders_of(&self.db, account_id, before_order_id, limit).await
                }

                async fn get_ticket(
                    &self,
                    ticket_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::checkout::TicketView>> {
                    $crate::checkout::ticket(&self.db, ticket_id).await
                }

                async fn order_head(
                    &self,
                    order_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::checkout::OrderView>> {
                    let mut pooled = self.db.read().await?;
                    let order_ids = [order_id];
                    Ok(
                        $crate::checkout::load_order_heads(&mut pooled.conn(), &order_ids)
                            .await?
                            .pop(),
                    )
                }

                async fn get_exchange(
                    &self,
                    exchange_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::exchange::ExchangeView>> {
                    $crate::exchange::get(&self.db, exchange_id).await
                }

                async fn seat_map(
                    &self,
                    event_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::seatmap::MapSnapshot>> {
                    seatmap::snapshot(&self.db, event_id).await
                }

                async fn seat_map_changes(
                    &self,
                    event_id: &str,
                    after: u64,
                    limit: u32,
                ) -> StoreResult<Vec<::boxoffice_store::seatmap::StoredBatch>> {
                    seatmap::changes_after(&self.db, event_id, after, limit).await
                }
            }

            #[async_trait]
            impl WorkerStore for $store {
                async fn expire_due_holds(
                    &self,
                    limit: u32,
                    held_grace_ms: u32,
                ) -> StoreResult<SweepReport> {
                    let due = $crate::expiry::due_holds(&self.db, limit, held_grace_ms).await?;
                    self.expire_holds(&due).await
                }

                async fn expire_holds(&self, hold_ids: &[String]) -> StoreResult<SweepReport> {
                    retrying(|| $crate::expiry::expire(&self.db, hold_ids)).await
                }

                async fn purge_idempotency(&self, older_than_s: u32) -> StoreResult<u64> {
                    retrying(|| $crate::expiry::purge_idempotency(&self.db, older_than_s)).await
                }

                async fn settle_payment(
                    &self,
                    operation_id: &str,
                    verdict: &::boxoffice_store::checkout::ProviderVerdict,
                    webhook: Option<(&str, &str)>,
                    answer: Option<(&IdempotencyScope, &::boxoffice_store::checkout::RenderOrder)>,
                ) -> StoreResult<Option<::boxoffice_store::checkout::Settled>> {
                    retrying(|| {
                        $crate::settle::settle(&self.db, operation_id, verdict, webhook, answer)
                    })
                    .await
                }

                async fn payment_operation(
                    &self,
                    operation_id: &str,
                ) -> StoreResult<Option<::boxoffice_store::checkout::PaymentOperation>> {
                    $crate::checkout::operation(&self.db, operation_id).await
                }

                async fn payment_operations(
                    &self,
                    operation_ids: &[String],
                ) -> StoreResult<Vec<::boxoffice_store::checkout::PaymentOperation>> {
                    $crate::checkout::operations(&self.db, operation_ids).await
                }

                async fn capture_confirmed(
                    &self,
                    captures: &[(String, String)],
                ) -> StoreResult<Vec<String>> {
                    retrying(|| $crate::settle::capture_confirmed_of(&self.db, captures)).await
                }

                async fn payment_operation_by_ref(
                    &self,
                    provider: &str,
                    provider_ref: &str,
                ) -> StoreResult<Option<::boxoffice_store::checkout::PaymentOperation>> {
                    $crate::checkout::operation_by_ref(&self.db, provider, provider_ref).await
                }

                async fn due_payment_operations(
                    &self,
                    limit: u32,
                ) -> StoreResult<Vec<::boxoffice_store::checkout::PaymentOperation>> {
                    $crate::checkout::due_operations(&self.db, limit).await
                }

                async fn postpone_payment_operation(
                    &self,
                    operation_id: &str,
                    delay_s: f64,
                    error: &str,
                ) -> StoreResult<()> {
                    $crate::checkout::postpone_operation(&self.db, operation_id, delay_s, error)
                        .await
                }

                async fn issue_tickets(
                    &self,
                    order_id: &str,
                    sign: &::boxoffice_store::checkout::SignTicket,
                ) -> StoreResult<u32> {
                    let order_ids = [order_id.to_owned()];
                    retrying(|| $crate::checkout::issue_tickets(&self.db, &order_ids, sign)).await
                }

                async fn issue_tickets_of(
                    &self,
                    order_ids: &[String],
                    sign: &::boxoffice_store::checkout::SignTicket,
                ) -> StoreResult<u32> {
                    retrying(|| $crate::checkout::issue_tickets(&self.db, order_ids, sign)).await
                }

                async fn claim_outbox(
                    &self,
                    limit: u32,
                    lease_s: f64,
                ) -> StoreResult<Vec<::boxoffice_store::checkout::OutboxMessage>> {
                    $crate::outbox::claim(&self.db, limit, lease_s).await
                }

                async fn finish_outbox(&self, ids: &[i64]) -> StoreResult<()> {
                    $crate::outbox::finish(&self.db, ids).await
                }

                async fn retry_outbox(
                    &self,
                    id: i64,
                    delay_s: f64,
                    error: &str,
                ) -> StoreResult<()> {
                    $crate::outbox::retry(&self.db, id, delay_s, error).await
                }

                async fn outbox_lag_s(&self) -> StoreResult<f64> {
                    $crate::outbox::lag_s(&self.db).await
                }

                async fn prune_seat_map_changes(&self, keep: u64) -> StoreResult<u64> {
                    seatmap::prune(&self.db, keep).await
                }
            }

            #[async_trait]
            impl EngineStore for $store {
                async fn engine_changes(
                    &self,
                    event_id: &str,
                    after: u64,
                    limit: u32,
                ) -> StoreResult<Vec<::boxoffice_store::seatmap::StoredBatch>> {
                    ::boxoffice_store::ReadStore::seat_map_changes(self, event_id, after, limit)
                        .await
                }

                async fn engine_load(
                    &self,
                    event: &EventRecord,
                    endpoint: &str,
                ) -> StoreResult<(EngineSnapshot, OffsetDateTime)> {
                    $crate::engine::load(&self.db, event, endpoint).await
                }

                async fn engine_rows(
                    &self,
                    event_id: &str,
                    seat_ids: &[String],
                    tier_ids: &[String],
                    hold_ids: &[String],
                ) -> StoreResult<EngineRows> {
                    $crate::engine::rows(&self.db, event_id, seat_ids, tier_ids, hold_ids).await
                }

                async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
                    let committed = $crate::group::apply(&self.db, group).await?;
                    self.group_committed(group);
                    Ok(committed)
                }
            }
        };
    };
}
