-- The authoritative hold path on SQLite: events, their inventory, holds, idempotency records,
-- outbox. Mirrors the PostgreSQL schema table for table and column for column, so both
-- backends answer the same story tests.
--
-- SQLite differences, all of representation only:
--   * Times are INTEGER unix milliseconds from the store's clock
--     (CAST(round(unixepoch('subsec') * 1000) AS INTEGER)), the same ms precision as
--     PostgreSQL's date_trunc('milliseconds', clock_timestamp()).
--   * JSON columns (waiting_room, hold.seats, outbox.payload) are TEXT holding JSON.
--   * Response bodies are BLOB.
--   * Tables are STRICT, so a value of the wrong type is refused instead of coerced.
--   * seat_id uses the default BINARY collation: byte order, the same as PostgreSQL's "C".
-- Every inventory table leads its key with event_id so that sharding by event needs no schema
-- change.

-- One on-sale: an event and its sale rules. Immutable after creation.
CREATE TABLE event (
    event_id                 TEXT PRIMARY KEY NOT NULL,
    name                     TEXT NOT NULL,
    starts_at                INTEGER NOT NULL,
    on_sale_at               INTEGER NOT NULL,
    currency                 TEXT NOT NULL,
    hold_ttl_s               INTEGER NOT NULL CHECK (hold_ttl_s >= 1),
    payment_grace_s          INTEGER NOT NULL CHECK (payment_grace_s >= 0),
    max_seats_per_hold       INTEGER NOT NULL CHECK (max_seats_per_hold >= 1),
    max_tickets_per_account  INTEGER NOT NULL CHECK (max_tickets_per_account >= 1),
    exchange_cutoff_s        INTEGER NOT NULL CHECK (exchange_cutoff_s >= 0),
    -- Waiting-room settings as the API spells them (camelCase JSON).
    waiting_room             TEXT NOT NULL CHECK (json_valid(waiting_room)),
    created_at               INTEGER NOT NULL
) STRICT;

-- Reserved-seat sections; position keeps the order the operator gave.
CREATE TABLE section (
    event_id       TEXT NOT NULL REFERENCES event (event_id),
    name           TEXT NOT NULL,
    position       INTEGER NOT NULL,
    rows           INTEGER NOT NULL CHECK (rows >= 1),
    seats_per_row  INTEGER NOT NULL CHECK (seats_per_row >= 1),
    price_minor    INTEGER NOT NULL CHECK (price_minor >= 0),
    PRIMARY KEY (event_id, name)
) STRICT;

-- General-admission tiers. The counts are authoritative and always add up (I4).
CREATE TABLE tier (
    event_id     TEXT NOT NULL REFERENCES event (event_id),
    tier_id      TEXT NOT NULL,
    position     INTEGER NOT NULL,
    name         TEXT NOT NULL,
    capacity     INTEGER NOT NULL CHECK (capacity >= 1),
    price_minor  INTEGER NOT NULL CHECK (price_minor >= 0),
    available    INTEGER NOT NULL CHECK (available >= 0),
    held         INTEGER NOT NULL CHECK (held >= 0),
    sold         INTEGER NOT NULL CHECK (sold >= 0),
    PRIMARY KEY (event_id, tier_id),
    CHECK (available + held + sold = capacity)
) STRICT;

-- One row per reserved seat: the authoritative inventory. A hold is hold_id plus
-- hold_expires_at on these rows, never a lock held across requests. seat_id compares with
-- BINARY (byte order, PostgreSQL's "C") so that "seat order" is the same order everywhere.
CREATE TABLE seat (
    event_id         TEXT NOT NULL,
    seat_id          TEXT COLLATE BINARY NOT NULL,
    section          TEXT NOT NULL,
    row_no           INTEGER NOT NULL,
    seat_no          INTEGER NOT NULL,
    price_minor      INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
    hold_id          TEXT,
    hold_expires_at  INTEGER,
    order_id         TEXT,
    -- Bumped on every change; the seat-map change feed orders by it.
    version          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (event_id, seat_id),
    CHECK (status <> 'HELD' OR (hold_id IS NOT NULL AND hold_expires_at IS NOT NULL)),
    CHECK (status <> 'AVAILABLE' OR (hold_id IS NULL AND hold_expires_at IS NULL AND order_id IS NULL))
) STRICT;

-- Release and expiry find a hold's seats by hold id.
CREATE INDEX seat_by_hold ON seat (hold_id) WHERE hold_id IS NOT NULL;

-- A hold: seats (JSON array of {seatId, priceMinor}) or a tier quantity, one account.
CREATE TABLE hold (
    event_id         TEXT NOT NULL,
    hold_id          TEXT NOT NULL,
    account_id       TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED', 'RELEASED', 'EXPIRED')),
    tier_id          TEXT,
    quantity         INTEGER NOT NULL CHECK (quantity >= 1),
    seats            TEXT NOT NULL CHECK (json_valid(seats)),
    total_minor      INTEGER NOT NULL,
    currency         TEXT NOT NULL,
    -- The key the hold was created under: at most one hold per key (I6), enforced here too.
    idempotency_key  TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (event_id, hold_id)
) STRICT;
CREATE UNIQUE INDEX hold_by_id ON hold (hold_id);
CREATE UNIQUE INDEX hold_by_key ON hold (event_id, account_id, idempotency_key);
-- The purchase limit sums an account's live and confirmed holds.
CREATE INDEX hold_by_account ON hold (event_id, account_id) WHERE status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED');
-- The sweeper finds due holds; the inline reclaim finds a tier's due holds.
CREATE INDEX hold_due ON hold (expires_at) WHERE status = 'HELD';

-- Idempotency records: the first response to (account, endpoint, key), stored in the same
-- transaction as the state it describes. Kept at least 24 hours.
CREATE TABLE idempotency (
    account_id      TEXT NOT NULL,
    endpoint        TEXT NOT NULL,
    idem_key        TEXT NOT NULL,
    request_digest  TEXT NOT NULL,
    status_code     INTEGER NOT NULL,
    response_body   BLOB NOT NULL,
    created_at      INTEGER NOT NULL,
    PRIMARY KEY (account_id, endpoint, idem_key)
) STRICT;
CREATE INDEX idempotency_by_age ON idempotency (created_at);

-- Transactional outbox: every change others must hear about, written with the change.
-- AUTOINCREMENT: ids only grow and are never reused, like a bigserial.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id      TEXT NOT NULL,
    topic         TEXT NOT NULL,
    payload       TEXT NOT NULL CHECK (json_valid(payload)),
    created_at    INTEGER NOT NULL,
    published_at  INTEGER
) STRICT;
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
