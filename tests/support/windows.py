"""Tests that spend a small rate limit over several requests keep them in one counting window.

models/rate_limits counts in fixed windows aligned to the epoch (every 300 s by default): a test
whose requests straddle a window's end sees its count start again, and fails on a loaded machine.
"""
import time


def within_one_window(seconds, window_seconds=300):
    """Sleep into the next window when the current one has fewer than `seconds` left."""
    left = window_seconds - time.time() % window_seconds
    if left < seconds:
        time.sleep(left + 0.1)
