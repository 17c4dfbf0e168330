-- The authoritative hold path: events, their inventory, holds, idempotency records, outbox.
-- Every inventory table leads its key with event_id so that sharding by event needs no schema
-- change. Times are timestamptz from the store's clock (clock_timestamp(), ms precision).

-- One on-sale: an event and its sale rules. Immutable after creation.
CREATE TABLE event (
    event_id                 text PRIMARY KEY,
    name                     text NOT NULL,
    starts_at                timestamptz NOT NULL,
    on_sale_at               timestamptz NOT NULL,
    currency                 text NOT NULL,
    hold_ttl_s               integer NOT NULL CHECK (hold_ttl_s >= 1),
    payment_grace_s          integer NOT NULL CHECK (payment_grace_s >= 0),
    max_seats_per_hold       integer NOT NULL CHECK (max_seats_per_hold >= 1),
    max_tickets_per_account  integer NOT NULL CHECK (max_tickets_per_account >= 1),
    exchange_cutoff_s        integer NOT NULL CHECK (exchange_cutoff_s >= 0),
    -- Waiting-room settings as the API spells them (camelCase JSON).
    waiting_room             jsonb NOT NULL,
    created_at               timestamptz NOT NULL
);

-- Reserved-seat sections; position keeps the order the operator gave.
CREATE TABLE section (
    event_id       text NOT NULL REFERENCES event (event_id),
    name           text NOT NULL,
    position       integer NOT NULL,
    rows           integer NOT NULL CHECK (rows >= 1),
    seats_per_row  integer NOT NULL CHECK (seats_per_row >= 1),
    price_minor    bigint NOT NULL CHECK (price_minor >= 0),
    PRIMARY KEY (event_id, name)
);

-- General-admission tiers. The counts are authoritative and always add up (I4).
CREATE TABLE tier (
    event_id     text NOT NULL REFERENCES event (event_id),
    tier_id      text NOT NULL,
    position     integer NOT NULL,
    name         text NOT NULL,
    capacity     bigint NOT NULL CHECK (capacity >= 1),
    price_minor  bigint NOT NULL CHECK (price_minor >= 0),
    available    bigint NOT NULL CHECK (available >= 0),
    held         bigint NOT NULL CHECK (held >= 0),
    sold         bigint NOT NULL CHECK (sold >= 0),
    PRIMARY KEY (event_id, tier_id),
    CHECK (available + held + sold = capacity)
);

-- One row per reserved seat: the authoritative inventory. A hold is hold_id plus
-- hold_expires_at on these rows, never a lock held across requests. seat_id uses the "C"
-- collation so that "lock in seat order" is the same order everywhere.
CREATE TABLE seat (
    event_id         text NOT NULL,
    seat_id          text COLLATE "C" NOT NULL,
    section          text NOT NULL,
    row_no           integer NOT NULL,
    seat_no          integer NOT NULL,
    price_minor      bigint NOT NULL,
    status           text NOT NULL CHECK (status IN ('AVAILABLE', 'HELD', 'SOLD')),
    hold_id          text,
    hold_expires_at  timestamptz,
    order_id         text,
    -- Bumped on every change; the seat-map change feed orders by it.
    version          bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (event_id, seat_id),
    CHECK (status <> 'HELD' OR (hold_id IS NOT NULL AND hold_expires_at IS NOT NULL)),
    CHECK (status <> 'AVAILABLE' OR (hold_id IS NULL AND hold_expires_at IS NULL AND order_id IS NULL))
) WITH (fillfactor = 70);  -- room for HOT updates: a hold rewrites seat rows in place

-- Release and expiry find a hold's seats by hold id.
CREATE INDEX seat_by_hold ON seat (hold_id) WHERE hold_id IS NOT NULL;

-- A hold: seats (JSON array of {seatId, priceMinor}) or a tier quantity, one account.
CREATE TABLE hold (
    event_id         text NOT NULL,
    hold_id          text NOT NULL,
    account_id       text NOT NULL,
    status           text NOT NULL CHECK (status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED', 'RELEASED', 'EXPIRED')),
    tier_id          text,
    quantity         integer NOT NULL CHECK (quantity >= 1),
    seats            jsonb NOT NULL,
    total_minor      bigint NOT NULL,
    currency         text NOT NULL,
    -- The key the hold was created under: at most one hold per key (I6), enforced here too.
    idempotency_key  text NOT NULL,
    created_at       timestamptz NOT NULL,
    expires_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (event_id, hold_id)
);
CREATE UNIQUE INDEX hold_by_id ON hold (hold_id);
CREATE UNIQUE INDEX hold_by_key ON hold (event_id, account_id, idempotency_key);
-- The purchase limit sums an account's live and confirmed holds.
CREATE INDEX hold_by_account ON hold (event_id, account_id) WHERE status IN ('HELD', 'PAYMENT_PENDING', 'CONFIRMED');
-- The sweeper finds due holds.
CREATE INDEX hold_due ON hold (expires_at) WHERE status = 'HELD';

-- Idempotency records: the first response to (account, endpoint, key), stored in the same
-- transaction as the state it describes. Kept at least 24 hours.
CREATE TABLE idempotency (
    account_id      text NOT NULL,
    endpoint        text NOT NULL,
    idem_key        text NOT NULL,
    request_digest  text NOT NULL,
    status_code     integer NOT NULL,
    response_body   bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (account_id, endpoint, idem_key)
);
CREATE INDEX idempotency_by_age ON idempotency (created_at);

-- Transactional outbox: every change others must hear about, written with the change.
CREATE TABLE outbox (
    id            bigserial PRIMARY KEY,
    event_id      text NOT NULL,
    topic         text NOT NULL,
    payload       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
