"""The delivery loop's wake-up pipe (delivery/connection.py): what ends a sleep, and that wakes never block."""
import os
import select
import threading

import pytest

from delivery.connection import Wakeup

# A sleep that should end at once is given this long; a test fails rather than hangs if it does not end.
LONG = 60.0


@pytest.fixture
def wakeup():
    made = Wakeup()
    yield made
    made.close()


def sleep_in_thread(wakeup, **kwargs):
    """Start wakeup.sleep(LONG, ...) on a thread; returns the thread and the event set once it returned."""
    returned = threading.Event()

    def sleeper():
        wakeup.sleep(LONG, **kwargs)
        returned.set()

    thread = threading.Thread(target=sleeper, daemon=True)
    thread.start()
    return thread, returned


def drained(wakeup):
    """True when nothing is left to read in the pipe."""
    readable, _, _ = select.select([wakeup._read], [], [], 0)
    return readable == []


def test_a_wake_before_the_sleep_ends_it_at_once(wakeup):
    wakeup.wake()
    _thread, returned = sleep_in_thread(wakeup)
    assert returned.wait(10)
    assert drained(wakeup)
    assert wakeup.asleep is False


def test_a_wake_from_another_thread_ends_a_sleep(wakeup):
    entered = threading.Event()
    thread, returned = sleep_in_thread(wakeup, ready=lambda: entered.set() or False)
    assert entered.wait(10)
    assert not returned.is_set()
    assert wakeup.asleep is True
    wakeup.wake()
    assert returned.wait(10)
    assert wakeup.asleep is False


def test_ready_ends_the_sleep_without_a_wake_and_is_asked_while_asleep(wakeup):
    seen = []
    _thread, returned = sleep_in_thread(wakeup, ready=lambda: seen.append(wakeup.asleep) or True)
    assert returned.wait(10)
    assert seen == [True]


def test_another_readable_descriptor_ends_the_sleep(wakeup):
    read, write = os.pipe()
    try:
        os.write(write, b"x")
        _thread, returned = sleep_in_thread(wakeup, also=[read])
        assert returned.wait(10)
        assert os.read(read, 1) == b"x"  # left for its owner to read
    finally:
        os.close(read)
        os.close(write)


def test_wakes_past_the_pipes_capacity_neither_block_nor_raise_and_one_sleep_drains_them(wakeup):
    for _ in range(100_000):  # a Linux pipe holds 65,536 bytes
        wakeup.wake()
    _thread, returned = sleep_in_thread(wakeup)
    assert returned.wait(10)
    assert drained(wakeup)


def test_descriptors_numbered_past_1023_are_waited_on(wakeup):
    # select() refuses a descriptor numbered 1024 or above; a process serving many clients has them.
    read, write = os.pipe()
    high = os.dup2(read, 1500)
    try:
        os.write(write, b"x")
        _thread, returned = sleep_in_thread(wakeup, also=[high])
        assert returned.wait(10)
        assert os.read(high, 1) == b"x"
        far = Wakeup()
        os.dup2(far._read, 1501)
        os.close(far._read)
        far._read = 1501
        far.wake()
        far.sleep(LONG)  # returns at once: its own pipe, numbered 1501, is readable
        assert far.asleep is False
        far.close()
    finally:
        for fd in (read, write, high):
            os.close(fd)
