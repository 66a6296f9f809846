"""The schema and the connection layer: migrations, statements, what the database keeps on write, and the
service through poolers, outages, hanging servers and the embedded PostgreSQL."""
