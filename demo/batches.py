"""Shipments in batches: each batch is planned from its own random stream, built, COPYed and committed.

Batches do not depend on one another, so worker processes (each with its own connection) load
them side by side; the data is the same whatever the number of workers, only ids differ.
"""
import multiprocessing
import random

from demo import bulk, documents, monitoring, shipments
from demo.plans import plan_natural
from demo.showcase import SHOWCASE, plan_showcase
from models import db

# Shipments per batch; each batch has its own random stream, so the same size gives the same data.
BATCH_SIZE = 2000
# Past this index shipments get fewer children, so a million shipments load in minutes.
FULL_DETAIL_LIMIT = 5000

# Replace the first-estimate rows the insert trigger wrote with the planned ETA histories.
DELETE_TRIGGER_REVISIONS = "DELETE FROM eta_revisions WHERE shipment_id BETWEEN %(first)s AND %(last)s"
# Planner statistics of the tables the seed fills.
ANALYZE = "ANALYZE " + ", ".join(t.name for t in bulk.TABLES)
# While loading, only the tables the triggers and the batch touch read need fresh statistics
# (shipments_before_write's aggregates, the ETA revision trigger): the rest wait for the end.
ANALYZE_READ = "ANALYZE shipments, containers, checks, pallets, packing_lists, packing_lines, eta_revisions"


def load_batch(conn, org, seed_value, start):
    """Plan, build and load the shipments [start, start + batch size); returns ids of those to move live."""
    showcase = SHOWCASE[org.slug][:org.count]
    first_showcase = org.count - len(showcase)
    rng = random.Random(f"{seed_value}/{org.slug}/{start}")
    batch = bulk.Batch()
    plans = []
    for index in range(start, min(start + org.batch_size, org.count)):
        if index >= first_showcase:
            plan = plan_showcase(org, index, rng, showcase[index - first_showcase])
        else:
            plan = plan_natural(org, index, rng)
        plan.lean = index >= FULL_DETAIL_LIMIT
        plan.label_ids = _labels(plan)
        shipments.add_shipment(batch, plan)
        documents.add_documents(batch, plan)
        monitoring.add_checks(batch, plan)
        monitoring.add_alerts(batch, plan)
        plans.append(plan)
    # Loaded as history (bulk.HISTORY): no webhook events, past changes are not news.
    bases = bulk.load(conn, batch, after_table=_replace_revisions(conn, batch))
    conn.commit()
    return [bases["shipments"] + p.shipment_id for p in plans if "live_update" in p.flags]


def load_all(url, conn, org, seed_value, workers, echo):
    """Load every batch of the organization; returns the ids of shipments to move live."""
    starts = list(range(0, org.count, org.batch_size))
    live = []
    if workers <= 1 or len(starts) <= 1:
        for done, start in enumerate(starts, start=1):
            live += load_batch(conn, org, seed_value, start)
            _progress(conn, org, done, len(starts), echo)
        return live
    # spawn, not fork: a forked child would share (and on exit close) the parent's connection.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(url, org, seed_value)) as pool:
        for done, ids in enumerate(pool.imap_unordered(_run_batch, starts), start=1):
            live += ids
            _progress(conn, org, done, len(starts), echo)
    return live


def _progress(conn, org, done, total, echo):
    if total > 1:
        echo(f"{org.slug}: {min(done * org.batch_size, org.count)}/{org.count} shipments")
    if done & (done - 1) == 0 and done < total:
        # Whenever the tables have doubled: without fresh statistics (autovacuum may be off or
        # behind) the triggers' lookups are planned as scans of whole tables.
        with conn.cursor() as cur:
            cur.execute(ANALYZE_READ)
        conn.commit()


_worker = {}


def _start_worker(url, org, seed_value):
    _worker.update(conn=db.connect(url), org=org, seed_value=seed_value)


def _run_batch(start):
    return load_batch(_worker["conn"], _worker["org"], _worker["seed_value"], start)


def _replace_revisions(conn, batch):
    def after_table(name, bases):
        if name == "shipments":
            first = bases["shipments"]
            with conn.cursor() as cur:
                cur.execute(DELETE_TRIGGER_REVISIONS, {"first": first, "last": first + batch.count(name) - 1})
    return after_table


def _labels(plan):
    ids = plan.org.label_ids
    if plan.labels is not None:
        return [ids[name] for name in plan.labels]
    rng = plan.rng
    roll = rng.random()
    count = 0 if roll < 0.55 else 1 if roll < 0.85 else 2 if roll < 0.97 else 3
    names = rng.sample(sorted(ids), count)
    if "organic" in plan.flags and "Organic" not in names:
        names.append("Organic")
    return [ids[name] for name in names]
