-- Shipment tracking read API: the whole database contract.
--
-- The organization's application writes shipments, tracking data, documents,
-- alerts and checks; this service reads them and owns its own tables (tokens,
-- rate limits, webhook endpoints, events, deliveries, attempts).  Applying this
-- file to an empty database creates everything; applying it again is harmless.
--
-- Every API id is a prefix plus the bigint primary key: shp_42 is shipments.id = 42.
-- Rules of the specification that concern stored values are kept here (CHECKs,
-- defaults and BEFORE triggers), so every writer obeys them.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- ---------------------------------------------------------------------------
-- Small pure helpers
-- ---------------------------------------------------------------------------

-- Upper case without spaces or dashes: how transport references and container
-- numbers are compared when searching.
CREATE OR REPLACE FUNCTION compact_reference(value text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT upper(translate(value, ' -', ''))
$$;

-- array_to_string is only STABLE; this wrapper lets produce arrays be indexed.
CREATE OR REPLACE FUNCTION produce_text(names text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_to_string(names, ' ')
$$;

-- Canonical transport reference: air waybills as 'ddd-dddddddd' (valid mod-7
-- check digit), everything else upper case without spaces or dashes; blank is null.
CREATE OR REPLACE FUNCTION canonical_transport_reference(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  compact text := compact_reference(btrim(value));
BEGIN
  IF compact IS NULL OR compact = '' THEN
    RETURN NULL;
  END IF;
  IF compact ~ '^[0-9]{11}$'
     AND substr(compact, 4, 7)::bigint % 7 = substr(compact, 11, 1)::int THEN
    RETURN substr(compact, 1, 3) || '-' || substr(compact, 4);
  END IF;
  RETURN compact;
END
$$;

-- The kind of a canonical transport reference, or null when it matches none.
CREATE OR REPLACE FUNCTION transport_reference_kind(canonical text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN canonical IS NULL THEN NULL
    WHEN canonical ~ '^[0-9]{3}-[0-9]{8}$' THEN 'awb'
    WHEN canonical ~ '^[A-Z]{3}[UJZ][0-9]{7}$' THEN 'container'
    WHEN canonical ~ '^[A-Z0-9]{6,20}$' THEN 'bill_of_lading'
    ELSE NULL
  END
$$;

-- A timestamp every reader can show: finite, and inside years 1 to 9999 in UTC with a day to spare at
-- each end, so that it also has a four-digit year wherever the API writes it, local offsets (up to 18
-- hours) included. 'infinity', '-infinity', BC dates and years past 9999 fail it: the API writes ISO 8601
-- timestamps, and Python's datetime (psycopg2's type) holds nothing else. Every timestamp column of the
-- application's tables is held to it by a CHECK named <table>_<column>_is_api_timestamp (but effective_eta,
-- which only ever holds a value of such a column).
CREATE OR REPLACE FUNCTION is_api_timestamp(value timestamptz) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value >= '0001-01-02 00:00:00+00' AND value < '9999-12-31 00:00:00+00'
$$;

-- A number every reader can show: not 'NaN' nor an infinity, which JSON has no way to write. Every
-- numeric column of the application's tables is held to it by a CHECK named <table>_<column>_is_api_number.
CREATE OR REPLACE FUNCTION is_api_number(value numeric) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value NOT IN ('NaN', 'Infinity', '-Infinity')
$$;

-- A webhook endpoint's secret as Standard Webhooks gives it: 'whsec_' and the standard base64 (groups of
-- four, '=' padded) of 24 to 64 bytes; anything else cannot sign (delivery/signing.py).
CREATE OR REPLACE FUNCTION is_webhook_secret(value text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT value ~ '^whsec[_]([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$'
     AND (length(value) - 6) / 4 * 3 - (length(value) - length(rtrim(value, '='))) BETWEEN 24 AND 64
$$;

-- Hex value of a label colour; a label without colour shows as gray.
CREATE OR REPLACE FUNCTION label_color_hex(color text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE coalesce(color, 'gray')
    WHEN 'gray' THEN '#6b7280' WHEN 'red' THEN '#ef4444'
    WHEN 'orange' THEN '#f97316' WHEN 'amber' THEN '#f59e0b'
    WHEN 'green' THEN '#22c55e' WHEN 'teal' THEN '#14b8a6'
    WHEN 'blue' THEN '#3b82f6' WHEN 'indigo' THEN '#6366f1'
    WHEN 'purple' THEN '#a855f7' WHEN 'pink' THEN '#ec4899'
  END
$$;

-- Position of a milestone in the usual order of a journey (the order of the
-- specification's list); events without a time are placed by it.
CREATE OR REPLACE FUNCTION milestone_rank(milestone text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT array_position(ARRAY[
    'booked', 'received_from_shipper', 'empty_pickup', 'stuffed', 'gate_in',
    'manifested', 'loaded', 'departed', 'transshipment_arrival',
    'transshipment_discharge', 'transferred', 'transshipment_load',
    'transshipment_departure', 'arrived', 'discharged', 'customs_cleared',
    'notified', 'available_for_pickup', 'gate_out', 'delivered', 'stripped',
    'empty_return', 'eta_revised', 'exception', 'untracked'], milestone)
$$;

-- ---------------------------------------------------------------------------
-- Organizations, people, tokens
-- ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS organizations (
  id          bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  name        text NOT NULL CHECK (btrim(name) <> ''),
  slug        text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
  -- Pinned API version; null until the first request without Service-Version.
  api_version text CHECK (api_version ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'),
  -- The service's own domain, refused as a webhook host (with its subdomains).
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS users (
  id         bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  email      text NOT NULL CHECK (email ~ '^[^@\s]+@[^@\s]+$'),
  name       text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS users_email_key ON users (lower(email));

CREATE TABLE IF NOT EXISTS memberships (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  role            text NOT NULL CHECK (role IN ('member', 'admin', 'owner')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  -- A member who left or was removed; their tokens stop working at once.
  removed_at      timestamptz,
  UNIQUE (organization_id, user_id)
);

CREATE TABLE IF NOT EXISTS tokens (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  user_id         bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
  name            text NOT NULL CHECK (btrim(name) <> ''),
  -- SHA-256 of the token value; the value itself is never stored.
  fingerprint     bytea NOT NULL UNIQUE CHECK (length(fingerprint) = 32),
  scopes          text[] NOT NULL DEFAULT ARRAY['read'] CHECK (scopes = ARRAY['read']),
  expires_at      timestamptz,
  revoked_at      timestamptz,
  last_used_at    timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now()
);
-- tokens list / active-token count per organization
CREATE INDEX IF NOT EXISTS tokens_organization_idx ON tokens (organization_id) WHERE revoked_at IS NULL;

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

-- ---------------------------------------------------------------------------
-- Shipments and what hangs off them (written by the application)
-- ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS labels (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  name            text NOT NULL CHECK (btrim(name) <> ''),
  color           text CHECK (color IN ('gray', 'red', 'orange', 'amber', 'green',
                                        'teal', 'blue', 'indigo', 'purple', 'pink')),
  color_hex       text GENERATED ALWAYS AS (label_color_hex(color)) STORED,
  UNIQUE (organization_id, name)
);

CREATE TABLE IF NOT EXISTS shipments (
  id                       bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id          bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  reference                text NOT NULL CHECK (btrim(reference) <> ''),
  erp_reference            text,
  transport_reference      text,
  transport_reference_type text CHECK (transport_reference_type IN ('container', 'awb', 'bill_of_lading')),
  transport_type           text CHECK (transport_type IN ('ocean', 'air', 'road')),
  cargo_type               text CHECK (cargo_type IN ('ambient', 'reefer', 'frozen')),
  temperature_celsius      numeric(5, 2),
  status                   text NOT NULL DEFAULT 'draft'
                           CHECK (status IN ('draft', 'validated', 'in_transit', 'arrived', 'error', 'in_warehouse')),
  -- Hidden facts: never exposed, never evented.
  awaiting_approval        boolean NOT NULL DEFAULT false,
  owned_elsewhere          boolean NOT NULL DEFAULT false,
  archived                 boolean NOT NULL DEFAULT false,
  archived_at              timestamptz,
  validated_at             timestamptz,
  approved_at              timestamptz,
  origin_location          text,
  origin_country           text,
  origin_timezone          text CHECK (origin_timezone ~ '^[+-][0-9]{2}:[0-9]{2}$'),
  destination_location     text,
  destination_country      text,
  destination_timezone     text CHECK (destination_timezone ~ '^[+-][0-9]{2}:[0-9]{2}$'),
  etd                      timestamptz,
  eta                      timestamptz,
  -- eta, else the earliest container eta; kept by triggers on both tables.
  effective_eta            timestamptz,
  original_eta             timestamptz,
  predicted_eta            timestamptz,
  carrier_name             text,
  carrier_scac             text,
  tracking_state           text NOT NULL DEFAULT 'none'
                           CHECK (tracking_state IN ('available', 'unavailable', 'pending', 'not_started',
                                                     'awaiting_reference', 'none')),
  tracking_status          text,
  unavailable_reason       text CHECK (unavailable_reason IN ('unsupported_carrier', 'invalid_reference',
                                                              'not_found', 'provider_error', 'past_voyage')),
  halted_reason            text CHECK (halted_reason IN ('errored', 'dropped')),
  last_tracked_at          timestamptz,
  carrier_updated_at       timestamptz,
  consignor                text,
  consignee                text,
  notify_party             text,
  -- Produce typed in the draft entry, shown until a packing list is read.
  draft_produce            text[] NOT NULL DEFAULT '{}',
  notes                    text,
  load_type                text,
  house_bl                 text,
  forwarder_reference      text,
  forwarder_eta            timestamptz,
  -- Free-time terms set on the shipment itself (first of the three sources).
  demurrage_free_days      integer CHECK (demurrage_free_days >= 0),
  detention_free_days      integer CHECK (detention_free_days >= 0),
  free_days_basis          text CHECK (free_days_basis IN ('calendar', 'working')),
  -- What free-text search matches, upper case: references (transport reference and container
  -- numbers also without spaces or dashes), parties and produce; kept by triggers.
  search_text              text,
  created_at               timestamptz NOT NULL DEFAULT now(),
  updated_at               timestamptz NOT NULL DEFAULT now(),
  -- Kept by shipments_before_write for GET /changes (docs/sync.md); writers never set them.
  -- revision: 1 at insert, +1 per transaction that changes anything GET /shipments/{id} shows
  -- (child tables touch their shipment through touch_parent_shipments).
  revision                 bigint NOT NULL DEFAULT 1,
  -- The transaction of the latest change: the change feed's order.
  change_xid               xid8 NOT NULL DEFAULT '1',
  -- Once visible, a shipment that becomes hidden shows in the feed as deleted; never visible, never there.
  ever_visible             boolean NOT NULL DEFAULT true,
  -- What GET /shipments/{id} shows from checks, pallets, packing lists and lines (docs/decisions.md,
  -- "Derived shipment fields"), kept by shipments_before_write in the transaction that writes them
  -- (the child tables touch their shipment); writers never set them.  Sums are unconstrained numeric
  -- so that they keep the scale of the lines (0 with no lines, as the API has always shown it).
  checks_total             integer NOT NULL DEFAULT 0,
  checks_passed            integer NOT NULL DEFAULT 0,
  checks_failed            integer NOT NULL DEFAULT 0,
  checks_warnings          integer NOT NULL DEFAULT 0,
  checks_skipped           integer NOT NULL DEFAULT 0,
  checks_pending           integer NOT NULL DEFAULT 0,
  cargo_pallets            integer NOT NULL DEFAULT 0,
  cargo_boxes              bigint NOT NULL DEFAULT 0,
  cargo_net_weight_kg      numeric NOT NULL DEFAULT 0,
  cargo_gross_weight_kg    numeric NOT NULL DEFAULT 0,
  organic                  boolean NOT NULL DEFAULT false,
  produce                  text[] NOT NULL DEFAULT '{}',
  -- The transaction that gave the shipment its organization (its insert, or the update that moved it):
  -- a state of that transaction was never seen by the organization, so hiding the shipment before it
  -- commits leaves no deletion in the feed.  Kept by shipments_before_write; writers never set it.
  joined_xid               xid8 NOT NULL DEFAULT '1',
  UNIQUE (organization_id, reference),
  -- The key of the organization's rows that hang off a shipment (containers, documents, packing lists,
  -- alerts, checks, check runs): they name both, so they can never be another organization's, and they
  -- follow the shipment when it moves (ON UPDATE CASCADE).
  UNIQUE (id, organization_id),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT shipments_archived_at_is_api_timestamp CHECK (is_api_timestamp(archived_at)),
  CONSTRAINT shipments_validated_at_is_api_timestamp CHECK (is_api_timestamp(validated_at)),
  CONSTRAINT shipments_approved_at_is_api_timestamp CHECK (is_api_timestamp(approved_at)),
  CONSTRAINT shipments_etd_is_api_timestamp CHECK (is_api_timestamp(etd)),
  CONSTRAINT shipments_eta_is_api_timestamp CHECK (is_api_timestamp(eta)),
  CONSTRAINT shipments_original_eta_is_api_timestamp CHECK (is_api_timestamp(original_eta)),
  CONSTRAINT shipments_predicted_eta_is_api_timestamp CHECK (is_api_timestamp(predicted_eta)),
  CONSTRAINT shipments_last_tracked_at_is_api_timestamp CHECK (is_api_timestamp(last_tracked_at)),
  CONSTRAINT shipments_carrier_updated_at_is_api_timestamp CHECK (is_api_timestamp(carrier_updated_at)),
  CONSTRAINT shipments_forwarder_eta_is_api_timestamp CHECK (is_api_timestamp(forwarder_eta)),
  CONSTRAINT shipments_created_at_is_api_timestamp CHECK (is_api_timestamp(created_at)),
  CONSTRAINT shipments_updated_at_is_api_timestamp CHECK (is_api_timestamp(updated_at)),
  CONSTRAINT shipments_temperature_celsius_is_api_number CHECK (is_api_number(temperature_celsius))
);

-- list_shipments: visible shipments of an organization, newest first (keyset on id).
CREATE INDEX IF NOT EXISTS shipments_list_idx ON shipments (organization_id, archived, id DESC)
  WHERE NOT awaiting_approval AND NOT owned_elsewhere;
-- list_shipments?archived=any: every visible shipment, newest first.
CREATE INDEX IF NOT EXISTS shipments_all_idx ON shipments (organization_id, id DESC)
  WHERE NOT awaiting_approval AND NOT owned_elsewhere;
-- list_shipments?status=...
CREATE INDEX IF NOT EXISTS shipments_status_idx ON shipments (organization_id, status, id DESC)
  WHERE NOT awaiting_approval AND NOT owned_elsewhere;
-- list_shipments?eta_after/eta_before
CREATE INDEX IF NOT EXISTS shipments_effective_eta_idx ON shipments (organization_id, effective_eta)
  WHERE NOT awaiting_approval AND NOT owned_elsewhere;
-- list_shipments?created_after/created_before
CREATE INDEX IF NOT EXISTS shipments_created_at_idx ON shipments (organization_id, created_at)
  WHERE NOT awaiting_approval AND NOT owned_elsewhere;
-- list_shipments?q=...: partial matches on the search document, fuzzy matches on the parties
CREATE INDEX IF NOT EXISTS shipments_search_trgm ON shipments USING gin (search_text gin_trgm_ops);
CREATE INDEX IF NOT EXISTS shipments_consignor_trgm ON shipments USING gin (consignor gin_trgm_ops);
CREATE INDEX IF NOT EXISTS shipments_consignee_trgm ON shipments USING gin (consignee gin_trgm_ops);
-- GET /changes: an organization's shipments in the order of their latest change (keyset on both).
CREATE INDEX IF NOT EXISTS shipments_changes_idx ON shipments (organization_id, change_xid, id) WHERE ever_visible;

-- Shipments deleted, or moved to another organization, after their organization saw them: GET /changes
-- shows them as deleted.  Kept for good (one small row each), so a mirror that polls rarely still
-- learns of every deletion.
CREATE TABLE IF NOT EXISTS deleted_shipments (
  id              bigint NOT NULL,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  revision        bigint NOT NULL,
  change_xid      xid8 NOT NULL DEFAULT pg_current_xact_id(),
  deleted_at      timestamptz NOT NULL DEFAULT now(),
  -- One row per organization that saw the shipment go: a shipment moved from one organization to
  -- another and on to a third leaves a deletion with each of the first two.
  PRIMARY KEY (id, organization_id)
);
CREATE INDEX IF NOT EXISTS deleted_shipments_changes_idx ON deleted_shipments (organization_id, change_xid, id);

-- Every key to shipments is DEFERRABLE (INITIALLY IMMEDIATE: checked at once, as any key, unless a
-- transaction says SET CONSTRAINTS ... DEFERRED). A bulk loader (demo/bulk.py) defers them to write a
-- shipment after its other rows, so its insert computes the derived columns once, from all of them.

-- Each shipment's JSON as GET /shipments/{id} shows it, made once per revision, version and renderer
-- (a digest of the code that shapes it) and served as stored while all three still match
-- (models/shipments.py RENDERED_PAGE_SQL). Only this service writes it; deleting every row is harmless.
-- It is WAL-logged (each rendering stored costs its WAL once) so that hot standbys have it: their reads
-- join it, and an UNLOGGED table cannot be read during recovery (docs/scaling.md).
CREATE TABLE IF NOT EXISTS shipment_renderings (
  shipment_id bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  api_version text NOT NULL,
  renderer    text NOT NULL,
  revision    bigint NOT NULL,
  body        text NOT NULL,
  rendered_at timestamptz NOT NULL DEFAULT now(),
  -- What the body is: the shipment as GET /shipments/{id} shows it, or the list GET
  -- /shipments/{id}/packing_lists answers (made only of rows that touch the shipment's revision).
  resource    text NOT NULL CHECK (resource IN ('shipment', 'packing_lists')),
  PRIMARY KEY (shipment_id, api_version, resource),
  -- The MD5 of the body, kept by the database whenever the body is written: ETags are made of it
  -- (docs/serving.md, "ETags"), so no request hashes the bytes it sends.
  body_md5    text GENERATED ALWAYS AS (md5(body)) STORED
);

CREATE TABLE IF NOT EXISTS shipment_labels (
  shipment_id bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  label_id    bigint NOT NULL REFERENCES labels (id) ON DELETE CASCADE,
  PRIMARY KEY (shipment_id, label_id)
);
-- list_shipments?labels=...: shipments carrying a label
CREATE INDEX IF NOT EXISTS shipment_labels_label_idx ON shipment_labels (label_id, shipment_id);

CREATE TABLE IF NOT EXISTS containers (
  id                  bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id     bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id         bigint NOT NULL,
  number              text CHECK (number ~ '^[A-Z]{4}[0-9]{7}$'),
  seal_number         text,
  vessel              text,
  voyage              text,
  port_of_loading     text,
  port_of_discharge   text,
  etd                 timestamptz,
  eta                 timestamptz,
  cargo_type          text CHECK (cargo_type IN ('ambient', 'reefer', 'frozen')),
  temperature_celsius numeric(5, 2),
  created_at          timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT containers_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT containers_etd_is_api_timestamp CHECK (is_api_timestamp(etd)),
  CONSTRAINT containers_eta_is_api_timestamp CHECK (is_api_timestamp(eta)),
  CONSTRAINT containers_created_at_is_api_timestamp CHECK (is_api_timestamp(created_at)),
  CONSTRAINT containers_temperature_celsius_is_api_number CHECK (is_api_number(temperature_celsius))
);
-- shipment containers (CONTAINERS_SQL in models/shipments.py), oldest first: created_at to the
-- second as shown, then id. AT TIME ZONE 'UTC' makes the expression immutable, so indexable.
CREATE INDEX IF NOT EXISTS containers_shipment_created_idx
  ON containers (shipment_id, date_trunc('second', created_at AT TIME ZONE 'UTC'), id);

CREATE TABLE IF NOT EXISTS shipment_legs (
  id                   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  shipment_id          bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  position             integer NOT NULL CHECK (position >= 0),
  transport_type       text CHECK (transport_type IN ('ocean', 'air', 'road')),
  carrier              text,
  transport_reference  text,
  origin_location      text,
  origin_country       text,
  origin_timezone      text CHECK (origin_timezone ~ '^[+-][0-9]{2}:[0-9]{2}$'),
  destination_location text,
  destination_country  text,
  destination_timezone text CHECK (destination_timezone ~ '^[+-][0-9]{2}:[0-9]{2}$'),
  etd                  timestamptz,
  eta                  timestamptz,
  UNIQUE (shipment_id, position),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT shipment_legs_etd_is_api_timestamp CHECK (is_api_timestamp(etd)),
  CONSTRAINT shipment_legs_eta_is_api_timestamp CHECK (is_api_timestamp(eta))
);

CREATE TABLE IF NOT EXISTS tracking_events (
  id                         bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  shipment_id                bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  milestone                  text NOT NULL CHECK (milestone_rank(milestone) IS NOT NULL),
  actual                     boolean NOT NULL DEFAULT true,
  occurred_at                timestamptz,
  -- Local UTC offset the source gave, in minutes; occurred_at_local is derived.
  occurred_at_offset_minutes integer CHECK (occurred_at_offset_minutes BETWEEN -1080 AND 1080),
  container_number           text,
  leg_index                  integer CHECK (leg_index >= 1),
  location_name              text,
  location_code              text,
  location_country_code      text CHECK (location_country_code ~ '^[A-Z]{2}$'),
  vessel_name                text,
  vessel_imo                 text,
  vessel_voyage              text,
  flight_number              text,
  latitude                   double precision CHECK (latitude BETWEEN -90 AND 90),
  longitude                  double precision CHECK (longitude BETWEEN -180 AND 180),
  created_at                 timestamptz NOT NULL DEFAULT now(),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT tracking_events_occurred_at_is_api_timestamp CHECK (is_api_timestamp(occurred_at)),
  CONSTRAINT tracking_events_created_at_is_api_timestamp CHECK (is_api_timestamp(created_at))
);
-- timeline events and free-time clocks of one shipment
CREATE INDEX IF NOT EXISTS tracking_events_shipment_idx ON tracking_events (shipment_id, occurred_at);
-- free_time: the tracking events the free-time engine reads (models/free_time_queries.py EVENT_MILESTONES), in
-- the order it reads them, with every column it reads (an index-only scan per shipment)
CREATE INDEX IF NOT EXISTS tracking_events_free_time_idx ON tracking_events (shipment_id, occurred_at, id)
  INCLUDE (milestone, actual, occurred_at_offset_minutes, container_number)
  WHERE milestone IN ('delivered', 'discharged', 'empty_return', 'gate_out', 'loaded', 'stripped',
                      'transshipment_discharge', 'transshipment_load', 'untracked');
-- free_time/at_risk: recent discharges, with what the candidate search reads of them (an index-only scan)
CREATE INDEX IF NOT EXISTS tracking_events_discharged_idx ON tracking_events (occurred_at, shipment_id)
  INCLUDE (container_number, occurred_at_offset_minutes) WHERE milestone = 'discharged' AND actual;
-- free_time/at_risk: a later gate-out of the same container stops a recent discharge's demurrage
CREATE INDEX IF NOT EXISTS tracking_events_gate_out_idx ON tracking_events (shipment_id, occurred_at)
  INCLUDE (container_number) WHERE milestone = 'gate_out' AND actual;
-- free_time/at_risk: the shipments it considers (ocean, active, not yet in the warehouse, visible), with
-- what the candidate search reads of them (an index-only scan)
CREATE INDEX IF NOT EXISTS shipments_free_time_idx ON shipments (organization_id, id)
  INCLUDE (carrier_name, demurrage_free_days)
  WHERE transport_type = 'ocean' AND NOT archived AND status <> 'in_warehouse'
    AND NOT awaiting_approval AND NOT owned_elsewhere;

CREATE TABLE IF NOT EXISTS eta_revisions (
  id             bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  shipment_id    bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  observed_at    timestamptz NOT NULL DEFAULT now(),
  previous_eta   timestamptz,
  new_eta        timestamptz NOT NULL,
  slip_seconds   bigint GENERATED ALWAYS AS (extract(epoch FROM new_eta - previous_eta)::bigint) STORED,
  first_estimate boolean NOT NULL DEFAULT false,
  backfilled     boolean NOT NULL DEFAULT false,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT eta_revisions_observed_at_is_api_timestamp CHECK (is_api_timestamp(observed_at)),
  CONSTRAINT eta_revisions_previous_eta_is_api_timestamp CHECK (is_api_timestamp(previous_eta)),
  CONSTRAINT eta_revisions_new_eta_is_api_timestamp CHECK (is_api_timestamp(new_eta))
);
-- timeline ETA revisions, oldest first
CREATE INDEX IF NOT EXISTS eta_revisions_shipment_idx ON eta_revisions (shipment_id, observed_at, id);

-- Free days an organization has agreed with a carrier (third source of terms).
CREATE TABLE IF NOT EXISTS carrier_terms (
  id                  bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id     bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  carrier             text NOT NULL,
  demurrage_free_days integer NOT NULL CHECK (demurrage_free_days >= 0),
  detention_free_days integer NOT NULL CHECK (detention_free_days >= 0),
  free_days_basis     text NOT NULL DEFAULT 'calendar' CHECK (free_days_basis IN ('calendar', 'working'))
);
CREATE UNIQUE INDEX IF NOT EXISTS carrier_terms_key ON carrier_terms (organization_id, lower(carrier));

-- ---------------------------------------------------------------------------
-- Documents, extracted data, packing lists
-- ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS documents (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id     bigint NOT NULL,
  type            text NOT NULL,
  filename        text NOT NULL,
  content_type    text NOT NULL DEFAULT 'application/octet-stream',
  byte_size       bigint NOT NULL DEFAULT 0 CHECK (byte_size >= 0),
  source          text NOT NULL DEFAULT 'email_upload',
  parse_status    text NOT NULL DEFAULT 'pending',
  page_range      text,
  -- Only 'current' records are exposed.
  record_kind     text NOT NULL DEFAULT 'current'
                  CHECK (record_kind IN ('current', 'replaced', 'reference_only', 'page_split')),
  replaced_by_id  bigint REFERENCES documents (id) ON DELETE SET NULL,
  -- Key of the file in the storage folder; null when there is no file.
  storage_key     text,
  scan_state      text CHECK (scan_state IN ('scanning', 'clean', 'blocked')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK (storage_key IS NULL OR scan_state IS NOT NULL),
  CONSTRAINT documents_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  -- The key of a packing list's document (packing_lists_document_fkey).
  UNIQUE (id, shipment_id),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT documents_created_at_is_api_timestamp CHECK (is_api_timestamp(created_at)),
  CONSTRAINT documents_updated_at_is_api_timestamp CHECK (is_api_timestamp(updated_at))
);
-- list_shipment_documents: current documents, oldest first (created_at to the second as shown, then id)
CREATE INDEX IF NOT EXISTS documents_shipment_created_idx
  ON documents (shipment_id, date_trunc('second', created_at AT TIME ZONE 'UTC'), id) WHERE record_kind = 'current';

-- Data extracted from a document; no row (or an empty object) means nothing extracted.
CREATE TABLE IF NOT EXISTS document_data (
  document_id  bigint PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
  schema       text,
  fields       jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(fields) = 'object'),
  extracted_at timestamptz NOT NULL DEFAULT now(),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT document_data_extracted_at_is_api_timestamp CHECK (is_api_timestamp(extracted_at))
);

-- Arrival notices carry free days (second source of terms); the latest wins.
CREATE TABLE IF NOT EXISTS arrival_notices (
  id                  bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  shipment_id         bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  document_id         bigint REFERENCES documents (id) ON DELETE SET NULL,
  received_at         timestamptz NOT NULL DEFAULT now(),
  demurrage_free_days integer CHECK (demurrage_free_days >= 0),
  detention_free_days integer CHECK (detention_free_days >= 0),
  free_days_basis     text CHECK (free_days_basis IN ('calendar', 'working')),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT arrival_notices_received_at_is_api_timestamp CHECK (is_api_timestamp(received_at))
);
CREATE INDEX IF NOT EXISTS arrival_notices_shipment_idx ON arrival_notices (shipment_id, received_at DESC);

CREATE TABLE IF NOT EXISTS packing_lists (
  id                     bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id        bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id            bigint NOT NULL,
  -- The document it was read from: one of the same shipment (packing_lists_document_fkey), so its
  -- own URL answers wherever the packing list is shown.
  document_id            bigint,
  container_id           bigint REFERENCES containers (id) ON DELETE SET NULL,
  reference              text NOT NULL DEFAULT '',
  declared_box_count     integer NOT NULL DEFAULT 0 CHECK (declared_box_count >= 0),
  declared_net_weight_kg numeric(12, 3) NOT NULL DEFAULT 0 CHECK (declared_net_weight_kg >= 0),
  -- A replaced packing list stays stored but is no longer exposed.
  is_current             boolean NOT NULL DEFAULT true,
  created_at             timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT packing_lists_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  CONSTRAINT packing_lists_document_fkey FOREIGN KEY (document_id, shipment_id)
    REFERENCES documents (id, shipment_id) ON DELETE SET NULL (document_id),
  -- The key of its pallets: a pallet names its packing list and its shipment (pallets_packing_list_fkey).
  UNIQUE (id, shipment_id),
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT packing_lists_created_at_is_api_timestamp CHECK (is_api_timestamp(created_at)),
  CONSTRAINT packing_lists_declared_net_weight_kg_is_api_number CHECK (is_api_number(declared_net_weight_kg))
);
-- list_shipment_packing_lists: packing lists of a shipment, oldest first (created_at to the second,
-- then id); also the shipment's has_packing_list test in list_shipments and the cascade index.
CREATE INDEX IF NOT EXISTS packing_lists_shipment_created_idx
  ON packing_lists (shipment_id, date_trunc('second', created_at AT TIME ZONE 'UTC'), id);

CREATE TABLE IF NOT EXISTS pallets (
  id               bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  shipment_id      bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  -- Null: a pallet on no packing list (unreachable, but counted in cargo).
  packing_list_id  bigint,
  container_id     bigint REFERENCES containers (id) ON DELETE SET NULL,
  pallet_number    text NOT NULL,
  -- A pallet's shipment is its packing list's: a packing list moved to another shipment takes its
  -- pallets along (and they their lines), and a pallet cannot be given another shipment alone.
  CONSTRAINT pallets_packing_list_fkey FOREIGN KEY (packing_list_id, shipment_id)
    REFERENCES packing_lists (id, shipment_id) ON UPDATE CASCADE ON DELETE CASCADE,
  -- The key of its lines (packing_lines_pallet_fkey).
  UNIQUE (id, shipment_id)
);
CREATE INDEX IF NOT EXISTS pallets_shipment_idx ON pallets (shipment_id, id);
CREATE INDEX IF NOT EXISTS pallets_packing_list_idx ON pallets (packing_list_id, id);

CREATE TABLE IF NOT EXISTS packing_lines (
  id               bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  pallet_id        bigint NOT NULL,
  -- Denormalised owner, so shipment-level sums and searches need no join; always its pallet's
  -- (packing_lines_pallet_fkey), so a line can only count for the shipment its pallet is on.
  shipment_id      bigint NOT NULL REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  line_index       integer NOT NULL CHECK (line_index >= 1),
  produce_name     text NOT NULL,
  produce_type     text NOT NULL DEFAULT '',
  variety          text NOT NULL DEFAULT '',
  calibre          text NOT NULL DEFAULT '',
  quality_category text NOT NULL DEFAULT '',
  pack_format      text NOT NULL DEFAULT '',
  label            text NOT NULL DEFAULT '',
  ggn              text NOT NULL DEFAULT '',
  organic          boolean NOT NULL DEFAULT false,
  box_count        integer NOT NULL DEFAULT 0 CHECK (box_count >= 0),
  box_weight_kg    numeric(10, 3) NOT NULL DEFAULT 0,
  net_weight_kg    numeric(12, 3) NOT NULL DEFAULT 0,
  gross_weight_kg  numeric(12, 3) NOT NULL DEFAULT 0,
  UNIQUE (pallet_id, line_index),
  CONSTRAINT packing_lines_pallet_fkey FOREIGN KEY (pallet_id, shipment_id)
    REFERENCES pallets (id, shipment_id) ON UPDATE CASCADE ON DELETE CASCADE,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT packing_lines_box_weight_kg_is_api_number CHECK (is_api_number(box_weight_kg)),
  CONSTRAINT packing_lines_net_weight_kg_is_api_number CHECK (is_api_number(net_weight_kg)),
  CONSTRAINT packing_lines_gross_weight_kg_is_api_number CHECK (is_api_number(gross_weight_kg))
);
-- shipment cargo sums, produce and organic
CREATE INDEX IF NOT EXISTS packing_lines_shipment_idx ON packing_lines (shipment_id);

-- Common aliases of produce names understood by search ('avo' -> 'Avocado').
CREATE TABLE IF NOT EXISTS produce_aliases (
  alias        text PRIMARY KEY CHECK (alias = lower(alias)),
  produce_name text NOT NULL
);

-- ---------------------------------------------------------------------------
-- Alerts and checks
-- ---------------------------------------------------------------------------

CREATE TABLE IF NOT EXISTS alert_kinds (
  key              text PRIMARY KEY,
  "group"          text NOT NULL,
  -- Internal kinds are stored but never listed or evented.
  customer_visible boolean NOT NULL DEFAULT true
);

CREATE TABLE IF NOT EXISTS alerts (
  id                bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id   bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id       bigint NOT NULL,
  key               text NOT NULL REFERENCES alert_kinds (key),
  severity          text NOT NULL DEFAULT 'warning',
  title             text NOT NULL,
  summary           text NOT NULL DEFAULT '',
  since             timestamptz NOT NULL DEFAULT now(),
  first_detected_at timestamptz NOT NULL DEFAULT now(),
  last_detected_at  timestamptz NOT NULL DEFAULT now(),
  resolved_at       timestamptz,
  CONSTRAINT alerts_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT alerts_since_is_api_timestamp CHECK (is_api_timestamp(since)),
  CONSTRAINT alerts_first_detected_at_is_api_timestamp CHECK (is_api_timestamp(first_detected_at)),
  CONSTRAINT alerts_last_detected_at_is_api_timestamp CHECK (is_api_timestamp(last_detected_at)),
  CONSTRAINT alerts_resolved_at_is_api_timestamp CHECK (is_api_timestamp(resolved_at))
);
-- list_alerts: open alerts, newest first
CREATE INDEX IF NOT EXISTS alerts_open_idx ON alerts (organization_id, id DESC) WHERE resolved_at IS NULL;
CREATE INDEX IF NOT EXISTS alerts_shipment_idx ON alerts (shipment_id, id DESC) WHERE resolved_at IS NULL;

CREATE TABLE IF NOT EXISTS check_runs (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id     bigint NOT NULL,
  started_at      timestamptz NOT NULL DEFAULT now(),
  -- Set when the run (and any automatic validation) finishes.
  finished_at     timestamptz,
  CONSTRAINT check_runs_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT check_runs_started_at_is_api_timestamp CHECK (is_api_timestamp(started_at)),
  CONSTRAINT check_runs_finished_at_is_api_timestamp CHECK (is_api_timestamp(finished_at))
);

-- The current result of each check of a shipment; a run updates them.
CREATE TABLE IF NOT EXISTS checks (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  shipment_id     bigint NOT NULL,
  check_run_id    bigint REFERENCES check_runs (id) ON DELETE SET NULL,
  key             text NOT NULL,
  category        text NOT NULL,
  status          text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'passed', 'failed', 'skipped', 'warning')),
  title           text NOT NULL,
  message         text NOT NULL DEFAULT '',
  ran_at          timestamptz NOT NULL DEFAULT now(),
  UNIQUE (shipment_id, key),
  CONSTRAINT checks_shipment_organization_fkey FOREIGN KEY (shipment_id, organization_id)
    REFERENCES shipments (id, organization_id) ON UPDATE CASCADE ON DELETE CASCADE DEFERRABLE,
  -- What every reader can show (is_api_timestamp, is_api_number above).
  CONSTRAINT checks_ran_at_is_api_timestamp CHECK (is_api_timestamp(ran_at))
);
-- list_checks?status=...: newest first per status
CREATE INDEX IF NOT EXISTS checks_list_idx ON checks (organization_id, status, id DESC);
-- list_checks with the default status filter (failed,warning): newest first without a sort.
CREATE INDEX IF NOT EXISTS checks_attention_idx ON checks (organization_id, id DESC)
  WHERE status IN ('failed', 'warning');
CREATE INDEX IF NOT EXISTS checks_run_idx ON checks (check_run_id);

-- ---------------------------------------------------------------------------
-- Histories: the lines of the database's life (docs/operations.md, "After a failover or a restore")
-- ---------------------------------------------------------------------------

-- A promoted standby, a restored backup or a copy of the database goes on from a point the line it
-- leaves may have passed: its sequences and transaction ids would hand out again numbers that line gave
-- to receivers (webhook-ids) and mirrors (GET /changes cursors). Each line is a history, known by the
-- server's system identifier, its timeline and the database's oid; a new one begins at the first write
-- that finds them changed (history() below). The first history changes no number.
CREATE TABLE IF NOT EXISTS histories (
  number            integer PRIMARY KEY CHECK (number >= 1),
  system_identifier bigint NOT NULL,
  timeline          integer NOT NULL,
  database_oid      oid NOT NULL,
  began_at          timestamptz NOT NULL DEFAULT now(),
  -- The event ids no event of this history has: every id sequence jumped 2^32 ahead when it began, past
  -- anything the line it left can have handed out (null for the first history). GET /events refuses
  -- starting_after in here.
  skipped_event_ids int8range,
  UNIQUE (system_identifier, timeline, database_oid)
);

-- Who the database is now: only on a primary (pg_walfile_name errors during recovery). The timeline is
-- the first 8 hex digits of the WAL file name; pg_control_checkpoint's lags a promotion until its checkpoint.
-- plpgsql, whose plans a session keeps: a SQL function returning a record is planned at every call (three
-- to six times the cost, measured with pgbench).
CREATE OR REPLACE FUNCTION history_identity(OUT system_identifier bigint, OUT timeline integer,
                                            OUT database_oid oid)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  system_identifier := (pg_control_system()).system_identifier;
  timeline := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int;
  SELECT d.oid INTO database_oid FROM pg_database d WHERE d.datname = current_database();
END
$$;

-- The history a read is in, writing nothing (GET /changes numbers its cursors with it): on a standby the
-- latest recorded (what it replayed is its primary's); on a primary the one its next write records.
CREATE OR REPLACE FUNCTION current_history() RETURNS integer
LANGUAGE plpgsql STABLE AS $$
DECLARE
  latest histories%ROWTYPE;
BEGIN
  SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
  IF NOT FOUND THEN
    RETURN 1;
  END IF;
  IF pg_is_in_recovery() OR (latest.system_identifier, latest.timeline, latest.database_oid)
                            = (SELECT i.system_identifier, i.timeline, i.database_oid FROM history_identity() i) THEN
    RETURN latest.number;
  END IF;
  RETURN latest.number + 1;
END
$$;

-- The history a write is in, begun first when the identity changed: under a lock (two sessions cannot
-- both begin one), every bigint sequence of the schema jumps 2^32 ahead, so no id the line left behind
-- handed out (webhook-ids above all) is handed out again. Called before this service's own tables hand
-- out an id (in_history: events, webhook endpoints, tokens, shipments) and by every write of a shipment
-- (shipments_before_write), once per transaction: the answer is kept in shiptrack.history_number until
-- the transaction ends, never longer (a session can outlive its standby's promotion). SECURITY DEFINER:
-- a writer allowed to insert rows need not be allowed to move sequences or lock this table.
CREATE OR REPLACE FUNCTION history() RETURNS integer
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
  jump constant bigint := 4294967296;
  known text := current_setting('shiptrack.history_number', true);
  latest histories%ROWTYPE;
  here record;
  events_before bigint;
  sequence record;
BEGIN
  IF known <> '' THEN
    RETURN known::integer;
  END IF;
  SELECT * INTO here FROM history_identity();
  SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
  IF NOT FOUND OR (latest.system_identifier, latest.timeline, latest.database_oid)
                  IS DISTINCT FROM (here.system_identifier, here.timeline, here.database_oid) THEN
    LOCK TABLE histories IN EXCLUSIVE MODE;
    SELECT * INTO latest FROM histories ORDER BY number DESC LIMIT 1;
    IF NOT FOUND THEN
      INSERT INTO histories (number, system_identifier, timeline, database_oid)
        VALUES (1, here.system_identifier, here.timeline, here.database_oid)
        RETURNING * INTO latest;
    ELSIF (latest.system_identifier, latest.timeline, latest.database_oid)
          IS DISTINCT FROM (here.system_identifier, here.timeline, here.database_oid) THEN
      SELECT coalesce(s.last_value, 0) INTO events_before
        FROM pg_sequences s
       WHERE format('%I.%I', s.schemaname, s.sequencename)::regclass
             = pg_get_serial_sequence('events', 'id')::regclass;
      FOR sequence IN
        SELECT format('%I.%I', s.schemaname, s.sequencename) AS name, coalesce(s.last_value, 0) AS last_value
          FROM pg_sequences s
         WHERE s.schemaname = current_schema() AND s.data_type = 'bigint'::regtype
           AND s.sequenceowner = current_user  -- the schema's (the function's owner); another role's is left be
      LOOP
        PERFORM setval(sequence.name, sequence.last_value + jump);
      END LOOP;
      INSERT INTO histories (number, system_identifier, timeline, database_oid, skipped_event_ids)
        VALUES (latest.number + 1, here.system_identifier, here.timeline, here.database_oid,
                int8range(events_before + 1, events_before + jump, '[]'))
        RETURNING * INTO latest;
    END IF;
  END IF;
  PERFORM set_config('shiptrack.history_number', latest.number::text, true);
  RETURN latest.number;
END
$$;

-- ---------------------------------------------------------------------------
-- Rules every writer obeys
-- ---------------------------------------------------------------------------

-- SHIP-<YYYYMMDD>-<4 characters>, unique within the organization.
CREATE OR REPLACE FUNCTION generate_shipment_reference(org bigint, at timestamptz) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  alphabet constant text := 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
  candidate text;
BEGIN
  LOOP
    candidate := 'SHIP-' || to_char(at AT TIME ZONE 'UTC', 'YYYYMMDD') || '-';
    FOR i IN 1..4 LOOP
      candidate := candidate || substr(alphabet, 1 + floor(random() * length(alphabet))::int, 1);
    END LOOP;
    EXIT WHEN NOT EXISTS (SELECT 1 FROM shipments WHERE organization_id = org AND reference = candidate);
  END LOOP;
  RETURN candidate;
END
$$;

-- A shipment with every value derived from other rows recomputed from them (docs/decisions.md,
-- "Derived shipment fields"): effective_eta and search_text, the checks summary, cargo, organic and
-- produce.  shipments_before_write applies it to every row written, and each child table's touch
-- re-saves its shipments, so the stored values are those of the writing transaction's own rows.
-- One statement, each child table read once: the packing lines are grouped by produce name once,
-- which gives the cargo sums, organic, produce and search_text's produce names together.
-- Cargo and the search document count the lines of pallets on a current packing list or on none;
-- produce and organic only those on a current packing list; with no current packing list, produce
-- is the draft entry's distinct names in code-point order ("C": what the API sorted them by).
CREATE OR REPLACE FUNCTION shipment_derived(s shipments) RETURNS shipments
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT coalesce(s.eta, ct.eta),
         upper(concat_ws(' | ', s.reference, s.erp_reference, compact_reference(s.transport_reference),
                         s.consignor, s.consignee, produce_text(s.draft_produce), ct.numbers, ln.names)),
         ck.total, ck.passed, ck.failed, ck.warnings, ck.skipped, ck.pending,
         pa.pallets, ln.boxes, ln.net_weight_kg, ln.gross_weight_kg, ln.organic,
         CASE WHEN pa.has_packing_list THEN ln.produce
              ELSE ARRAY(SELECT DISTINCT d COLLATE "C" FROM unnest(s.draft_produce) d
                          WHERE d IS NOT NULL ORDER BY 1) END
    INTO s.effective_eta, s.search_text,
         s.checks_total, s.checks_passed, s.checks_failed, s.checks_warnings, s.checks_skipped, s.checks_pending,
         s.cargo_pallets, s.cargo_boxes, s.cargo_net_weight_kg, s.cargo_gross_weight_kg, s.organic, s.produce
    FROM (SELECT min(c.eta) AS eta, string_agg(c.number, ' ' ORDER BY c.id) AS numbers
            FROM containers c WHERE c.shipment_id = s.id) ct,
         (SELECT count(*) AS total,
                 count(*) FILTER (WHERE c.status = 'passed') AS passed,
                 count(*) FILTER (WHERE c.status = 'failed') AS failed,
                 count(*) FILTER (WHERE c.status = 'warning') AS warnings,
                 count(*) FILTER (WHERE c.status = 'skipped') AS skipped,
                 count(*) FILTER (WHERE c.status = 'pending') AS pending
            FROM checks c WHERE c.shipment_id = s.id) ck,
         (SELECT count(*) AS pallets,
                 EXISTS (SELECT 1 FROM packing_lists k
                          WHERE k.shipment_id = s.id AND k.is_current) AS has_packing_list
            FROM pallets pl LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
           WHERE pl.shipment_id = s.id AND (k.id IS NULL OR k.is_current)) pa,
         (SELECT coalesce(sum(g.boxes), 0) AS boxes,
                 coalesce(sum(g.net_weight_kg), 0) AS net_weight_kg,
                 coalesce(sum(g.gross_weight_kg), 0) AS gross_weight_kg,
                 coalesce(bool_or(g.organic), false) AS organic,
                 coalesce(array_agg(g.produce_name ORDER BY g.produce_name) FILTER (WHERE g.listed),
                          '{}'::text[]) AS produce,
                 string_agg(g.produce_name, ' ' ORDER BY g.produce_name) AS names
            FROM (SELECT l.produce_name,
                         sum(l.box_count) AS boxes,
                         sum(l.net_weight_kg) AS net_weight_kg,
                         sum(l.gross_weight_kg) AS gross_weight_kg,
                         bool_or(l.organic) FILTER (WHERE k.id IS NOT NULL) AS organic,
                         bool_or(k.id IS NOT NULL) AS listed
                    FROM packing_lines l
                    JOIN pallets pl ON pl.id = l.pallet_id
                    LEFT JOIN packing_lists k ON k.id = pl.packing_list_id
                   WHERE l.shipment_id = s.id AND (k.id IS NULL OR k.is_current)
                   GROUP BY l.produce_name) g) ln;
  RETURN s;
END
$$;

CREATE OR REPLACE FUNCTION shipments_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  touched boolean;
BEGIN
  -- The first write of a new history records it (history() above), before the change is numbered.
  IF coalesce(current_setting('shiptrack.history_number', true), '') = '' THEN
    PERFORM history();
  END IF;
  IF TG_OP = 'UPDATE' THEN
    -- The change feed's columns and the derived values are this trigger's alone (set below); what a
    -- writer put there is dropped first, so it neither counts as a change nor sticks.  NULL
    -- change_xid is a touch.
    touched := NEW.change_xid IS NULL;
    NEW.revision := OLD.revision;
    NEW.change_xid := OLD.change_xid;
    NEW.ever_visible := OLD.ever_visible;
    NEW.joined_xid := OLD.joined_xid;
    NEW.effective_eta := OLD.effective_eta;
    NEW.search_text := OLD.search_text;
    NEW.checks_total := OLD.checks_total;
    NEW.checks_passed := OLD.checks_passed;
    NEW.checks_failed := OLD.checks_failed;
    NEW.checks_warnings := OLD.checks_warnings;
    NEW.checks_skipped := OLD.checks_skipped;
    NEW.checks_pending := OLD.checks_pending;
    NEW.cargo_pallets := OLD.cargo_pallets;
    NEW.cargo_boxes := OLD.cargo_boxes;
    NEW.cargo_net_weight_kg := OLD.cargo_net_weight_kg;
    NEW.cargo_gross_weight_kg := OLD.cargo_gross_weight_kg;
    NEW.organic := OLD.organic;
    NEW.produce := OLD.produce;
  END IF;
  IF NEW.reference IS NULL OR btrim(NEW.reference) = '' THEN
    NEW.reference := generate_shipment_reference(NEW.organization_id, coalesce(NEW.created_at, now()));
  END IF;
  NEW.transport_reference := canonical_transport_reference(NEW.transport_reference);
  NEW.transport_reference_type := transport_reference_kind(NEW.transport_reference);
  NEW.archived_at := CASE WHEN NEW.archived THEN coalesce(NEW.archived_at, now()) END;
  IF TG_OP = 'UPDATE' THEN
    -- Set once: the first estimate and the first validation are never overwritten.
    NEW.original_eta := coalesce(OLD.original_eta, NEW.original_eta, NEW.eta);
    NEW.validated_at := coalesce(OLD.validated_at, NEW.validated_at,
                                 CASE WHEN NEW.status = 'validated' THEN now() END);
    IF NEW IS DISTINCT FROM OLD AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
      NEW.updated_at := now();
    END IF;
  ELSE
    NEW.original_eta := coalesce(NEW.original_eta, NEW.eta);
    NEW.validated_at := coalesce(NEW.validated_at, CASE WHEN NEW.status = 'validated' THEN now() END);
  END IF;
  -- After the updated_at test: a change of the shipment's other rows is a new revision, not an edit.
  NEW := shipment_derived(NEW);
  -- The change feed's bookkeeping (docs/sync.md).
  IF TG_OP = 'INSERT' THEN
    NEW.revision := 1;
    NEW.change_xid := pg_current_xact_id();
    NEW.joined_xid := pg_current_xact_id();
    NEW.ever_visible := NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere;
  ELSE
    -- Moved to another organization: new to it, as if inserted now (shipments_record_move tells the
    -- old one).  Visible at some commit in its organization, or now: a state of the transaction that
    -- brought it there (joined_xid) counts only if it is the state that commits.
    IF NEW.organization_id IS DISTINCT FROM OLD.organization_id THEN
      NEW.joined_xid := pg_current_xact_id();
    END IF;
    NEW.ever_visible := (NOT NEW.awaiting_approval AND NOT NEW.owned_elsewhere)
                        OR (OLD.ever_visible AND NEW.joined_xid <> pg_current_xact_id());
    IF touched OR NEW IS DISTINCT FROM OLD THEN
      -- One new revision per transaction, however many statements it runs.
      IF OLD.change_xid <> pg_current_xact_id() THEN
        NEW.revision := OLD.revision + 1;
      END IF;
      NEW.change_xid := pg_current_xact_id();
    END IF;
  END IF;
  RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER shipments_before_write
  BEFORE INSERT OR UPDATE ON shipments
  FOR EACH ROW EXECUTE FUNCTION shipments_before_write();

-- A revision is recorded when eta moves 5 minutes or more from the last one recorded.
CREATE OR REPLACE FUNCTION shipments_record_eta_revision() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_eta timestamptz;
  has_previous boolean;
BEGIN
  IF NEW.eta IS NULL THEN
    RETURN NULL;
  END IF;
  SELECT r.new_eta, true INTO last_eta, has_previous
    FROM eta_revisions r WHERE r.shipment_id = NEW.id
    ORDER BY r.observed_at DESC, r.id DESC LIMIT 1;
  IF NOT coalesce(has_previous, false) THEN
    INSERT INTO eta_revisions (shipment_id, previous_eta, new_eta, first_estimate)
      VALUES (NEW.id, NULL, NEW.eta, true);
  ELSIF abs(extract(epoch FROM NEW.eta - last_eta)) >= 300 THEN
    INSERT INTO eta_revisions (shipment_id, previous_eta, new_eta, first_estimate)
      VALUES (NEW.id, last_eta, NEW.eta, false);
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_eta_revision_insert
  AFTER INSERT ON shipments
  FOR EACH ROW WHEN (NEW.eta IS NOT NULL) EXECUTE FUNCTION shipments_record_eta_revision();
CREATE OR REPLACE TRIGGER shipments_eta_revision_update
  AFTER UPDATE OF eta ON shipments
  FOR EACH ROW WHEN (NEW.eta IS DISTINCT FROM OLD.eta) EXECUTE FUNCTION shipments_record_eta_revision();

-- Everything GET /shipments/{id} shows from other tables (containers, labels, checks summary,
-- cargo, produce, organic) touches the shipments concerned after each statement: the re-save
-- makes shipments_before_write recompute the derived values (shipment_derived) and take a new revision
-- (change_xid NULL is the request for one).  An UPDATE touches only the shipments of rows that
-- really changed (the two transition tables compared whole-row), so re-saving equal values is free.
-- = ANY(ARRAY(...)) keeps these primary-key lookups even before the tables are analysed (an
-- IN-subquery was planned as a scan of every shipment without statistics).
-- A bulk loader may defer them for its own transaction (SET LOCAL shiptrack.defer_touch = 'on') and
-- must then touch every shipment whose rows it wrote before it commits, so each is recomputed once
-- instead of once per child table (demo/bulk.py; the values still come from shipments_before_write).
-- A label renamed is not deferred: it changes shipments such a loader did not write.
CREATE OR REPLACE FUNCTION touch_parent_shipments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('shiptrack.defer_touch', true) = 'on' THEN
    RETURN NULL;
  END IF;
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(SELECT DISTINCT shipment_id FROM changed_rows));
  RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION touch_parent_shipments_of_changed_rows() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('shiptrack.defer_touch', true) = 'on' THEN
    RETURN NULL;
  END IF;
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(
     SELECT n.shipment_id FROM (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) n
     UNION
     SELECT o.shipment_id FROM (SELECT * FROM old_rows EXCEPT ALL SELECT * FROM new_rows) o));
  RETURN NULL;
END
$$;
-- A label renamed or recoloured changes every shipment that carries it.
CREATE OR REPLACE FUNCTION touch_labelled_shipments() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE shipments s SET change_xid = NULL
   WHERE s.id = ANY (ARRAY(
     SELECT sl.shipment_id FROM shipment_labels sl
      WHERE sl.label_id IN (SELECT n.id FROM (SELECT * FROM new_rows EXCEPT ALL SELECT * FROM old_rows) n)));
  RETURN NULL;
END
$$;
DO $$
DECLARE
  child text;
BEGIN
  FOREACH child IN ARRAY ARRAY['containers', 'shipment_labels', 'checks', 'pallets', 'packing_lists',
                               'packing_lines'] LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_insert AFTER INSERT ON %1$s '
                   'REFERENCING NEW TABLE AS changed_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments()', child);
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_update AFTER UPDATE ON %1$s '
                   'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments_of_changed_rows()', child);
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_refresh_delete AFTER DELETE ON %1$s '
                   'REFERENCING OLD TABLE AS changed_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION touch_parent_shipments()', child);
  END LOOP;
END
$$;
CREATE OR REPLACE TRIGGER labels_refresh_update
  AFTER UPDATE ON labels REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION touch_labelled_shipments();

-- A shipment deleted after its organization saw it leaves a row for GET /changes.  Not when its
-- whole organization goes (the organization row is already gone when this runs), nor when the
-- transaction that brought it to its organization deletes it (nobody saw it there).
CREATE OR REPLACE FUNCTION shipments_record_deletion() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_shipments AS t (id, organization_id, revision)
  SELECT d.id, d.organization_id, d.revision + 1
    FROM deleted_rows d
   WHERE d.ever_visible AND d.joined_xid <> pg_current_xact_id()
     AND EXISTS (SELECT 1 FROM organizations o WHERE o.id = d.organization_id)
  ON CONFLICT (id, organization_id) DO UPDATE
     SET revision = greatest(t.revision, EXCLUDED.revision),
         change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_record_deletion
  AFTER DELETE ON shipments REFERENCING OLD TABLE AS deleted_rows
  FOR EACH STATEMENT EXECUTE FUNCTION shipments_record_deletion();

-- A shipment moved to another organization (docs/writing-data.md, "Moving a shipment"): the old
-- organization's feed shows it deleted at once, as if it were, and the labels of any other
-- organization come off it (labels belong to an organization; the new one never had them).  Its
-- containers, documents, packing lists, alerts, checks and check runs move with it through their
-- keys (ON UPDATE CASCADE); its webhook events stay the old organization's record.
CREATE OR REPLACE FUNCTION shipments_record_move() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.ever_visible AND OLD.joined_xid <> pg_current_xact_id() THEN
    INSERT INTO deleted_shipments AS t (id, organization_id, revision)
    VALUES (OLD.id, OLD.organization_id, NEW.revision)
    ON CONFLICT (id, organization_id) DO UPDATE
       SET revision = greatest(t.revision, EXCLUDED.revision),
           change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  END IF;
  DELETE FROM shipment_labels sl
   USING labels l
   WHERE sl.shipment_id = NEW.id AND l.id = sl.label_id AND l.organization_id <> NEW.organization_id;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_record_move
  AFTER UPDATE OF organization_id ON shipments
  FOR EACH ROW WHEN (NEW.organization_id IS DISTINCT FROM OLD.organization_id)
  EXECUTE FUNCTION shipments_record_move();

-- TRUNCATE leaves nothing stale: it fires no row or statement trigger, so on the tables a stored
-- rendering or a kept aggregate is made of it first deletes every row itself, which touches the
-- shipments concerned as any DELETE does (new revision, aggregates recomputed, stored renderings no
-- longer current, the change feed told); what TRUNCATE then empties is already empty.
CREATE OR REPLACE FUNCTION truncate_as_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('DELETE FROM %I.%I', TG_TABLE_SCHEMA, TG_TABLE_NAME);
  RETURN NULL;
END
$$;
DO $$
DECLARE
  shown text;
BEGIN
  FOREACH shown IN ARRAY ARRAY['containers', 'shipment_labels', 'labels', 'checks', 'pallets',
                               'packing_lists', 'packing_lines'] LOOP
    EXECUTE format('CREATE OR REPLACE TRIGGER %1$s_truncate BEFORE TRUNCATE ON %1$s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION truncate_as_delete()', shown);
  END LOOP;
END
$$;
-- TRUNCATE shipments (with CASCADE) records every deletion its organizations' feeds must show, as
-- shipments_record_deletion does, without the per-row cascade a DELETE of every shipment would cost.
CREATE OR REPLACE FUNCTION shipments_record_truncation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO deleted_shipments AS t (id, organization_id, revision)
  SELECT s.id, s.organization_id, s.revision + 1
    FROM shipments s
   WHERE s.ever_visible AND s.joined_xid <> pg_current_xact_id()
  ON CONFLICT (id, organization_id) DO UPDATE
     SET revision = greatest(t.revision, EXCLUDED.revision),
         change_xid = EXCLUDED.change_xid, deleted_at = EXCLUDED.deleted_at;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER shipments_truncate
  BEFORE TRUNCATE ON shipments
  FOR EACH STATEMENT EXECUTE FUNCTION shipments_record_truncation();

-- Container numbers are stored in ISO 6346 form: upper case, no spaces or dashes.
CREATE OR REPLACE FUNCTION containers_before_write() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.number := nullif(compact_reference(NEW.number), '');
  RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER containers_before_write
  BEFORE INSERT OR UPDATE OF number ON containers
  FOR EACH ROW EXECUTE FUNCTION containers_before_write();

CREATE OR REPLACE FUNCTION documents_touch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW IS DISTINCT FROM OLD AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER documents_touch
  BEFORE UPDATE ON documents
  FOR EACH ROW EXECUTE FUNCTION documents_touch();

-- ---------------------------------------------------------------------------
-- Rules the statements of models/ share, each written once here
-- ---------------------------------------------------------------------------

-- Each is LANGUAGE sql, STABLE (IMMUTABLE when it reads only its arguments), neither STRICT nor SECURITY
-- DEFINER nor SET: PostgreSQL then inlines it into the statement that calls it (a subquery in the caller's
-- plan, or an expression in its conditions, planned with the caller's values), so a statement plans as if
-- the rule were written out in it. Parameters are written with their function's name
-- (shipment_page.archived): where a column has the same name, the column would win.

-- Whether a shipment is visible to an organization: the organization's own, neither awaiting approval nor
-- owned elsewhere. Every statement that reads what the API shows asks it (`visible_to(s, %(organization_id)s)`
-- in models/), and so do the functions below and the webhook events' triggers. One expression of the row's
-- columns, inlined into the caller's conditions: the planner sees the columns themselves, so the caller's
-- indexes serve as with the rule written out, the partial ones on visible shipments too (their predicates
-- write it out: a predicate is matched against the caller's conditions once this is inlined).
CREATE OR REPLACE FUNCTION visible_to(s shipments, organization_id bigint) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT s.organization_id = visible_to.organization_id AND NOT s.awaiting_approval AND NOT s.owned_elsewhere
$$;

-- The page of visible shipments GET /shipments and GET /shipments/{id} read (models/shipments.py), newest
-- first: the organization's, neither awaiting approval nor owned elsewhere, through the filters given (NULL
-- filters nothing; inlined, the planner folds those away). Time bounds compare at the precision responses
-- show (the second), so a bound copied from a response matches its item: `shown >= after` is
-- `col >= ceil(after)` and `shown <= before` is `col < floor(before) + 1 s`. The bound is widened rather than
-- the column truncated, so shipments_created_at_idx and shipments_effective_eta_idx still serve the filters.
-- The search (q) is models/shipments.py search_params: its parameters are the patterns made from q.
CREATE OR REPLACE FUNCTION shipment_page(
  organization_id bigint, page_size integer, shipment_id bigint DEFAULT NULL, shipment_ids bigint[] DEFAULT NULL,
  archived boolean DEFAULT NULL, statuses text[] DEFAULT NULL,
  created_after timestamptz DEFAULT NULL, created_before timestamptz DEFAULT NULL,
  eta_after timestamptz DEFAULT NULL, eta_before timestamptz DEFAULT NULL, starting_after bigint DEFAULT NULL,
  label_ids bigint[] DEFAULT NULL, q text DEFAULT NULL, q_like text DEFAULT NULL, q_compact_like text DEFAULT NULL,
  q_alias_regex text DEFAULT NULL, q_fuzzy text DEFAULT NULL)
RETURNS SETOF shipments
LANGUAGE sql STABLE AS $$
  SELECT s.*
    FROM shipments s
   WHERE visible_to(s, shipment_page.organization_id)
     AND (shipment_page.shipment_id IS NULL OR s.id = shipment_page.shipment_id)
     AND (shipment_page.shipment_ids IS NULL OR s.id = ANY (shipment_page.shipment_ids))
     AND (shipment_page.archived IS NULL OR s.archived = shipment_page.archived)
     AND (shipment_page.statuses IS NULL OR s.status = ANY (shipment_page.statuses))
     AND (shipment_page.created_after IS NULL
          OR s.created_at >= date_trunc('second', shipment_page.created_after + interval '0.999999 s', 'UTC'))
     AND (shipment_page.created_before IS NULL
          OR s.created_at < date_trunc('second', shipment_page.created_before, 'UTC') + interval '1 s')
     AND (shipment_page.eta_after IS NULL
          OR s.effective_eta >= date_trunc('second', shipment_page.eta_after + interval '0.999999 s', 'UTC'))
     AND (shipment_page.eta_before IS NULL
          OR s.effective_eta < date_trunc('second', shipment_page.eta_before, 'UTC') + interval '1 s')
     AND (shipment_page.starting_after IS NULL OR s.id < shipment_page.starting_after)
     AND (shipment_page.label_ids IS NULL OR s.id IN (
           SELECT sl.shipment_id FROM shipment_labels sl
            WHERE sl.label_id = ANY (shipment_page.label_ids)
            GROUP BY sl.shipment_id
           HAVING count(*) = cardinality(shipment_page.label_ids)))
     AND (shipment_page.q IS NULL
          OR s.search_text LIKE upper(shipment_page.q_like)
          OR s.search_text LIKE shipment_page.q_compact_like
          OR s.search_text ~ upper(shipment_page.q_alias_regex)
          OR shipment_page.q_fuzzy <% s.consignor
          OR shipment_page.q_fuzzy <% s.consignee)
   ORDER BY s.id DESC
   LIMIT shipment_page.page_size
$$;

-- The free-time facts of the organization's visible shipments (models/free_time_queries.py), one row each:
-- the shipment's id and, as one JSON text, everything the engine reads of it: the shipment with its own
-- terms, the latest arrival notice stating each kind's free days, the organization's terms for its carrier
-- (models/free_time_queries.py FACT_FIELDS names these positions), then its container numbers (oldest
-- first) and, for ocean shipments, the tracking events that start, stop or end a clock, in time order (one
-- row per shipment keeps a page of candidates to one round trip; one text lets the at-risk list recognise
-- facts it has already summarised without parsing them: api/free_time.py). An array, not an object: keys
-- would be repeated in every row, half the bytes returned, and an array parses faster (docs/free-time.md,
-- "Speed"). The milestones are models/free_time_queries.py EVENT_MILESTONES, those of
-- tracking_events_free_time_idx. Callers pick the shipments (WHERE id IN ...): inlined, only those are read.
CREATE OR REPLACE FUNCTION free_time_facts(organization_id bigint) RETURNS TABLE (id bigint, facts text)
LANGUAGE sql STABLE AS $$
  SELECT s.id, json_build_array(
           s.id, s.reference, s.transport_reference, s.transport_type, s.status, s.carrier_name,
           s.demurrage_free_days, s.detention_free_days, s.free_days_basis,
           nd.free_days, nd.basis, nt.free_days, nt.basis,
           ct.id, ct.demurrage_free_days, ct.detention_free_days, ct.free_days_basis,
           -- ARRAY(... ORDER BY) keeps the order; the events come in it from tracking_events_free_time_idx
           -- (json_agg(... ORDER BY) would sort each shipment's events again).
           array_to_json(ARRAY(
             SELECT k.number FROM containers k WHERE k.shipment_id = s.id AND k.number IS NOT NULL ORDER BY k.id)),
           array_to_json(ARRAY(
             SELECT json_build_array(v.milestone, v.actual, v.occurred_at, v.occurred_at_offset_minutes,
                                     v.container_number)
               FROM tracking_events v
              WHERE v.shipment_id = s.id AND s.transport_type = 'ocean' AND v.milestone IN (
                      'delivered', 'discharged', 'empty_return', 'gate_out', 'loaded', 'stripped',
                      'transshipment_discharge', 'transshipment_load', 'untracked')
              ORDER BY v.occurred_at, v.id)))::text
    FROM shipments s
    LEFT JOIN carrier_terms ct
      ON ct.organization_id = s.organization_id AND lower(ct.carrier) = lower(s.carrier_name)
    LEFT JOIN LATERAL (
      SELECT n.demurrage_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
       WHERE n.shipment_id = s.id AND n.demurrage_free_days IS NOT NULL
       ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nd ON true
    LEFT JOIN LATERAL (
      SELECT n.detention_free_days AS free_days, n.free_days_basis AS basis FROM arrival_notices n
       WHERE n.shipment_id = s.id AND n.detention_free_days IS NOT NULL
       ORDER BY n.received_at DESC, n.id DESC LIMIT 1) nt ON true
   WHERE visible_to(s, free_time_facts.organization_id)
$$;

-- The shipments GET /free_time/at_risk considers at `as_of` (a superset: the engine decides), found through
-- tracking_events_discharged_idx (recent actual discharges) and shipments_free_time_idx (the shipments the
-- list considers), both read from the index alone: a discharge counts when no gate-out of its container
-- follows it (tracking_events_gate_out_idx), its port day is within the window (its port day is day 1),
-- and the demurrage free days are known and few enough to leave at most 2 days.
CREATE OR REPLACE FUNCTION at_risk_candidates(organization_id bigint, as_of timestamptz, window_days integer)
RETURNS TABLE (shipment_id bigint)
LANGUAGE sql STABLE AS $$
  SELECT o.shipment_id
    FROM (SELECT s.id AS shipment_id, s.organization_id, s.carrier_name, s.demurrage_free_days,
                 -- The most whole days from an open discharge's port day to today there (0 when it is
                 -- later), among those within the window.
                 max(d.age) FILTER (WHERE d.age < at_risk_candidates.window_days) AS age
            FROM tracking_events e
            JOIN shipments s ON s.id = e.shipment_id
           CROSS JOIN LATERAL (
             SELECT greatest(0, ((at_risk_candidates.as_of AT TIME ZONE 'UTC')
                                 + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date
                                - ((e.occurred_at AT TIME ZONE 'UTC')
                                   + make_interval(mins => coalesce(e.occurred_at_offset_minutes, 0)))::date) AS age
             ) d
           WHERE e.milestone = 'discharged' AND e.actual
             AND e.occurred_at >= at_risk_candidates.as_of - make_interval(days => at_risk_candidates.window_days + 1)
             AND visible_to(s, at_risk_candidates.organization_id)
             AND s.transport_type = 'ocean' AND NOT s.archived AND s.status <> 'in_warehouse'
             AND NOT EXISTS (
               SELECT 1 FROM tracking_events g
                WHERE g.shipment_id = e.shipment_id AND g.milestone = 'gate_out' AND g.actual
                  AND g.occurred_at >= e.occurred_at
                  AND (g.container_number IS NULL
                       OR compact_reference(g.container_number) = compact_reference(e.container_number)))
           GROUP BY s.id) o
    LEFT JOIN carrier_terms ct ON ct.organization_id = o.organization_id AND lower(ct.carrier) = lower(o.carrier_name)
   -- At most 2 days left means at least free days - 2 used, and a clock uses at most one free day per day
   -- on either basis (the start day included), so free days <= age + 3 (docs/free-time.md, "Speed").
   -- coalesce evaluates the notice lookup only for shipments without their own free days.
   WHERE coalesce(o.demurrage_free_days,
                  (SELECT n.demurrage_free_days FROM arrival_notices n
                    WHERE n.shipment_id = o.shipment_id AND n.demurrage_free_days IS NOT NULL
                    ORDER BY n.received_at DESC, n.id DESC LIMIT 1),
                  ct.demurrage_free_days) <= o.age + 3
$$;

-- A token's state, as `tokens list` shows it and as every check of an active token asks it: member_removed
-- (its user left the organization; the token is revoked with it), revoked, expired, else active. One
-- expression of the token's and its membership's columns, inlined into the caller's statement.
CREATE OR REPLACE FUNCTION token_state(t tokens, m memberships) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN m.removed_at IS NOT NULL THEN 'member_removed'
              WHEN t.revoked_at IS NOT NULL THEN 'revoked'
              WHEN t.expires_at IS NOT NULL AND t.expires_at <= now() THEN 'expired'
              ELSE 'active' END
$$;

-- The principal of a token fingerprint: the active token with it, its user (still a member) and
-- organization; no row for any other. The API keeps what it answers per process (models/principals.py).
CREATE OR REPLACE FUNCTION token_principal(token_fingerprint bytea)
RETURNS TABLE (token_id bigint, token_name text, scopes text[], expires_at timestamptz, user_email text,
               organization_id bigint, organization_name text, slug text, api_version text)
LANGUAGE sql STABLE AS $$
  SELECT t.id, t.name, t.scopes, t.expires_at, u.email, o.id, o.name, o.slug, o.api_version
    FROM tokens t
    JOIN organizations o ON o.id = t.organization_id
    JOIN users u ON u.id = t.user_id
    JOIN memberships m ON m.organization_id = t.organization_id AND m.user_id = t.user_id
   WHERE t.fingerprint = token_principal.token_fingerprint AND token_state(t, m) = 'active'
$$;

-- ---------------------------------------------------------------------------
-- This service's own tables
-- ---------------------------------------------------------------------------

-- Fixed-window request counters shared by every worker and host.  UNLOGGED:
-- losing them in a crash only forgives a few requests.  `hits` is what the processes have reserved of
-- the window (models/rate_limits.py), never more than the limit; `granted` what the last reservation got.
CREATE UNLOGGED TABLE IF NOT EXISTS rate_limit_counters (
  bucket       text NOT NULL,
  window_start timestamptz NOT NULL,
  hits         integer NOT NULL,
  granted      integer NOT NULL DEFAULT 0,
  PRIMARY KEY (bucket, window_start)
);

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

-- == webhooks (owned by delivery/) ==========================================
--
-- Outbound webhooks: endpoints (settings), the transactional outbox `events`
-- filled by triggers on the application's tables, one `webhook_deliveries` row
-- per (event, endpoint) and one `webhook_attempts` row per HTTP request.
-- Event ids are `msg_<n>` (`evt_` already names tracking events); endpoint ids
-- are `whe_<n>`.  See docs/webhooks.md.

CREATE TABLE IF NOT EXISTS webhook_endpoints (
  id                   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id      bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  url                  text NOT NULL CHECK (url ~* '^https://'),
  description          text,
  -- The types this endpoint receives; webhook.test is sent on request whatever this says.
  event_types          text[] NOT NULL CHECK (
                         cardinality(event_types) >= 1
                         AND event_types <@ ARRAY['shipment.status_changed', 'shipment.eta_changed',
                                                  'shipment.checks_completed', 'alert.created']),
  -- 'fernet:' + a Fernet token of the 'whsec_' secret, encrypted under the deployment's secret key so that
  -- a dump or a backup signs nothing (docs/secret-key.md); the 'whsec_' secret itself in a deployment
  -- without a key, or upgraded and not yet through `flask --app app secrets encrypt`. The prefix is
  -- written `whsec[_]` so that a dump holds no whsec_ text at all: secret scanners look for it.
  secret               text NOT NULL CHECK (secret ~ '^fernet:[A-Za-z0-9_-]+=*$' OR is_webhook_secret(secret)),
  enabled              boolean NOT NULL DEFAULT true,
  disabled_at          timestamptz,
  disabled_reason      text,
  -- Set once the admins were e-mailed about an automatic disabling.
  disabled_notified_at timestamptz,
  -- Start of the current run of failed deliveries, and the latest failure:
  -- a success, or a day without failures, restarts the run (SPEC: Delivery 6).
  failing_since        timestamptz,
  last_failure_at      timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  -- Set once the admins were warned that the current failure run passed 24 hours;
  -- cleared when the run ends or a new one starts (one warning per run).
  failure_warned_at    timestamptz
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_organization_idx ON webhook_endpoints (organization_id, id);

-- At most 5 endpoints per organization, whoever writes them.  The organization
-- row is locked so two concurrent inserts cannot both see 4.
CREATE OR REPLACE FUNCTION webhook_endpoints_limit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM organizations WHERE id = NEW.organization_id FOR UPDATE;
  IF (SELECT count(*) FROM webhook_endpoints WHERE organization_id = NEW.organization_id) >= 5 THEN
    RAISE EXCEPTION 'an organization has at most 5 webhook endpoints'
      USING ERRCODE = 'check_violation', CONSTRAINT = 'webhook_endpoints_limit';
  END IF;
  RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER webhook_endpoints_limit
  BEFORE INSERT ON webhook_endpoints
  FOR EACH ROW EXECUTE FUNCTION webhook_endpoints_limit();

-- The outbox.  Triggers insert the facts of an event in the writer's
-- transaction; the delivery script renders `body` (the exact bytes sent) once.
CREATE TABLE IF NOT EXISTS events (
  id                  bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  organization_id     bigint NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
  type                text NOT NULL CHECK (type IN ('shipment.status_changed', 'shipment.eta_changed',
                                                    'shipment.checks_completed', 'alert.created',
                                                    'webhook.test')),
  shipment_id         bigint REFERENCES shipments (id) ON DELETE CASCADE DEFERRABLE,
  alert_id            bigint REFERENCES alerts (id) ON DELETE CASCADE,
  check_run_id        bigint REFERENCES check_runs (id) ON DELETE SET NULL,
  -- webhook.test only: the one endpoint it goes to.
  endpoint_id         bigint REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  previous_attributes jsonb,
  -- Extra members of `data` fixed when the event happened (data.checks).
  data_extra          jsonb NOT NULL DEFAULT '{}',
  -- Writer's transaction: several changes in one transaction make one event.
  txid                bigint NOT NULL DEFAULT txid_current(),
  created_at          timestamptz NOT NULL DEFAULT now(),
  -- pending: waiting to be rendered; rendered: body stored and fanned out;
  -- skipped: the subject was hidden or gone when rendering; render_failed: the
  -- serialiser raised (render_error says what); `webhooks retry-render` makes it pending again.
  state               text NOT NULL DEFAULT 'pending'
                      CHECK (state IN ('pending', 'rendered', 'skipped', 'render_failed')),
  api_version         text,
  body                text,
  rendered_at         timestamptz,
  -- The exception of the last failed render (type and message); null otherwise.
  render_error        text,
  CHECK ((state = 'rendered') = (body IS NOT NULL))
);
-- delivery pass (models/events.py claim_unrendered): the organizations with events waiting to be rendered,
-- and each one's oldest
CREATE INDEX IF NOT EXISTS events_pending_organization_idx ON events (organization_id, id) WHERE state = 'pending';
-- coalescing triggers: this transaction's event for a shipment
CREATE INDEX IF NOT EXISTS events_txid_idx ON events (txid, shipment_id) WHERE state = 'pending';
-- retention
CREATE INDEX IF NOT EXISTS events_created_at_idx ON events (created_at);
-- GET /events (models/events.py list_history): an organization's rendered events, newest first
CREATE INDEX IF NOT EXISTS events_history_idx ON events (organization_id, id DESC) WHERE state = 'rendered';
-- GET /events?shipment=: one shipment's rendered events, newest first
CREATE INDEX IF NOT EXISTS events_shipment_history_idx ON events (shipment_id, id DESC) WHERE state = 'rendered';
-- `webhooks render-failures` and the webhook_render_failures view
CREATE INDEX IF NOT EXISTS events_render_failed_idx ON events (id) WHERE state = 'render_failed';

-- The ids this service hands out itself (msg_, whe_, tok_), and shipments', are handed out in the current
-- history (history(), "Histories" above): checked before a statement's rows take their ids, whoever inserts
-- them (shipments_before_write comes too late for that: a row's id is drawn before its BEFORE ROW triggers).
CREATE OR REPLACE FUNCTION in_history() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM history();
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER events_in_history
  BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER webhook_endpoints_in_history
  BEFORE INSERT ON webhook_endpoints FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER tokens_in_history
  BEFORE INSERT ON tokens FOR EACH STATEMENT EXECUTE FUNCTION in_history();
CREATE OR REPLACE TRIGGER shipments_in_history
  BEFORE INSERT ON shipments FOR EACH STATEMENT EXECUTE FUNCTION in_history();

CREATE TABLE IF NOT EXISTS webhook_deliveries (
  id              bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  event_id        bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  endpoint_id     bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  -- scheduled: the normal fan-out; resend: an admin sent it again; test: webhook.test.
  reason          text NOT NULL DEFAULT 'scheduled' CHECK (reason IN ('scheduled', 'resend', 'test')),
  -- pending: an attempt is due at next_attempt_at (also while leased);
  -- dropped: the endpoint was disabled or removed before it succeeded.
  state           text NOT NULL DEFAULT 'pending'
                  CHECK (state IN ('pending', 'succeeded', 'failed', 'dropped')),
  attempt_count   integer NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
  max_attempts    integer NOT NULL DEFAULT 8 CHECK (max_attempts >= 1),
  -- Due time; a claiming pass pushes it forward by its lease, so work of a
  -- pass that died becomes due again when the lease runs out (or at once, when
  -- lease_holder says whose it is).
  next_attempt_at timestamptz,
  lease_token     uuid,
  last_status_code integer,
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  finished_at     timestamptz,
  -- The claiming process's key (webhook_lease_holders), on which it holds a session advisory lock
  -- for its whole life: a lease whose holder's lock is not held is freed at once. Null: the lease
  -- runs out by its time only (a transaction pooler, the CLI's test and resend).
  lease_holder    integer,
  UNIQUE (event_id, endpoint_id),
  CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL))
);
-- claim: due deliveries of one endpoint, earliest first
CREATE INDEX IF NOT EXISTS webhook_deliveries_due_idx
  ON webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE state = 'pending';
-- watch mode: the next due time overall
CREATE INDEX IF NOT EXISTS webhook_deliveries_next_idx
  ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
-- claim: an endpoint's requests in flight in every process (its leased rows), for the per-endpoint cap
CREATE INDEX IF NOT EXISTS webhook_deliveries_leased_idx
  ON webhook_deliveries (endpoint_id) WHERE lease_token IS NOT NULL;
-- Each delivery process's key for its leases (webhook_deliveries.lease_holder), one per process start.
CREATE SEQUENCE IF NOT EXISTS webhook_lease_holders AS integer CYCLE;

CREATE TABLE IF NOT EXISTS webhook_attempts (
  id            bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
  delivery_id   bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
  endpoint_id   bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  event_id      bigint NOT NULL REFERENCES events (id) ON DELETE CASCADE,
  attempt       integer NOT NULL CHECK (attempt >= 1),
  reason        text NOT NULL,
  attempted_at  timestamptz NOT NULL,
  -- Null until the attempt is finished.
  duration_ms   integer CHECK (duration_ms >= 0),
  succeeded     boolean NOT NULL,
  status_code   integer,
  -- Why it failed, in words (timeout, refused address, redirect, ...); null on success.
  error         text,
  -- The first 2 KB of the reply, as text.
  response_body text,
  -- The address the connection went to (the one the SSRF guard checked).
  address       text,
  -- in_flight: written with the claim, before the request; succeeded / failed: its outcome;
  -- interrupted: the pass died (or lost its database) before recording, and the delivery was
  -- claimed again: the request may or may not have reached the receiver.
  state         text NOT NULL CHECK (state IN ('in_flight', 'succeeded', 'failed', 'interrupted'))
);
-- `webhooks attempts`: an endpoint's log, newest first
CREATE INDEX IF NOT EXISTS webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, id DESC);
CREATE INDEX IF NOT EXISTS webhook_attempts_delivery_idx ON webhook_attempts (delivery_id);
-- retention: attempts older than 30 days
CREATE INDEX IF NOT EXISTS webhook_attempts_attempted_at_idx ON webhook_attempts (attempted_at);

-- The one rule of "did not receive" (`webhooks recover`, GET /events' delivery_success): the endpoints owed
-- rendered event `ev` (same organization, subscribed to its type now, created no later than the event) with
-- no succeeded delivery of it. Whether one must be enabled, and what a pending delivery means, is the
-- caller's. Inlined into the statement that calls it (LANGUAGE sql, STABLE, one SELECT), so its plan is
-- the plan of the rule written out.
-- The event comes as its columns, not as a row: a row argument stays a whole-row value in the inlined
-- statement. Called LATERAL beside the events, it is inlined but stays a subquery run per event (PostgreSQL
-- does not pull up a lateral subquery whose NOT EXISTS refers to the outer row): callers narrow the events
-- first (by organization: events_organization_idx).
CREATE OR REPLACE FUNCTION endpoints_not_received(
  event_id bigint, organization_id bigint, event_type text, created_at timestamptz, event_state text)
RETURNS SETOF webhook_endpoints
LANGUAGE sql STABLE AS $$
  SELECT e.*
    FROM webhook_endpoints e
   WHERE e.organization_id = endpoints_not_received.organization_id
     AND endpoints_not_received.event_type = ANY (e.event_types)
     AND endpoints_not_received.created_at >= e.created_at
     AND endpoints_not_received.event_state = 'rendered'
     AND NOT EXISTS (SELECT 1 FROM webhook_deliveries received
                      WHERE received.event_id = endpoints_not_received.event_id AND received.endpoint_id = e.id
                        AND received.state = 'succeeded')
$$;

-- The claim's lock: up to `lim` enabled endpoints with work due by `due_by` that no other claim is counting
-- right now, each locked for the caller's transaction. The endpoints of the organizations with the fewest
-- requests in flight come first, then the earliest due: an organization whose backlog holds every worker
-- (its endpoints' work is due earliest) would otherwise take each slot as it frees, while another's endpoint
-- waits for the whole backlog. The requests are counted here without the lock, for this order only. The
-- per-endpoint cap holds across processes because a claim counts an endpoint's leased rows only while
-- holding this lock, in a later statement, whose snapshot sees every claim committed before the lock was
-- granted. A try-lock: a busy endpoint is skipped, never waited for. VOLATILE (it takes locks): planned on its
-- own, never inlined.
CREATE OR REPLACE FUNCTION lock_claimable_endpoints(due_by timestamptz, lim integer, lock_space integer)
RETURNS SETOF bigint
LANGUAGE sql VOLATILE AS $$
  WITH due AS MATERIALIZED (
    SELECT e.id, e.organization_id, (SELECT min(d.next_attempt_at) FROM webhook_deliveries d
                                      WHERE d.endpoint_id = e.id AND d.state = 'pending') AS due
      FROM webhook_endpoints e
     WHERE e.enabled
  ), waiting AS MATERIALIZED (
    SELECT w.id, w.organization_id, w.due,
           (SELECT count(*) FILTER (WHERE l.state = 'pending' AND l.next_attempt_at > lock_claimable_endpoints.due_by)
              FROM webhook_deliveries l
             WHERE l.endpoint_id = w.id AND l.lease_token IS NOT NULL) AS in_flight
      FROM due w
     WHERE w.due <= lock_claimable_endpoints.due_by
  ), candidates AS MATERIALIZED (
    SELECT id FROM waiting
     ORDER BY sum(in_flight) OVER (PARTITION BY organization_id), due, id
     LIMIT lock_claimable_endpoints.lim
  )
  SELECT id FROM candidates
   WHERE pg_try_advisory_xact_lock(lock_claimable_endpoints.lock_space, (id % 2147483647)::int)
$$;

-- The one rule of starting an attempt, for every way a delivery is leased (the claim of due work; the
-- CLI's test events and resends): the row a dead pass left in flight is closed as `interrupted`, then each
-- delivery's attempt row is written `in_flight`, before its request. Returns what sending each one needs, by
-- delivery id. The deliveries come as the rows their caller's statement wrote (RETURNING d.*), not read here:
-- a function cannot rely on seeing what the statement that calls it writes. VOLATILE (it writes): planned
-- on its own, never inlined.
CREATE OR REPLACE FUNCTION start_attempts(leased webhook_deliveries[], started_at timestamptz)
RETURNS TABLE (id bigint, event_id bigint, endpoint_id bigint, reason text, attempt integer,
               max_attempts integer, lease_token uuid, attempt_id bigint, url text, secret text, type text,
               body text)
LANGUAGE sql VOLATILE AS $$
  UPDATE webhook_attempts a SET state = 'interrupted'
   WHERE a.delivery_id = ANY (ARRAY(SELECT (d).id FROM unnest(start_attempts.leased) AS d))
     AND a.state = 'in_flight';
  WITH started AS (
    INSERT INTO webhook_attempts (delivery_id, endpoint_id, event_id, attempt, reason, attempted_at, succeeded,
                                  state)
    SELECT d.id, d.endpoint_id, d.event_id, d.attempt_count + 1, d.reason, start_attempts.started_at, false,
           'in_flight'
      FROM unnest(start_attempts.leased) AS d
    RETURNING webhook_attempts.id, webhook_attempts.delivery_id
  )
  SELECT d.id, d.event_id, d.endpoint_id, d.reason, d.attempt_count + 1, d.max_attempts, d.lease_token,
         s.id, e.url, e.secret, ev.type, ev.body
    FROM unnest(start_attempts.leased) AS d
    JOIN started s ON s.delivery_id = d.id
    JOIN events ev ON ev.id = d.event_id
    JOIN webhook_endpoints e ON e.id = d.endpoint_id
   ORDER BY d.id;
$$;

-- The claim of due deliveries (models/webhook_deliveries.py claim_due), procrastinate's fetch_job as one
-- function: up to `lim` deliveries due by `claimed_at` leased to the caller (`lease_until`, `token`, `holder`),
-- at most `cap` in flight per endpoint in all processes, their attempts started (start_attempts). Deliveries
-- are taken in turns between organizations: the first of each organization (earliest due first) before
-- anyone's second, so that one organization's backlog cannot fill a claim while another's delivery waits (the
-- turns need every locked endpoint's free share read and locked first: at most `cap` rows per endpoint, of
-- endpoints no other claim may touch meanwhile). Two statements: the endpoints' locks
-- (lock_claimable_endpoints), then the claim, which counts the leases with a snapshot of its own (a VOLATILE
-- PL/pgSQL function takes one per statement) that sees every claim committed before the locks were granted.
CREATE OR REPLACE FUNCTION claim_due_deliveries(
  claimed_at timestamptz, lease_until timestamptz, token uuid, cap integer, lim integer, lock_space integer,
  holder integer)
RETURNS TABLE (id bigint, event_id bigint, endpoint_id bigint, reason text, attempt integer,
               max_attempts integer, lease_token uuid, attempt_id bigint, url text, secret text, type text,
               body text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  claimable bigint[] := ARRAY(SELECT l.id FROM lock_claimable_endpoints(claim_due_deliveries.claimed_at,
                                                                        claim_due_deliveries.lim,
                                                                        claim_due_deliveries.lock_space) AS l (id));
BEGIN
  RETURN QUERY
  WITH free AS (
    -- The FILTER keeps state and next_attempt_at out of the scan's conditions, so that it reads the few
    -- leased rows (webhook_deliveries_leased_idx), not every pending row due later (next_idx: an endpoint
    -- with thousands of retries waiting made each claim cost 10 ms of server CPU).
    SELECT f.endpoint_id, e.organization_id,
           claim_due_deliveries.cap - (
             SELECT count(*) FILTER (WHERE l.state = 'pending' AND l.next_attempt_at > claim_due_deliveries.claimed_at)
               FROM webhook_deliveries l
              WHERE l.endpoint_id = f.endpoint_id AND l.lease_token IS NOT NULL) AS free
      FROM unnest(claimable) AS f (endpoint_id)
      JOIN webhook_endpoints e ON e.id = f.endpoint_id
  ), picked AS (
    SELECT d.id
      FROM free f
     CROSS JOIN LATERAL (
       SELECT d.id, d.next_attempt_at FROM webhook_deliveries d
        WHERE d.endpoint_id = f.endpoint_id AND d.state = 'pending'
          AND d.next_attempt_at <= claim_due_deliveries.claimed_at
        ORDER BY d.next_attempt_at, d.id
        LIMIT f.free
          FOR UPDATE SKIP LOCKED) d
     WHERE f.free > 0
     ORDER BY row_number() OVER (PARTITION BY f.organization_id ORDER BY d.next_attempt_at, d.id),
              d.next_attempt_at, d.id
     LIMIT claim_due_deliveries.lim
  ), claimed AS (
    UPDATE webhook_deliveries d
       SET next_attempt_at = claim_due_deliveries.lease_until, lease_token = claim_due_deliveries.token,
           lease_holder = claim_due_deliveries.holder
     WHERE d.id = ANY (ARRAY(SELECT p.id FROM picked p))  -- by the primary key: a join read the whole table
    RETURNING d.*
  )
  SELECT * FROM start_attempts(ARRAY(SELECT c::webhook_deliveries FROM claimed c), claim_due_deliveries.claimed_at);
END
$$;

-- True when a row written now about this shipment makes a webhook event (the check runs' and the alerts'
-- triggers ask it first): not a row a bulk loader writes as history (SET LOCAL shiptrack.history = 'on', the
-- demo seed: past changes are not news), and only about a shipment visible to its organization.
CREATE OR REPLACE FUNCTION shipment_evented(shipment_id bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT current_setting('shiptrack.history', true) IS DISTINCT FROM 'on'
     AND coalesce((SELECT visible_to(s, s.organization_id) FROM shipments s WHERE s.id = shipment_id), false)
$$;

-- A timestamp as the API writes it (UTC, to the second, Z suffix), for previous_attributes.
CREATE OR REPLACE FUNCTION api_timestamp(value timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_char(value AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- One event per shipment, type and transaction, from the first value to the
-- last; none when the transaction ends where it began.  `field` is 'status' or
-- 'eta'; old_value / new_value are their API renderings.
CREATE OR REPLACE FUNCTION record_shipment_change(shipment shipments, event_type text, field text,
                                                  old_value jsonb, new_value jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  existing events%ROWTYPE;
BEGIN
  SELECT * INTO existing FROM events
   WHERE txid = txid_current() AND shipment_id = shipment.id AND type = event_type AND state = 'pending';
  IF FOUND THEN
    IF existing.previous_attributes -> field = new_value THEN
      DELETE FROM events WHERE id = existing.id;
    END IF;
    RETURN;
  END IF;
  IF NOT visible_to(shipment, shipment.organization_id) THEN
    RETURN;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, previous_attributes)
    VALUES (shipment.organization_id, event_type, shipment.id, jsonb_build_object(field, old_value));
  PERFORM pg_notify('webhook_events', '');
END
$$;

CREATE OR REPLACE FUNCTION shipments_record_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    PERFORM record_shipment_change(NEW, 'shipment.status_changed', 'status',
                                   to_jsonb(OLD.status), to_jsonb(NEW.status));
  END IF;
  IF NEW.eta IS DISTINCT FROM OLD.eta THEN
    PERFORM record_shipment_change(NEW, 'shipment.eta_changed', 'eta',
                                   coalesce(to_jsonb(api_timestamp(OLD.eta)), 'null'),
                                   coalesce(to_jsonb(api_timestamp(NEW.eta)), 'null'));
  END IF;
  RETURN NULL;
END
$$;
-- Only status and eta: effective_eta and predicted_eta changes send nothing.
CREATE OR REPLACE TRIGGER shipments_record_events
  AFTER UPDATE ON shipments
  FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status OR NEW.eta IS DISTINCT FROM OLD.eta)
  EXECUTE FUNCTION shipments_record_events();

-- shipment.checks_completed: when a run gets its finished_at.  The results are
-- fixed now, from the checks this run wrote.
CREATE OR REPLACE FUNCTION check_runs_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT shipment_evented(NEW.shipment_id) THEN
    RETURN NULL;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, check_run_id, data_extra)
  SELECT NEW.organization_id, 'shipment.checks_completed', NEW.shipment_id, NEW.id,
         jsonb_build_object('checks', jsonb_build_object(
           'summary', jsonb_build_object(
             'total', count(c.id),
             'passed', count(c.id) FILTER (WHERE c.status = 'passed'),
             'failed', count(c.id) FILTER (WHERE c.status = 'failed'),
             'warnings', count(c.id) FILTER (WHERE c.status = 'warning'),
             'skipped', count(c.id) FILTER (WHERE c.status = 'skipped'),
             'pending', count(c.id) FILTER (WHERE c.status = 'pending')),
           'results', coalesce(jsonb_agg(jsonb_build_object(
                         'check_type', c.category, 'key', c.key, 'status', c.status) ORDER BY c.id)
                       FILTER (WHERE c.id IS NOT NULL), '[]'::jsonb)))
    FROM (SELECT 1) one LEFT JOIN checks c ON c.check_run_id = NEW.id;
  PERFORM pg_notify('webhook_events', '');
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER check_runs_record_event_insert
  AFTER INSERT ON check_runs
  FOR EACH ROW WHEN (NEW.finished_at IS NOT NULL) EXECUTE FUNCTION check_runs_record_event();
CREATE OR REPLACE TRIGGER check_runs_record_event_update
  AFTER UPDATE ON check_runs
  FOR EACH ROW WHEN (OLD.finished_at IS NULL AND NEW.finished_at IS NOT NULL)
  EXECUTE FUNCTION check_runs_record_event();

-- alert.created: a new open alert of a customer-visible kind.
CREATE OR REPLACE FUNCTION alerts_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT shipment_evented(NEW.shipment_id)
     OR NOT coalesce((SELECT k.customer_visible FROM alert_kinds k WHERE k.key = NEW.key), false) THEN
    RETURN NULL;
  END IF;
  INSERT INTO events (organization_id, type, shipment_id, alert_id)
    VALUES (NEW.organization_id, 'alert.created', NEW.shipment_id, NEW.id);
  PERFORM pg_notify('webhook_events', '');
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER alerts_record_event
  AFTER INSERT ON alerts
  FOR EACH ROW WHEN (NEW.resolved_at IS NULL) EXECUTE FUNCTION alerts_record_event();

-- Operator views: rows that read plainly in psql (docs/webhooks.md has queries).
CREATE OR REPLACE VIEW webhook_delivery_status AS
SELECT 'whe_' || e.id AS endpoint, o.slug AS organization, e.url, 'msg_' || ev.id AS event, ev.type,
       d.reason, d.state AS status, d.attempt_count AS attempts, d.next_attempt_at AS next_attempt,
       d.last_status_code, d.last_error, ev.created_at AS event_created_at, d.finished_at,
       d.id AS delivery_id
  FROM webhook_deliveries d
  JOIN webhook_endpoints e ON e.id = d.endpoint_id
  JOIN organizations o ON o.id = e.organization_id
  JOIN events ev ON ev.id = d.event_id;

CREATE OR REPLACE VIEW webhook_attempt_log AS
SELECT a.attempted_at, 'whe_' || a.endpoint_id AS endpoint, 'msg_' || a.event_id AS event, ev.type,
       a.attempt, a.reason, a.state AS status,
       a.status_code, a.duration_ms, a.error, a.address, d.next_attempt_at AS next_attempt,
       left(a.response_body, 200) AS response_start, a.id AS attempt_id
  FROM webhook_attempts a
  JOIN events ev ON ev.id = a.event_id
  JOIN webhook_deliveries d ON d.id = a.delivery_id;

-- Events the serialiser could not render (`webhooks render-failures`, `webhooks retry-render`).
CREATE OR REPLACE VIEW webhook_render_failures AS
SELECT 'msg_' || ev.id AS event, o.slug AS organization, ev.type,
       coalesce('alr_' || ev.alert_id, 'shp_' || ev.shipment_id) AS subject, ev.created_at,
       ev.rendered_at AS failed_at, ev.render_error AS error
  FROM events ev JOIN organizations o ON o.id = ev.organization_id
 WHERE ev.state = 'render_failed';

CREATE OR REPLACE VIEW webhook_endpoint_health AS
SELECT 'whe_' || e.id AS endpoint, o.slug AS organization, e.url, e.enabled, e.disabled_at,
       e.disabled_reason, e.failing_since, e.last_failure_at,
       (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') AS waiting,
       (SELECT max(a.attempted_at) FROM webhook_attempts a WHERE a.endpoint_id = e.id AND a.succeeded)
         AS last_success_at
  FROM webhook_endpoints e JOIN organizations o ON o.id = e.organization_id;

-- ---------------------------------------------------------------------------
-- Foreign keys followed by cascading deletes and ON DELETE SET NULL
-- ---------------------------------------------------------------------------
-- Without these, deleting an organization, a shipment or a document scans each child table
-- once per deleted row (a 20,000-shipment organization took over ten minutes to delete).
CREATE INDEX IF NOT EXISTS memberships_user_idx ON memberships (user_id);
CREATE INDEX IF NOT EXISTS tokens_owner_idx ON tokens (organization_id, user_id);
CREATE INDEX IF NOT EXISTS tokens_user_idx ON tokens (user_id);
CREATE INDEX IF NOT EXISTS containers_organization_idx ON containers (organization_id);
CREATE INDEX IF NOT EXISTS documents_organization_idx ON documents (organization_id);
CREATE INDEX IF NOT EXISTS documents_shipment_all_idx ON documents (shipment_id);
CREATE INDEX IF NOT EXISTS documents_replaced_by_idx ON documents (replaced_by_id);
CREATE INDEX IF NOT EXISTS arrival_notices_document_idx ON arrival_notices (document_id);
CREATE INDEX IF NOT EXISTS packing_lists_organization_idx ON packing_lists (organization_id);
CREATE INDEX IF NOT EXISTS packing_lists_document_idx ON packing_lists (document_id);
CREATE INDEX IF NOT EXISTS packing_lists_container_idx ON packing_lists (container_id);
CREATE INDEX IF NOT EXISTS pallets_container_idx ON pallets (container_id);
CREATE INDEX IF NOT EXISTS alerts_organization_all_idx ON alerts (organization_id);
CREATE INDEX IF NOT EXISTS alerts_shipment_all_idx ON alerts (shipment_id);
CREATE INDEX IF NOT EXISTS check_runs_organization_idx ON check_runs (organization_id);
CREATE INDEX IF NOT EXISTS check_runs_shipment_idx ON check_runs (shipment_id);
CREATE INDEX IF NOT EXISTS events_organization_idx ON events (organization_id);
CREATE INDEX IF NOT EXISTS events_shipment_idx ON events (shipment_id);
CREATE INDEX IF NOT EXISTS events_alert_idx ON events (alert_id);
CREATE INDEX IF NOT EXISTS events_check_run_idx ON events (check_run_id);
CREATE INDEX IF NOT EXISTS events_endpoint_idx ON events (endpoint_id);
CREATE INDEX IF NOT EXISTS webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id);
CREATE INDEX IF NOT EXISTS webhook_attempts_event_idx ON webhook_attempts (event_id);

-- == held requests (api/waiting.py) ==========================================
--
-- GET /changes and GET /events with `wait` are held until their organization's feed changes: each API process
-- hears these on the connection that listens for principals (models/principals.py), and wakes only the requests
-- of the organizations named.  Statement-level: one notification per organization and statement, and NOTIFY
-- sends equal payloads of one transaction once, at its commit.
CREATE OR REPLACE FUNCTION notify_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'shipments' THEN
    PERFORM pg_notify('shiptrack_changes', c.organization_id::text)
       FROM (SELECT DISTINCT organization_id FROM changed_rows WHERE ever_visible) c;
  ELSE
    PERFORM pg_notify('shiptrack_changes', c.organization_id::text)
       FROM (SELECT DISTINCT organization_id FROM changed_rows) c;
  END IF;
  RETURN NULL;
END
$$;
-- What GET /changes lists: a shipment's new revision (inserts and updates, the touches of its child tables
-- included) and a deletion recorded (a shipment deleted or moved away, deleted_shipments).
CREATE OR REPLACE TRIGGER shipments_notify_changes_insert
  AFTER INSERT ON shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER shipments_notify_changes_update
  AFTER UPDATE ON shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER deleted_shipments_notify_changes_insert
  AFTER INSERT ON deleted_shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();
CREATE OR REPLACE TRIGGER deleted_shipments_notify_changes_update
  AFTER UPDATE ON deleted_shipments REFERENCING NEW TABLE AS changed_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_changes();

-- What GET /events lists: an event rendered (the outbox, models/events.py store_rendered).
CREATE OR REPLACE FUNCTION notify_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('shiptrack_events', r.organization_id::text)
     FROM (SELECT DISTINCT organization_id FROM rendered_rows
            WHERE state = 'rendered' AND type <> 'webhook.test') r;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER events_notify_events
  AFTER UPDATE ON events REFERENCING NEW TABLE AS rendered_rows
  FOR EACH STATEMENT EXECUTE FUNCTION notify_events();

-- Where each organization's feeds stand, for a process that cannot listen (behind a transaction pooler): it
-- asks this once a second for the organizations it holds requests of, and wakes those whose heads moved.
-- Each value is one backward step of an index (shipments_changes_idx, deleted_shipments_changes_idx,
-- events_history_idx).
CREATE OR REPLACE FUNCTION feed_heads(organization_ids bigint[])
RETURNS TABLE (organization_id bigint, changes text, events bigint)
LANGUAGE sql STABLE AS $$
  SELECT o.id,
         concat((SELECT max(s.change_xid) FROM shipments s WHERE s.organization_id = o.id AND s.ever_visible),
                '/', (SELECT max(t.change_xid) FROM deleted_shipments t WHERE t.organization_id = o.id)),
         (SELECT max(ev.id) FROM events ev WHERE ev.organization_id = o.id AND ev.state = 'rendered')
    FROM unnest(organization_ids) AS o (id)
$$;
