"""Rate limits counted by one process alone while the primary is away (models/rate_limits.py `_alone`), without a database."""
import pytest

from models import db, rate_limits


def reserving(*answers):
    """A reserve_with that answers each of `answers` in turn (an exception is raised), and the calls it got."""
    calls = []

    def reserve(wanted):
        calls.append(wanted)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer
    return reserve, calls


def test_alone_a_process_admits_what_it_last_knew_was_left_then_refuses_from_memory():
    held = rate_limits.Reservations(300, alone=True)
    # Its one reservation: 2 requests, when all processes had reserved 7 of the 10; then the primary is away.
    reserve, calls = reserving({"b": (7, 2, 100)}, db.DatabaseUnavailable("primary away"))
    admitted = [held.admit({"b": 10}, reserve)[1] for _ in range(7)]
    # Its 2, then the 3 the window had left when it last knew (10 - 7), then refused.
    assert admitted == [True] * 5 + [False] * 2
    assert len(calls) == 3   # the reservation, the one that found the primary away, the one that found nothing left
    standings, _ = held.admit({"b": 10}, reserve)
    assert standings["b"].remaining == -1 and 1 <= standings["b"].resets_in <= 100


def test_alone_a_bucket_never_reserved_gets_the_whole_limit():
    held = rate_limits.Reservations(300, alone=True)
    reserve, _calls = reserving(db.DatabaseUnavailable("primary away"))
    admitted = [held.admit({"token:1": 4, "ip:x": 100}, reserve)[1] for _ in range(6)]
    assert admitted == [True] * 4 + [False] * 2


def test_not_alone_the_primary_away_is_raised():
    held = rate_limits.Reservations(300)
    reserve, _calls = reserving(db.DatabaseUnavailable("primary away"))
    with pytest.raises(db.DatabaseUnavailable):
        held.admit({"b": 10}, reserve)
