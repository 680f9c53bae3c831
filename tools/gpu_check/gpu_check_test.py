"""The GPU check without a GPU: the bundle make_bundle.sh makes, run against
the fake NVML (tests/fake_nvml/) and a stand-in nvidia-smi that prints known
values, one of them disagreeing; and the bundle alone in an empty root (no
Debian packages, not even a shell).

Environment (set by CMake): BUILD_DIR, the build with gpu-check, gpu-load
and metrics-agent; FAKE_NVML, the fake libnvidia-ml.so.1; FAKE_CUDA, a
stand-in libcuda.so.1 (tools/gpu_check/fake_cuda.cc).
"""
import json
import os
import re
import shutil
import subprocess

import pytest

BUILD_DIR = os.environ["BUILD_DIR"]
FAKE_NVML = os.environ["FAKE_NVML"]
FAKE_CUDA = os.environ["FAKE_CUDA"]
HERE = os.path.dirname(os.path.abspath(__file__))

# What the fake NVML answers for GPU i (tests/fake_nvml/fake_nvml.cc), in
# nvidia-smi's words and units.
def smi_line(i, temperature=None, power="%d.00", utilization=None):
    return ", ".join([
        str(i), "GPU-00000000-0000-0000-0000-00000000000%d" % i, "550.54.15",
        "16384", str((15 - i) * 1024), str((i + 1) * 1024),  # total, used, free MiB
        *(utilization or [str(10 + 20 * i), "5"]),
        power % (100 + 10 * i) if "%" in power else power, "300.00",
        str(40 + i if temperature is None else temperature),
        "1400", "2600", str(i), "0", "0x%016x" % (4 * i), "Fake GPU 16GB"])


STAND_IN = """#!/bin/sh
# A stand-in nvidia-smi for the GPU check's tests.
case "$1" in
  --query-gpu=index,uuid,*)
    [ -n "$REFUSE" ] && { echo "Field \\"$REFUSE\\" is not a valid field to query."; exit 2; }
    cat "$(dirname "$0")/gpus.csv";;
  --query-gpu=index,*)
    [ "$1" = "--query-gpu=index,$REFUSE" ] && exit 2
    field=${1#--query-gpu=index,}
    # One field: its column from the full answer.
    column=$(echo "%(fields)s" | tr ',' '\\n' | grep -n -x "$field" | cut -d: -f1)
    awk -F', ' -v c="$column" '{ printf "%%s, %%s\\n", $1, $c }' "$(dirname "$0")/gpus.csv";;
  --query-compute-apps=*)
    for gpu in 0 1; do
      echo "GPU-00000000-0000-0000-0000-00000000000$gpu, $JOB_PID, $((256 * (gpu + 1)))"
    done;;
  dmon) printf '# gpu   rxpci   txpci\\n# Idx    MB/s    MB/s\\n    0       1       0\\n    1       1       0\\n';;
  *) exit 2;;
esac
"""

FIELDS = ("index,uuid,driver_version,memory.total,memory.used,memory.free,utilization.gpu,"
          "utilization.memory,power.draw,enforced.power.limit,temperature.gpu,clocks.sm,"
          "clocks.mem,ecc.errors.corrected.volatile.total,"
          "ecc.errors.uncorrected.volatile.total,clocks_throttle_reasons.active,name")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("bundle") / "gpu-check")
    made = subprocess.run([os.path.join(HERE, "make_bundle.sh"), BUILD_DIR, folder],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    return folder


@pytest.fixture
def stand_in(tmp_path):
    """A folder with the stand-in nvidia-smi; write gpus.csv into it."""
    path = tmp_path / "nvidia-smi"
    path.write_text(STAND_IN % {"fields": FIELDS})
    path.chmod(0o755)
    return tmp_path


def run_check(bundle, stand_in, lines, *flags, env=None):
    (stand_in / "gpus.csv").write_text("\n".join(lines) + "\n")
    environment = dict(os.environ, FAKE_NVML_PROCESSES="%d:256" % os.getpid(),
                       JOB_PID=str(os.getpid()), **(env or {}))
    return subprocess.run(
        [os.path.join(bundle, "run"), "--nvidia-smi=%s" % (stand_in / "nvidia-smi"),
         "--nvml-library=" + FAKE_NVML, "--python=/usr/bin/python3", "--interval=100ms",
         "--pid=%d" % os.getpid(), *flags],
        capture_output=True, text=True, env=environment, timeout=120)


def row(output, client, signal, gpu):
    """The cells of a client's table row."""
    section = output.split("## " + client)[1].split("\n## ")[0]
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if len(cells) == 7 and cells[0] == signal and cells[1] == str(gpu):
            return cells
    raise AssertionError("no row %s of GPU %s for %s in:\n%s" % (signal, gpu, client, output))


def test_the_bundle_holds_what_it_runs_with_and_no_driver(bundle):
    libs = os.listdir(os.path.join(bundle, "lib"))
    assert any(name.startswith("ld-linux") for name in libs)
    assert "libc.so.6" in libs and "libgrpc++.so.1.51" in libs
    assert "libpthread.so.0" in libs and "libdl.so.2" in libs  # glibc's, for older libraries
    assert not [name for name in libs if name.startswith(("libnvidia", "libcuda"))]
    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(bundle) for f in files)
    assert size < 64 << 20
    assert os.path.exists(bundle + ".tar.gz")


