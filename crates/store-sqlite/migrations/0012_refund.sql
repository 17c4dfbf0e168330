-- Refunds (issue 37): tickets of a confirmed order given back for money. A refund is written
-- PENDING by the event's writer in the group that voids its tickets and frees their seats;
-- the relay asks the provider and settles it SUCCEEDED or FAILED (money still owed).

-- The event's refund policy (NULL cutoff: fans cannot refund on their own).
ALTER TABLE event ADD COLUMN refund_cutoff_s INTEGER CHECK (refund_cutoff_s >= 0);
ALTER TABLE event ADD COLUMN refund_keep_fee_minor INTEGER NOT NULL DEFAULT 0 CHECK (refund_keep_fee_minor >= 0);

-- The refund that voided a ticket.
ALTER TABLE ticket ADD COLUMN refund_id TEXT;

CREATE TABLE refund (
    event_id         TEXT NOT NULL,
    refund_id        TEXT NOT NULL,
    order_id         TEXT NOT NULL,
    -- Who asked (the order's owner for a fan's refund), and the request's key and digest.
    account_id       TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    -- The order's payment operation the money goes back through.
    operation_id     TEXT NOT NULL,
    -- The tickets voided (JSON array of ticket ids, all of order_id).
    ticket_ids       TEXT NOT NULL CHECK (json_valid(ticket_ids)),
    amount_minor     INTEGER NOT NULL CHECK (amount_minor >= 0),
    currency         TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    reason           TEXT NOT NULL,
    provider_ref     TEXT,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    settled_at       INTEGER,
    PRIMARY KEY (event_id, refund_id)
) STRICT;
CREATE UNIQUE INDEX refund_by_id ON refund (refund_id);
CREATE UNIQUE INDEX refund_by_key ON refund (account_id, idempotency_key);
CREATE INDEX refund_by_order ON refund (order_id);
