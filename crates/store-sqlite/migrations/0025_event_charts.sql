-- Events created on a venue chart (issue 41): the chart as the event copied it, with the price
-- of each of its categories. The copy is the event's own (it never reads venue_chart again)
-- and the one place its seats' labels, positions, categories and kinds are kept; a seat's id
-- is its places in the copy (docs/VENUES.md), so the seat rows need no new column, and an
-- event without a chart has no row here.
CREATE TABLE event_chart (
    event_id         TEXT PRIMARY KEY REFERENCES event (event_id),
    -- The stored chart it was copied from, for the record.
    chart_id         TEXT NOT NULL,
    -- The chart as the API spells it (boxoffice_domain::venue::VenueChart's JSON).
    chart            TEXT NOT NULL CHECK (json_valid(chart)),
    -- {"<category key>": <standard face price in minor units>}.
    category_prices  TEXT NOT NULL CHECK (json_valid(category_prices))
);
