#!/usr/bin/python3
"""The Python client's benchmark (bench/python_client.sh runs it under
pg_virtualenv against its own metricsd):

1. record(): CPU per value on the caller's thread and for the whole process
   (Reporter thread and gRPC included, until all is acknowledged), beside
   the C++ Reporter's figures for the same values in the same run
   (tests/testing/cpp_reporter_main.cc).
2. profile(): its share of one core at 1 s with 8 fake GPUs, against the
   same process idle for as long.
3. A 2-hour stream (7200 instants of 25 values, 1 s apart) recorded at a
   compressed pace, with metricsd killed while 5 minutes' worth (300
   instants) is recorded and started again after: values lost and doubled,
   counted in SQL.

Prints a table, then one JSON line.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "..", "build")
sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python", "tests"))
os.environ.setdefault("METRICSD", os.path.join(BUILD, "server", "metricsd"))
os.environ.setdefault("METRICSCTL", os.path.join(BUILD, "ctl", "metricsctl"))

import conftest  # noqa: E402  (the tests' metricsd fixture, reused)
from metrics_client import Client, Reporter, profile  # noqa: E402

SERIES = 25


def cpu_seconds(who=resource.RUSAGE_SELF):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def python_record(server, trial, token, instants):
    names = ["s%d" % s for s in range(SERIES)]
    base = time.time() - instants * 0.001 - 60
    r = Reporter(server.address, trial, token=token, agent_id="python",
                 buffer_samples=instants * SERIES)
    values = [{name: float(i) for name in names} for i in range(instants)]
    process_before = cpu_seconds()
    thread_before = time.thread_time_ns()
    for i in range(instants):
        r.record(values[i], time=base + i * 0.001)
    thread_ns = time.thread_time_ns() - thread_before
    r.flush(timeout=300)
    process_s = cpu_seconds() - process_before
    stats = r.close()
    assert stats.acknowledged == instants * SERIES, stats
    n = instants * SERIES
    return thread_ns / n, process_s * 1e9 / n


def cpp_record(server, trial, token, instants):
    before = cpu_seconds(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        [os.path.join(BUILD, "tests", "cpp_reporter"), "--server", server.address,
         "--trial_id", str(trial), "--agent_id", "cpp", "--token", token,
         "--instants", str(instants), "--series", str(SERIES),
         "--base_us", str(int((time.time() - instants * 0.001 - 60) * 1e6)),
         "--timeout_s", "300"], check=True, capture_output=True, text=True)
    process_s = cpu_seconds(resource.RUSAGE_CHILDREN) - before
    result = json.loads(out.stdout.strip().splitlines()[-1])
    n = instants * SERIES
    return result["record_cpu_ns_per_value"], process_s * 1e9 / n


def profiler_share(server, trial, token, seconds):
    os.environ["FAKE_NVML_GPU_COUNT"] = "8"
    fake = os.path.join(BUILD, "tests", "fake_nvml_uninstrumented", "libnvidia-ml.so.1")
    with Reporter(server.address, trial, token=token, agent_id="idle"):
        start, before = time.monotonic(), cpu_seconds()
        time.sleep(seconds)
        idle = (cpu_seconds() - before) / (time.monotonic() - start)
    with profile(trial_id=trial, server=server.address, token=token, agent_id="profiled",
                 nvml_library=fake) as p:
        start, before = time.monotonic(), cpu_seconds()
        time.sleep(seconds)
        busy = (cpu_seconds() - before) / (time.monotonic() - start)
    assert p.gpus == 8
    return 100 * busy, 100 * idle


def outage(server, trial, token):
    instants, down_from, down_for = 7200, 3600, 300
    names = ["s%d" % s for s in range(SERIES)]
    base = time.time() - instants - 60
    r = Reporter(server.address, trial, token=token, agent_id="outage",
                 initial_backoff=0.2, max_backoff=2.0)
    for i in range(instants):
        if i == down_from:
            server.kill()
        if down_from <= i < down_from + down_for:
            time.sleep(0.01)  # the outage lasts 3 s of real time
        if i == down_from + down_for:
            held = r.stats.buffered
            server.start()
        r.record({name: float(i) for name in names}, time=base + i)
        if i % 100 == 0:
            time.sleep(0.002)
    r.flush(timeout=300)
    stats = r.close()
    rows = server.sql(
        "SELECT count(*), count(DISTINCT (m.end_time, e.key)) FROM metrics_unpacked m, "
        "jsonb_each(m.metrics) e WHERE m.trial_id = %d AND m.agent_id = 'outage'" % trial)
    stored, distinct = int(rows[0][0]), int(rows[0][1])
    return dict(recorded=stats.recorded, stored=stored, lost=instants * SERIES - distinct,
                doubled=stored - distinct, dropped=stats.dropped, held_at_restart=held,
                resent=stats.resent)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instants", type=int, default=20000,
                        help="instants of 25 values for the record figures")
    parser.add_argument("--profile_seconds", type=float, default=20)
    args = parser.parse_args()
    server = conftest.Metricsd()
    try:
        with Client(server.address, token=server.admin_token) as admin:
            trials = [admin.create_trial(t).id for t in (1, 2, 3, 4)]
        token = server.admin_token
        cpp_thread, cpp_process = cpp_record(server, trials[0], token, args.instants)
        py_thread, py_process = python_record(server, trials[1], token, args.instants)
        busy, idle = profiler_share(server, trials[2], token, args.profile_seconds)
        away = outage(server, trials[3], token)
    finally:
        server.close()
    print("record(), %d instants of %d values:" % (args.instants, SERIES))
    print("  %-32s %8.0f ns per value (C++ Record: %.0f)" % (
        "caller's thread, Python", py_thread, cpp_thread))
    print("  %-32s %8.0f ns per value (C++ process: %.0f)" % (
        "whole process, Python", py_process, cpp_process))
    print("profile() at 1 s, 8 fake GPUs: %.3f %% of a core (the process idle: %.3f %%)"
          % (busy, idle))
    print("2 h stream, 5 min of it with metricsd away: %(recorded)d recorded, %(stored)d "
          "stored, %(lost)d lost, %(doubled)d doubled, %(dropped)d dropped" % away)
    print(json.dumps({
        "record_thread_ns_per_value": round(py_thread, 1),
        "record_process_ns_per_value": round(py_process, 1),
        "cpp_record_thread_ns_per_value": round(cpp_thread, 1),
        "cpp_process_ns_per_value": round(cpp_process, 1),
        "thread_ratio_to_cpp": round(py_thread / cpp_thread, 2),
        "process_ratio_to_cpp": round(py_process / cpp_process, 2),
        "profiler_core_percent": round(busy, 3), "idle_core_percent": round(idle, 3),
        "outage": away}))


if __name__ == "__main__":
    main()
