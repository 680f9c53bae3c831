#!/usr/bin/env python3
"""The platform's harness (Determined 0.30 and later) against a real metricsd,
with tokens required: its ReportTrialMetrics bodies, exactly as its bindings
write them for each release's form, posted with Debian's python3-requests
and the header its task session sends; then read back as a user and the
platform's Web UI would: the chart API, the two legacy routes in the UI's
forms, and GetMetrics for a training group. A replay stores once, a refused
report says why and stores nothing.

Usage: harness_report_test.py PATH/TO/metricsd PATH/TO/metricsctl
"""
import datetime
import json
import os
import struct
import subprocess
import sys
import unittest

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rest_api_test  # noqa: E402  (its Server class starts metricsd)

METRICSD = METRICSCTL = None
TRIAL = 7
OTHER_TRIAL = 8


class Server(rest_api_test.Server):
    """rest_api_test's metricsd process, tokens required, and their making."""

    def __init__(self):
        rest_api_test.METRICSD = METRICSD
        super().__init__("harness", ["--auth=required"])
        self.base = "http://127.0.0.1:%d" % self.port

    def token(self, *flags):
        out = subprocess.run([METRICSCTL, "--database-url", "dbname=" + self.db, "tokens",
                              "create", "--name=harness test"] + list(flags),
                             check=True, capture_output=True, text=True).stdout
        return out.strip().splitlines()[-1]


SERVER = None


def float32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def harness_session(token):
    """A session as the harness's TaskSession makes it: the token in
    grpc-gateway's header for gRPC metadata x-allocation-token."""
    s = requests.Session()
    s.headers.update({"Grpc-Metadata-x-allocation-token": "Bearer %s" % token})
    return s


def encode(value):
    """The harness's JSON encoder (determined.util.json_encode): non-finite
    floats as the strings "NaN", "Infinity", "-Infinity"."""
    def jsonable(v):
        if isinstance(v, float) and v != v:
            return "NaN"
        if isinstance(v, float) and v in (float("inf"), float("-inf")):
            return "Infinity" if v > 0 else "-Infinity"
        if isinstance(v, dict):
            return {k: jsonable(x) for k, x in v.items()}
        if isinstance(v, list):
            return [jsonable(x) for x in v]
        return v
    return json.dumps(jsonable(value))


def body(group, avg, report_time=None, release="0.32", steps=None, batches=None):
    """The body the harness's bindings write (to_json(omit_unset=True)):
    0.30 and 0.31 leave the unset fields out, 0.32 and later send them as
    null."""
    trial_metrics = {"metrics": {"avgMetrics": avg}, "trialId": TRIAL, "trialRunId": 1}
    if report_time is not None:
        trial_metrics["reportTime"] = report_time.isoformat()
    if release != "0.30" or batches is not None:
        trial_metrics["metrics"]["batchMetrics"] = batches
    if release != "0.30" or steps is not None:
        trial_metrics["stepsCompleted"] = steps
    return {"metrics": trial_metrics, "group": group}


def profiling_reports(agent, t, gpus=("GPU-aaaa", "GPU-bbbb"), base=0.0):
    """One aggregation period of the harness's profiler: a report per group,
    each timed when it is made, keyed by agent id."""
    groups = [
        ("gpu", {g: {"gpu_util": 40.0 + i + base, "gpu_free_memory": 7.9e10 - i}
                 for i, g in enumerate(gpus)}),
        ("cpu", {"cpu_util_simple": 12.5 + base}),
        ("memory", {"memory_free": 2.5e10 + base * 1e6}),
        ("disk", {"disk_iops": 3.0, "disk_throughput_read": 1024.0 + base,
                  "disk_throughput_write": 2048.0, "/": {"disk_util": 55.5},
                  "/run/determined/workdir/shared_fs": {"disk_util": 7.0}}),
        ("network", {"net_throughput_sent": 100.0 + base, "net_throughput_recv": 200.0}),
    ]
    return [(g, {agent: avg}, t + datetime.timedelta(microseconds=17 * i))
            for i, (g, avg) in enumerate(groups)]


class HarnessReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.admin = SERVER.token("--role=admin")
        for trial in (TRIAL, OTHER_TRIAL):
            r = requests.post(SERVER.base + "/api/v1/trials", json={"id": trial},
                              headers={"Authorization": "Bearer " + cls.admin})
            assert r.status_code == 200, r.text
        cls.reporter = SERVER.token("--role=reporter", "--trial=%d" % TRIAL)
        cls.session = harness_session(cls.reporter)
        cls.start = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) \
            - datetime.timedelta(minutes=5)

    def post(self, payload, session=None, trial=TRIAL, data=None):
        s = session or self.session
        return s.post(SERVER.base + "/api/v1/trials/%d/metrics" % trial,
                      data=data if data is not None else encode(payload),
                      headers={"Content-Type": "application/json"})

    def get(self, path):
        return requests.get(SERVER.base + path,
                            headers={"Authorization": "Bearer " + self.admin})

    def series(self):
        r = self.get("/api/v1/trials/%d/metrics/system/series" % TRIAL)
        self.assertEqual(r.status_code, 200, r.text)
        return {(s["agentId"], s["name"], s["gpuUuid"]): (s["unit"], int(s["sampleCount"]))
                for s in r.json()["series"]}

    def first_line(self, path, session=None):
        """The first NDJSON line of a stream (a follow's is its whole list)."""
        s = session or self.session
        with s.get(SERVER.base + path, stream=True, timeout=30) as r:
            self.assertEqual(r.status_code, 200)
            for line in r.iter_lines():
                if line:
                    return json.loads(line)
        return None

    def test_1_every_group_of_both_releases_is_stored_charted_and_read_by_the_ui(self):
        for release, agent, offset in (("0.32", "node-new", 0), ("0.30", "node-old", 1)):
            for i in range(3):
                t = self.start + datetime.timedelta(seconds=10 * i + offset)
                for group, avg, when in profiling_reports(agent, t, base=i):
                    r = self.post(body(group, avg, when, release))
                    self.assertEqual(r.status_code, 200, r.text)
                    self.assertEqual(r.json(), {})
        series = self.series()
        for agent in ("node-new", "node-old"):
            self.assertEqual(series[(agent, "gpu_util", "GPU-aaaa")], ("percent", 3))
            self.assertEqual(series[(agent, "gpu_free_memory", "GPU-bbbb")], ("bytes", 3))
            self.assertEqual(series[(agent, "cpu_util_simple", "")], ("percent", 3))
            self.assertEqual(series[(agent, "memory_free", "")], ("bytes", 3))
            self.assertEqual(series[(agent, "disk_iops", "")], ("operations/s", 3))
            self.assertEqual(series[(agent, "disk_util{mount=/}", "")], ("percent", 3))
            self.assertEqual(
                series[(agent, "disk_util{mount=/run/determined/workdir/shared_fs}", "")],
                ("percent", 3))
            self.assertEqual(series[(agent, "net_throughput_recv", "")], ("bytes/s", 3))

        # The chart API: the values and the reports' times.
        r = self.get("/api/v1/trials/%d/metrics/system?name=cpu_util_simple&agentId=node-new"
                     "&maxPoints=100" % TRIAL)
        self.assertEqual(r.status_code, 200, r.text)
        chart = r.json()["series"][0]
        self.assertEqual(chart["max"], [12.5, 13.5, 14.5])
        first = self.start + datetime.timedelta(microseconds=17)
        # Raw points' times, to the microsecond (fractional milliseconds).
        self.assertAlmostEqual(chart["bucketStartMs"][0], first.timestamp() * 1000, delta=1e-3)

        # The Web UI's profiler tab: its available-series follow ...
        listed = self.first_line("/api/v1/trials/%d/profiler/available_series?follow=true"
                                 % TRIAL)["result"]["labels"]
        names = {(x["agentId"], x["name"], x["gpuUuid"]) for x in listed}
        self.assertIn(("node-new", "gpu_util", "GPU-aaaa"), names)
        self.assertIn(("node-old", "memory_free", ""), names)
        self.assertTrue(all(x["metricType"] == "PROFILER_METRIC_TYPE_SYSTEM" for x in listed))
        # ... as the platform lists them: no series with a mount path.
        self.assertFalse(any("mount" in x["name"] for x in listed), listed)

        # ... and its metrics follow, without a GPU UUID: every GPU's points.
        ui = ("/api/v1/trials/%d/profiler/metrics?labels.name=gpu_util&labels.agentId=node-new"
              "&labels.metricType=PROFILER_METRIC_TYPE_SYSTEM&follow=true" % TRIAL)
        by_gpu = {}
        with self.session.get(SERVER.base + ui, stream=True, timeout=30) as r:
            self.assertEqual(r.status_code, 200)
            for line in r.iter_lines():
                if not line:
                    continue
                batch = json.loads(line)["result"]["batch"]
                by_gpu[batch["labels"]["gpuUuid"]] = batch["values"]
                if len(by_gpu) == 2:
                    break
        self.assertEqual(by_gpu, {"GPU-aaaa": [40.0, 41.0, 42.0], "GPU-bbbb": [41.0, 42.0, 43.0]})
        one = self.first_line(ui.replace("&follow=true", "&labels.gpuUuid=GPU-bbbb&follow=true"))
        self.assertEqual(one["result"]["batch"]["labels"]["gpuUuid"], "GPU-bbbb")
        # The names and units the harness sent (the 0.30+ UI's): bytes, as
        # the legacy wire's float32.
        memory = self.first_line(
            "/api/v1/trials/%d/profiler/metrics?labels.name=memory_free&labels.agentId=node-old"
            "&labels.metricType=PROFILER_METRIC_TYPE_SYSTEM" % TRIAL)
        self.assertEqual([float32(v) for v in memory["result"]["batch"]["values"]],
                         [float32(2.5e10 + i * 1e6) for i in range(3)])

        # The agent's inventory says how these values were sampled.
        r = self.get("/api/v1/trials/%d" % TRIAL)
        agents = {a["agentId"]: a for a in r.json()["agents"]}
        self.assertIn("10 s", agents["node-new"]["inventory"]["sampling"])
        self.assertEqual(r.json()["runId"], 1)

    def test_2_a_replayed_report_is_answered_and_stored_once(self):
        t = self.start + datetime.timedelta(minutes=1)
        payload = body("cpu", {"node-replay": {"cpu_util_simple": 50.0}}, t)
        for _ in range(3):
            r = self.post(payload)
            self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual(self.series()[("node-replay", "cpu_util_simple", "")], ("percent", 1))

    def test_3_a_training_group_is_read_back_through_get_metrics(self):
        payload = body("training", {"loss": 0.25, "accuracy": float("nan")}, steps=100,
                       batches=[{"loss": 0.3}, {"loss": 0.2}])
        payload["metrics"].pop("reportTime", None)
        for _ in range(2):  # a replay changes nothing
            r = self.post(payload)
            self.assertEqual(r.status_code, 200, r.text)
        r = self.post(body("validation", {"validation_loss": 0.5}, steps=100))
        self.assertEqual(r.status_code, 200, r.text)
        with self.session.get(SERVER.base + "/api/v1/trials/metrics/trial_metrics",
                              params={"trialIds": TRIAL, "group": "training"},
                              stream=True, timeout=30) as r:
            self.assertEqual(r.status_code, 200, r.text)
            lines = [json.loads(x) for x in r.iter_lines() if x]
        reports = [m for line in lines for m in line["result"]["metrics"]]
        self.assertEqual(len(reports), 1, reports)
        report = reports[0]
        self.assertEqual(report["group"], "training")
        self.assertEqual(report["totalBatches"], 100)
        self.assertEqual(report["trialRunId"], 1)
        self.assertFalse(report["archived"])
        self.assertEqual(report["metrics"]["avg_metrics"], {"loss": 0.25, "accuracy": "NaN"})
        self.assertEqual(report["metrics"]["batch_metrics"], [{"loss": 0.3}, {"loss": 0.2}])

    def test_4_a_refused_report_says_why_and_stores_nothing(self):
        before = self.series()
        t = self.start + datetime.timedelta(minutes=2)
        bad = body("gpu", {"node-bad": {"GPU-x": {"gpu_util": True, "gpu_free_memory": 1.0}}}, t)
        r = self.post(bad)
        self.assertEqual(r.status_code, 400, r.text)
        self.assertEqual(r.json()["message"],
                         'metrics.metrics.avgMetrics["node-bad"]["GPU-x"].gpu_util: '
                         'not a number, got true')
        r = self.post(None, data='{"group": "cpu", "metrics": {"trialId": 7, "trialRunId": 1,'
                                 ' "metrics": {"avgMetrics": {"a": {"b": 1, "b": 2}}}}}')
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn("is given twice", r.json()["message"])
        r = self.post(body("a.b", {}))
        self.assertEqual(r.status_code, 400, r.text)
        self.assertIn('group: "a.b" must not contain "."', r.json()["message"])
        self.assertEqual(self.series(), before)

    def test_5_python_non_finite_values_are_dropped_not_refused(self):
        t = self.start + datetime.timedelta(minutes=3)
        # Python's json writes bare tokens, the harness's encoder strings.
        for data in ('{"group": "cpu", "metrics": {"trialId": 7, "trialRunId": 1, '
                     '"reportTime": "%s", "metrics": {"avgMetrics": {"node-nan": '
                     '{"cpu_util_simple": NaN, "x": Infinity}}}}}' % t.isoformat(),
                     encode(body("memory", {"node-nan": {"memory_free": float("-inf")}}, t))):
            r = self.post(None, data=data)
            self.assertEqual(r.status_code, 200, r.text)
        self.assertFalse(any(a == "node-nan" for a, _, _ in self.series()))
        text = self.get("/metrics").text
        self.assertRegex(text, r"metricsd_trial_metrics_dropped_values_total [3-9]")

    def test_6_the_doors_take_our_tokens_in_either_header_and_no_others(self):
        t = self.start + datetime.timedelta(minutes=4)
        payload = body("cpu", {"node-auth": {"cpu_util_simple": 1.0}}, t)
        self.assertEqual(self.post(payload, session=requests.Session()).status_code, 401)
        sdk = requests.Session()
        sdk.headers["Authorization"] = "Bearer " + self.reporter
        self.assertEqual(self.post(payload, session=sdk).status_code, 200)
        # Both headers, disagreeing: refused.
        both = harness_session(self.reporter)
        both.headers["Authorization"] = "Bearer " + self.admin
        self.assertEqual(self.post(payload, session=both).status_code, 401)
        # A reporter of another trial, and an unknown trial.
        other = harness_session(SERVER.token("--role=reporter", "--trial=%d" % OTHER_TRIAL))
        self.assertEqual(self.post(payload, session=other).status_code, 403)
        admin = harness_session(self.admin)
        unknown = body("cpu", {"node-auth": {"cpu_util_simple": 1.0}}, t)
        unknown["metrics"]["trialId"] = 999
        self.assertEqual(self.post(unknown, session=admin, trial=999).status_code, 404)
        # The reads take the harness's header too.
        self.assertEqual(harness_session(self.reporter).get(
            SERVER.base + "/api/v1/trials/%d/metrics/system/series" % TRIAL).status_code, 200)

    def test_7_an_older_run_is_refused_and_follows_end_with_the_trial(self):
        t = self.start + datetime.timedelta(minutes=4, seconds=30)
        newer = body("cpu", {"node-run": {"cpu_util_simple": 1.0}}, t)
        newer["metrics"]["trialRunId"] = 2
        self.assertEqual(self.post(newer).status_code, 200)
        older = body("cpu", {"node-run": {"cpu_util_simple": 1.0}},
                     t + datetime.timedelta(seconds=1))
        r = self.post(older)
        self.assertEqual(r.status_code, 412, r.text)
        self.assertIn("run 1 of trial 7 is older than run 2", r.json()["message"])
        # The UI's follows end when the trial does.
        ui = ("/api/v1/trials/%d/profiler/available_series?follow=true" % TRIAL)
        with self.session.get(SERVER.base + ui, stream=True, timeout=30) as r:
            lines = r.iter_lines()
            next(line for line in lines if line)
            done = requests.patch(SERVER.base + "/api/v1/trials/%d" % TRIAL,
                                  json={"state": "COMPLETED"},
                                  headers={"Authorization": "Bearer " + self.admin})
            self.assertEqual(done.status_code, 200, done.text)
            rest = [line for line in lines if line]  # ends, or times out
            self.assertTrue(all("result" in json.loads(x) for x in rest), rest)


def main():
    global METRICSD, METRICSCTL, SERVER
    METRICSD, METRICSCTL = sys.argv[1], sys.argv[2]
    SERVER = Server()
    try:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(HarnessReportTest)
        result = unittest.TextTestRunner(verbosity=2).run(suite)
    finally:
        SERVER.stop()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
