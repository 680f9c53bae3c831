"""The exceptions metrics_client raises.

Every error from the server carries its gRPC status code and message, and
never the API token. Thread-safety: plain exception classes.
"""
from typing import Optional

import grpc


class MetricsError(Exception):
    """An error of the metrics service or of this client.

    Attributes:
        code: the grpc.StatusCode the server (or the client) gave, for
            example grpc.StatusCode.NOT_FOUND for an unknown trial.
        message: the server's own words, naming the field and the reason.
    """

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__("%s: %s" % (code.name, message))
        self.code = code
        self.message = message


class PermanentError(MetricsError):
    """The server refused the reporter's stream for good (an unknown or
    ended trial, a token that may not write it, another client on the same
    stream id). The reporter has stopped; record(), flush() and close()
    raise or return it."""


class BufferFullError(MetricsError):
    """record() under overflow="block" found no room in the buffer within
    block_timeout; the values were dropped (and counted as dropped)."""

    def __init__(self, message: str):
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


class ReporterClosedError(MetricsError):
    """record() or flush() after close()."""

    def __init__(self, message: str = "the reporter is closed"):
        super().__init__(grpc.StatusCode.FAILED_PRECONDITION, message)


class FlushTimeoutError(MetricsError, TimeoutError):
    """flush() ran out of time with samples still unacknowledged; they stay
    buffered and are still being sent."""

    def __init__(self, message: str):
        super().__init__(grpc.StatusCode.DEADLINE_EXCEEDED, message)


def from_rpc_error(error: grpc.RpcError,
                   cls: Optional[type] = None) -> MetricsError:
    """The MetricsError (or `cls`) for a failed call, with the server's code
    and message."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return (cls or MetricsError)(code or grpc.StatusCode.UNKNOWN, details or "")
