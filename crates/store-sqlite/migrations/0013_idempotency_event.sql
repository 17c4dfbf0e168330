-- The event an idempotency record is about, as on PostgreSQL (its migration 0015): both
-- backends write records with the same statements. One SQLite file is one shard and no
-- event moves out of it, so the column is only written here, and no earlier record is
-- filled in.
ALTER TABLE idempotency ADD COLUMN event_id TEXT;

CREATE INDEX idempotency_by_event ON idempotency (event_id) WHERE event_id IS NOT NULL;
