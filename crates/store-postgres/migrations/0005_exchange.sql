-- Exchanges (rebooking, issue 7): a confirmed order's tickets move to new seats or tier
-- units, of the same event or another one. The new seats get a hold and an order of their
-- own (in the target event); the old tickets are voided and their seats go back on sale in
-- the same transaction as the new ones are sold. With a price increase the new seats are
-- first held and the old tickets marked (ticket.exchange_id) until the difference is paid.

CREATE TABLE exchange (
    exchange_id       text PRIMARY KEY,
    account_id        text NOT NULL,
    -- The order whose tickets move, and its event.
    order_id          text NOT NULL,
    from_event_id     text NOT NULL,
    to_event_id       text NOT NULL,
    -- The old tickets (JSON array of ticket ids) and what they were bought for.
    ticket_ids        jsonb NOT NULL,
    from_value_minor  bigint NOT NULL,
    -- The hold of the new seats (in to_event_id), and the order it became.
    new_hold_id       text NOT NULL,
    new_order_id      text,
    to_value_minor    bigint NOT NULL,
    -- to_value - from_value: above 0 is paid through checkout, below 0 is a refund due.
    amount_due_minor  bigint NOT NULL,
    currency          text NOT NULL,
    status            text NOT NULL CHECK (status IN ('PAYMENT_REQUIRED', 'COMPLETED', 'FAILED', 'EXPIRED')),
    idempotency_key   text NOT NULL,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL
);
CREATE UNIQUE INDEX exchange_by_hold ON exchange (new_hold_id);
CREATE INDEX exchange_by_order ON exchange (order_id);

-- A ticket being exchanged (status VALID, exchange_id set) shows as EXCHANGING and cannot be
-- checked in or exchanged again; a ticket an exchange replaced is VOIDED and keeps the id.
ALTER TABLE ticket ADD COLUMN exchange_id text;
CREATE INDEX ticket_by_exchange ON ticket (exchange_id) WHERE exchange_id IS NOT NULL;

-- Units of a confirmed hold that left by exchange: the purchase limit counts
-- quantity - exchanged_out.
ALTER TABLE hold ADD COLUMN exchanged_out integer NOT NULL DEFAULT 0 CHECK (exchanged_out >= 0);
