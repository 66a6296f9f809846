"""Webhooks: the outbox's events, the delivery script end to end and under faults, the SSRF guard, the
`flask webhooks` commands, encrypted endpoint secrets, and the receivers docs/receiving-webhooks.md shows."""
