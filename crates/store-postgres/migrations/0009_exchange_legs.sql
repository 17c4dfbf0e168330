-- Exchanges across shards (issue 17, DESIGN §7): when the old event and the target event live
-- on different shards, each shard keeps its own row of the exchange, under the same id.
--   BOTH   both sides in this database, written in one transaction (every exchange before).
--   OUT    the old event's shard: the record of the mark on the old tickets (PAYMENT_REQUIRED
--          while the exchange is open, then COMPLETED with the swap, or FAILED/EXPIRED with the
--          marks taken back). new_hold_id names the hold on the other shard.
--   IN     the target event's shard: the new hold (and order), as any exchange's, but the old
--          tickets are not here; its status is what the OUT row follows.
--   ABORT  the target event's shard: written when the IN row never came (the request died
--          between the two steps); the IN row can no longer be written after it.
ALTER TABLE exchange ADD COLUMN leg text NOT NULL DEFAULT 'BOTH'
    CHECK (leg IN ('BOTH', 'OUT', 'IN', 'ABORT'));
-- The settler looks for open OUT rows.
CREATE INDEX exchange_open_out ON exchange (updated_at) WHERE leg = 'OUT' AND status = 'PAYMENT_REQUIRED';
