-- Events spread over shards (issue 17). The directory lives in the home database (the one
-- the nodes' --database-url names); every shard has these tables, only the home one's are
-- read. An event with no row here lives in the home database.

-- The shards besides the home one.
CREATE TABLE shard (
    name      text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9-]{0,31}$' AND name <> 'main'),
    url       text NOT NULL CHECK (length(url) BETWEEN 1 AND 1000),
    added_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- How new events are placed: 'least-events' or 'pinned:NAME'. One row; a placement locks it,
-- so two placements never both count the same shard as the least loaded.
CREATE TABLE shard_placement (
    only_row  boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    rule      text NOT NULL CHECK (rule = 'least-events' OR rule ~ '^pinned:[a-z][a-z0-9-]{0,31}$')
);
INSERT INTO shard_placement (rule) VALUES ('least-events');

-- Where each event was placed, and by which request (its idempotency scope): the same
-- request sent again is sent to the same shard, where its stored answer is.
CREATE TABLE event_shard (
    event_id   text PRIMARY KEY,
    shard      text NOT NULL CHECK (length(shard) BETWEEN 1 AND 32),
    placed_by  text UNIQUE,
    placed_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX event_shard_by_shard ON event_shard (shard);
