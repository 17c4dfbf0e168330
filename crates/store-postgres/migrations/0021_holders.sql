-- Ticket holders (issue 39): who will use each ticket, asked before payment, carried on the
-- ticket, changeable by its owner until the event's cutoff.

-- What the event asks of each holder (JSON: nameRequired, questions, changeCutoffSeconds);
-- NULL: a name may be given, nothing is asked.
ALTER TABLE event ADD COLUMN holder_policy text;

-- The holder given for one ticket of a hold before its checkout: a seat's (slot = seat id)
-- or a tier unit's (slot = 'unit:<n>', n counted from 1 in the order's unit order). Copied
-- onto the tickets when they are issued; replaced whole by each PUT.
CREATE TABLE hold_holder (
    event_id    text NOT NULL,
    hold_id     text NOT NULL,
    slot        text NOT NULL,
    name        text,
    -- The answers by question id, a JSON object.
    answers     text NOT NULL DEFAULT '{}',
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (event_id, hold_id, slot)
);

-- The ticket's holder (NULL name and answers: the account that holds the ticket, as after
-- a transfer or an exchange).
ALTER TABLE ticket ADD COLUMN holder_name text;
ALTER TABLE ticket ADD COLUMN holder_answers text;
