"""Waiting in a Python test for what another thread or process does, without
a fixed sleep: eventually() polls a condition until it holds or a time limit
passes, and the test asserts on its result (the C++ tests' Eventually, in
eventually.h beside this file).

    assert eventually(lambda: reporter.stats.acknowledged == 200, timeout=20)

A function of its arguments; safe from any thread.
"""

import time


def eventually(condition, timeout, every=0.02):
    """Calls `condition` every `every` seconds until it returns a true value
    (then returns it), or until `timeout` seconds have passed (then returns
    its value at one more call at the end)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    return condition()
