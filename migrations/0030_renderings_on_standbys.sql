-- Migration 30: stored renderings are WAL-logged, so that a hot standby has them and serves the reads that
-- join them (DATABASE_REPLICA_URL, docs/scaling.md): an unlogged table cannot be read during recovery.
ALTER TABLE shipment_renderings SET LOGGED;
