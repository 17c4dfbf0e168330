-- Mail to fans (issue 39): an account's address and language, and one mail per (outbox
-- message, account). The relay fans a delivered message out into mails; the mail worker
-- sends them through SMTP, outside any transaction, at most once each: a mail is SENDING
-- (committed) before the SMTP transaction starts and SENT after the server accepted it; a
-- SENDING mail whose lease ended is never sent again blindly but becomes UNCERTAIN, for an
-- operator to resend. Times are unix milliseconds of the store's clock.

CREATE TABLE account (
    account_id    TEXT PRIMARY KEY,
    -- Where mail goes; NULL: nowhere (the mail is recorded NO_ADDRESS).
    email         TEXT CHECK (length(email) BETWEEN 3 AND 254),
    -- Who gave the address: the identity token's email claim, or the fan (PUT /v1/me). A
    -- token never overwrites the fan's choice.
    email_source  TEXT CHECK (email_source IN ('TOKEN', 'FAN')),
    -- The language of the account's mail (en, de, fr, es, zh); NULL: English.
    locale        TEXT,
    updated_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE mail_message (
    mail_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The outbox message's id.
    outbox_id        INTEGER NOT NULL,
    account_id       TEXT NOT NULL,
    -- What the mail says (ORDER_TICKETS, EXCHANGE_TICKETS, ...).
    kind             TEXT NOT NULL,
    -- The outbox message's JSON payload, rendered when the mail is sent.
    payload          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN
                         ('PENDING', 'SENDING', 'SENT', 'FAILED', 'UNCERTAIN', 'NO_ADDRESS')),
    n_attempts       INTEGER NOT NULL DEFAULT 0 CHECK (n_attempts >= 0),
    -- When a PENDING mail is due.
    next_attempt_at  INTEGER NOT NULL,
    -- Until when a SENDING mail's worker may still record its outcome; past it, the mail is
    -- UNCERTAIN.
    lease_until      INTEGER,
    last_error       TEXT,
    to_address       TEXT,
    subject          TEXT,
    sent_at          INTEGER,
    created_at       INTEGER NOT NULL
) STRICT;
-- Fan-out is exactly once per message and account, however often the relay delivers the
-- message again.
CREATE UNIQUE INDEX mail_message_once ON mail_message (outbox_id, account_id);
CREATE INDEX mail_message_due ON mail_message (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX mail_message_sending ON mail_message (lease_until) WHERE status = 'SENDING';
CREATE INDEX mail_message_by_status ON mail_message (status, mail_id DESC);
