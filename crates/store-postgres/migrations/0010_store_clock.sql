-- The store's clock. Every statement reads "now" through boxoffice_now(), so that one
-- definition says what the store's clock is. Here it is clock_timestamp(), in an SQL
-- function the planner inlines (no cost per row or per statement).
--
-- Tests move the clock forward instead of sleeping past a deadline:
-- PgStore::advance_clock adds to store_clock.offset_ms and redefines boxoffice_now() as
-- clock_timestamp() plus that offset (a constant, still inlined; replacing the function
-- invalidates the plans that inlined it). Nothing else writes store_clock: in production
-- the offset stays 0 and the function stays as below.
CREATE TABLE store_clock (
    id        integer PRIMARY KEY CHECK (id = 1),
    offset_ms bigint  NOT NULL
);
INSERT INTO store_clock (id, offset_ms) VALUES (1, 0);

CREATE FUNCTION boxoffice_now() RETURNS timestamptz
    LANGUAGE sql VOLATILE
    AS $$ SELECT clock_timestamp() $$;
