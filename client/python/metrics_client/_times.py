"""The time arguments of Reporter and Client: seconds since the epoch (a
float, an int or a numpy scalar) or an aware datetime, to microseconds.

Thread-safety: pure functions.
"""
import math
from datetime import datetime


def to_micros(what: str, t) -> int:
    """`t` in microseconds since the epoch; ValueError naming `what` for a
    naive datetime or anything that is not a finite number of seconds."""
    if isinstance(t, datetime):
        if t.tzinfo is None:
            raise ValueError("%s: a datetime must carry a time zone" % what)
        t = t.timestamp()
    try:
        if isinstance(t, (bool, str, bytes)):
            raise TypeError
        seconds = float(t)  # numpy scalars too
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ValueError("%s: must be seconds since the epoch or an aware "
                         "datetime, not %r" % (what, t))
    return int(round(seconds * 1e6))
