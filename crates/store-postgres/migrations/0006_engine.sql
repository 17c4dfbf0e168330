-- The event engine (issue 14): one writer per event decides in memory and commits in groups.
-- Each group carries its writer's sequence number; the event's seatmap row holds the last one
-- committed, checked and set by the group's last statement. A group whose predecessor failed,
-- or that was decided by another node's writer on stale state, finds another number and
-- changes nothing (a compare-and-set on the event, checked by the store itself).
ALTER TABLE seatmap ADD COLUMN writer_seq bigint NOT NULL DEFAULT 0 CHECK (writer_seq >= 0);

-- A writer loads the keys used at its event's hold endpoint once, when it takes the event.
CREATE INDEX idempotency_by_endpoint ON idempotency (endpoint);
