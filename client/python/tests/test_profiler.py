"""The in-process profiler: its samplers on recorded /proc files (the same
fixtures and figures as metrics-agent's SystemSamplerTest) and on the fake
NVML library of the C++ tests, and end to end: profile() for a moment
leaves the host's and the GPUs' series in the trial."""
import json
import logging
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import CLIENT_TESTDATA, FAKE_NVML, REPO_ROOT
from eventually import eventually
import metrics_client
from metrics_client import Reporter, profile
from metrics_client._host import HostSampler
from metrics_client._job import JobSampler
from metrics_client._nvml import Nvml, NvmlError

# What the profiler sends: the vocabulary's host and GPU signals, as
# metrics-agent does (both are made from the same table).
with open(os.path.join(REPO_ROOT, "common", "vocabulary", "signals.json")) as _f:
    _SIGNALS = json.load(_f)["signals"]
HOST_SERIES = {s["name"]: s["unit"] for s in _SIGNALS
               if s["scope"] == "host" and not s.get("sent_by")}
GPU_SERIES = {s["name"]: s["unit"] for s in _SIGNALS if s["scope"] == "gpu"}


def load(proc, name):
    shutil.rmtree(proc, ignore_errors=True)
    shutil.copytree(os.path.join(CLIENT_TESTDATA, name), proc)


def sampler_between_t0_and_t1(tmp_path):
    """A sampler that read t0 first, with t1 in place for its next take."""
    proc = str(tmp_path / "proc")
    load(proc, "t0")
    sampler = HostSampler(proc)
    load(proc, "t1")
    return sampler, proc


@pytest.mark.filterwarnings("ignore:shared, active, inactive memory")
def test_host_sampler_reads_the_agents_fixtures_as_the_agent_does(tmp_path):
    """client/testdata/host_readings.json, which metrics-agent's
    system_sampler_test.cc reads too."""
    with open(os.path.join(CLIENT_TESTDATA, "host_readings.json")) as f:
        readings = json.load(f)
    proc = str(tmp_path / "proc")
    load(proc, readings["first"])
    sampler = HostSampler(proc)
    load(proc, readings["then"])
    values, errors = sampler.take(float(readings["after_s"]))
    assert errors == []
    v = {name: value for name, value, unit in values}
    assert {name: unit for name, value, unit in values} == HOST_SERIES
    for name, expected in readings["expect"].items():
        assert v[name] == pytest.approx(expected, rel=1e-12), (name, readings["why"][name])
    again = {name: value for name, value, unit in sampler.take(float(readings["after_s"]))[0]}
    for name, expected in readings["again"].items():
        assert again[name] == expected, name


@pytest.mark.filterwarnings("ignore:shared, active, inactive memory")
def test_a_missing_source_is_named_and_the_rest_measured(tmp_path):
    sampler, proc = sampler_between_t0_and_t1(tmp_path)
    os.remove(os.path.join(proc, "net", "dev"))
    values, errors = sampler.take(2.0)
    names = {name for name, value, unit in values}
    assert len(errors) == 1 and "net/dev" in errors[0]
    assert "net_throughput_sent" not in names
    assert {"cpu_util_simple", "disk_iops", "memory_free"} <= names


