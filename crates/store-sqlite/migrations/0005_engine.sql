-- The event engine (issue 14): one writer per event decides in memory and commits in groups.
-- Each group carries its writer's sequence number; the event's seatmap row holds the last one
-- committed, checked and set by the group's last statement, so a group decided on stale state
-- (another process's writer came between) changes nothing.
ALTER TABLE seatmap ADD COLUMN writer_seq INTEGER NOT NULL DEFAULT 0;

-- A writer loads the keys used at its event's hold endpoint once, when it takes the event.
CREATE INDEX idempotency_by_endpoint ON idempotency (endpoint);
