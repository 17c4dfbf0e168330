-- Refunds (issue 37): tickets of a confirmed order given back for money. A refund is written
-- PENDING by the event's writer in the group that voids its tickets and frees their seats;
-- the relay asks the provider and settles it SUCCEEDED or FAILED (money still owed).

-- The event's refund policy (NULL cutoff: fans cannot refund on their own).
ALTER TABLE event ADD COLUMN refund_cutoff_s integer CHECK (refund_cutoff_s >= 0);
ALTER TABLE event ADD COLUMN refund_keep_fee_minor bigint NOT NULL DEFAULT 0 CHECK (refund_keep_fee_minor >= 0);

-- The refund that voided a ticket.
ALTER TABLE ticket ADD COLUMN refund_id text;

CREATE TABLE refund (
    event_id         text NOT NULL,
    refund_id        text NOT NULL,
    order_id         text NOT NULL,
    -- Who asked (the order's owner for a fan's refund), and the request's key and digest.
    account_id       text NOT NULL,
    idempotency_key  text NOT NULL,
    request_digest   text NOT NULL,
    -- The order's payment operation the money goes back through.
    operation_id     text NOT NULL,
    -- The tickets voided (JSON array of ticket ids, all of order_id).
    ticket_ids       jsonb NOT NULL,
    amount_minor     bigint NOT NULL CHECK (amount_minor >= 0),
    currency         text NOT NULL,
    status           text NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED')),
    reason           text NOT NULL,
    provider_ref     text,
    last_error       text,
    created_at       timestamptz NOT NULL,
    settled_at       timestamptz,
    PRIMARY KEY (event_id, refund_id)
);
CREATE UNIQUE INDEX refund_by_id ON refund (refund_id);
CREATE UNIQUE INDEX refund_by_key ON refund (account_id, idempotency_key);
CREATE INDEX refund_by_order ON refund (order_id);
