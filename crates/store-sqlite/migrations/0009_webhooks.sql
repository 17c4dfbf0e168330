-- Outgoing webhooks for integrators (issue 19): endpoints organisers register, and one
-- delivery per (endpoint, outbox message). The relay fans a delivered message out into
-- deliveries; the delivery worker sends them, outside any transaction, and records each
-- attempt here. Times are unix milliseconds of the store's clock.

CREATE TABLE webhook_endpoint (
    endpoint_id      TEXT PRIMARY KEY,
    url              TEXT NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- The event types it receives: a JSON array (order.confirmed, tickets.issued, ...).
    event_types      TEXT NOT NULL CHECK (json_valid(event_types)),
    -- Signs every delivery (HMAC-SHA256); shown once, in the answer that created it.
    secret           TEXT NOT NULL,
    enabled          INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    -- The creating admin and request: a replay of the key answers the same endpoint.
    created_by       TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    created_at       INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX webhook_endpoint_by_key ON webhook_endpoint (created_by, idempotency_key);

CREATE TABLE webhook_delivery (
    delivery_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    endpoint_id       TEXT NOT NULL REFERENCES webhook_endpoint (endpoint_id),
    -- The outbox message's id: the event id integrators dedupe on.
    event_id          INTEGER NOT NULL,
    event_type        TEXT NOT NULL,
    -- The outbox message's JSON payload, sent as the event's data.
    payload           TEXT NOT NULL,
    event_created_at  INTEGER NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    n_attempts        INTEGER NOT NULL DEFAULT 0 CHECK (n_attempts >= 0),
    -- When it is due; a claim moves it out by the worker's lease.
    next_attempt_at   INTEGER NOT NULL,
    last_status_code  INTEGER,
    last_error        TEXT,
    delivered_at      INTEGER,
    created_at        INTEGER NOT NULL
) STRICT;
-- Fan-out is exactly once per endpoint and event, however often the relay delivers the
-- message again.
CREATE UNIQUE INDEX webhook_delivery_once ON webhook_delivery (endpoint_id, event_id);
CREATE INDEX webhook_delivery_due ON webhook_delivery (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX webhook_delivery_log ON webhook_delivery (endpoint_id, delivery_id DESC);
