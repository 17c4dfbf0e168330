-- The store's clock offset, in milliseconds: every statement reads "now" as
-- unixepoch('subsec') plus this (the now_ms! macro in src/lib.rs), so that tests can move the
-- store's clock forward (SqliteStore::advance_clock) instead of sleeping past a deadline.
-- Nothing else writes it: in production it stays 0.
CREATE TABLE store_clock (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    offset_ms INTEGER NOT NULL
);
INSERT INTO store_clock (id, offset_ms) VALUES (1, 0);
