//! The HELP text of every metric boxoffice exports (Prometheus' exposition format wants one
//! per metric; `promtool check metrics` flags a metric without). A test checks that every
//! metric name used in the workspace's sources is here.

/// `(kind, name, help)` of every metric.
pub const METRICS: &[(&str, &str, &str)] = &[
    (
        "counter",
        "boxoffice_allocation_items_kept_total",
        "Seats and tier units allocations added by an operator keep back",
    ),
    (
        "counter",
        "boxoffice_allocation_items_released_total",
        "Kept seats and tier units an operator put back on sale",
    ),
    (
        "counter",
        "boxoffice_box_office_sales_total",
        "Sales made at the box office, by payment (cash, card_present)",
    ),
    (
        "counter",
        "boxoffice_capture_compensations_total",
        "Confirmed orders given back because their capture failed for good",
    ),
    (
        "counter",
        "boxoffice_comps_issued_total",
        "Comp tickets issued from allocations",
    ),
    (
        "histogram",
        "boxoffice_checkout_stage_seconds",
        "Time of each stage of a checkout request, by stage",
    ),
    (
        "counter",
        "boxoffice_cluster_fenced_answers_total",
        "Requests answered 503 because this node no longer holds the event's lease",
    ),
    (
        "counter",
        "boxoffice_cluster_fenced_groups_total",
        "Writer groups the store refused because their lease fence was stale",
    ),
    (
        "counter",
        "boxoffice_cluster_forward_failures_total",
        "Requests this node could not forward to the event's owner",
    ),
    (
        "histogram",
        "boxoffice_cluster_forward_seconds",
        "Time to forward a request to the event's owner and get its answer",
    ),
    (
        "counter",
        "boxoffice_cluster_forwarded_total",
        "Requests forwarded to the node that owns the event",
    ),
    (
        "gauge",
        "boxoffice_cluster_leases_held",
        "Event leases this node holds",
    ),
    (
        "counter",
        "boxoffice_cluster_leases_lost_total",
        "Event leases this node lost (taken over or fenced)",
    ),
    (
        "counter",
        "boxoffice_cluster_takeovers_total",
        "Event leases this node took over from another owner (epoch above 1)",
    ),
    (
        "counter",
        "boxoffice_coalesced_timeouts_total",
        "Requests answered 503 because a load they waited for (an event, a lease) ran past its deadline, by what",
    ),
    (
        "counter",
        "boxoffice_coalesced_waits_total",
        "Requests that waited for a load another request started instead of their own store call, by what",
    ),
    (
        "counter",
        "boxoffice_connections_at_limit_total",
        "Connections accepted while the listener was at its connection limit",
    ),
    (
        "counter",
        "boxoffice_exchange_settler_errors_total",
        "Rounds of the exchange settler that failed",
    ),
    (
        "counter",
        "boxoffice_exchanges_refused_total",
        "Exchanges refused (closed, seats unavailable, conflict, purchase limit)",
    ),
    (
        "counter",
        "boxoffice_exchanges_settled_total",
        "Exchanges across shards the settler finished, by how they ended",
    ),
    (
        "counter",
        "boxoffice_exchanges_total",
        "Exchanges committed, by status",
    ),
    (
        "histogram",
        "boxoffice_hold_batch_requests",
        "Hold requests decided per writer group",
    ),
    (
        "histogram",
        "boxoffice_hold_batch_seconds",
        "Time of a writer group's commit",
    ),
    (
        "counter",
        "boxoffice_holds_rejected_early_total",
        "Hold requests refused from the seat map before reaching the writer",
    ),
    (
        "histogram",
        "boxoffice_http_request_seconds",
        "HTTP request latency, by route and status class",
    ),
    (
        "counter",
        "boxoffice_http_requests_total",
        "HTTP requests answered, by route and status",
    ),
    (
        "counter",
        "boxoffice_outbox_delivered_total",
        "Outbox messages delivered, by topic",
    ),
    (
        "gauge",
        "boxoffice_outbox_lag_seconds",
        "Age of the oldest undelivered outbox message",
    ),
    (
        "counter",
        "boxoffice_outbox_retried_total",
        "Outbox deliveries that failed and were put back for later",
    ),
    (
        "counter",
        "boxoffice_promo_codes_applied_total",
        "Promo codes applied to a hold at its checkout (each use counted once)",
    ),
    (
        "counter",
        "boxoffice_promo_codes_refused_total",
        "Checkouts refused 409 PROMO_CODE_INVALID (unknown, expired or used-up code)",
    ),
    (
        "counter",
        "boxoffice_reconciler_settled_total",
        "Payment operations the reconciler settled",
    ),
    (
        "counter",
        "boxoffice_limit_refused_total",
        "Requests answered 429 by an abuse limit, by limit (holds-per-account, ...)",
    ),
    (
        "counter",
        "boxoffice_limit_buckets_dropped_total",
        "Abuse-limit buckets forgotten while still refilling because a shard was full",
    ),
    (
        "counter",
        "boxoffice_ledger_accounts_dropped_total",
        "Accounts whose recent lapsed holds were forgotten because the hold ledger was full",
    ),
    (
        "counter",
        "boxoffice_refused_busy_total",
        "Requests answered 429 because the store had no connection free in time",
    ),
    (
        "counter",
        "boxoffice_seatmap_batches_applied_total",
        "Seat-map change batches applied to the in-memory maps",
    ),
    (
        "counter",
        "boxoffice_seatmap_reloads_total",
        "In-memory seat maps reloaded from the store",
    ),
    (
        "counter",
        "boxoffice_seatmap_renders_total",
        "Seat-map snapshots rendered",
    ),
    (
        "counter",
        "boxoffice_seatmap_stream_lagged_total",
        "Seat-map streams that fell behind and were told to reset",
    ),
    (
        "gauge",
        "boxoffice_seatmap_streams",
        "Open seat-map event streams",
    ),
    (
        "counter",
        "boxoffice_store_analyses_total",
        "Tables the store analyzed after a large change",
    ),
    (
        "counter",
        "boxoffice_store_primary_switches_total",
        "Times a pool followed its shard's primary to another host",
    ),
    (
        "counter",
        "boxoffice_sweeper_errors_total",
        "Expiry sweeps that failed",
    ),
    (
        "counter",
        "boxoffice_sweeper_holds_expired_total",
        "Holds the sweeper expired",
    ),
    (
        "counter",
        "boxoffice_sweeper_seats_freed_total",
        "Seats the sweeper put back on sale",
    ),
    (
        "counter",
        "boxoffice_tickets_issued_total",
        "Tickets issued",
    ),
    (
        "gauge",
        "boxoffice_waitroom_active_shoppers",
        "Admitted shoppers of a waiting room, by event",
    ),
    (
        "counter",
        "boxoffice_waitroom_admitted_total",
        "Fans admitted from a waiting room, by event",
    ),
    (
        "gauge",
        "boxoffice_waitroom_max_active_shoppers",
        "The cap on a waiting room's admitted shoppers, by event",
    ),
    (
        "counter",
        "boxoffice_waitroom_polls_total",
        "Waiting-room status polls, by event",
    ),
    (
        "gauge",
        "boxoffice_waitroom_release_rate_per_second",
        "A waiting room's current release rate, by event",
    ),
    (
        "counter",
        "boxoffice_waitroom_released_total",
        "Fans released from a waiting room's queue, by event",
    ),
    (
        "gauge",
        "boxoffice_waitroom_serving",
        "Waiting rooms this node serves",
    ),
    (
        "counter",
        "boxoffice_waitroom_slots_returned_total",
        "Shopper slots given back (trips ended, holds ended without a sale)",
    ),
    (
        "counter",
        "boxoffice_waitroom_slot_moves_total",
        "Shopper slots moved by what their fans did, by the state or step moved to (held, paying, refused, ended)",
    ),
    (
        "counter",
        "boxoffice_waitroom_slots_retaken_total",
        "Shopper slots taken again by admitted fans whose slot had gone back (a second try)",
    ),
    (
        "gauge",
        "boxoffice_waitroom_sold_out",
        "1 when a waiting room's event is sold out, by event",
    ),
    (
        "gauge",
        "boxoffice_waitroom_waiting",
        "Fans waiting in a waiting room's queue, by event",
    ),
    (
        "counter",
        "boxoffice_writer_catch_ups_total",
        "Times an event writer read the change feed to catch up",
    ),
    (
        "counter",
        "boxoffice_writer_checkouts_not_kept_total",
        "Checkouts a writer group decided but the store did not keep",
    ),
    (
        "counter",
        "boxoffice_writer_commands_total",
        "Commands decided by the event writers, by kind",
    ),
    (
        "counter",
        "boxoffice_writer_exchanges_refused_total",
        "Exchanges a writer group's store refused (order or tickets changed)",
    ),
    (
        "counter",
        "boxoffice_access_codes_created_total",
        "Access codes of presale lanes created, by how (generated, imported)",
    ),
    (
        "counter",
        "boxoffice_venue_charts_created_total",
        "Venue charts imported (a replay of a key not counted)",
    ),
    (
        "counter",
        "boxoffice_access_redemptions_total",
        "Access-code redemptions decided by the event writers, by decision",
    ),
    (
        "counter",
        "boxoffice_waitlist_total",
        "Waiting-list entries joined and offered seats at once, by status",
    ),
    (
        "counter",
        "boxoffice_door_synced_scans_total",
        "Scans synced from door devices, by result (first check-in, duplicate, revoked)",
    ),
    (
        "counter",
        "boxoffice_webhook_attempts_total",
        "Webhook delivery attempts, by outcome (delivered, retried, failed for good)",
    ),
    (
        "counter",
        "boxoffice_webhook_deliveries_made_total",
        "Webhook deliveries the outbox relay's fan-out made (one per endpoint and event)",
    ),
    (
        "counter",
        "boxoffice_webhook_replays_total",
        "Webhook deliveries queued again from the admin route",
    ),
    (
        "counter",
        "boxoffice_mail_messages_total",
        "Fans' mails the mail sender finished a round with, by outcome (sent, retried, failed, no_address, uncertain)",
    ),
    (
        "counter",
        "boxoffice_mail_made_total",
        "Fans' mails the outbox relay's fan-out made (one per outbox message and account)",
    ),
    (
        "counter",
        "boxoffice_mail_resends_total",
        "Fans' mails queued again from the admin route",
    ),
    (
        "counter",
        "boxoffice_transfers_total",
        "Transfer offers made, accepted, declined and withdrawn, by status",
    ),
    (
        "counter",
        "boxoffice_writer_transfers_refused_total",
        "Transfers a writer group's store refused (offer, order or tickets changed)",
    ),
    (
        "counter",
        "boxoffice_refunds_total",
        "Fans' refunds recorded (PENDING) and settled by the provider (SUCCEEDED, FAILED), by status",
    ),
    (
        "counter",
        "boxoffice_events_cancelled_total",
        "Events cancelled by an organiser (the group that stopped their sale committed)",
    ),
    (
        "counter",
        "boxoffice_cancellation_refunds_recorded_total",
        "Refunds the cancellations' job recorded for paid orders of cancelled events",
    ),
    (
        "counter",
        "boxoffice_cancellation_errors_total",
        "Steps of the cancellations' job that failed (retried on its next round)",
    ),
    (
        "counter",
        "boxoffice_writer_refunds_refused_total",
        "Refunds a writer group's store refused (order, payment or tickets changed)",
    ),
    (
        "counter",
        "boxoffice_writer_expiries_skipped_total",
        "Hold expiries a writer skipped (the hold had already ended)",
    ),
    (
        "counter",
        "boxoffice_writer_expiry_groups_total",
        "Writer groups that expired holds",
    ),
    (
        "counter",
        "boxoffice_writer_group_failures_total",
        "Writer groups whose commit failed",
    ),
    (
        "histogram",
        "boxoffice_writer_load_wait_seconds",
        "Time a writer waited for one of the node's turns to load its event (--writer-loads-max)",
    ),
    (
        "counter",
        "boxoffice_writer_loads_total",
        "Events loaded by a writer from the store",
    ),
    (
        "gauge",
        "boxoffice_writer_queue_depth",
        "Commands waiting in an event writer's queue",
    ),
    (
        "counter",
        "boxoffice_writer_unloads_total",
        "Idle event writers that handed their lease back and dropped their engine",
    ),
    (
        "gauge",
        "boxoffice_writers_running",
        "Event writers running on this node (loaded, loading or unloading)",
    ),
];

