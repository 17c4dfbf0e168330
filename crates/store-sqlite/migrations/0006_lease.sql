-- One owner per event (issue 15): the same lease as on PostgreSQL. SQLite is the embedded
-- one-node store, but a second process on the same file is fenced the same way: every group
-- checks the lease's node and epoch inside its (serialized) write transaction.
CREATE TABLE event_lease (
    event_id    TEXT PRIMARY KEY REFERENCES event (event_id),
    node_id     TEXT NOT NULL CHECK (length(node_id) BETWEEN 1 AND 64),
    epoch       INTEGER NOT NULL CHECK (epoch >= 1),
    since       INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE cluster_node (
    node_id       TEXT PRIMARY KEY CHECK (length(node_id) BETWEEN 1 AND 64),
    advertise_url TEXT NOT NULL CHECK (length(advertise_url) BETWEEN 1 AND 255),
    started_at    INTEGER NOT NULL,
    heartbeat_at  INTEGER NOT NULL
) STRICT;
