-- Ticket transfers between accounts (issue 19): the giver offers tickets of a confirmed
-- order; accepting voids them and issues new ones to the receiver in a new order, through the
-- event's writer (no capacity is consumed). An offer past expires_at reads as EXPIRED.
ALTER TABLE event ADD COLUMN transfer_cutoff_s integer NOT NULL DEFAULT 0 CHECK (transfer_cutoff_s >= 0);

-- The accepted transfer that voided a ticket (boxoffice check counts its seat as the
-- receiver's).
ALTER TABLE ticket ADD COLUMN transfer_id text;

CREATE TABLE transfer (
    event_id         text NOT NULL,
    transfer_id      text NOT NULL,
    order_id         text NOT NULL,
    from_account_id  text NOT NULL,
    to_account_id    text NOT NULL,
    -- The tickets offered (JSON array of ticket ids, all of order_id).
    ticket_ids       jsonb NOT NULL,
    status           text NOT NULL CHECK (status IN ('OFFERED', 'ACCEPTED', 'DECLINED', 'WITHDRAWN')),
    expires_at       timestamptz NOT NULL,
    new_order_id     text,
    -- The giver's request: its key and digest (a retry answers the same offer).
    idempotency_key  text NOT NULL,
    request_digest   text NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (event_id, transfer_id)
);
CREATE UNIQUE INDEX transfer_by_id ON transfer (transfer_id);
CREATE UNIQUE INDEX transfer_by_key ON transfer (from_account_id, idempotency_key);
CREATE INDEX transfer_by_order ON transfer (order_id) WHERE status = 'OFFERED';
CREATE INDEX transfer_by_giver ON transfer (from_account_id, transfer_id DESC);
CREATE INDEX transfer_by_receiver ON transfer (to_account_id, transfer_id DESC);