def test_readings_that_agree_with_nvidia_smi(bundle, stand_in, tmp_path):
    saved = tmp_path / "saved"
    saved.mkdir()
    result = run_check(bundle, stand_in, [smi_line(0), smi_line(1)], "--save-dir=%s" % saved)
    assert result.returncode == 0, result.stdout + result.stderr
    for client in ("metrics-agent", "Python client"):
        assert "%s: 40 agree, 0 differ, 0 answered by neither, 0 unchecked" % client \
            in result.stdout
        assert row(result.stdout, client, "gpu_sm_clock", 1)[2:6] == [
            "1400 MHz", "1400, 1400", "±30 MHz", "agree"]
        assert row(result.stdout, client, "process %d" % os.getpid(), 1)[2:4] == [
            "512 MiB", "512, 512"]
    assert sorted(os.listdir(saved)) == [
        "metrics-agent-1.json", "metrics-agent-2.json", "nvidia-smi-compute-apps.csv",
        "nvidia-smi-dmon.txt", "nvidia-smi-query-gpu.csv", "python-client-1.json",
        "python-client-2.json"]
    agent = json.loads((saved / "metrics-agent-1.json").read_text())
    assert {s["gpu_uuid"] for s in agent["series"] if "gpu_uuid" in s} == {
        "GPU-00000000-0000-0000-0000-000000000000", "GPU-00000000-0000-0000-0000-000000000001"}


def test_a_disagreeing_value_is_reported(bundle, stand_in):
    result = run_check(bundle, stand_in, [smi_line(0), smi_line(1, temperature=55)])
    assert result.returncode == 1, result.stdout + result.stderr
    for client in ("metrics-agent", "Python client"):
        assert row(result.stdout, client, "gpu_temperature", 1)[2:6] == [
            "55 C", "41, 41", "±2 C", "**DIFFER**"]
        assert row(result.stdout, client, "gpu_temperature", 0)[5] == "agree"
        assert "%s: 39 agree, 1 differ" % client in result.stdout


def test_a_signal_neither_answers_carries_the_clients_note(bundle, stand_in):
    result = run_check(bundle, stand_in, [smi_line(0, power="[N/A]"), smi_line(1, power="[N/A]")],
                       env={"FAKE_NVML_UNSUPPORTED": "nvmlDeviceGetPowerUsage"})
    assert result.returncode == 0, result.stdout + result.stderr
    cells = row(result.stdout, "metrics-agent", "gpu_power", 0)
    assert cells[2:6] == ["[N/A]", "not reported", "±5 W + 10 %", "neither answers"]
    assert "gpu_power is not supported (nvmlDeviceGetPowerUsage" in cells[6]