def test_nvml_through_ctypes_on_the_fake_library(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_GPU_COUNT", "8")
    nvml = Nvml(FAKE_NVML)
    try:
        assert nvml.uuids == ["GPU-00000000-0000-0000-0000-%012d" % i for i in range(8)]
        readings = nvml.read()
        assert [uuid for uuid, _ in readings] == nvml.uuids
        for i, (_, values) in enumerate(readings):
            assert values == {  # the same as metrics-agent's (NvmlTest)
                "gpu_util": (10.0 + 20 * i, "percent"),
                "gpu_free_memory": (float((i + 1) << 30), "bytes"),
                "gpu_memory_used": (float((15 - i) << 30), "bytes"),
                "gpu_memory_total": (float(16 << 30), "bytes"),
                "gpu_memory_util": (5.0, "percent"),
                "gpu_power": (pytest.approx(100.0 + 10 * i), "watts"),
                "gpu_power_limit": (pytest.approx(300.0), "watts"),
                "gpu_temperature": (40 + i, "celsius"),
                "gpu_sm_clock": (1.4e9, "hertz"),
                "gpu_memory_clock": (2.6e9, "hertz"),
                "gpu_pcie_rx": ((1000 + i) * 1024, "bytes/s"),
                "gpu_pcie_tx": (500 * 1024, "bytes/s"),
                "gpu_ecc_corrected": (i, "errors"),
                "gpu_ecc_uncorrected": (0, "errors"),
                "gpu_throttle_reasons": (4 * i, "bitset"),
            }
        assert nvml.take_notes() == []
    finally:
        nvml.close()
    monkeypatch.setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetPowerUsage,nvmlDeviceGetTemperature")
    nvml = Nvml(FAKE_NVML)
    try:
        nvml.read()
        second = nvml.read()
        notes = nvml.take_notes()
        assert len(notes) == 16  # two signals of 8 GPUs, said once
        assert "gpu_power is not supported (nvmlDeviceGetPowerUsage" in notes[0]
        assert "gpu_power" not in second[0][1] and "gpu_power_limit" in second[0][1]
    finally:
        nvml.close()
    monkeypatch.delenv("FAKE_NVML_UNSUPPORTED")
    monkeypatch.setenv("FAKE_NVML_FAIL_INIT", "1")
    with pytest.raises(NvmlError, match="nvmlInit_v2 failed"):
        Nvml(FAKE_NVML)
    monkeypatch.setenv("FAKE_NVML_FAIL_INIT", "0")
    monkeypatch.setenv("FAKE_NVML_UUID_UNTERMINATED", "1")
    with pytest.raises(NvmlError, match="no NUL-terminated UUID"):
        Nvml(FAKE_NVML)
    with pytest.raises(NvmlError, match="^/nonexistent/libnvidia-ml.so.1 not found$"):
        Nvml("/nonexistent/libnvidia-ml.so.1")


def test_nvml_lists_each_gpus_compute_processes(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_NVML_PROCESSES", "4242:256,17:64")
    nvml = Nvml(FAKE_NVML)
    try:
        # The same as metrics-agent's (NvmlTest.ComputeProcessesListsEveryProcessOfEachGpu).
        assert nvml.compute_processes() == [
            (uuid, [(4242, (i + 1) * 256 << 20), (17, (i + 1) * 64 << 20)])
            for i, uuid in enumerate(nvml.uuids)]
        assert [used for _, used in nvml.process_memory({4242})] == [256 << 20, 512 << 20]
        monkeypatch.setenv("FAKE_NVML_UNSUPPORTED", "nvmlDeviceGetComputeRunningProcesses_v3")
        assert nvml.compute_processes() == []
        assert len(nvml.take_notes()) == 2
    finally:
        nvml.close()


def test_nvml_describes_the_gpus_and_reads_mig_devices(monkeypatch):
    monkeypatch.setenv("FAKE_NVML_GPU_COUNT", "2")
    monkeypatch.setenv("FAKE_NVML_MIG", "1")
    nvml = Nvml(FAKE_NVML)
    try:
        described = nvml.describe()
        assert described["driver_version"] == "550.54.15"
        assert described["cuda_version"] == "12.4"
        mig = ["MIG-00000000-0000-0000-0000-000000010000",
               "MIG-00000000-0000-0000-0000-000000010002"]
        assert described["gpus"] == [
            {"index": 0, "uuid": "GPU-00000000-0000-0000-0000-000000000000",
             "name": "Fake GPU 16GB", "memory_total_bytes": 16 << 30,
             "mig_mode": "disabled", "mig_devices": []},
            {"index": 1, "uuid": "GPU-00000000-0000-0000-0000-000000000001",
             "name": "Fake GPU 16GB", "memory_total_bytes": 16 << 30,
             "mig_mode": "enabled", "mig_devices": mig}]
        readings = dict(nvml.read())
        # The GPU in MIG mode has no utilisation; each MIG device its memory,
        # as metrics-agent reports them (nvml_test.cc).
        assert "gpu_util" in readings["GPU-00000000-0000-0000-0000-000000000000"]
        assert "gpu_util" not in readings["GPU-00000000-0000-0000-0000-000000000001"]
        assert "gpu_power" in readings["GPU-00000000-0000-0000-0000-000000000001"]
        assert readings[mig[1]] == {"gpu_free_memory": (float(5 << 30), "bytes"),
                                    "gpu_memory_used": (float(3 << 30), "bytes"),
                                    "gpu_memory_total": (float(8 << 30), "bytes")}
    finally:
        nvml.close()


def test_profile_reports_the_host_and_its_gpus(metricsd, admin, trial, monkeypatch, caplog):
    monkeypatch.setenv("FAKE_NVML_GPU_COUNT", "2")
    # This process is the job: it uses 256 MiB of GPU 0 (512 of GPU 1);
    # pid 1 is not ours.
    monkeypatch.setenv("FAKE_NVML_PROCESSES", "%d:256,1:64" % os.getpid())
    token = metricsd.mint_token("reporter", trial)
    with profile(trial_id=trial, server=metricsd.address, token=token, interval=0.2,
                 agent_id="node-1", nvml_library=FAKE_NVML, cgroup=None) as profiler:
        sum(i * i for i in range(2000000))  # some CPU of its own
        assert eventually(lambda: profiler.samples >= 5, timeout=30)
    assert profiler.gpus == 2
    series = {(s.name, s.gpu_uuid): s for s in admin.list_series(trial)}
    expected = {(name, ""): unit for name, unit in HOST_SERIES.items()}
    expected.update({("process_cpu_util", ""): "percent", ("process_memory_rss", ""): "bytes"})
    for i in range(2):
        uuid = "GPU-00000000-0000-0000-0000-%012d" % i
        expected.update({(name, uuid): unit for name, unit in GPU_SERIES.items()})
        expected[("process_gpu_memory", uuid)] = "bytes"
    assert {key: s.unit for key, s in series.items()} == expected
    buckets = admin.query(trial, names=["process_gpu_memory", "process_memory_rss"])
    by_series = {(d.series.name, d.series.gpu_uuid): d.buckets for d in buckets}
    assert {b.max for b in by_series[("process_gpu_memory",
                                      "GPU-00000000-0000-0000-0000-000000000001")]} == {512 << 20}
    assert min(b.min for b in by_series[("process_memory_rss", "")]) > 10 << 20
    assert {s.agent_id for s in series.values()} == {"node-1"}
    # Every sample kept: as many memory readings as samples taken.
    assert series[("memory_free", "")].sample_count == profiler.samples
    # What it ran on, sent once with the first batch.
    inventory = admin.get_trial(trial).inventories["node-1"]
    assert inventory["agent_version"] == "metrics_client %s (Python)" % metrics_client.__version__
    assert inventory["cpu_count"] > 0 and int(inventory["memory_total_bytes"]) > 0
    assert inventory["driver_version"] == "550.54.15"
    assert [g["uuid"] for g in inventory["gpus"]] == [
        "GPU-00000000-0000-0000-0000-%012d" % i for i in range(2)]
    assert "gpu_status" not in inventory
    # Without NVML: one line saying so, and the host series.
    with caplog.at_level(logging.INFO, logger="metrics_client"):
        with profile(trial_id=trial, server=metricsd.address, token=token, interval=0.2,
                     agent_id="node-2", nvml_library="/nonexistent/libnvidia-ml.so.1",
                     job=False) as p:
            assert eventually(lambda: p.samples >= 1, timeout=30)
    assert p.gpus == 0
    assert caplog.text.count("no GPU metrics") == 1
    assert {s.name for s in admin.list_series(trial) if s.agent_id == "node-2"} <= set(HOST_SERIES)
    assert admin.get_trial(trial).inventories["node-2"]["gpu_status"] == (
        "NVML not available: /nonexistent/libnvidia-ml.so.1 not found")


def test_a_disabled_profiler_does_nothing(metricsd):
    with profile(trial_id=1, server=metricsd.address, enabled=False) as p:
        time.sleep(0.1)
    assert p.samples == 0 and p.reporter is None


def test_profile_through_a_given_reporter_leaves_it_open(metricsd, trial):
    r = Reporter(metricsd.address, trial, token=metricsd.mint_token("reporter", trial))
    with profile(reporter=r, interval=0.1, nvml_library=None) as p:
        assert eventually(lambda: p.samples >= 3, timeout=30)
    r.flush(timeout=30)
    assert r.stats.acknowledged >= 3 * 7 - 5  # the first sample has no rates yet
    r.close()


def _tree(root, files):
    for path, text in files.items():
        full = os.path.join(str(root), path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)


def test_job_cgroup_share_on_the_shared_fixtures(tmp_path):
    """client/testdata/cgroup_cases.json, the cases metrics-agent's
    job_sampler_test.cc reads too: v2 by quota, cpuset or neither; v1 apart
    and together, found by path or as "self"."""
    with open(os.path.join(CLIENT_TESTDATA, "cgroup_cases.json")) as f:
        cases = json.load(f)["cases"]
    for n, case in enumerate(cases):
        root = tmp_path / ("case%d" % n)
        cpu = "cpu  1 2 3 4 5 6 7 8 0 0\n"
        _tree(root, {"proc/stat": cpu + "".join(
            "cpu%d 1 2 3 4 5 6 7 8 0 0\n" % i for i in range(case["host_cpus"]))})
        job = None
        for step in case["steps"]:
            for path in step.get("removed", []):
                os.remove(str(root / path))
            _tree(root, step["files"])
            if job is None:
                job = JobSampler(os.getpid(), case["cgroup"], str(root / "cgroup"),
                                 str(root / "proc"))
                continue
            values = {name: value for name, value, _ in job.take(step["after_s"])[0]}
            for name, expected in step["expect"].items():
                assert values.get(name) == pytest.approx(expected, rel=1e-9), (case["name"], name)
            for name in step.get("absent", []):
                assert name not in values, (case["name"], name)
    with pytest.raises(OSError, match="cgroup /nope"):
        JobSampler(os.getpid(), "/nope", str(tmp_path / "case0" / "cgroup"),
                   str(tmp_path / "case0" / "proc"))


def test_job_process_tree_counts_its_children():
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt = time.time()\nwhile time.time() < t + 0.6: pass"])
    try:
        job = JobSampler(os.getpid(), None)
        time.sleep(0.5)
        values = {name: value for name, value, _ in job.take(0.5)[0]}
        # The child spun for the whole half second: about 100 % on an idle
        # machine, less when other work shares the cores (48 % was seen on
        # 2 busy cores); the sleeping parent alone counts about 0.
        assert 10 < values["process_cpu_util"] < 250
        assert values["process_memory_rss"] > 10 << 20
    finally:
        child.wait()
