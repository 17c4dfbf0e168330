-- Sale phases and access codes (issue 40). A hold records the phase it was granted in (NULL:
-- the event has no phases, or the hold was made outside the hold route: a transfer, an
-- exchange, a waiting-list offer), so that `boxoffice check` can verify that no ticket of a
-- lane lies outside the lane's sections and tiers.
ALTER TABLE hold ADD COLUMN phase_id text;

-- A presale lane's access codes: each admits up to `max_uses` accounts. `uses` counts the
-- redemptions; the event's writer decides every redemption and the group raises it only
-- while it is below `max_uses` (a counted conditional update), so a single-use code raced by
-- many accounts admits exactly one. Codes are inserted once and never rewritten.
CREATE TABLE access_code (
    event_id    text NOT NULL,
    phase_id    text NOT NULL,
    code        text NOT NULL,
    max_uses    integer NOT NULL CHECK (max_uses >= 1),
    uses        integer NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    -- The generate or import request that made the code ("<account>:<idempotency key>") and
    -- its digest: a retry answers the codes it made instead of making more.
    batch_key     text NOT NULL,
    batch_digest  text NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (event_id, phase_id, code)
);
CREATE INDEX access_code_batch ON access_code (event_id, phase_id, batch_key);

-- Who redeemed a code of a lane: one row per account and lane (a second redemption by the
-- same account answers the first's success without a second use).
CREATE TABLE access_redemption (
    event_id     text NOT NULL,
    phase_id     text NOT NULL,
    account_id   text NOT NULL,
    code         text NOT NULL,
    redeemed_at  timestamptz NOT NULL,
    PRIMARY KEY (event_id, phase_id, account_id)
);
