"""What people run: the `flask` commands for tokens and versions, the demo and `dev.py`, the smoke check, the
docs' runnable examples, the operations topology and the alert rules."""