/// Describes every metric to the global recorder (its HELP line).
pub fn describe() {
    for (kind, name, help) in METRICS {
        match *kind {
            "counter" => metrics::describe_counter!(*name, *help),
            "gauge" => metrics::describe_gauge!(*name, *help),
            _ => metrics::describe_histogram!(*name, *help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::METRICS;

    /// Every `counter!`/`gauge!`/`histogram!` name in the workspace's sources has a HELP text.
    #[test]
    fn every_metric_used_is_described() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut used = std::collections::BTreeSet::new();
        let mut dirs = vec![root];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("reading the sources") {
                let path = entry.expect("a directory entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("a source file");
                    for macro_call in ["counter!(", "gauge!(", "histogram!("] {
                        for (at, _) in text.match_indices(macro_call) {
                            let rest = text[at + macro_call.len()..].trim_start();
                            if let Some(name) = rest.strip_prefix("\"boxoffice_") {
                                let end = name.find('"').expect("a closed string");
                                used.insert(format!("boxoffice_{}", &name[..end]));
                            }
                        }
                    }
                }
            }
        }
        assert!(used.len() > 40, "the scan found the metrics: {used:?}");
        let described: std::collections::BTreeSet<String> = METRICS
            .iter()
            .map(|(_, name, _)| (*name).to_owned())
            .collect();
        let missing: Vec<&String> = used.difference(&described).collect();
        assert!(missing.is_empty(), "no HELP text: {missing:?}");
    }
}