def test_a_gpu_in_mig_mode_has_no_utilisation_on_either_side(bundle, stand_in):
    result = run_check(bundle, stand_in, [smi_line(0), smi_line(1, utilization=["[N/A]"] * 2)],
                       env={"FAKE_NVML_MIG": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    for signal in ("gpu_util", "gpu_memory_util"):
        assert row(result.stdout, "metrics-agent", signal, 1)[2:6] == [
            "[N/A]", "not reported", "±10 %", "neither answers"]
        assert row(result.stdout, "metrics-agent", signal, 0)[5] == "agree"
    assert row(result.stdout, "metrics-agent", "gpu_power", 1)[5] == "agree"


def test_a_field_this_nvidia_smi_does_not_know_is_unchecked(bundle, stand_in):
    result = run_check(bundle, stand_in, [smi_line(0), smi_line(1)],
                       env={"REFUSE": "clocks_throttle_reasons.active"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert row(result.stdout, "metrics-agent", "gpu_throttle_reasons", 1)[2:6] == [
        "unknown field", "0x4, 0x4", "one of the readings", "unchecked"]
    assert row(result.stdout, "metrics-agent", "gpu_util", 1)[5] == "agree"


def test_a_gpu_load_runs_through_the_check_as_its_job(bundle, stand_in):
    (stand_in / "gpus.csv").write_text(smi_line(0) + "\n" + smi_line(1) + "\n")
    result = subprocess.run(
        [os.path.join(bundle, "run"), "--nvidia-smi=%s" % (stand_in / "nvidia-smi"),
         "--nvml-library=" + FAKE_NVML, "--python=", "--interval=100ms", "--load",
         "--cuda-library=" + FAKE_CUDA],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, JOB_PID="1"))
    found = re.search(r"A GPU load \(gpu-load, pid (\d+)\) keeps the GPUs busy: "
                      r"ready: 1024 MiB held on each of 2 GPU\(s\)", result.stdout)
    assert found, result.stdout + result.stderr
    load = int(found.group(1))
    # The load is the job the agent samples (the fake NVML lists no process
    # for it: 0 MiB on both sides), and it is gone when the check ends.
    assert row(result.stdout, "metrics-agent", "process_gpu_memory (pid %d)" % load, 0)[2:4] == [
        "0 MiB", "0, 0"]
    assert not os.path.exists("/proc/%d" % load)

    missing = subprocess.run(
        [os.path.join(bundle, "run"), "--nvidia-smi=%s" % (stand_in / "nvidia-smi"),
         "--nvml-library=" + FAKE_NVML, "--python=", "--interval=100ms", "--load",
         "--cuda-library=/nonexistent/libcuda.so.1"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, JOB_PID="1"))
    assert "No GPU load: gpu-load: cannot load /nonexistent/libcuda.so.1" in missing.stdout
    assert "## metrics-agent" in missing.stdout  # the check goes on without it


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
@pytest.mark.skipif(bool(os.environ.get("METRICS_SANITIZER")),
                    reason="a sanitizer's runtime reads the real /proc (its options from "
                    "/proc/self/environ, the leak check's threads); ./test.sh's build runs it")
def test_the_bundle_runs_alone_in_an_empty_root(bundle, tmp_path):
    """No Debian package, no shell, no nvidia-smi, no python3: the agent
    still samples the (fake) GPUs, and the check says what it could not do.
    The root's /proc is a folder of recorded files (the agent's fixtures),
    not a mount: mounting one needs a mount namespace, which a chroot (as
    on the fresh-machine check) cannot make private."""
    root = tmp_path / "root"
    shutil.copytree(os.path.join(HERE, "..", "..", "client", "testdata", "t0"), root / "proc")
    (root / "fake").mkdir()
    shutil.copytree(bundle, root / "gpu-check", symlinks=True)
    shutil.copy(FAKE_NVML, root / "fake" / "libnvidia-ml.so.1")
    loader = "/gpu-check/lib/" + next(n for n in os.listdir(root / "gpu-check" / "lib")
                                      if n.startswith("ld-linux"))

    def in_root(*argv):
        return subprocess.run(["chroot", str(root), *argv], capture_output=True, text=True,
                              timeout=120,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                   "FAKE_NVML_GPU_COUNT": "2"})

    once = in_root(loader, "--library-path", "/gpu-check/lib", "/gpu-check/bin/metrics-agent",
                   "--once", "--json", "--interval=100ms",
                   "--nvml-library=/fake/libnvidia-ml.so.1")
    assert once.returncode == 0, once.stderr
    sample = json.loads(once.stdout)
    assert [g["uuid"] for g in sample["inventory"]["gpus"]] == [
        "GPU-00000000-0000-0000-0000-000000000000", "GPU-00000000-0000-0000-0000-000000000001"]
    assert any(s["name"] == "memory_free" for s in sample["series"])  # from the recorded /proc

    check = in_root(loader, "--library-path", "/gpu-check/lib", "/gpu-check/bin/gpu-check",
                    "--agent=/gpu-check/bin/metrics-agent", "--loader=" + loader,
                    "--library-path=/gpu-check/lib", "--nvml-library=/fake/libnvidia-ml.so.1",
                    "--python-readings=/gpu-check/python/python_readings.py",
                    "--interval=100ms")
    assert check.returncode == 2, check.stdout + check.stderr
    assert "nvidia-smi could not be asked (nvidia-smi: not found)" in check.stdout
    assert row(check.stdout, "metrics-agent", "gpu_memory_total", 1)[2:4] == [
        "not asked", "16384, 16384 MiB"]
    assert re.search(r"python3 cannot be run here: the Python client is not checked",
                     check.stdout)
