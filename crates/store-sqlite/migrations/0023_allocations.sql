-- Allocations, comps and the box office (issue 40). What an allocation still keeps is not
-- here: each kept seat or unit is a hold of the allocation's system account
-- ('allocation:<id>', which no token can name) that lapses at its releaseAt. These tables
-- hold what the holds cannot say: the allocation's name and what it was given, the comps
-- issued from it, and the orders sold at the box office.

-- An allocation as given (on creation or added later): `definition` is the JSON of
-- `boxoffice_domain::allocation::Allocation`.
CREATE TABLE allocation (
    event_id       TEXT NOT NULL,
    allocation_id  TEXT NOT NULL,
    definition     TEXT NOT NULL CHECK (json_valid(definition)),
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (event_id, allocation_id)
);

-- A comp: an order of amount 0 confirmed for `account_id` from what `allocation_id` kept.
-- No foreign key to `allocation`: a shard move deletes an event's tables in its own order;
-- `boxoffice check` finds a comp that names no allocation.
CREATE TABLE allocation_comp (
    event_id       TEXT NOT NULL,
    order_id       TEXT NOT NULL,
    allocation_id  TEXT NOT NULL,
    account_id     TEXT NOT NULL,
    -- The operator who issued it.
    issued_by      TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (event_id, order_id)
);

-- A sale at the box office: the order, how it was paid, who sold it, and the buyer if given.
CREATE TABLE box_office_sale (
    event_id       TEXT NOT NULL,
    order_id       TEXT NOT NULL,
    payment_kind   TEXT NOT NULL CHECK (payment_kind IN ('cash', 'card_present')),
    sold_by        TEXT NOT NULL,
    buyer_email    TEXT,
    buyer_name     TEXT,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (event_id, order_id)
);
