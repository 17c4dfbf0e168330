-- Checkout: orders, payment operations, webhook dedupe, tickets, and delivery state for the
-- outbox relay. Every table leads its key with event_id (sharding by event needs no schema
-- change); global unique indexes serve lookups by id.

-- The order a hold became when it went to checkout. One order per hold, ever: the unique
-- index on hold_id is what makes a second authorization for one hold impossible.
CREATE TABLE orders (
    event_id        text NOT NULL,
    order_id        text NOT NULL,
    hold_id         text NOT NULL,
    account_id      text NOT NULL,
    status          text NOT NULL CHECK (status IN ('PENDING_PAYMENT', 'CONFIRMED', 'CANCELLED')),
    -- Seats and prices as held (JSON array of {seatId, priceMinor}), or a tier quantity.
    seats           jsonb NOT NULL,
    tier_id         text,
    quantity        integer NOT NULL CHECK (quantity >= 1),
    total_minor     bigint NOT NULL,
    currency        text NOT NULL,
    -- Why a cancelled order was cancelled (declined, hold lost, capture failed, ...).
    cancel_reason   text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (event_id, order_id)
);
CREATE UNIQUE INDEX orders_by_id ON orders (order_id);
CREATE UNIQUE INDEX orders_by_hold ON orders (hold_id);
CREATE INDEX orders_by_account ON orders (account_id, order_id DESC);

-- The hold remembers its order (set when it moves to PAYMENT_PENDING). In checkout its
-- expires_at is the grace deadline; the sweeper finds those that ran out.
ALTER TABLE hold ADD COLUMN order_id text;
CREATE INDEX hold_due_in_checkout ON hold (expires_at) WHERE status = 'PAYMENT_PENDING';

-- The payment of an order: one authorization, identified by operation_id, which is also the
-- idempotency key every provider call carries (capture and void derive theirs from it).
CREATE TABLE payment_operation (
    event_id         text NOT NULL,
    operation_id     text NOT NULL,
    order_id         text NOT NULL,
    provider         text NOT NULL,
    payment_method   text NOT NULL,
    status           text NOT NULL CHECK (status IN ('AUTHORIZING', 'REQUIRES_ACTION', 'AUTHORIZED', 'UNKNOWN',
                                                     'CAPTURED', 'VOIDED', 'FAILED')),
    provider_ref     text,
    next_action_url  text,
    amount_minor     bigint NOT NULL,
    currency         text NOT NULL,
    -- Provider calls made for this operation, and when the reconciler may try again.
    n_attempts       integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_error       text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (event_id, operation_id)
);
CREATE UNIQUE INDEX payment_operation_by_id ON payment_operation (operation_id);
CREATE UNIQUE INDEX payment_operation_by_order ON payment_operation (order_id);
CREATE UNIQUE INDEX payment_operation_by_ref ON payment_operation (provider, provider_ref) WHERE provider_ref IS NOT NULL;
-- The reconciler's work list: operations not settled yet.
CREATE INDEX payment_operation_open ON payment_operation (next_attempt_at)
    WHERE status IN ('AUTHORIZING', 'REQUIRES_ACTION', 'UNKNOWN', 'AUTHORIZED');

-- Provider webhook events already applied: each is applied at most once.
CREATE TABLE webhook_event (
    provider     text NOT NULL,
    event_id     text NOT NULL,
    received_at  timestamptz NOT NULL,
    PRIMARY KEY (provider, event_id)
);

-- Tickets, issued only from a committed confirmation: one per seat or per tier unit.
CREATE TABLE ticket (
    event_id       text NOT NULL,
    ticket_id      text NOT NULL,
    order_id       text NOT NULL,
    account_id     text NOT NULL,
    seat_id        text,
    tier_id        text,
    unit           integer NOT NULL,
    code           text NOT NULL,
    status         text NOT NULL CHECK (status IN ('VALID', 'VOIDED', 'CHECKED_IN')),
    issued_at      timestamptz NOT NULL,
    checked_in_at  timestamptz,
    PRIMARY KEY (event_id, ticket_id)
);
CREATE UNIQUE INDEX ticket_by_id ON ticket (ticket_id);
-- Issuance is idempotent: a redelivered "issue tickets" message finds its units taken.
CREATE UNIQUE INDEX ticket_by_unit ON ticket (order_id, unit);

-- Delivery state of the outbox relay: rows are claimed with a lease, retried with backoff.
ALTER TABLE outbox ADD COLUMN n_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN next_attempt_at timestamptz;
ALTER TABLE outbox ADD COLUMN last_error text;
