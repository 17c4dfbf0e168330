-- Ticket transfers between accounts (issue 19): the giver offers tickets of a confirmed
-- order; accepting voids them and issues new ones to the receiver in a new order, through the
-- event's writer (no capacity is consumed). An offer past expires_at reads as EXPIRED.
ALTER TABLE event ADD COLUMN transfer_cutoff_s INTEGER NOT NULL DEFAULT 0 CHECK (transfer_cutoff_s >= 0);

-- The accepted transfer that voided a ticket (boxoffice check counts its seat as the
-- receiver's).
ALTER TABLE ticket ADD COLUMN transfer_id TEXT;

CREATE TABLE transfer (
    event_id         TEXT NOT NULL,
    transfer_id      TEXT NOT NULL,
    order_id         TEXT NOT NULL,
    from_account_id  TEXT NOT NULL,
    to_account_id    TEXT NOT NULL,
    -- The tickets offered (JSON array of ticket ids, all of order_id).
    ticket_ids       TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('OFFERED', 'ACCEPTED', 'DECLINED', 'WITHDRAWN')),
    expires_at       INTEGER NOT NULL,
    new_order_id     TEXT,
    idempotency_key  TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (event_id, transfer_id)
) STRICT;
CREATE UNIQUE INDEX transfer_by_id ON transfer (transfer_id);
CREATE UNIQUE INDEX transfer_by_key ON transfer (from_account_id, idempotency_key);
CREATE INDEX transfer_by_order ON transfer (order_id) WHERE status = 'OFFERED';
CREATE INDEX transfer_by_giver ON transfer (from_account_id, transfer_id DESC);
CREATE INDEX transfer_by_receiver ON transfer (to_account_id, transfer_id DESC);
