-- Venue charts (issue 41): an operator's seating charts, each written once and never changed
-- (an edit is a new chart), so that the seat ids an event takes from a chart stay stable.
-- A chart belongs to no event and no account: it lives in the home shard, like a webhook
-- endpoint, and its key does not lead with event_id.
CREATE TABLE venue_chart (
    -- A UUIDv7: listing by id lists oldest first ("C": compared byte for byte).
    chart_id           text COLLATE "C" PRIMARY KEY,
    name               text NOT NULL,
    -- The chart as the API spells it (the camelCase JSON of boxoffice_domain::venue::
    -- VenueChart), validated before it is written. Text, not jsonb: nothing queries inside
    -- it, and a 100,000-seat chart is read and written whole.
    chart              text NOT NULL,
    -- What a list shows without reading the chart.
    seat_count         bigint NOT NULL CHECK (seat_count >= 0),
    standing_capacity  bigint NOT NULL CHECK (standing_capacity >= 0),
    section_count      integer NOT NULL CHECK (section_count >= 1),
    -- The creation's idempotency: the account, its key and the request's digest. A replay
    -- answers from this row whenever it comes (not only within the idempotency table's 24 h).
    created_by         text NOT NULL,
    idempotency_key    text NOT NULL,
    request_digest     text NOT NULL,
    created_at         timestamptz NOT NULL,
    UNIQUE (created_by, idempotency_key)
);
