-- Migration 15: a lease records its holder, the key of the delivery process that claimed it, on which
-- that process holds a session advisory lock for its whole life; a lease whose holder's lock is not held
-- (a process killed, or its connection lost) is freed at once instead of when it runs out (schema.sql).
ALTER TABLE webhook_deliveries ADD COLUMN lease_holder integer;
CREATE SEQUENCE webhook_lease_holders AS integer CYCLE;
