-- Moves by logical replication (issue 38, item 2): `boxoffice shard move` publishes an
-- event's rows with a row filter on event_id (store-postgres moving.rs). PostgreSQL refuses
-- an UPDATE or DELETE on a table in a publication that publishes them when the filter's
-- columns are not in the table's replica identity -- on the source, for every event, while
-- a move runs. Every other table of an event leads its primary key with event_id; the
-- idempotency records are keyed by (account, endpoint, key) and carry event_id beside it
-- (migration 0015).
--
-- FULL rather than another key: event_id is NULL for a record about no single event, so no
-- unique index over NOT NULL columns can include it (REPLICA IDENTITY USING INDEX needs one),
-- and changing the primary key would change every look-up. The cost: with wal_level =
-- logical, an UPDATE or DELETE of a record writes the whole old row to the WAL (a settled
-- checkout's answer rewritten, the purge of records past 24 hours); inserts, the bulk of the
-- table's writes, write the same as before. With wal_level = replica nothing changes.
ALTER TABLE idempotency REPLICA IDENTITY FULL;

-- The events a move is copying into this shard (issue 38): their rows arrive here while the
-- directory still names the source, where they are written. Until the cut-over this shard's
-- workers leave them alone (the sweeper's due holds, the reconciler's due payments, the open
-- cancellations): acting on the copy would call the payment provider a second time and write
-- rows the source's changes then collide with. Written by the mover before it subscribes,
-- deleted once the directory names this shard.
CREATE TABLE event_moving_in (
    event_id  text PRIMARY KEY,
    since     timestamptz NOT NULL DEFAULT clock_timestamp()
);
