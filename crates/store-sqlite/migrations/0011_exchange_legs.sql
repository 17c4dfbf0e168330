-- An exchange's leg, as on PostgreSQL (its migration 0009): one SQLite file is one shard, so
-- every exchange here is whole ('BOTH'); the column lets both backends read exchanges with
-- the same statements.
ALTER TABLE exchange ADD COLUMN leg text NOT NULL DEFAULT 'BOTH'
    CHECK (leg IN ('BOTH', 'OUT', 'IN', 'ABORT'));
