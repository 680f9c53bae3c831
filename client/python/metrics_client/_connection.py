"""The gRPC channel and call metadata of a Reporter or Client: where to
connect, TLS, and the API token (read from a file when given one).

The token lives only in the metadata handed to gRPC; no message, log line or
repr built here contains it. Thread-safety: functions without shared state.
"""
from typing import List, Optional, Tuple

import grpc

# Keepalive pings find a server that vanished without closing the
# connection (metricsd permits them every 10 s); reconnect delays stay short
# so a restarted server is found quickly.
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 30000),
    ("grpc.keepalive_timeout_ms", 10000),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 5000),
    ("grpc.max_receive_message_length", 64 << 20),
]


def read_token(token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    """The token to send, from `token` or the first line of `token_file`;
    ValueError when both are given or the token is not printable ASCII."""
    if token is not None and token_file is not None:
        raise ValueError("token, token_file: give one of them, not both")
    if token_file is not None:
        try:
            with open(token_file, encoding="ascii", errors="replace") as f:
                token = f.read().strip()
        except OSError as e:
            raise ValueError("token_file: cannot read %s: %s"
                             % (token_file, e.strerror)) from None
        if not token:
            raise ValueError("token_file: %s is empty" % token_file)
    if token is not None and (
            not token or any(not ("\x20" < c < "\x7f") for c in token)):
        # gRPC sends only printable ASCII; the message never quotes the token.
        raise ValueError("token: must be printable ASCII without spaces "
                         "(check the token file)")
    return token


def metadata(token: Optional[str]) -> List[Tuple[str, str]]:
    return [("authorization", "Bearer " + token)] if token else []


def _read_pem(what: str, path: Optional[str]) -> Optional[bytes]:
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ValueError("%s: cannot read %s: %s" % (what, path, e.strerror)) from None


def open_channel(server: str, tls: bool = False, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None) -> grpc.Channel:
    """A channel to `server` ("host:port"): plaintext, or TLS when `tls` or
    any tls_* file is given (tls_ca: the CA to trust instead of the
    system's; tls_cert and tls_key: a client certificate for mutual TLS)."""
    if not server or not isinstance(server, str):
        raise ValueError("server: must be \"host:port\", e.g. \"localhost:8081\"")
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("tls_cert, tls_key: give both or neither")
    if tls or tls_ca or tls_cert:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_pem("tls_ca", tls_ca),
            private_key=_read_pem("tls_key", tls_key),
            certificate_chain=_read_pem("tls_cert", tls_cert))
        return grpc.secure_channel(server, credentials, options=_CHANNEL_OPTIONS)
    return grpc.insecure_channel(server, options=_CHANNEL_OPTIONS)
