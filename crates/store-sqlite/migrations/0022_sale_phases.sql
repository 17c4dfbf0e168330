-- Sale phases and access codes (issue 40); see the PostgreSQL migration 0025.
ALTER TABLE hold ADD COLUMN phase_id TEXT;

CREATE TABLE access_code (
    event_id    TEXT NOT NULL,
    phase_id    TEXT NOT NULL,
    code        TEXT NOT NULL,
    max_uses    INTEGER NOT NULL CHECK (max_uses >= 1),
    uses        INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    batch_key     TEXT NOT NULL,
    batch_digest  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (event_id, phase_id, code)
) STRICT;
CREATE INDEX access_code_batch ON access_code (event_id, phase_id, batch_key);

CREATE TABLE access_redemption (
    event_id     TEXT NOT NULL,
    phase_id     TEXT NOT NULL,
    account_id   TEXT NOT NULL,
    code         TEXT NOT NULL,
    redeemed_at  INTEGER NOT NULL,
    PRIMARY KEY (event_id, phase_id, account_id)
) STRICT;
