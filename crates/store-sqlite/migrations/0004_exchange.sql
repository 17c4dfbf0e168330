-- SQLite mirror of the PostgreSQL migration 0005_exchange.sql (INTEGER unix ms times, JSON as TEXT).
-- Exchanges (rebooking, issue 7): a confirmed order's tickets move to new seats or tier
-- units, of the same event or another one. The new seats get a hold and an order of their
-- own (in the target event); the old tickets are voided and their seats go back on sale in
-- the same transaction as the new ones are sold. With a price increase the new seats are
-- first held and the old tickets marked (ticket.exchange_id) until the difference is paid.

CREATE TABLE exchange (
    exchange_id       TEXT PRIMARY KEY NOT NULL,
    account_id        TEXT NOT NULL,
    -- The order whose tickets move, and its event.
    order_id          TEXT NOT NULL,
    from_event_id     TEXT NOT NULL,
    to_event_id       TEXT NOT NULL,
    -- The old tickets (JSON array of ticket ids) and what they were bought for.
    ticket_ids        TEXT NOT NULL CHECK (json_valid(ticket_ids)),
    from_value_minor  INTEGER NOT NULL,
    -- The hold of the new seats (in to_event_id), and the order it became.
    new_hold_id       TEXT NOT NULL,
    new_order_id      TEXT,
    to_value_minor    INTEGER NOT NULL,
    -- to_value - from_value: above 0 is paid through checkout, below 0 is a refund due.
    amount_due_minor  INTEGER NOT NULL,
    currency          TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('PAYMENT_REQUIRED', 'COMPLETED', 'FAILED', 'EXPIRED')),
    idempotency_key   TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX exchange_by_hold ON exchange (new_hold_id);
CREATE INDEX exchange_by_order ON exchange (order_id);

-- A ticket being exchanged (status VALID, exchange_id set) shows as EXCHANGING and cannot be
-- checked in or exchanged again; a ticket an exchange replaced is VOIDED and keeps the id.
ALTER TABLE ticket ADD COLUMN exchange_id TEXT;
CREATE INDEX ticket_by_exchange ON ticket (exchange_id) WHERE exchange_id IS NOT NULL;

-- Units of a confirmed hold that left by exchange: the purchase limit counts
-- quantity - exchanged_out.
ALTER TABLE hold ADD COLUMN exchanged_out INTEGER NOT NULL DEFAULT 0 CHECK (exchanged_out >= 0);
