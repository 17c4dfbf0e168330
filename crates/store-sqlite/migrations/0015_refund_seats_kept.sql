-- An organiser's refund of chosen tickets may keep their seats off sale (releaseSeats false):
-- the tickets are void, the seats stay sold to the order's hold.
ALTER TABLE refund ADD COLUMN seats_released INTEGER NOT NULL DEFAULT 1 CHECK (seats_released IN (0, 1));
