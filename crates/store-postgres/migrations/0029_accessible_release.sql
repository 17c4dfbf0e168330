-- Accessible seats kept until a time (issue 41, item 3): until this instant (the store's
-- clock) an event's wheelchair spaces and companion seats are held only by holds that ask for
-- accessible places. NULL: they sell to everyone from the start.
ALTER TABLE event_chart ADD COLUMN accessible_release_at timestamptz;
