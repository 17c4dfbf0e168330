-- Mail to fans (issue 39): an account's address and language, and one mail per (outbox
-- message, account). The relay fans a delivered message out into mails; the mail worker
-- sends them through SMTP, outside any transaction, at most once each: a mail is SENDING
-- (committed) before the SMTP transaction starts and SENT after the server accepted it; a
-- SENDING mail whose lease ended is never sent again blindly but becomes UNCERTAIN, for an
-- operator to resend.

CREATE TABLE account (
    account_id    text PRIMARY KEY,
    -- Where mail goes; NULL: nowhere (the mail is recorded NO_ADDRESS).
    email         text CHECK (length(email) BETWEEN 3 AND 254),
    -- Who gave the address: the identity token's email claim, or the fan (PUT /v1/me). A
    -- token never overwrites the fan's choice.
    email_source  text CHECK (email_source IN ('TOKEN', 'FAN')),
    -- The language of the account's mail (en, de, fr, es, zh); NULL: English.
    locale        text,
    updated_at    timestamptz NOT NULL
);

CREATE TABLE mail_message (
    mail_id          bigserial PRIMARY KEY,
    -- The outbox message's id (the global one behind shards). No foreign key: outbox rows
    -- may live on another shard.
    outbox_id        bigint NOT NULL,
    account_id       text NOT NULL,
    -- What the mail says (ORDER_TICKETS, EXCHANGE_TICKETS, ...).
    kind             text NOT NULL,
    -- The outbox message's JSON payload, rendered when the mail is sent.
    payload          text NOT NULL,
    status           text NOT NULL CHECK (status IN
                         ('PENDING', 'SENDING', 'SENT', 'FAILED', 'UNCERTAIN', 'NO_ADDRESS')),
    n_attempts       integer NOT NULL DEFAULT 0 CHECK (n_attempts >= 0),
    -- When a PENDING mail is due.
    next_attempt_at  timestamptz NOT NULL,
    -- Until when a SENDING mail's worker may still record its outcome; past it, the mail is
    -- UNCERTAIN.
    lease_until      timestamptz,
    last_error       text,
    to_address       text,
    subject          text,
    sent_at          timestamptz,
    created_at       timestamptz NOT NULL
);
-- Fan-out is exactly once per message and account, however often the relay delivers the
-- message again.
CREATE UNIQUE INDEX mail_message_once ON mail_message (outbox_id, account_id);
CREATE INDEX mail_message_due ON mail_message (next_attempt_at) WHERE status = 'PENDING';
CREATE INDEX mail_message_sending ON mail_message (lease_until) WHERE status = 'SENDING';
CREATE INDEX mail_message_by_status ON mail_message (status, mail_id DESC);
