-- Ticket types, fees and tax shown all-in, and promo codes (issue 40).

-- Each ticket of a hold priced (`boxoffice_domain::pricing::PriceLine`): its type, the face
-- value charged, what a promo code took off it, its fees, its tax (part of face and fees when
-- the tax is included) and what the fan pays for it. Line 0 is the order's own fees (face 0,
-- type '_order'); lines 1..n the tickets in the hold's seat order (a tier's units in order).
-- Written in the group transaction that creates the hold (rewritten when a promo code is
-- applied), for events with ticket types, fees or tax and for holds with a promo code; a hold
-- without lines is priced by its seats JSON and total as before. The hold's and its order's
-- answers, the report and `boxoffice check` (an order's total is the sum of its lines) read
-- them.
CREATE TABLE hold_line (
    event_id        TEXT NOT NULL,
    hold_id         TEXT NOT NULL,
    line            INTEGER NOT NULL CHECK (line >= 0),
    seat_id         TEXT,
    ticket_type     TEXT NOT NULL,
    face_minor      INTEGER NOT NULL CHECK (face_minor >= 0),
    discount_minor  INTEGER NOT NULL CHECK (discount_minor >= 0),
    fees_minor      INTEGER NOT NULL CHECK (fees_minor >= 0),
    tax_minor       INTEGER NOT NULL CHECK (tax_minor >= 0),
    all_in_minor    INTEGER NOT NULL CHECK (all_in_minor >= 0),
    PRIMARY KEY (event_id, hold_id, line)
) STRICT;

-- An event's promo codes: a share or an amount off the face value of each eligible ticket
-- (`ticket_types`, a JSON array; '[]': every type), at most `max_uses` checkouts, between
-- `valid_from` and `valid_until` (NULL: open). `uses` only grows by a conditional update
-- (`uses < max_uses`), so racing checkouts cannot use a code more than `max_uses` times.
CREATE TABLE promo_code (
    event_id          TEXT NOT NULL,
    code              TEXT NOT NULL,
    percent_off_bp    INTEGER NOT NULL CHECK (percent_off_bp BETWEEN 0 AND 10000),
    amount_off_minor  INTEGER NOT NULL CHECK (amount_off_minor >= 0),
    ticket_types      TEXT NOT NULL DEFAULT '[]',
    max_uses          INTEGER NOT NULL CHECK (max_uses >= 1),
    uses              INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0 AND uses <= max_uses),
    valid_from        INTEGER,
    valid_until       INTEGER,
    created_at        INTEGER NOT NULL,
    PRIMARY KEY (event_id, code)
) STRICT;

-- The code applied to a hold (one per hold): its use is counted once, however often the
-- hold's checkout is retried.
CREATE TABLE hold_promo (
    event_id    TEXT NOT NULL,
    hold_id     TEXT NOT NULL,
    code        TEXT NOT NULL,
    applied_at  INTEGER NOT NULL,
    PRIMARY KEY (event_id, hold_id)
) STRICT;
