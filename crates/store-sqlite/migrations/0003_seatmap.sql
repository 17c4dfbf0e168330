-- The seat-map change feed (issue 5); see the PostgreSQL migration of the same name. SQLite
-- has one writer at a time, so the version bump is in commit order by construction.

CREATE TABLE seatmap (
    event_id  TEXT PRIMARY KEY NOT NULL REFERENCES event (event_id),
    version   INTEGER NOT NULL CHECK (version >= 0)
) STRICT;
INSERT INTO seatmap (event_id, version) SELECT event_id, 0 FROM event;

CREATE TABLE seatmap_change (
    event_id    TEXT NOT NULL,
    version     INTEGER NOT NULL,
    changes     TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (event_id, version)
) STRICT, WITHOUT ROWID;
