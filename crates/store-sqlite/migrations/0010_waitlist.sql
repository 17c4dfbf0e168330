-- The group waiting list after sell-out (issue 19); see the PostgreSQL migration 0013.
ALTER TABLE event ADD COLUMN waitlist_offer_ttl_s INTEGER NOT NULL DEFAULT 600 CHECK (waitlist_offer_ttl_s > 0);

CREATE TABLE waitlist (
    event_id         TEXT NOT NULL,
    waitlist_id      TEXT NOT NULL,
    account_id       TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    quantity         INTEGER NOT NULL CHECK (quantity >= 1),
    section          TEXT,
    max_price_minor  INTEGER,
    together         INTEGER NOT NULL,
    offer_hold_id    TEXT NOT NULL,
    -- The joining request's key and digest: a retry is answered with this entry.
    idempotency_key  TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('WAITING', 'OFFERED', 'PURCHASED', 'LAPSED', 'LEFT')),
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (event_id, waitlist_id)
) STRICT;
CREATE UNIQUE INDEX waitlist_by_id ON waitlist (waitlist_id);
CREATE UNIQUE INDEX waitlist_by_seq ON waitlist (event_id, seq);
CREATE UNIQUE INDEX waitlist_by_offer ON waitlist (offer_hold_id);
CREATE UNIQUE INDEX waitlist_waiting_account ON waitlist (event_id, account_id) WHERE status = 'WAITING';
CREATE INDEX waitlist_live ON waitlist (event_id, seq) WHERE status IN ('WAITING', 'OFFERED');
