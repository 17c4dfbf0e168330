-- Venue charts (issue 41): an operator's seating charts, each written once and never changed
-- (an edit is a new chart), so that the seat ids an event takes from a chart stay stable.
-- A chart belongs to no event and no account.
CREATE TABLE venue_chart (
    -- A UUIDv7: listing by id lists oldest first.
    chart_id           TEXT PRIMARY KEY,
    name               TEXT NOT NULL,
    -- The chart as the API spells it (the camelCase JSON of boxoffice_domain::venue::
    -- VenueChart), validated before it is written.
    chart              TEXT NOT NULL CHECK (json_valid(chart)),
    -- What a list shows without reading the chart.
    seat_count         INTEGER NOT NULL CHECK (seat_count >= 0),
    standing_capacity  INTEGER NOT NULL CHECK (standing_capacity >= 0),
    section_count      INTEGER NOT NULL CHECK (section_count >= 1),
    -- The creation's idempotency: the account, its key and the request's digest. A replay
    -- answers from this row whenever it comes.
    created_by         TEXT NOT NULL,
    idempotency_key    TEXT NOT NULL,
    request_digest     TEXT NOT NULL,
    -- Unix milliseconds of the store's clock.
    created_at         INTEGER NOT NULL,
    UNIQUE (created_by, idempotency_key)
);
