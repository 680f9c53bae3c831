#!/usr/bin/env python3
"""The REST API of a real metricsd, driven by Python's standard library (an
HTTP client that is not ours), on a throwaway database of the PostgreSQL
that test.sh starts (the PG* environment variables).

Usage: rest_api_test.py PATH/TO/metricsd
"""
import datetime
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "common", "testing"))
from eventually import eventually  # noqa: E402

METRICSD = None
CORS_ORIGIN = "http://ui.example"


def rfc3339(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Server:
    """A metricsd process on its own database, on ports chosen at run time."""

    def __init__(self, name="main", flags=()):
        self.db = "rest_api_test_%d_%s" % (os.getpid(), name)
        subprocess.run(["dropdb", "--if-exists", self.db], check=True)
        subprocess.run(["createdb", self.db], check=True)
        url = "dbname=" + self.db
        # The log goes to a file: a pipe nobody drains could fill and block.
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [METRICSD, "--database-url", url, "--migrate",
             "--http-address", "127.0.0.1:0", "--grpc-address", "127.0.0.1:0",
             "--cors-origin", CORS_ORIGIN,
             # The REST semantics, not tokens (server/auth/auth_matrix_test.cc).
             "--auth=off"] + list(flags),
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        deadline = time.time() + 30
        self.port = None
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.search(r"HTTP listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("metricsd did not start: " + self.log_text())

    def log_text(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        """Stops metricsd (SIGTERM); returns the seconds it took to exit."""
        start = time.time()
        self.proc.terminate()
        self.proc.wait(timeout=60)
        took = time.time() - start
        subprocess.run(["dropdb", "--if-exists", self.db], check=True)
        return took

    def request(self, method, path, body=None, headers=None):
        """Returns (status, headers, parsed JSON body or None)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, path, body=data, headers=headers or {})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        try:
            return resp.status, resp.headers, json.loads(raw)
        except ValueError:
            return resp.status, resp.headers, raw

    def stream(self, path):
        """Yields each NDJSON line's parsed object as it arrives."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", path)
        resp = conn.getresponse()
        self.last_stream_status = resp.status
        self.last_stream_headers = resp.headers
        while True:
            line = resp.readline()
            if not line:
                break
            if line.strip():
                yield json.loads(line)
        conn.close()


SERVER = None


def parse_time(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def legacy_batch(trial, name, values, times, agent="agent-1", gpu="",
                 metric_type="PROFILER_METRIC_TYPE_SYSTEM", batches=None):
    return {
        "values": values,
        "batches": batches if batches is not None else list(range(len(values))),
        "timestamps": [rfc3339(t) for t in times],
        "labels": {"trialId": trial, "name": name, "agentId": agent,
                   "gpuUuid": gpu, "metricType": metric_type},
    }


class RestApiTest(unittest.TestCase):
    next_trial = 100

    def new_trial(self):
        RestApiTest.next_trial += 1
        trial = RestApiTest.next_trial
        status, _, body = SERVER.request("POST", "/api/v1/trials", {"id": trial})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["id"], trial)
        self.assertEqual(body["state"], "ACTIVE")
        return trial

    def now(self):
        return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) - \
            datetime.timedelta(minutes=5)

    def test_trial_lifecycle_and_errors(self):
        trial = self.new_trial()
        status, _, body = SERVER.request("POST", "/api/v1/trials", {"id": trial})
        self.assertEqual(status, 409)
        self.assertEqual(body["code"], 6)
        self.assertIn("already exists", body["message"])
        self.assertEqual(body["details"], [])

        status, _, body = SERVER.request("GET", "/api/v1/trials/999999")
        self.assertEqual((status, body["code"]), (404, 5))

        status, _, body = SERVER.request("PATCH", "/api/v1/trials/%d" % trial,
                                         {"state": "COMPLETED"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["state"], "COMPLETED")
        self.assertIn("endedAt", body)
        status, _, body = SERVER.request("PATCH", "/api/v1/trials/%d" % trial,
                                         {"state": "ERROR"})
        self.assertEqual((status, body["code"]), (412, 9))

        status, _, body = SERVER.request("PATCH", "/api/v1/trials/%d" % trial,
                                         {"state": "SLEEPING"})
        self.assertEqual(status, 400)
        self.assertIn("state", body["message"])

    def test_list_trials_newest_first_by_state_and_page(self):
        first, second, third = self.new_trial(), self.new_trial(), self.new_trial()
        SERVER.request("PATCH", "/api/v1/trials/%d" % second, {"state": "CANCELED"})
        status, _, body = SERVER.request("GET", "/api/v1/trials?limit=3")
        self.assertEqual(status, 200, body)
        self.assertEqual([t["id"] for t in body["trials"]], [third, second, first])
        self.assertEqual(body["trials"][1]["state"], "CANCELED")

        status, _, body = SERVER.request(
            "GET", "/api/v1/trials?state=CANCELED&beforeId=%d" % third)
        self.assertEqual([t["id"] for t in body["trials"]][:1], [second])
        self.assertTrue(all(t["state"] == "CANCELED" for t in body["trials"]))

        status, _, body = SERVER.request("GET", "/api/v1/trials?limit=5000")
        self.assertEqual(status, 400)
        self.assertIn("limit", body["message"])
        status, _, body = SERVER.request("GET", "/api/v1/trials?state=SLEEPING")
        self.assertEqual(status, 400)
        self.assertIn("state", body["message"])

    def test_profiler_page_is_served_read_only(self):
        status, headers, body = SERVER.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/html"))
        self.assertIn(b'src="/ui/main.js"', body)
        self.assertIn("default-src 'self'", headers["Content-Security-Policy"])
        status, headers, body = SERVER.request("GET", "/ui/uPlot.iife.min.js")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/javascript"))
        status, _, body = SERVER.request("GET", "/ui/config.json")
        self.assertEqual(body, {"grafanaUrl": ""})
        status, headers, body = SERVER.request("POST", "/", "x")
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD")
        status, _, body = SERVER.request("GET", "/ui/../index.html")
        self.assertEqual(status, 404)

    def test_bad_requests_name_what_is_wrong(self):
        trial = self.new_trial()
        base = "/api/v1/trials/%d/metrics/system" % trial
        status, _, body = SERVER.request("GET", base + "?maxPoints=abc")
        self.assertEqual(status, 400)
        self.assertIn("maxPoints", body["message"])
        status, _, body = SERVER.request("GET", base + "?colour=blue")
        self.assertEqual(status, 400)
        self.assertIn("colour", body["message"])
        status, _, body = SERVER.request("GET", base + "?start=yesterday")
        self.assertEqual(status, 400)
        self.assertIn("RFC 3339", body["message"])
        status, _, body = SERVER.request("GET", "/api/v1/trials/abc")
        self.assertEqual(status, 400)
        self.assertIn("trial_id", body["message"])
        status, _, body = SERVER.request("POST", "/api/v1/trials", "{not json")
        self.assertEqual(status, 400)
        self.assertIn("request body", body["message"])
        status, _, body = SERVER.request("GET", "/api/v1/nothing/here")
        self.assertEqual((status, body["code"]), (404, 5))
        status, headers, body = SERVER.request("DELETE", "/api/v1/trials/%d" % trial)
        self.assertEqual(status, 405)
        self.assertEqual(headers["Allow"], "GET, HEAD, PATCH")

    def test_legacy_post_then_new_chart_and_legacy_get(self):
        trial = self.new_trial()
        t0 = self.now()
        times = [t0 + datetime.timedelta(seconds=i) for i in range(3)]
        body = {"batches": [
            legacy_batch(trial, "gpu_util", [10, 20, 30], times, gpu="GPU-0"),
            legacy_batch(trial, "gpu_util", [90, 80, 70], times, gpu="GPU-1"),
            legacy_batch(trial, "free_memory", [1.5, 2.5, 3.5], times),
            legacy_batch(trial, "dataloader_next", [0.25], times[:1],
                         metric_type="PROFILER_METRIC_TYPE_TIMING", batches=[42]),
        ]}
        status, headers, reply = SERVER.request("POST", "/api/v1/trials/profiler/metrics", body)
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply, {})
        self.assertEqual(headers["Deprecation"], "@1795305600")
        self.assertIn("/api/v1/trials/%d/metrics/system" % trial, headers["Link"])
        self.assertIn('rel="successor-version"', headers["Link"])

        # The new chart endpoint: memory_free in bytes, times in epoch ms.
        status, _, chart = SERVER.request(
            "GET", "/api/v1/trials/%d/metrics/system?name=memory_free&maxPoints=100" % trial)
        self.assertEqual(status, 200, chart)
        self.assertEqual(len(chart["series"]), 1)
        s = chart["series"][0]
        self.assertEqual(s["series"]["name"], "memory_free")
        self.assertEqual(s["series"]["unit"], "bytes")
        self.assertEqual(s["resolutionMs"], 0)  # raw points for a short window
        self.assertEqual(s["max"], [1.5e9, 2.5e9, 3.5e9])
        self.assertEqual(s["bucketStartMs"], [int(t.timestamp() * 1000) for t in times])

        # Repeated query parameters select several series.
        status, _, chart = SERVER.request(
            "GET", "/api/v1/trials/%d/metrics/system?name=gpu_util&gpuUuid=GPU-0&gpuUuid=GPU-1"
            % trial)
        self.assertEqual(status, 200, chart)
        self.assertEqual(sorted(x["series"]["gpuUuid"] for x in chart["series"]),
                         ["GPU-0", "GPU-1"])

        status, _, listed = SERVER.request("GET", "/api/v1/trials/%d/metrics/system/series" % trial)
        self.assertEqual(status, 200)
        self.assertEqual(sorted((x["name"], x["gpuUuid"]) for x in listed["series"]),
                         [("gpu_util", "GPU-0"), ("gpu_util", "GPU-1"), ("memory_free", "")])
        self.assertEqual({x["sampleCount"] for x in listed["series"]}, {"3"})

        # The legacy GET, line by line: a GPU metric without a GPU UUID comes
        # per GPU; old names and units come back.
        lines = list(SERVER.stream(
            "/api/v1/trials/%d/profiler/metrics?labels.name=gpu_util" % trial))
        self.assertEqual(SERVER.last_stream_status, 200)
        self.assertEqual(SERVER.last_stream_headers["Deprecation"], "@1795305600")
        by_gpu = {l["result"]["batch"]["labels"]["gpuUuid"]: l["result"]["batch"] for l in lines}
        self.assertEqual(sorted(by_gpu), ["GPU-0", "GPU-1"])
        self.assertEqual(by_gpu["GPU-1"]["values"], [90, 80, 70])
        self.assertEqual(by_gpu["GPU-0"]["labels"]["metricType"], "PROFILER_METRIC_TYPE_SYSTEM")
        self.assertEqual(parse_time(by_gpu["GPU-0"]["timestamps"][0]), times[0])

        lines = list(SERVER.stream(
            "/api/v1/trials/%d/profiler/metrics?labels.name=free_memory&labels.agentId=agent-1"
            % trial))
        self.assertEqual(len(lines), 1)
        self.assertEqual(lines[0]["result"]["batch"]["values"], [1.5, 2.5, 3.5])

        lines = list(SERVER.stream(
            "/api/v1/trials/%d/profiler/metrics?labels.metricType=PROFILER_METRIC_TYPE_TIMING"
            % trial))
        self.assertEqual(len(lines), 1)
        self.assertEqual(lines[0]["result"]["batch"]["batches"], [42])
        self.assertEqual(lines[0]["result"]["batch"]["labels"]["name"], "dataloader_next")

        lines = list(SERVER.stream("/api/v1/trials/%d/profiler/available_series" % trial))
        self.assertEqual(len(lines), 1)
        names = sorted((l["name"], l["gpuUuid"], l["metricType"])
                       for l in lines[0]["result"]["labels"])
        self.assertEqual(names, [
            ("dataloader_next", "", "PROFILER_METRIC_TYPE_TIMING"),
            ("free_memory", "", "PROFILER_METRIC_TYPE_SYSTEM"),
            ("gpu_util", "GPU-0", "PROFILER_METRIC_TYPE_SYSTEM"),
            ("gpu_util", "GPU-1", "PROFILER_METRIC_TYPE_SYSTEM")])

    def test_bad_legacy_batch_stores_nothing(self):
        trial = self.new_trial()
        t0 = self.now()
        good = legacy_batch(trial, "gpu_util", [10, 20], [t0, t0 + datetime.timedelta(seconds=1)],
                            gpu="GPU-0")
        bad = legacy_batch(trial, "cpu_util_simple", [1, 2, 3], [t0])
        status, _, body = SERVER.request("POST", "/api/v1/trials/profiler/metrics",
                                         {"batches": [good, bad]})
        self.assertEqual(status, 400)
        self.assertEqual(body["code"], 3)
        self.assertIn("batches[1]", body["message"])
        self.assertIn("equal lengths", body["message"])
        status, _, listed = SERVER.request("GET", "/api/v1/trials/%d/metrics/system/series" % trial)
        self.assertEqual(listed["series"], [])

        status, _, body = SERVER.request("POST", "/api/v1/trials/profiler/metrics",
                                         {"batches": [legacy_batch(999999, "gpu_util", [1], [t0])]})
        self.assertEqual((status, body["code"]), (404, 5))

        lines = list(SERVER.stream("/api/v1/trials/999999/profiler/metrics"))
        self.assertEqual(SERVER.last_stream_status, 404)
        self.assertEqual(lines[0]["error"]["code"], 5)

    def test_report_batch_over_rest(self):
        trial = self.new_trial()
        t0 = self.now()
        body = {"streamId": "rest-client", "batch": {
            "sequence": 1, "agentId": "agent-9",
            "series": [{"name": "cpu_util_simple", "unit": "percent"}],
            "reports": [{"time": rfc3339(t0), "series": [0], "values": [12.5]}]}}
        path = "/api/v1/trials/%d/metrics/system" % trial
        status, _, reply = SERVER.request("POST", path, body)
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply, {"ackedSequence": "1", "duplicate": False})
        status, _, reply = SERVER.request("POST", path, body)
        self.assertEqual(reply, {"ackedSequence": "1", "duplicate": True})
        body["batch"]["reports"][0]["values"] = ["NaN"]
        body["batch"]["sequence"] = 2
        status, _, reply = SERVER.request("POST", path, body)
        self.assertEqual(status, 400)
        self.assertIn("values[0]", reply["message"])

    def test_hundreds_of_follows_each_get_every_update(self):
        """300 follows of one trial at once (more than a thread each would allow):
        each gets the first answer and then the update, and /healthz answers."""
        trial = self.new_trial()
        t0 = self.now()
        post = lambda value, at: SERVER.request(
            "POST", "/api/v1/trials/profiler/metrics",
            {"batches": [legacy_batch(trial, "cpu_util_simple", [value],
                                      [t0 + datetime.timedelta(seconds=at)])]})
        self.assertEqual(post(1, 0)[0], 200)
        request = ("GET /api/v1/trials/%d/metrics/system/follow?name=cpu_util_simple "
                   "HTTP/1.0\r\n\r\n" % trial).encode()
        sockets = []
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", SERVER.port), timeout=30)
            s.sendall(request)
            sockets.append(s)
        received = [b""] * len(sockets)

        def read_until(i, lines):
            while received[i].partition(b"\r\n\r\n")[2].count(b"\n") < lines:
                chunk = sockets[i].recv(65536)
                if not chunk:
                    break
                received[i] += chunk

        for i in range(len(sockets)):
            read_until(i, 1)
        self.assertEqual(SERVER.request("GET", "/healthz")[0], 200)
        self.assertEqual(post(77, 1)[0], 200)
        for i in range(len(sockets)):
            read_until(i, 2)
            sockets[i].close()
        for i, data in enumerate(received):
            head, _, body = data.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), (i, head[:100]))
            lines = [json.loads(l) for l in body.split(b"\n") if l]
            self.assertGreaterEqual(len(lines), 2, i)
            self.assertEqual([v for s in lines[0]["result"]["series"] for v in s["max"]], [1])
            self.assertIn(77, [v for l in lines[1:] for s in l["result"]["series"] for v in s["max"]])

    def test_follow_until_trial_completes(self):
        trial = self.new_trial()
        t0 = self.now()
        post = lambda values, start: SERVER.request(
            "POST", "/api/v1/trials/profiler/metrics",
            {"batches": [legacy_batch(trial, "cpu_util_simple", values,
                                      [t0 + datetime.timedelta(seconds=start + i)
                                       for i in range(len(values))])]})
        self.assertEqual(post([1, 2], 0)[0], 200)

        legacy_lines, new_lines = [], []
        legacy = threading.Thread(target=lambda: legacy_lines.extend(SERVER.stream(
            "/api/v1/trials/%d/profiler/metrics?follow=true" % trial)))
        follow = threading.Thread(target=lambda: new_lines.extend(SERVER.stream(
            "/api/v1/trials/%d/metrics/system/follow?name=cpu_util_simple" % trial)))
        legacy.start()
        follow.start()
        self.assertTrue(eventually(lambda: legacy_lines, timeout=20))
        self.assertEqual(post([3, 4], 2)[0], 200)
        eventually(lambda: sum(len(l["result"]["batch"]["values"]) for l in legacy_lines) >= 4,
                   timeout=20)
        status, _, _ = SERVER.request("PATCH", "/api/v1/trials/%d" % trial,
                                      {"state": "COMPLETED"})
        self.assertEqual(status, 200)
        legacy.join(timeout=20)
        follow.join(timeout=20)
        self.assertFalse(legacy.is_alive(), "the legacy follow did not end")
        self.assertFalse(follow.is_alive(), "the new follow did not end")
        values = [v for l in legacy_lines for v in l["result"]["batch"]["values"]]
        self.assertEqual(values, [1, 2, 3, 4])
        self.assertTrue(new_lines and all("result" in l for l in new_lines))
        seen = [v for l in new_lines for s in l["result"]["series"] for v in s["max"]]
        self.assertIn(4, seen)

    def test_deprecated_calls_are_logged_once_per_client_and_method(self):
        trial = self.new_trial()
        for _ in range(3):
            list(SERVER.stream("/api/v1/trials/%d/profiler/available_series" % trial))
        lines = [l for l in SERVER.log_text().splitlines()
                 if "deprecated API: 127.0.0.1 called GetTrialProfilerAvailableSeries" in l]
        self.assertEqual(len(lines), 1, SERVER.log_text())

    def test_a_stream_whose_client_left_frees_its_connection(self):
        # Follows on a trial with no data send nothing; their clients leave.
        # The gateway must notice and cancel the calls, or they would hold
        # their HTTP connections (2 at most here) until the trial ends.
        server = Server("left", ["--http-max-connections", "2"])
        try:
            status, _, _ = server.request("POST", "/api/v1/trials", {"id": 1})
            self.assertEqual(status, 200)
            for path in ["/api/v1/trials/1/profiler/metrics?follow=true",
                         "/api/v1/trials/1/metrics/system/follow"]:
                client = socket.create_connection(("127.0.0.1", server.port))
                client.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
                time.sleep(0.5)
                client.close()
            def healthy():
                try:
                    return server.request("GET", "/healthz")[0] == 200
                except (ConnectionError, http.client.HTTPException):
                    return False
            self.assertTrue(eventually(healthy, timeout=10, every=0.5),
                            "departed streams still hold their connections")
        finally:
            server.stop()

    def test_cors(self):
        status, headers, _ = SERVER.request(
            "OPTIONS", "/api/v1/trials/1",
            headers={"Origin": CORS_ORIGIN, "Access-Control-Request-Method": "GET"})
        self.assertEqual(status, 204)
        self.assertEqual(headers["Access-Control-Allow-Origin"], CORS_ORIGIN)
        self.assertIn("PATCH", headers["Access-Control-Allow-Methods"])
        status, headers, _ = SERVER.request("GET", "/api/v1/trials/1",
                                            headers={"Origin": CORS_ORIGIN})
        self.assertEqual(headers["Access-Control-Allow-Origin"], CORS_ORIGIN)
        status, headers, _ = SERVER.request("GET", "/api/v1/trials/1",
                                            headers={"Origin": "http://evil.example"})
        self.assertNotIn("Access-Control-Allow-Origin", headers)
        status, _, body = SERVER.request(
            "OPTIONS", "/api/v1/trials/1",
            headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "GET"})
        self.assertEqual(status, 403)


if __name__ == "__main__":
    METRICSD = sys.argv.pop(1)
    SERVER = Server()
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        SERVER.stop()
    sys.exit(0 if result.wasSuccessful() else 1)
