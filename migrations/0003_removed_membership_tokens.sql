-- Migration 3: a removed membership's tokens never work again, whoever removes or re-adds the member
-- (issue 10; docs/authentication.md).  Idempotent: CREATE OR REPLACE.

-- A removed membership's tokens never work again, whichever writer removes or re-adds the member
-- (the CLI, the application, a SQL console): they are revoked when the membership is removed
-- (removed_at set, or the row deleted), and any token still active when a membership starts or
-- restarts (INSERT, removed_at cleared) is revoked too, as it can only be left from an earlier
-- membership (a DELETE, TRUNCATE or restore that ran without this trigger).  A membership moved
-- to another organization or user counts as removed for the old pair and started for the new.
CREATE OR REPLACE FUNCTION memberships_revoke_tokens() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE'
     OR (TG_OP = 'UPDATE' AND (OLD.organization_id, OLD.user_id) IS DISTINCT FROM (NEW.organization_id, NEW.user_id)) THEN
    UPDATE tokens SET revoked_at = now()
     WHERE organization_id = OLD.organization_id AND user_id = OLD.user_id AND revoked_at IS NULL;
  END IF;
  IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND (
       NEW.removed_at IS NOT NULL OR OLD.removed_at IS NOT NULL
       OR (OLD.organization_id, OLD.user_id) IS DISTINCT FROM (NEW.organization_id, NEW.user_id))) THEN
    UPDATE tokens SET revoked_at = now()
     WHERE organization_id = NEW.organization_id AND user_id = NEW.user_id AND revoked_at IS NULL;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER memberships_revoke_tokens
  AFTER INSERT OR UPDATE OR DELETE ON memberships
  FOR EACH ROW EXECUTE FUNCTION memberships_revoke_tokens();
