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

pub mod allocation;
pub mod cancellation;
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
pub mod holder;
pub mod idempotency;
pub mod inventory;
pub mod lease;
pub mod mail;
pub mod outbox;
pub mod phase;
pub mod pricing;
pub mod refund;
pub mod report;
pub mod seatmap;
pub mod settle;
pub mod transfer;
pub mod venue;
pub mod waitlist;
pub mod webhook;

#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use boxoffice_domain::OffsetDateTime;
}

/// `impl $trait for $store` where each method is a call of the statement function named
/// beside it, with the store's `db` before the method's arguments (`retrying`: the call is
/// made again while the store reports a serialization conflict), followed by the methods
/// written out.
#[doc(hidden)]
#[macro_export]
macro_rules! __forward {
    ($store:ty, $trait:path {
        $( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty
            = $module:ident :: $func:ident $(, $retrying:ident)?; )*
    } $($written:tt)*) => {
        #[$crate::__private::async_trait]
        impl $trait for $store {
            $(
                async fn $name(&self, $($arg: $ty),*) -> ::boxoffice_store::StoreResult<$ret> {
                    $crate::__call!(
                        $crate::$module::$func(&self.db $(, $arg)*) $(, $retrying)?
                    )
                }
            )*
            $($written)*
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __call {
    ($call:expr) => {
        $call.await
    };
    ($call:expr, retrying) => {
        ::boxoffice_store::retrying(|| $call).await
    };
}

/// Implements every store trait for a backend's store type with a `db: Db` field: one table
/// for both backends, each method beside the statement function that is its body, so no
/// trait method is written twice. The type provides what only a backend knows, as inherent
/// methods: `run_migrations` (its dialect's migrations), `event_created` (after an event is
/// created: PostgreSQL refreshes its planner statistics), `group_committed` (after each
/// committed group: the same), and the legs of an exchange across shards (`mark_out`,
/// `in_fate`, `finish_out`, `open_out`: PostgreSQL's; SQLite has no shards).
#[macro_export]
macro_rules! impl_store {
    ($store:ty, $backend:literal) => {
        #[allow(unused_imports)]
        const _: () = {
            use ::boxoffice_domain::OffsetDateTime;
            use ::boxoffice_domain::engine::{EngineRows, EngineSnapshot};
            use ::boxoffice_domain::event::EventSpec;
            use ::boxoffice_domain::idempotency::{IdempotencyScope, Idempotent, StoredResponse};
            use ::boxoffice_domain::inventory::Inventory;
            use ::boxoffice_store::checkout::{
                OrderView, OutboxMessage, PaymentOperation, ProviderVerdict, RenderOrder,
                Settled, SignTicket, TicketView,
            };
            use ::boxoffice_store::engine::{EngineStore, GroupCommitted, GroupWrite};
            use ::boxoffice_store::exchange::{
                ExchangeOut, ExchangeRefused, ExchangeStatus, ExchangeView, InFate,
            };
            use ::boxoffice_store::lease::{Fence, Lease, NodeRecord, Taken};
            use ::boxoffice_store::seatmap::{MapSnapshot, StoredBatch};
            use ::boxoffice_store::transfer::{
                OfferRefused, Offered, TransferOffer, TransferRole, TransferStatus, TransferView,
            };
            use ::boxoffice_store::webhook::{
                Attempt, DueDelivery, EndpointCreated, NewEndpoint, WebhookDelivery,
                WebhookEndpoint, WebhookEvent,
            };
            use ::boxoffice_store::{
                EventCounts, EventRecord, HoldView, ReadStore, RenderEvent, StoreResult,
                SweepReport, retrying,
            };

            $crate::__forward!($store, ::boxoffice_store::Store {
                ping() -> () = outbox::ping;
                now() -> OffsetDateTime = outbox::now;
                replace_answer(scope: &IdempotencyScope, response: &StoredResponse) -> bool
                    = idempotency::replace, retrying;
                check_in(ticket_id: &str) -> Option<(bool, String)> = checkout::check_in;
            }
                fn backend(&self) -> &'static str {
                    $backend
                }

                async fn migrate(&self) -> StoreResult<()> {
                    self.run_migrations().await
                }

                async fn create_event(
                    &self,
                    scope: &IdempotencyScope,
                    request_digest: &str,
                    event_id: &str,
                    spec: &EventSpec,
                    render: &RenderEvent,
                ) -> StoreResult<Idempotent> {
                    let db = &self.db;
                    let create = || {
                        $crate::event::create(db, scope, request_digest, event_id, spec, render)
                    };
                    let created = retrying(create).await?;
                    self.event_created(spec, &created).await;
                    Ok(created)
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
            );

            $crate::__forward!($store, ReadStore {
                get_event(event_id: &str) -> Option<EventRecord> = event::load;
                list_events(after_event_id: Option<&str>, limit: u32) -> Vec<EventRecord>
                    = event::list;
                get_hold(hold_id: &str) -> Option<HoldView> = hold::get;
                stored_answers(asked: &[(IdempotencyScope, String)]) -> Vec<Option<Idempotent>>
                    = idempotency::stored_answers;
                list_event_ids() -> Vec<String> = event::ids;
                load_inventory(event_id: &str) -> Option<Inventory> = inventory::load;
                get_order(order_id: &str) -> Option<OrderView> = checkout::order;
                order_head(order_id: &str) -> Option<OrderView> = checkout::order_head;
                list_orders(account_id: &str, before_order_id: Option<&str>, limit: u32)
                    -> Vec<OrderView> = checkout::orders_of;
                get_ticket(ticket_id: &str) -> Option<TicketView> = checkout::ticket;
                get_exchange(exchange_id: &str) -> Option<ExchangeView> = exchange::get;
                seat_map(event_id: &str) -> Option<MapSnapshot> = seatmap::snapshot;
                seat_map_changes(event_id: &str, after: u64, limit: u32) -> Vec<StoredBatch>
                    = seatmap::changes_after;
            }
                async fn event_counts(&self, event: &EventRecord) -> StoreResult<EventCounts> {
                    let now = ::boxoffice_store::Store::now(self).await?;
                    $crate::event::counts(&self.db, event, now).await
                }
            );

            $crate::__forward!($store, ::boxoffice_store::WorkerStore {
                expire_holds(hold_ids: &[String]) -> SweepReport = expiry::expire, retrying;
                purge_idempotency(older_than_s: u32) -> u64
                    = expiry::purge_idempotency, retrying;
                settle_payment(
                    operation_id: &str,
                    verdict: &ProviderVerdict,
                    webhook: Option<(&str, &str)>,
                    answer: Option<(&IdempotencyScope, &RenderOrder)>
                ) -> Option<Settled> = settle::settle, retrying;
                payment_operation(operation_id: &str) -> Option<PaymentOperation>
                    = checkout::operation;
                payment_operations(operation_ids: &[String]) -> Vec<PaymentOperation>
                    = checkout::operations;
                capture_confirmed(captures: &[(String, String)]) -> Vec<String>
                    = settle::capture_confirmed_of, retrying;
                payment_operation_by_ref(provider: &str, provider_ref: &str)
                    -> Option<PaymentOperation> = checkout::operation_by_ref;
                due_payment_operations(limit: u32) -> Vec<PaymentOperation>
                    = checkout::due_operations;
                postpone_payment_operation(operation_id: &str, delay_s: f64, error: &str) -> ()
                    = checkout::postpone_operation;
                issue_tickets_of(order_ids: &[String], sign: &SignTicket) -> u32
                    = checkout::issue_tickets, retrying;
                claim_outbox(limit: u32, lease_s: f64) -> Vec<OutboxMessage> = outbox::claim;
                finish_outbox(ids: &[i64]) -> () = outbox::finish;
                retry_outbox(id: i64, delay_s: f64, error: &str) -> () = outbox::retry;
                outbox_lag_s() -> f64 = outbox::lag_s;
                prune_seat_map_changes(keep: u64) -> u64 = seatmap::prune;
            }
                async fn expire_due_holds(
                    &self,
                    limit: u32,
                    held_grace_ms: u32,
                ) -> StoreResult<SweepReport> {
                    let due = $crate::expiry::due_holds(&self.db, limit, held_grace_ms).await?;
                    ::boxoffice_store::WorkerStore::expire_holds(self, &due).await
                }

                async fn issue_tickets(&self, order_id: &str, sign: &SignTicket) -> StoreResult<u32> {
                    let order_ids = [order_id.to_owned()];
                    retrying(|| $crate::checkout::issue_tickets(&self.db, &order_ids, sign)).await
                }
            );

            $crate::__forward!($store, EngineStore {
                engine_load(event: &EventRecord, endpoint: &str)
                    -> (EngineSnapshot, OffsetDateTime) = engine::load;
                engine_rows(
                    event_id: &str,
                    seat_ids: &[String],
                    tier_ids: &[String],
                    hold_ids: &[String]
                ) -> EngineRows = engine::rows;
                engine_changes(event_id: &str, after: u64, limit: u32) -> Vec<StoredBatch>
                    = seatmap::changes_after;
            }
                async fn apply_group(&self, group: &GroupWrite<'_>) -> StoreResult<GroupCommitted> {
                    let committed = $crate::group::apply(&self.db, group).await?;
                    self.group_committed(group);
                    Ok(committed)
                }
            );

            $crate::__forward!($store, ::boxoffice_store::holder::HolderStore {
                hold_holders(event_id: &str, hold_id: &str)
                    -> Vec<::boxoffice_store::holder::HoldHolder> = holder::hold_holders;
                set_hold_holders(
                    event_id: &str,
                    hold_id: &str,
                    account_id: &str,
                    holders: &[::boxoffice_store::holder::HoldHolder]
                ) -> ::boxoffice_store::holder::HoldHoldersSet = holder::set_hold_holders;
                set_ticket_holder(
                    event_id: &str,
                    ticket_id: &str,
                    account_id: &str,
                    details: &::boxoffice_domain::holder::HolderDetails,
                    change_cutoff_s: u32
                ) -> ::boxoffice_store::holder::TicketHolderSet = holder::set_ticket_holder;
            });

            $crate::__forward!($store, ::boxoffice_store::pricing::PricingStore {
                sales_split(event_id: &str) -> ::boxoffice_store::pricing::SalesSplit
                    = pricing::sales_split;
                hold_price(event_id: &str, hold_id: &str)
                    -> Option<::boxoffice_domain::pricing::OrderPrice> = pricing::hold_price;
                create_promo_code(
                    code: &::boxoffice_store::pricing::PromoCode,
                    scope: &::boxoffice_domain::idempotency::IdempotencyScope,
                    request_digest: &str,
                    response: &::boxoffice_domain::idempotency::StoredResponse
                ) -> Option<::boxoffice_domain::idempotency::Idempotent>
                    = pricing::create_promo_code;
                promo_codes(event_id: &str) -> Vec<::boxoffice_store::pricing::PromoCode>
                    = pricing::promo_codes;
                apply_promo_code(
                    event: &EventRecord,
                    hold_id: &str,
                    account_id: &str,
                    code: &str
                ) -> ::boxoffice_store::pricing::PromoApplied = pricing::apply_promo_code;
            });

            $crate::__forward!($store, ::boxoffice_store::door::DoorStore {
                door_lists(event_id: &str) -> ::boxoffice_store::door::DoorLists = door::lists;
            });

            $crate::__forward!($store, ::boxoffice_store::allocation::AllocationStore {
                add_allocations(
                    event_id: &str,
                    allocations: &[::boxoffice_domain::allocation::Allocation],
                    answer: Option<&::boxoffice_store::allocation::Answer>
                ) -> Vec<String> = allocation::add;
                allocations(event_id: &str)
                    -> Vec<::boxoffice_domain::allocation::Allocation> = allocation::list;
                kept_holds(event_id: &str)
                    -> Vec<::boxoffice_store::allocation::KeptRow> = allocation::kept;
                record_comp(
                    comp: &::boxoffice_store::allocation::CompRecord,
                    answer: Option<&::boxoffice_store::allocation::Answer>
                ) -> () = allocation::record_comp;
                comps(event_id: &str)
                    -> Vec<::boxoffice_store::allocation::CompRecord> = allocation::comps;
                record_box_office_sale(
                    sale: &::boxoffice_store::allocation::BoxOfficeSale,
                    answer: Option<&::boxoffice_store::allocation::Answer>
                ) -> () = allocation::record_sale;
                box_office_sale(event_id: &str, order_id: &str)
                    -> Option<::boxoffice_store::allocation::BoxOfficeSale> = allocation::sale;
                unrecorded_comp_orders(event_id: &str) -> Vec<String> = allocation::unrecorded_comps;
                record_answer(event_id: &str, answer: &::boxoffice_store::allocation::Answer)
                    -> () = allocation::record_answer;
            });

            $crate::__forward!($store, ::boxoffice_store::lease::LeaseStore {
                register_node(node_id: &str, advertise_url: &str) -> () = lease::register_node;
                nodes() -> Vec<NodeRecord> = lease::nodes;
                take_lease(event_id: &str, node_id: &str, ttl_ms: u64) -> Taken = lease::take;
                renew_leases(node_id: &str, held: &[(String, u64)], ttl_ms: u64) -> Vec<String>
                    = lease::renew;
                release_lease(event_id: &str, fence: &Fence) -> bool = lease::release;
                lease(event_id: &str) -> Option<Lease> = lease::lease;
            });

            $crate::__forward!($store, ::boxoffice_store::report::ReportStore {
                report_rows(event: &EventRecord) -> ::boxoffice_store::report::ReportRows
                    = report::report_rows;
                timeline_rows(event: &EventRecord, bucket_s: u32)
                    -> ::boxoffice_store::report::TimelineRows = report::timeline_rows;
            });

            $crate::__forward!($store, ::boxoffice_store::phase::PhaseStore {
                insert_access_codes(batch: &::boxoffice_store::phase::CodeBatch)
                    -> ::boxoffice_store::phase::CodesInserted = phase::insert;
                access_codes(event_id: &str, phase_id: &str, limit: u32)
                    -> Vec<::boxoffice_store::phase::AccessCodeRow> = phase::list;
                access_code(event_id: &str, phase_id: &str, code: &str)
                    -> Option<::boxoffice_store::phase::AccessCodeRow> = phase::get;
                access_redeemed(event_id: &str, phase_id: &str, account_id: &str)
                    -> bool = phase::redeemed;
            });

            $crate::__forward!($store, ::boxoffice_store::venue::VenueStore {
                create_venue_chart(new: &::boxoffice_store::venue::NewChart)
                    -> ::boxoffice_store::venue::ChartCreated = venue::create;
                venue_chart(chart_id: &str) -> Option<(
                    ::boxoffice_store::venue::ChartSummary,
                    ::boxoffice_domain::venue::VenueChart
                )> = venue::get;
                list_venue_charts(after_chart_id: Option<&str>, limit: u32)
                    -> Vec<::boxoffice_store::venue::ChartSummary> = venue::list;
            });

            $crate::__forward!($store, ::boxoffice_store::waitlist::WaitlistStore {
                get_waitlist_entry(waitlist_id: &str)
                    -> Option<::boxoffice_store::waitlist::WaitlistView> = waitlist::entry;
            });

            $crate::__forward!($store, ::boxoffice_store::webhook::WebhookStore {
                create_webhook_endpoint(new: &NewEndpoint) -> EndpointCreated
                    = webhook::create_endpoint;
                get_webhook_endpoint(endpoint_id: &str) -> Option<WebhookEndpoint>
                    = webhook::endpoint;
                list_webhook_endpoints() -> Vec<WebhookEndpoint> = webhook::endpoints;
                set_webhook_endpoint_enabled(endpoint_id: &str, enabled: bool)
                    -> Option<WebhookEndpoint> = webhook::set_enabled;
                delete_webhook_endpoint(endpoint_id: &str) -> bool = webhook::delete_endpoint;
                fan_out_webhooks(events: &[WebhookEvent]) -> u64 = webhook::fan_out;
                claim_webhook_deliveries(limit: u32, lease_s: f64) -> Vec<DueDelivery>
                    = webhook::claim;
                record_webhook_attempt(delivery_id: i64, attempt: &Attempt) -> ()
                    = webhook::record_attempt;
                list_webhook_deliveries(endpoint_id: &str, before: Option<i64>, limit: u32)
                    -> Vec<WebhookDelivery> = webhook::deliveries;
                replay_webhook_delivery(endpoint_id: &str, delivery_id: i64)
                    -> Option<WebhookDelivery> = webhook::replay;
            });

            $crate::__forward!($store, ::boxoffice_store::mail::MailStore {
                get_account(account_id: &str) -> Option<::boxoffice_store::mail::AccountRecord>
                    = mail::account;
                update_account(account_id: &str, update: &::boxoffice_store::mail::AccountUpdate)
                    -> ::boxoffice_store::mail::AccountRecord = mail::update_account;
                record_token_email(account_id: &str, email: &str) -> bool
                    = mail::record_token_email;
                fan_out_mail(mails: &[::boxoffice_store::mail::NewMail]) -> u64 = mail::fan_out;
                cancelled_ticket_accounts(event_id: &str, limit: u32) -> Vec<String>
                    = mail::cancelled_ticket_accounts;
                expire_mail_leases() -> u64 = mail::expire_leases;
                claim_mail(limit: u32, lease_s: f64) -> Vec<::boxoffice_store::mail::ClaimedMail>
                    = mail::claim;
                record_mail(mail_id: i64, outcome: &::boxoffice_store::mail::MailOutcome) -> bool
                    = mail::record;
                get_mail(mail_id: i64) -> Option<::boxoffice_store::mail::MailMessage> = mail::get;
                list_mail(
                    status: Option<::boxoffice_store::mail::MailStatus>,
                    before: Option<i64>,
                    limit: u32
                ) -> Vec<::boxoffice_store::mail::MailMessage> = mail::list;
                resend_mail(mail_id: i64) -> Option<::boxoffice_store::mail::Resent>
                    = mail::resend;
            });

            $crate::__forward!($store, ::boxoffice_store::refund::RefundStore {
                get_refund(event_id: &str, refund_id: &str)
                    -> Option<::boxoffice_store::refund::RefundView> = refund::get;
                refund_by_key(event_id: &str, account_id: &str, key: &str)
                    -> Option<(::boxoffice_store::refund::RefundView, String)> = refund::by_key;
                refund_money(write: &::boxoffice_store::refund::RefundWrite)
                    -> Result<::boxoffice_store::refund::RefundView, String> = refund::money;
                record_refund_due(write: &::boxoffice_store::refund::RefundWrite)
                    -> Result<::boxoffice_store::refund::RefundView, String> = refund::due;
                settle_refund(event_id: &str, refund_id: &str,
                              settled: &::boxoffice_store::refund::RefundSettled)
                    -> Option<::boxoffice_store::refund::RefundView> = refund::settle;
                event_refund_policy(event_id: &str)
                    -> Option<Option<::boxoffice_domain::event::RefundPolicy>> = refund::policy;
                set_refund_policy(event_id: &str,
                                  policy: Option<::boxoffice_domain::event::RefundPolicy>)
                    -> bool = refund::set_policy;
            });

            $crate::__forward!($store, ::boxoffice_store::cancellation::CancellationStore {
                get_cancellation(event_id: &str)
                    -> Option<(::boxoffice_store::cancellation::CancellationView, String, String)>
                    = cancellation::get;
                event_cancelled(event_id: &str) -> bool = cancellation::cancelled;
                cancellation_step(event_id: &str, limit: u32)
                    -> ::boxoffice_store::cancellation::CancellationStep
                    = cancellation::step, retrying;
                cancellations_open() -> Vec<String> = cancellation::open;
            });

            $crate::__forward!($store, ::boxoffice_store::transfer::TransferStore {
                offer_transfer(offer: &TransferOffer, closes_at: OffsetDateTime)
                    -> Result<Offered, OfferRefused> = transfer::offer;
                get_transfer(transfer_id: &str) -> Option<TransferView> = transfer::get;
                list_transfers(account_id: &str, role: TransferRole, limit: u32)
                    -> Vec<TransferView> = transfer::list;
                end_transfer(transfer_id: &str, account_id: &str, to: TransferStatus)
                    -> Option<TransferView> = transfer::end;
            });
        };
    };
}
