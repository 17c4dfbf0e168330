-- Best available reads a section's first free seats in (row, seat) order, a few hundred per
-- batch, instead of every seat of the section (see hold_batch, read_free_seats).
CREATE INDEX seat_by_place ON seat (event_id, section, row_no, seat_no);
