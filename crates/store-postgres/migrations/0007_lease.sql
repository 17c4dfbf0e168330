-- One owner per event across nodes (issue 15). A node writes an event only while it holds
-- the event's lease; every group its writer commits reads the row FOR SHARE and checks its
-- node and epoch, and a takeover (epoch + 1) updates the row, so it waits for the groups in
-- flight and every later group of the former owner finds another epoch and writes nothing.
CREATE TABLE event_lease (
    event_id    text PRIMARY KEY REFERENCES event (event_id),
    node_id     text NOT NULL CHECK (length(node_id) BETWEEN 1 AND 64),
    epoch       bigint NOT NULL CHECK (epoch >= 1),
    since       timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
);

-- The nodes and the internal address each forwards to; heartbeat_at is refreshed every second.
CREATE TABLE cluster_node (
    node_id       text PRIMARY KEY CHECK (length(node_id) BETWEEN 1 AND 64),
    advertise_url text NOT NULL CHECK (length(advertise_url) BETWEEN 1 AND 255),
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL
);
