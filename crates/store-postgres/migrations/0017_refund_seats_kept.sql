-- An organiser's refund of chosen tickets may keep their seats off sale (releaseSeats false):
-- the tickets are void, the seats stay sold to the order's hold.
ALTER TABLE refund ADD COLUMN seats_released boolean NOT NULL DEFAULT true;
