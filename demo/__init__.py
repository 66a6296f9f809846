"""The demo data generator behind `flask --app app demo seed` (see docs/demo-data.md).

Shipments are planned in Python from a seeded random.Random (plans.py), turned into rows
(tracking.py, documents.py, monitoring.py) and bulk-loaded with COPY (copy.py), so the same
code makes the 300-shipment demo and a million-shipment benchmark.
"""
