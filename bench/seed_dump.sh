#!/bin/bash
# Every row a seed writes, as text, for comparing two checkouts' seeds (not a test; docs/demo-data.md).
#   bench/seed_dump.sh CHECKOUT DATABASE OUTFILE [SHIPMENTS]
#   bench/seed_dump.sh /tmp/old seed_old /tmp/old.txt && bench/seed_dump.sh . seed_new /tmp/new.txt
#   diff /tmp/old.txt /tmp/new.txt
# Recreates DATABASE on 127.0.0.1:5432, seeds SHIPMENTS (default 300) with one worker and a pinned
# --now (so ids and values repeat), and writes each loaded table ordered by id, every column but
# change_xid. What may differ between two runs: references the database generates (random), and
# the live ETA change's wall-clock times (updated_at, observed_at, the event's txid and created_at).
set -euo pipefail
checkout=$1; database=$2; out=$3; shipments=${4:-300}
psql=(psql -q -h 127.0.0.1 -U postgres)
"${psql[@]}" -c "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" 2>/dev/null
venv=$(cd "$(dirname "$0")/.." && pwd)/.venv
cd "$checkout"
export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/$database SHIPTRACK_STORAGE_DIR=$(mktemp -d)
"$venv/bin/flask" --app app db init >/dev/null
"$venv/bin/flask" --app app demo seed --shipments "$shipments" --workers 1 --now 2026-03-01T12:00 >/dev/null
: > "$out"
for table in shipments shipment_labels containers shipment_legs tracking_events eta_revisions documents \
             document_data arrival_notices packing_lists pallets packing_lines check_runs checks alerts events \
             deleted_shipments; do
  columns=$("${psql[@]}" -At "$database" -c "SELECT string_agg(quote_ident(column_name), ',' ORDER BY ordinal_position)
    FROM information_schema.columns WHERE table_name = '$table' AND column_name <> 'change_xid'")
  order=$("${psql[@]}" -At "$database" -c "SELECT CASE WHEN EXISTS (SELECT 1 FROM information_schema.columns
    WHERE table_name = '$table' AND column_name = 'id') THEN 'id' ELSE '1, 2' END")
  echo "== $table" >> "$out"
  "${psql[@]}" -At "$database" -c "SELECT $columns FROM $table ORDER BY $order" >> "$out"
done
rm -rf "$SHIPTRACK_STORAGE_DIR"
