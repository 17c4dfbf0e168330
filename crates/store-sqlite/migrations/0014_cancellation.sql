-- Cancelling an event (issue 37): one row per cancelled event, written by the event's writer
-- in the group that voids every ticket; the refunds' job walks the paid orders by order id
-- (its cursor) and marks the cancellation finished when every refund settled.
CREATE TABLE event_cancellation (
    event_id         TEXT PRIMARY KEY REFERENCES event (event_id),
    reason           TEXT NOT NULL,
    -- The admin who cancelled, the request's key and digest.
    account_id       TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    -- The refunds' job: the current pass took the orders up to this id ('' = a pass from the
    -- start comes next).
    cursor_order_id  TEXT NOT NULL DEFAULT '',
    finished_at      INTEGER
) STRICT;
CREATE INDEX event_cancellation_open ON event_cancellation (event_id) WHERE finished_at IS NULL;

-- Why a ticket was voided when no refund or exchange says it ('EVENT_CANCELLED').
ALTER TABLE ticket ADD COLUMN void_reason TEXT;
