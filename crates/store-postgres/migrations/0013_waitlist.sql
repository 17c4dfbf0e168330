-- The group waiting list after sell-out (issue 19): a party of `quantity` waits for seats
-- together (one row) or anywhere, optionally in one section and under a price cap. The
-- event's writer keeps the list in memory and offers freed seats to the earliest entry they
-- satisfy whole, as a hold (offer_hold_id) with the event's offer TTL. Statuses: WAITING,
-- OFFERED (its hold live, or ended before a writer saw it: read as LAPSED or PURCHASED by the
-- hold), PURCHASED, LAPSED, LEFT.
ALTER TABLE event ADD COLUMN waitlist_offer_ttl_s integer NOT NULL DEFAULT 600 CHECK (waitlist_offer_ttl_s > 0);

CREATE TABLE waitlist (
    event_id         text NOT NULL,
    waitlist_id      text NOT NULL,
    account_id       text NOT NULL,
    -- The entry's place in its event's list.
    seq              bigint NOT NULL,
    quantity         integer NOT NULL CHECK (quantity >= 1),
    section          text,
    max_price_minor  bigint,
    together         boolean NOT NULL,
    offer_hold_id    text NOT NULL,
    -- The joining request's key and digest: a retry is answered with this entry.
    idempotency_key  text NOT NULL,
    request_digest   text NOT NULL,
    status           text NOT NULL CHECK (status IN ('WAITING', 'OFFERED', 'PURCHASED', 'LAPSED', 'LEFT')),
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (event_id, waitlist_id)
);
CREATE UNIQUE INDEX waitlist_by_id ON waitlist (waitlist_id);
CREATE UNIQUE INDEX waitlist_by_seq ON waitlist (event_id, seq);
CREATE UNIQUE INDEX waitlist_by_offer ON waitlist (offer_hold_id);
-- One waiting entry per account and event (the engine also refuses a second live one).
CREATE UNIQUE INDEX waitlist_waiting_account ON waitlist (event_id, account_id) WHERE status = 'WAITING';
CREATE INDEX waitlist_live ON waitlist (event_id, seq) WHERE status IN ('WAITING', 'OFFERED');
