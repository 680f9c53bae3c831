#!/usr/bin/env python3
"""metricsd's HTTP port as a stranger meets it: raw bytes over a socket (no
client library to fix them up), one row per kind of bad request, each checked
for its status, the JSON error shape, whether the connection is closed, and
that nothing was stored; then thousands of bad requests, and hundreds of
calls failing with 503 while the database refuses connections, with the
server's memory measured before and after; then slow and idle clients past
the connection limit while /healthz keeps answering.

Usage: http_door_test.py PATH/TO/metricsd
"""
import gzip
import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rest_api_test  # noqa: E402  (its Server class starts metricsd)

SERVER = None
HOST = b"Host: 127.0.0.1\r\n"


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class Reply:
    def __init__(self, status, headers, body, closed, raw):
        self.status, self.headers, self.body = status, headers, body
        self.closed, self.raw = closed, raw

    def header(self, name):
        return self.headers.get(name.lower())


# Bytes read past one response (pipelined answers), per socket.
_pending = {}


def read_reply(sock, head=False):
    """Reads one response; notes whether the server then closed."""
    data = _pending.pop(sock.fileno(), b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response: %r" % data)
        data += chunk
    head_bytes, rest = data.split(b"\r\n\r\n", 1)
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers.setdefault(name.strip().lower(), value.strip())
    if head or status in (100, 204, 304):
        body = b""
    elif "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        body, rest = rest[:n], rest[n:]
    else:  # chunked
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += sock.recv(65536)
            size_text, rest = rest.split(b"\r\n", 1)
            size = int(size_text, 16)
            while len(rest) < size + 2:
                rest += sock.recv(65536)
            body, rest = body + rest[:size], rest[size + 2:]
            if size == 0:
                break
    closed = False
    if headers.get("connection", "").lower() == "close":
        sock.settimeout(3)
        try:
            while True:
                extra = sock.recv(65536)
                if not extra:
                    closed = True
                    break
                rest += extra
        except (ConnectionResetError, socket.timeout):
            closed = True
    else:
        _pending[sock.fileno()] = rest
    return Reply(status, headers, body, closed, head_bytes + b"\r\n\r\n" + rest)


def send_raw(port, data, head=False):
    with connect(port) as s:
        s.sendall(data)
        reply = read_reply(s, head=head)
        _pending.pop(s.fileno(), None)
        return reply


def get(path, extra=b""):
    return b"GET " + path + b" HTTP/1.1\r\n" + HOST + extra + b"\r\n"


def post(path, body, method=b"POST", extra=b""):
    return (method + b" " + path + b" HTTP/1.1\r\n" + HOST +
            b"Content-Type: application/json\r\nContent-Length: " +
            str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def report_body(values=b"[1.5]", reports=None, trial_field=b""):
    if reports is None:
        reports = (b'[{"time": "2026-01-01T00:00:00Z", "series": [0], '
                   b'"values": ' + values + b"}]")
    return (b'{"streamId": "s", "batch": {' + trial_field +
            b'"sequence": 1, "agentId": "a", "series": '
            b'[{"name": "cpu_util_simple", "unit": "percent"}], '
            b'"reports": ' + reports + b"}}")


LEGACY = "/api/v1/trials/1/profiler"
REPORT = b"/api/v1/trials/1/metrics"


def harness(group, avg, time=b"2026-12-01T00:00:00.5+00:00", trial=b"1"):
    """A ReportTrialMetrics body as the platform's harness writes one."""
    return (b'{"metrics": {"metrics": {"avgMetrics": ' + avg + b', "batchMetrics": null}, '
            b'"trialId": ' + trial + b', "trialRunId": 1, "stepsCompleted": null, '
            b'"reportTime": "' + time + b'"}, "group": "' + group + b'"}')

def otlp(body, content_type=b"application/x-protobuf", encoding=b""):
    return (b"POST /v1/metrics HTTP/1.1\r\n" + HOST + b"Content-Type: " + content_type +
            b"\r\n" + (b"Content-Encoding: " + encoding + b"\r\n" if encoding else b"") +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


# 300 MiB of zeros, gzipped: a bomb the server must refuse without
# inflating it whole (its limit is 64 MiB inflated).
GZIP_BOMB = gzip.compress(bytes(300 << 20), compresslevel=1)

# (class, name, request bytes, status, closes, words the message must hold)
ROWS = [
    # 1. Invalid UTF-8 anywhere is a 400 naming the part.
    ("utf8", "query name", get(b"/api/v1/trials/1/metrics/system?name=%FF%FE"),
     400, False, 'query parameter "name": is not valid UTF-8'),
    ("utf8", "query agentId", get(b"/api/v1/trials/1/metrics/system?agentId=%C3"),
     400, False, '"agentId"'),
    ("utf8", "query gpuUuid", get(b"/api/v1/trials/1/metrics/system?gpuUuid=%ED%A0%80"),
     400, False, '"gpuUuid"'),
    ("utf8", "follow", get(b"/api/v1/trials/1/metrics/system/follow?name=%FF"),
     400, False, '"name"'),
    ("utf8", "legacy labels.name", get(LEGACY.encode() + b"/metrics?labels.name=%FF%FE"),
     400, False, '"labels.name"'),
    ("utf8", "path", get(b"/api/v1/trials/%FF/metrics/system"), 400, False, "path"),
    ("utf8", "raw bytes in the query", get(b"/api/v1/trials/1/metrics/system?name=\xff"),
     400, False, 'query parameter "name": is not valid UTF-8'),
    ("utf8", "body", post(b"/api/v1/trials", b'{"id": 9001, "x": "\xff"}'),
     400, False, "request body: is not valid UTF-8"),
    ("utf8", "body lone surrogate", post(b"/api/v1/trials/1", b'{"state": "\\ud800"}',
                                         method=b"PATCH"),
     400, False, "lone high surrogate"),
    ("utf8", "key name", get(b"/api/v1/trials/1/metrics/system?%FF=1"), 400, False,
     "name: is not valid UTF-8"),
    # 2. A field the path sets cannot be set again.
    ("path", "trialId on GetTrial", get(b"/api/v1/trials/987654321?trialId=1"),
     400, False, "set by the request's path"),
    ("path", "trial_id on chart", get(b"/api/v1/trials/987654321/metrics/system?trial_id=1"),
     400, False, "set by the request's path"),
    ("path", "series", get(b"/api/v1/trials/987654321/metrics/system/series?trialId=1"),
     400, False, "set by the request's path"),
    ("path", "follow", get(b"/api/v1/trials/987654321/metrics/system/follow?trialId=1"),
     400, False, "set by the request's path"),
    ("path", "legacy labels.trialId",
     get(b"/api/v1/trials/987654321/profiler/metrics?labels.trialId=1"),
     400, False, "set by the request's path"),
    ("path", "legacy labels", get(b"/api/v1/trials/987654321/profiler/metrics?labels=x"),
     400, False, "set by the request's path"),
    ("path", "legacy series", get(b"/api/v1/trials/987654321/profiler/available_series?trialId=1"),
     400, False, "set by the request's path"),
    ("path", "PATCH body", post(b"/api/v1/trials/987654321",
                                b'{"trialId": 1, "state": "COMPLETED"}', method=b"PATCH"),
     400, False, '"trialId": is set by the request\'s path'),
    ("path", "report body", post(b"/api/v1/trials/987654321/metrics/system",
                                 report_body(trial_field=b'"trialId": 1, ')),
     400, False, '"batch.trialId": is set by the request\'s path'),
    # 3. Bodies are strict JSON, mapped strictly.
    ("json", "single quotes", post(b"/api/v1/trials", b"{'id': 7003}"), 400, False,
     "not valid JSON"),
    ("json", "trailing comma", post(b"/api/v1/trials", b'{"id": 7004,}'), 400, False,
     "not valid JSON"),
    ("json", "bare key", post(b"/api/v1/trials", b"{id: 7030}"), 400, False,
     "not valid JSON"),
    ("json", "duplicate key", post(b"/api/v1/trials", b'{"id": 7031, "id": 7032}'),
     400, False, '"id": is given twice'),
    ("json", "trailing text", post(b"/api/v1/trials", b'{"id": 7033} {}'), 400, False,
     "after the value"),
    ("json", "comment", post(b"/api/v1/trials", b'{"id": 7034 /* c */}'), 400, False,
     "not valid JSON"),
    ("json", "NaN literal", post(b"/api/v1/trials/1/metrics/system", report_body(b"[NaN]")),
     400, False, "not valid JSON"),
    ("json", "plus number", post(b"/api/v1/trials", b'{"id": +7035}'), 400, False,
     "not valid JSON"),
    ("json", "fraction for an int", post(b"/api/v1/trials", b'{"id": 7036.5}'), 400, False,
     '"id": "7036.5" is not an int32'),
    ("json", "nested array", post(b"/api/v1/trials/1/metrics/system", report_body(b"[[1]]")),
     400, False, '"batch.reports[0].values[0]": expected a number, got an array'),
    ("json", "scalar for repeated", post(b"/api/v1/trials/1/metrics/system", report_body(b"50.0")),
     400, False, '"batch.reports[0].values": expected an array, got a number'),
    ("json", "object for repeated",
     post(b"/api/v1/trials/1/metrics/system",
          report_body(reports=b'{"time": "2026-01-01T00:00:00Z", "series": [0], "values": [1]}')),
     400, False, '"batch.reports": expected an array, got an object'),
    ("json", "string for a message", post(b"/api/v1/trials/1/metrics/system",
                                          b'{"batch": "x"}'), 400, False,
     '"batch": expected an object'),
    ("json", "unknown field", post(b"/api/v1/trials", b'{"id": 7037, "color": 1}'),
     400, False, '"color": is not a field'),
    ("json", "array at the top", post(b"/api/v1/trials", b"[1]"), 400, False,
     "expected an object"),
    ("json", "deep nesting", post(b"/api/v1/trials", b'{"x":' * 100 + b"1" + b"}" * 100),
     400, False, "is not a field"),
    ("json", "legacy body", post(b"/api/v1/trials/profiler/metrics", b'{"batches": {}}'),
     400, False, '"batches": expected an array'),
    # 4. Framing (RFC 9110/9112): ambiguity is 400 and close.
    ("framing", "two Content-Length",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST + b"Content-Length: 13\r\n"
     b"Content-Length: 40\r\n\r\n" + b'{"id": 7040}' + b" " * 27, 400, True,
     "Content-Length"),
    ("framing", "no Host", b"GET /api/v1/trials/1 HTTP/1.1\r\n\r\n", 400, True, "Host"),
    ("framing", "two Host", get(b"/api/v1/trials/1", extra=HOST), 400, True, "Host"),
    ("framing", "Content-Length -1",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST + b"Content-Length: -1\r\n\r\n",
     400, True, "Content-Length"),
    ("framing", "gzip, chunked",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST +
     b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 501, True,
     'only "chunked"'),
    ("framing", "chunked not final",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\n",
     400, True, "final coding"),
    ("framing", "TE and CL",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST +
     b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, True, "framing"),
    ("framing", "TE in HTTP/1.0",
     b"POST /api/v1/trials HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     400, True, "HTTP/1.0"),
    ("framing", "bad chunk size",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST +
     b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400, True, "framing"),
    ("framing", "NUL in the path", get(b"/ui/main.js%00.css"), 400, False,
     "control character"),
    ("framing", "plus sign trial", get(b"/api/v1/trials/+1"), 400, False,
     '"+1" is not an int32'),
    ("framing", "space in maxPoints", get(b"/api/v1/trials/1/metrics/system?maxPoints=%205"),
     400, False, '" 5" is not an int32'),
    ("framing", "hex maxPoints", get(b"/api/v1/trials/1/metrics/system?maxPoints=0x10"),
     400, False, "is not an int32"),
    ("framing", "bool yes", get(b"/api/v1/trials?limit=1&state=yes"), 400, False, "state"),
    ("framing", "HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400, True, ""),
    ("framing", "HTTP/3.0", b"GET / HTTP/3.0\r\n" + HOST + b"\r\n", 400, True, ""),
    ("framing", "garbage", b"HELLO\r\n\r\n", 400, True, "framing"),
    ("framing", "space in target", b"GET /a b HTTP/1.1\r\n" + HOST + b"\r\n", 400, True, ""),
    ("framing", "bad header name", get(b"/api/v1/trials/1", extra=b"Bad Name: x\r\n"),
     400, True, "framing"),
    ("framing", "Expect other", post(b"/api/v1/trials", b'{"id": 7041}', extra=b"Expect: x\r\n"),
     417, True, "Expect"),
    ("framing", "fragment", get(b"/api/v1/trials/1#x"), 400, False, ""),
    # 6. Every error is JSON.
    ("json-errors", "414", get(b"/api/v1/trials/1?x=" + b"a" * 9000), 414, True, "target"),
    ("json-errors", "431", get(b"/api/v1/trials/1", extra=b"X-Big: " + b"a" * 20000 + b"\r\n"),
     431, True, "headers"),
    ("json-errors", "413",
     b"POST /api/v1/trials HTTP/1.1\r\n" + HOST + b"Content-Length: 99999999\r\n\r\n",
     413, True, "larger than the limit"),
    ("json-errors", "405", post(b"/api/v1/trials/1", b"{}", method=b"DELETE"), 405, False,
     "not allowed"),
    ("json-errors", "404", get(b"/api/v1/nothing"), 404, False, "no route"),
    ("json-errors", "legacy 405", post(LEGACY.encode() + b"/available_series", b"{}"),
     405, False, "not allowed"),
    ("json-errors", "legacy 414", get(LEGACY.encode() + b"/metrics?x=" + b"a" * 9000),
     414, True, "target"),
    # 7. Exports: refused as JSON before any byte of the file.
    ("export", "csv name", get(b"/api/v1/trials/1/metrics/system/export.csv?name=%FF"),
     400, False, '"name"'),
    ("export", "csv trialId", get(b"/api/v1/trials/987654321/metrics/system/export.csv?trialId=1"),
     400, False, "set by the request's path"),
    ("export", "csv start", get(b"/api/v1/trials/1/metrics/system/export.csv?start=%00"),
     400, False, '"start"'),
    ("export", "csv backwards", get(b"/api/v1/trials/1/metrics/system/export.csv"
                                    b"?start=2026-01-02T00:00:00Z&end=2026-01-01T00:00:00Z"),
     400, False, "is not before end"),
    ("export", "csv empty label", get(b"/api/v1/trials/1/metrics/system/export.csv?agentId="),
     400, False, "agent_id[0]"),
    ("export", "csv unknown trial", get(b"/api/v1/trials/987654321/metrics/system/export.csv"),
     404, False, "987654321"),
    ("export", "csv POST", post(b"/api/v1/trials/1/metrics/system/export.csv", b"{}"),
     405, False, "not allowed"),
    ("export", "trace base", get(b"/api/v1/trials/1/metrics/system/trace?baseTimeNanoseconds=-5"),
     400, False, "base_time_nanoseconds"),
    ("export", "trace base overflow",
     get(b"/api/v1/trials/1/metrics/system/trace?baseTimeNanoseconds=99999999999999999999"),
     400, False, "baseTimeNanoseconds"),
    ("export", "trace maxPoints", get(b"/api/v1/trials/1/metrics/system/trace?maxPoints=10001"),
     400, False, "max_points"),
    ("export", "trace agent UTF-8", get(b"/api/v1/trials/1/metrics/system/trace?agentId=%C3"),
     400, False, '"agentId"'),
    # 8. Summaries: trial lists, groups, offsets and GPU indexes it cannot take.
    ("summary", "no trial", get(b"/api/v1/metrics/system/summary"), 400, False, "trial_id"),
    ("summary", "nine trials", get(b"/api/v1/metrics/system/summary?" +
                                   b"&".join(b"trialId=%d" % i for i in range(1, 10))),
     400, False, "at most 8"),
    ("summary", "trial twice", get(b"/api/v1/metrics/system/summary?trialId=1&trialId=1"),
     400, False, "named twice"),
    ("summary", "trial overflow", get(b"/api/v1/metrics/system/summary?trialId=99999999999"),
     400, False, "trialId"),
    ("summary", "trial text", get(b"/api/v1/metrics/system/summary?trialId=%FF"),
     400, False, "trialId"),
    ("summary", "unknown trial", get(b"/api/v1/metrics/system/summary?trialId=987654321"),
     404, False, "987654321"),
    ("summary", "group", get(b"/api/v1/metrics/system/summary?trialId=1&group=NODES"),
     400, False, "group"),
    ("summary", "offset overflow",
     get(b"/api/v1/metrics/system/summary?trialId=1&relative=true&offsetEndMs=9223372036854775807"),
     400, False, "offset_end"),
    ("summary", "negative offset",
     get(b"/api/v1/metrics/system/summary?trialId=1&relative=true&offsetStartMs=-1"),
     400, False, "offset_start"),
    ("summary", "offsets mixed",
     get(b"/api/v1/metrics/system/summary?trialId=1&relative=true&start=2026-01-01T00:00:00Z"),
     400, False, "start"),
    ("summary", "gpu index", get(b"/api/v1/metrics/system/summary?trialId=1&gpuIndex=-3"),
     400, False, "gpu_index"),
    ("summary", "POST", post(b"/api/v1/metrics/system/summary?trialId=1", b"{}"),
     405, False, "not allowed"),
    # 9. The platform's ReportTrialMetrics and GetMetrics: what its harness
    # would never send, refused naming the field, before anything is stored.
    ("platform", "body UTF-8", post(REPORT, b'{"group": "\xff"}'),
     400, False, "request body: is not valid UTF-8"),
    ("platform", "trial of another path", post(REPORT, b'{"metrics": {"trialId": 2}, "group": "cpu"}'),
     400, False, "is not the value the request's path gives it"),
    ("platform", "trial overflow", post(b"/api/v1/trials/99999999999/metrics", b"{}"),
     400, False, "metrics.trial_id"),
    ("platform", "unknown trial",
     post(b"/api/v1/trials/987654321/metrics", harness(b"cpu", b'{"a": {"cpu_util_simple": 1}}',
                                                       trial=b"987654321")),
     404, False, "987654321"),
    ("platform", "no group", post(REPORT, harness(b"", b"{}")), 400, False, "group: must not be empty"),
    ("platform", "dotted group", post(REPORT, harness(b"a.b", b"{}")), 400, False, "must not contain"),
    ("platform", "avgMetrics not an object", post(REPORT, harness(b"cpu", b"[1]")),
     400, False, "avgMetrics\": expected an object, got an array"),
    ("platform", "agent not an object", post(REPORT, harness(b"cpu", b'{"a": 5}')),
     400, False, 'avgMetrics["a"]: expected an object'),
    ("platform", "nested too deep", post(REPORT, harness(b"gpu", b'{"a": {"G": {"gpu_util": {"x": 1}}}}')),
     400, False, "nested deeper than"),
    ("platform", "labels in cpu", post(REPORT, harness(b"cpu", b'{"a": {"x": {"y": 1}}}')),
     400, False, "the cpu group has no labels"),
    ("platform", "not a number", post(REPORT, harness(b"gpu", b'{"a": {"G": {"gpu_util": "x"}}}')),
     400, False, 'avgMetrics["a"].G.gpu_util: not a number, got the string "x"'),
    ("platform", "agent id non-printable", post(REPORT, harness(b"cpu", b'{"a\\u0007": {"c": 1}}')),
     400, False, "(the agent id): has a non-printable character"),
    ("platform", "key twice", post(REPORT, harness(b"cpu", b'{"a": {"c": 1, "c": 2}}')),
     400, False, "is given twice"),
    ("platform", "number past a double", post(REPORT, harness(b"cpu", b'{"a": {"c": 1e999}}')),
     400, False, "range of a double"),
    ("platform", "bare NaN elsewhere", post(b"/api/v1/trials/1/metrics/system", report_body(b"[NaN]")),
     400, False, "not valid JSON"),
    ("platform", "report time", post(REPORT, b'{"metrics": {"reportTime": "yesterday"}, "group": "cpu"}'),
     400, False, "reportTime"),
    ("platform", "report time of 1970",
     post(REPORT, harness(b"cpu", b'{"a": {"c": 1}}', b"1970-01-01T00:00:00+00:00")),
     400, False, "metrics.reportTime"),
    ("platform", "negative run", post(REPORT, b'{"metrics": {"trialRunId": -1}, "group": "cpu"}'),
     400, False, "metrics.trialRunId"),
    ("platform", "deep JSON", post(REPORT, b'{"metrics": {"metrics": {"avgMetrics": ' +
                                   b'{"a":' * 5000), 400, False, "nested too deeply"),
    ("platform", "NUL in a generic group", post(REPORT, harness(b"training", b'{"a\\u0000": 1}')),
     400, False, "a NUL character"),
    ("platform", "epoch not a number",
     post(REPORT, harness(b"training", b'{"epoch": "one"}')), 400, False, "epoch"),
    ("platform", "413",
     b"POST " + REPORT + b" HTTP/1.1\r\n" + HOST + b"Content-Length: 99999999\r\n\r\n",
     413, True, "larger than the limit"),
    ("platform", "GetMetrics no trial", get(b"/api/v1/trials/metrics/trial_metrics?group=training"),
     400, False, "trialIds"),
    ("platform", "GetMetrics trial text",
     get(b"/api/v1/trials/metrics/trial_metrics?trialIds=x&group=training"), 400, False, "trialIds"),
    ("platform", "GetMetrics trial twice",
     get(b"/api/v1/trials/metrics/trial_metrics?trialIds=1&trialIds=1&group=training"),
     400, False, "named twice"),
    ("platform", "GetMetrics no group", get(b"/api/v1/trials/metrics/trial_metrics?trialIds=1"),
     400, False, "group: must not be empty"),
    ("platform", "GetMetrics unknown trial",
     get(b"/api/v1/trials/metrics/trial_metrics?trialIds=987654321&group=training"),
     404, False, "987654321"),
    # 10. OTLP/HTTP (POST /v1/metrics): bodies it cannot take, before any point.
    ("otlp", "truncated protobuf", otlp(b"\x0a\x05\x0a\x03"), 400, False, "(protobuf)"),
    ("otlp", "content type", otlp(b"x", b"text/plain"), 415, False, "Content-Type"),
    ("otlp", "encoding", otlp(b"x", encoding=b"br"), 415, False, "only gzip"),
    ("otlp", "not gzip", otlp(b"not gzip", encoding=b"gzip"), 400, False, "not valid gzip"),
    ("otlp", "deep JSON",
     otlp(b'{"resourceMetrics":[{"resource":{"attributes":[{"key":"k","value":' +
          b'{"arrayValue":{"values":[' * 5000, b"application/json"), 400, False, "(JSON)"),
]


def stored_counts():
    out = subprocess.run(
        ["psql", "-X", "-tA", "-d", SERVER.db, "-c",
         "SELECT (SELECT count(*) FROM trials) || ' ' || (SELECT count(*) FROM metrics)"],
        check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def rpc_status(body):
    """A protobuf google.rpc.Status (OTLP/HTTP's error body for a protobuf
    request) as {"code", "message"}: field 1 varint, field 2 string."""
    status, at = {"code": 0, "message": ""}, 0
    while at < len(body):
        key, at = varint(body, at)
        if key == 0x08:
            status["code"], at = varint(body, at)
        elif key == 0x12:
            size, at = varint(body, at)
            status["message"], at = body[at:at + size].decode("utf-8"), at + size
        else:
            raise AssertionError("unexpected field key %d in %r" % (key, body))
    return status


class HttpDoorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        status, _, body = SERVER.request("POST", "/api/v1/trials", {"id": 1})
        assert status == 200, body

    def check_error(self, reply, status, words, name, protobuf=False):
        self.assertEqual(reply.status, status, "%s: %r" % (name, reply.raw[:300]))
        if protobuf:  # OTLP/HTTP answers a protobuf request's error in protobuf
            self.assertEqual(reply.header("content-type"), "application/x-protobuf", name)
            self.assertIn(words, rpc_status(reply.body)["message"], name)
            return
        self.assertEqual(reply.header("content-type"), "application/json", name)
        text = reply.body.decode("utf-8")  # valid UTF-8, or this raises
        error = json.loads(text)
        # A stream's error before its first message is its error line.
        if sorted(error) == ["error"]:
            error = error["error"]
        self.assertEqual(sorted(error), ["code", "details", "message"], name)
        self.assertEqual(error["details"], [], name)
        self.assertIn(words, error["message"], name)

    def test_bad_requests_table(self):
        before = stored_counts()
        for kind, name, request, status, closes, words in ROWS:
            with self.subTest(kind=kind, name=name):
                reply = send_raw(SERVER.port, request)
                self.check_error(reply, status, words, name, protobuf=kind == "otlp" and
                                 b"content-type: application/x-protobuf" in request.lower())
                self.assertEqual(reply.closed, closes, "%s: connection closed?" % name)
                self.assertEqual(reply.raw.count(b"HTTP/1.1 "), 1,
                                 "%s: one response head" % name)
                if status == 405:
                    self.assertIn("HEAD", reply.header("allow"), name)
                if LEGACY.encode() in request.split(b"\r\n")[0] or b"/profiler/" in request[:80]:
                    self.assertIsNotNone(reply.header("deprecation"), name)
                    self.assertIn("successor-version", reply.header("link") or "", name)
        self.assertEqual(stored_counts(), before, "a refused request stored something")

    def test_otlp_gzip_bomb_is_refused_at_the_limit(self):
        # 300 MiB of zeros in a few hundred KB: refused once 64 MiB are
        # inflated, not after inflating it all.
        start = time.time()
        reply = send_raw(SERVER.port, otlp(GZIP_BOMB, encoding=b"gzip"))
        self.check_error(reply, 413, "inflates past", "gzip bomb", protobuf=True)
        print("[ figures ] a %d-byte gzip bomb of %d MiB refused in %.2f s" %
              (len(GZIP_BOMB), 300, time.time() - start))
        self.assertLess(time.time() - start, 5)

    def test_gzip_chunked_is_answered_at_once(self):
        start = time.time()
        reply = send_raw(SERVER.port, b"POST /api/v1/trials HTTP/1.1\r\n" + HOST +
                         b"Transfer-Encoding: gzip, chunked\r\n\r\n")
        self.assertEqual(reply.status, 501)
        self.assertLess(time.time() - start, 1.0)

    def test_head_works_wherever_get_does(self):
        for path in (b"/api/v1/trials/1", b"/api/v1/trials", b"/healthz", b"/metrics",
                     b"/api/v1/trials/1/metrics/system/series",
                     b"/api/v1/trials/1/metrics/system?maxPoints=10",
                     b"/api/v1/trials/1/metrics/system/follow",
                     b"/api/v1/trials/1/metrics/system/export.csv",
                     b"/api/v1/trials/1/metrics/system/trace",
                     b"/api/v1/trials/1/profiler/available_series"):
            with self.subTest(path=path):
                with connect(SERVER.port) as s:
                    s.sendall(b"HEAD " + path + b" HTTP/1.1\r\n" + HOST + b"\r\n")
                    reply = read_reply(s, head=True)
                    self.assertEqual(reply.status, 200, reply.raw[:300])
                    # No body follows: the same connection answers next.
                    s.sendall(get(b"/healthz"))
                    self.assertEqual(read_reply(s).status, 200)
        reply = send_raw(SERVER.port, b"HEAD /api/v1/trials/999 HTTP/1.1\r\n" + HOST + b"\r\n",
                         head=True)
        self.assertEqual(reply.status, 404)

    def test_good_requests_still_work_keep_alive_and_pipelined(self):
        with connect(SERVER.port) as s:
            s.sendall(get(b"/api/v1/trials/1") + get(b"/healthz") +
                      post(b"/api/v1/trials", b'{"id": 7100}'))
            self.assertEqual(read_reply(s).status, 200)
            self.assertEqual(read_reply(s).status, 200)
            created = read_reply(s)
            self.assertEqual(created.status, 200, created.raw)
            self.assertEqual(json.loads(created.body)["id"], 7100)
            chunked = (b"POST /api/v1/trials HTTP/1.1\r\n" + HOST +
                       b"Transfer-Encoding: chunked\r\n\r\n5\r\n{\"id\"\r\n7\r\n: 7101}\r\n0\r\n\r\n")
            s.sendall(chunked)
            self.assertEqual(json.loads(read_reply(s).body)["id"], 7101)
            s.sendall(post(b"/api/v1/trials", b'{"id": 7102}', extra=b"Expect: 100-continue\r\n"))
            self.assertEqual(read_reply(s).status, 100)
            self.assertEqual(read_reply(s).status, 200)
        reply = send_raw(SERVER.port, b"GET /api/v1/trials/1 HTTP/1.0\r\n\r\n")
        self.assertEqual(reply.status, 200)
        self.assertTrue(reply.closed)

    def test_memory_stays_flat_under_a_flood_of_bad_requests(self):
        keep_alive = [r for r in ROWS if not r[4]]
        closing = [r for r in ROWS if r[4]]

        def flood(times):
            with connect(SERVER.port) as s:
                for _ in range(times):
                    for row in keep_alive:
                        s.sendall(row[2])
                        reply = read_reply(s)
                        assert reply.status == row[3], (row[1], reply.raw[:200])
            for _ in range(max(1, times // 10)):
                for row in closing:
                    send_raw(SERVER.port, row[2])

        flood(100)  # warm up: pools, caches and arenas reach their size
        before = rss_kb(SERVER.proc.pid)
        start = time.time()
        flood(1000)
        sent = 1000 * len(keep_alive) + 100 * len(closing)
        grown = rss_kb(SERVER.proc.pid) - before
        print("[ figures ] %d bad requests in %.1f s; RSS %d KB -> %+d KB" %
              (sent, time.time() - start, before, grown))
        if os.environ.get("METRICS_SANITIZER"):
            # AddressSanitizer keeps freed memory in quarantine (256 MB) and
            # checks leaks at exit instead: the flood ran, RSS means nothing.
            print("[ figures ] RSS not checked under %s" % os.environ["METRICS_SANITIZER"])
            return
        self.assertLess(grown, 2048, "memory grew under bad requests")

    def test_memory_stays_flat_under_a_flood_of_failing_calls(self):
        """5xx on the path REST shares with gRPC (in this process, no socket):
        with its database refusing connections, every chart request fails
        with 503 and the server's memory stays flat; the database back, the
        same request is answered."""
        chart = get(b"/api/v1/trials/1/metrics/system")

        def flood(times):
            with connect(SERVER.port) as s:
                for _ in range(times):
                    s.sendall(chart)
                    reply = read_reply(s)
                    assert reply.status == 503, reply.raw[:300]

        database_allows_connections(False)
        try:
            flood(50)  # warm up
            before = rss_kb(SERVER.proc.pid)
            start = time.time()
            flood(400)
            grown = rss_kb(SERVER.proc.pid) - before
        finally:
            database_allows_connections(True)
        print("[ figures ] 400 failing chart requests in %.1f s; RSS %d KB -> %+d KB" %
              (time.time() - start, before, grown))
        deadline = time.time() + 10
        while send_raw(SERVER.port, chart).status != 200:
            self.assertLess(time.time(), deadline, "no answer once the database is back")
            time.sleep(0.1)
        if os.environ.get("METRICS_SANITIZER"):
            print("[ figures ] RSS not checked under %s" % os.environ["METRICS_SANITIZER"])
            return
        # Each request costs the server a refused connection (20 ms), so
        # fewer than the bad requests above, and a tighter bound: 1 MB over
        # 400 calls catches a leak of 2.5 KB a call.
        self.assertLess(grown, 1024, "memory grew under failing calls")


def database_allows_connections(allow):
    """Lets metricsd's database take connections again, or stops it taking
    any (superusers' too) and ends the sessions it has."""
    sql = ["ALTER DATABASE %s ALLOW_CONNECTIONS %s" % (SERVER.db, "true" if allow else "false")]
    if not allow:
        sql.append("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                   "WHERE datname = '%s'" % SERVER.db)
    for statement in sql:
        subprocess.run(["psql", "-X", "-qtA", "-d", "postgres", "-c", statement],
                       check=True, capture_output=True)


def with_auth(value, path=b"/api/v1/trials/1"):
    return get(path, b"Authorization: " + value + b"\r\n")


UNKNOWN = b"Bearer mtk_" + b"0" * 64
NO_TOKEN = "a valid API token is required"
# Hostile credentials, against a server that requires tokens: each refused
# cleanly, none reaching a look-up it should not.
AUTH_ROWS = [
    ("none", get(b"/api/v1/trials/1"), 401, False, NO_TOKEN),
    ("unknown token", with_auth(UNKNOWN), 401, False, NO_TOKEN),
    ("another scheme", with_auth(b"Basic dXNlcjpwYXNz"), 401, False, NO_TOKEN),
    ("huge", with_auth(b"Bearer " + b"a" * 12000), 401, False, NO_TOKEN),
    ("past the header limit", with_auth(b"Bearer " + b"a" * 20000), 431, True, "headers"),
    ("NUL byte", with_auth(b"Bearer mtk_\x00" + b"0" * 63), 400, True, "bad value"),
    ("bytes past ASCII", with_auth(b"Bearer mtk_\xff\xfe" + b"0" * 62), 401, False, NO_TOKEN),
    ("token and more", with_auth(UNKNOWN + b" " + UNKNOWN), 401, False, NO_TOKEN),
    ("two", get(b"/api/v1/trials/1", b"Authorization: " + UNKNOWN + b"\r\n"
                b"Authorization: Bearer x\r\n"), 400, False, "given 2 times"),
    ("a hundred", get(b"/api/v1/trials/1", (b"Authorization: " + UNKNOWN + b"\r\n") * 100),
     400, False, "given 100 times"),
    ("two allocation tokens", get(b"/api/v1/trials/1",
                                  (b"Grpc-Metadata-x-allocation-token: " + UNKNOWN + b"\r\n") * 2),
     400, False, "given 2 times"),
    ("huge allocation token",
     get(b"/api/v1/trials/1", b"Grpc-Metadata-x-allocation-token: Bearer " + b"b" * 9000 + b"\r\n"),
     401, False, NO_TOKEN),
    ("on /metrics", with_auth(b"Bearer " + b"a" * 12000, b"/metrics"), 401, False, NO_TOKEN),
    ("on the legacy shim", with_auth(UNKNOWN, LEGACY.encode() + b"/available_series"), 401, False,
     NO_TOKEN),
    ("DEL on a follow", with_auth(b"Bearer \x7f", b"/api/v1/trials/1/metrics/system/follow"), 400,
     True, "bad value"),
    ("on a follow", with_auth(UNKNOWN, b"/api/v1/trials/1/metrics/system/follow"), 401, False,
     NO_TOKEN),
]


class HostileCredentialsTest(unittest.TestCase):
    """The credential headers' rows, against a metricsd that requires tokens
    (the per-address limit off: the rows, not the limit, are under test)."""

    check_error = HttpDoorTest.check_error

    @classmethod
    def setUpClass(cls):
        cls.auth_server = rest_api_test.Server(
            "door-auth", flags=["--auth=required", "--auth-failure-burst=0"])

    @classmethod
    def tearDownClass(cls):
        cls.auth_server.stop()

    def test_hostile_credentials_table(self):
        for name, request, status, closes, words in AUTH_ROWS:
            with self.subTest(name=name):
                reply = send_raw(self.auth_server.port, request)
                self.check_error(reply, status, words, name)
                self.assertEqual(reply.closed, closes, "%s: connection closed?" % name)
                if status == 401:
                    self.assertEqual(reply.header("www-authenticate"), "Bearer", name)
                self.assertNotIn(b"mtk_", reply.body, name)
        # Still serving.
        self.assertEqual(send_raw(self.auth_server.port, get(b"/healthz")).status, 200)


class SlowClientTest(unittest.TestCase):
    """A server of its own with a small connection limit and short timeouts."""

    @classmethod
    def setUpClass(cls):
        cls.server = rest_api_test.Server("slow", flags=[
            "--http-max-connections=20", "--http-header-timeout=2s",
            "--http-body-timeout=2s", "--http-idle-timeout=3s"])

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def healthz_seconds(self):
        start = time.time()
        reply = send_raw(self.server.port, get(b"/healthz"))
        self.assertEqual(reply.status, 200)
        return time.time() - start

    def test_slow_and_silent_clients_cannot_lock_out_healthz(self):
        clients = []
        start = time.time()
        for i in range(60):  # three times the limit
            s = connect(self.server.port, timeout=10)
            if i % 2:
                s.sendall(b"GET /api/v1/trials/1 HTTP/1.1\r\n")  # then one line a second
            clients.append(s)
        worst = 0.0
        closed_at = {}
        deadline = start + 8
        while time.time() < deadline and len(closed_at) < len(clients):
            worst = max(worst, self.healthz_seconds())
            for i, s in enumerate(clients):
                if i in closed_at:
                    continue
                s.setblocking(False)
                try:
                    if i % 2:
                        s.send(b"X-Slow: 1\r\n")
                    if s.recv(4096) == b"":
                        closed_at[i] = time.time() - start
                except BlockingIOError:
                    pass
                except (ConnectionResetError, BrokenPipeError):
                    closed_at[i] = time.time() - start
            time.sleep(0.5)
        for s in clients:
            s.close()
        print("[ figures ] /healthz worst %.3f s with 60 slow clients (limit 20); "
              "all closed by %.1f s" % (worst, max(closed_at.values() or [0])))
        self.assertLess(worst, 1.0)
        self.assertEqual(len(closed_at), len(clients), "a slow client was never closed")
        # Each within the header timeout (2 s), with room for the check's pace.
        self.assertLess(max(closed_at.values()), 2 + 1.5)

    def test_slow_body_is_cut_at_the_body_timeout(self):
        with connect(self.server.port) as s:
            s.sendall(b"POST /api/v1/trials HTTP/1.1\r\n" + HOST + b"Content-Length: 100\r\n\r\n{")
            start = time.time()
            s.settimeout(10)
            while True:
                try:
                    if s.recv(4096) == b"":
                        break
                except ConnectionResetError:
                    break
            self.assertLess(time.time() - start, 2 + 1.5)

    def test_idle_keep_alive_connection_is_closed(self):
        with connect(self.server.port) as s:
            s.sendall(get(b"/healthz"))
            self.assertEqual(read_reply(s).status, 200)
            start = time.time()
            s.settimeout(10)
            self.assertEqual(s.recv(4096), b"")
            self.assertLess(time.time() - start, 3 + 1.5)


if __name__ == "__main__":
    rest_api_test.METRICSD = sys.argv.pop(1)
    SERVER = rest_api_test.Server("door")
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        SERVER.stop()
    sys.exit(0 if result.wasSuccessful() else 1)
