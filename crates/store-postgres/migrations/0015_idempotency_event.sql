-- The event an idempotency record is about (issue 37): the records of an event's holds,
-- checkouts and exchanges, and of its creation, carry its id, so that `boxoffice shard move`
-- (store-postgres moving.rs) carries them with the event's other rows. NULL for a record
-- about no single event. Without it a moved event's records stayed on the old shard: a
-- granted hold's key was refused with 422 on the new one, a recorded refusal was decided
-- again, and a checkout's replay kept the PENDING answer its settlement never updated.
ALTER TABLE idempotency ADD COLUMN event_id text;

-- The move reads and deletes an event's records by it.
CREATE INDEX idempotency_by_event ON idempotency (event_id) WHERE event_id IS NOT NULL;

-- Records written before this migration, where the endpoint names the event or the hold:
-- a hold's (POST /v1/events/{event_id}/holds) and a checkout's
-- (POST /v1/holds/{hold_id}/checkout). The others (exchanges, creations) are purged with
-- their age like every record, 24 hours at most.
UPDATE idempotency SET event_id = split_part(endpoint, '/', 4)
 WHERE endpoint LIKE 'POST /v1/events/%/holds';
UPDATE idempotency AS i SET event_id = h.event_id
  FROM hold AS h
 WHERE i.endpoint LIKE 'POST /v1/holds/%/checkout'
   AND h.hold_id = split_part(i.endpoint, '/', 4);
