-- Migration 26: requests are counted by reservations each process takes of a window (rate_limit_counters keeps
-- what the last one got) and served from memory, and the principals each API process keeps are dropped when
-- a write changes one (notify_principals). The request's count and page are no longer one call:
-- authenticate_and_count and counted_shipment_page go.
DROP FUNCTION IF EXISTS counted_shipment_page(bytea, text, integer, text, text, integer, bigint, bigint[], boolean,
                                              text[], timestamptz, timestamptz, timestamptz, timestamptz, bigint,
                                              bigint[]);
DROP FUNCTION IF EXISTS authenticate_and_count(bytea, text, integer);
ALTER TABLE rate_limit_counters ADD COLUMN IF NOT EXISTS granted integer NOT NULL DEFAULT 0;

-- How many requests a process is given of a bucket's window when it asks for `wanted` and `taken` of the
-- window's `quota` are reserved already: what it asked for, but never more than a sixteenth of what is
-- left (at least one), so that near the limit the reservations shrink to one request and a process holding
-- some leaves the rest to the others; none once the window is spent.
CREATE OR REPLACE FUNCTION reservation(wanted integer, quota integer, taken integer) RETURNS integer
LANGUAGE sql IMMUTABLE AS $$
  SELECT least(wanted, greatest(0, quota - taken), greatest(1, (quota - taken) / 16))
$$;

-- A token's principal, its user or its organization changed: each API process drops the principals it
-- keeps (models/principals.py), on every host, within the moment it takes to hear this.
CREATE OR REPLACE FUNCTION notify_principals() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('shiptrack_principals', '');
  RETURN NULL;
END
$$;

-- Every write that can change what token_principal answers, whichever writer makes it (the CLI, the
-- application, a SQL console), and only those: a token's last use is written without one.
CREATE OR REPLACE TRIGGER tokens_notify_principals
  AFTER INSERT OR DELETE OR UPDATE OF organization_id, user_id, name, fingerprint, scopes, expires_at, revoked_at
  ON tokens FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER memberships_notify_principals
  AFTER INSERT OR DELETE OR UPDATE OF organization_id, user_id, removed_at
  ON memberships FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER organizations_notify_principals
  AFTER DELETE OR UPDATE OF id, name, slug, api_version
  ON organizations FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER users_notify_principals
  AFTER DELETE OR UPDATE OF id, email
  ON users FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER tokens_truncate_notify_principals
  AFTER TRUNCATE ON tokens FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER memberships_truncate_notify_principals
  AFTER TRUNCATE ON memberships FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER organizations_truncate_notify_principals
  AFTER TRUNCATE ON organizations FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
CREATE OR REPLACE TRIGGER users_truncate_notify_principals
  AFTER TRUNCATE ON users FOR EACH STATEMENT EXECUTE FUNCTION notify_principals();
