-- Events created on a venue chart (issue 41): the chart as the event copied it, with the price
-- of each of its categories. A stored chart never changes, but an event must not depend on
-- the venue_chart row (which lives in the home shard, not the event's): the copy is the event's
-- own, moved with it, and the one place its seats' labels, positions, categories and kinds are
-- kept. A seat's id is its places in this copy (docs/VENUES.md), so the seat rows need no new
-- column, and an event without a chart has no row here.
CREATE TABLE event_chart (
    event_id         text PRIMARY KEY REFERENCES event (event_id),
    -- The stored chart it was copied from, for the record.
    chart_id         text NOT NULL,
    -- The chart as the API spells it (boxoffice_domain::venue::VenueChart's JSON). Text, not
    -- jsonb: read and written whole, never queried inside.
    chart            text NOT NULL,
    -- {"<category key>": <standard face price in minor units>}, every category the chart
    -- uses priced.
    category_prices  text NOT NULL
);
