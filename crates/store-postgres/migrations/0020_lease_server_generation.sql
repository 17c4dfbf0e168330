-- A lease is good only on the server it was taken on (issue 38): the generation of that
-- server (its postmaster's start time, in microseconds) is kept with the lease, and a group
-- or a renewal on any other server (the standby a failover promoted, the primary restarted
-- after a crash) finds it stale. The writer takes the lease again (epoch + 1) and reloads its
-- event from the server it now writes to. 0 for the rows written before (stale everywhere).
ALTER TABLE event_lease ADD COLUMN server_generation BIGINT NOT NULL DEFAULT 0;
