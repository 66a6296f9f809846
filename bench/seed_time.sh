#!/bin/bash
# Time `demo seed --shipments N` of a checkout on a new database (not a test; docs/demo-data.md).
#   bench/seed_time.sh CHECKOUT DATABASE SHIPMENTS [more demo seed options]
# Recreates DATABASE on $DATABASE_URL's server (default 127.0.0.1:5432, user postgres), applies
# the checkout's schema, times the seed with `time`, then VACUUM ANALYZEs (timed separately) and
# prints the load average before and after, the database's size and, when the server runs on this
# machine, the CPU seconds its processes used during the seed (the seed's own are in `time`'s user + sys).
set -euo pipefail
checkout=$(cd "$1" && pwd); database=$2; shipments=$3; shift 3
server=${DATABASE_URL:-postgresql://postgres@127.0.0.1:5432/postgres}
url=${server%/*}/$database
bench=$(cd "$(dirname "$0")" && pwd)
venv=$bench/../.venv
server_cpu() { "$venv/bin/python" "$bench/proc_cpu.py" postgres; }
psql -q "$server" -c "DROP DATABASE IF EXISTS \"$database\" WITH (FORCE)" -c "CREATE DATABASE \"$database\""
cd "$checkout"
export DATABASE_URL=$url SHIPTRACK_STORAGE_DIR=${SHIPTRACK_STORAGE_DIR:-$(mktemp -d)}
"$venv/bin/flask" --app app db init
echo "checkout $checkout ($(git -C "$checkout" rev-parse --short HEAD)), database $database, $shipments shipments $*"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
before=$(server_cpu)
time "$venv/bin/flask" --app app demo seed --shipments "$shipments" "$@"
after=$(server_cpu)
[ "$before" = "?" ] || echo "PostgreSQL server CPU during the seed: $((after - before)) s"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
time psql -q "$url" -c "VACUUM ANALYZE"
psql -At "$url" -c "SELECT 'database size ' || pg_size_pretty(pg_database_size(current_database()))"
