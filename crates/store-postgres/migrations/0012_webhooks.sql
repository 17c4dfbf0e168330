-- Outgoing webhooks for integrators (issue 19): endpoints organisers register, and one
-- delivery per (endpoint, outbox message). The relay fans a delivered message out into
-- deliveries; the delivery worker sends them, outside any transaction, and records each
-- attempt here.

CREATE TABLE webhook_endpoint (
    endpoint_id      text PRIMARY KEY,
    url              text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- The event types it receives (order.confirmed, tickets.issued, ...).
    event_types      text[] NOT NULL,
    -- Signs every delivery (HMAC-SHA256); shown once, in the answer that created it.
    secret           text NOT NULL,
    enabled          boolean NOT NULL DEFAULT true,
    -- The creating admin and request: a replay of the key answers the same endpoint.
    created_by       text NOT NULL,
    idempotency_key  text NOT NULL,
    request_digest   text NOT NULL,
    created_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX webhook_endpoint_by_key ON webhook_endpoint (created_by, idempotency_key);

CREATE TABLE webhook_delivery (
    delivery_id       bigserial PRIMARY KEY,
    endpoint_id       text NOT NULL REFERENCES webhook_endpoint (endpoint_id),
    -- The outbox message's id (the global one behind shards): the event id integrators
    -- dedupe on. No foreign key: outbox rows may live on another shard.
    event_id          bigint NOT NULL,
    event_type        text NOT NULL,
    -- The outbox message's JSON payload, sent as the event's data.
    payload           text NOT NULL,
    event_created_at  timestamptz NOT NULL,
    status            text NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    n_attempts        integer NOT NULL DEFAULT 0 CHECK (n_attempts >= 0),
    -- When it is due; a claim moves it out by the worker's lease.
    next_attempt_at   timestamptz NOT NULL,
    last_status_code  integer,
    last_error        text,
    delivered_at      timestamptz,
    created_at        timestamptz NOT NULL
);
-- Fan-out is exactly once per endpoint and event, however often the relay delivers the
-- message again.
CREATE UNIQUE INDEX webhook_delivery_once ON webhook_delivery (endpoint_id, event_id);
CREATE INDEX webhook_delivery_due ON webhook_delivery (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_delivery_log ON webhook_delivery (endpoint_id, delivery_id DESC);
