-- The lease's server generation (issue 38; see PostgreSQL's migration 0020): one embedded
-- file has one generation, 0.
ALTER TABLE event_lease ADD COLUMN server_generation INTEGER NOT NULL DEFAULT 0;
