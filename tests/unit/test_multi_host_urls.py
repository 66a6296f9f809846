"""The hosts of a libpq multi-host URL a connect tries next (models/deadline.py): without one that did not
answer, and those that did not answer lately last."""
import time

import pytest

from models import deadline


@pytest.mark.parametrize(("dsn", "host", "rest"), [
    ("postgresql://u:pw@a:1,b:2,c:3/db?target_session_attrs=read-write", ("b", "2"),
     "user=u password=pw dbname=db host=a,c port=1,3 target_session_attrs=read-write"),
    ("postgresql://u@a,b/db", ("a", "5432"), "user=u dbname=db host=b"),
    ("postgresql://u@a:7,a:8/db", ("a", "8"), "user=u dbname=db host=a port=7"),
    ("postgresql://u@a:1/db", ("a", "1"), None),             # the only host: nothing else to try
    ("postgresql://u@a:1,b:2/db", ("c", "3"), None),         # not one of them
    ("postgresql://u@a:1,b:2/db?hostaddr=127.0.0.1,127.0.0.2", ("a", "1"), None),  # left to libpq
    ("not a database url", ("a", "1"), None),
])
def test_a_host_that_does_not_answer_is_left_out_of_the_next_try(dsn, host, rest):
    assert deadline.without_host(dsn, host) == rest


@pytest.mark.parametrize(("dsn", "rest"), [
    ("postgresql://u@a:1,b:2,c:3/db?target_session_attrs=read-write",
     "user=u dbname=db host=b,c,a port=2,3,1 target_session_attrs=read-write"),
    ("postgresql://u@a,b/db", "user=u dbname=db host=b,a"),
    ("postgresql://u@b:2,a:1/db", "postgresql://u@b:2,a:1/db"),   # last already
    ("postgresql://u@a:1/db", "postgresql://u@a:1/db"),            # the only host
    ("postgresql://u@c:1,d:2/db", "postgresql://u@c:1,d:2/db"),    # none silent
    ("not a database url", "not a database url"),                  # the connect says so
])
def test_a_host_that_did_not_answer_lately_is_tried_last(dsn, rest, monkeypatch):
    silent_until = time.monotonic() + 60
    monkeypatch.setattr(deadline, "_silent", {("a", "1"): silent_until, ("a", "5432"): silent_until,
                                              ("d", "2"): time.monotonic() - 1})
    assert deadline.silent_last(dsn) == rest
