-- The seat-map change feed (issue 5). Every transaction that changes a seat's status or
-- deadline, or a tier's count, bumps its event's map version as its last statement and writes
-- one change row with that version. The version row is locked last and only until commit, so
-- versions are contiguous per event and in commit order: a reader at version v needs exactly
-- the rows after v. Readers poll; a missed wake-up cannot lose a change.

CREATE TABLE seatmap (
    event_id  text PRIMARY KEY REFERENCES event (event_id),
    version   bigint NOT NULL CHECK (version >= 0)
);
INSERT INTO seatmap (event_id, version) SELECT event_id, 0 FROM event;

-- One row per committed change batch: seats as [[seatId, status, heldUntilMs|null]] and tiers
-- as [[tierId, available]] (compact JSON text, written and read only by boxoffice).
CREATE TABLE seatmap_change (
    event_id    text NOT NULL,
    version     bigint NOT NULL,
    changes     text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (event_id, version)
);
