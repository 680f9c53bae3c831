#!/usr/bin/env python3
"""Prints the Python client's GPU readings (metrics_client's Nvml, as its
profiler takes them) as one JSON object, in the shape of
`metrics-agent --once --json`, for gpu-check to hold against nvidia-smi.

Needs Python 3.9 or later and its standard library only: it loads
metrics_client's NVML and vocabulary modules without the package's
__init__, which would import grpc and protobuf.

Usage: python_readings.py [--nvml-library PATH] [--interval 1s] [--pid PID]
       [--client DIR]
  --pid: also that process's GPU memory (process_gpu_memory) per GPU.
  --client: the metrics_client folder; default: beside this script (the
            bundle), or the repository's client/python.
"""
import argparse
import importlib.util
import json
import os
import sys
import time


def load_client(folder):
    """Imports metrics_client._nvml from `folder` without running the
    package's __init__."""
    spec = importlib.util.spec_from_file_location(
        "metrics_client", os.path.join(folder, "__init__.py"),
        submodule_search_locations=[folder])
    package = importlib.util.module_from_spec(spec)
    sys.modules["metrics_client"] = package
    from metrics_client import _nvml  # noqa: E402 (after the package is set up)
    return _nvml


def seconds(text):
    """"1s", "500ms" or a plain number of seconds."""
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text[:-1] if text.endswith("s") else text)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nvml-library", default="libnvidia-ml.so.1")
    parser.add_argument("--interval", default="1s", type=seconds)
    parser.add_argument("--pid", type=int, default=0)
    parser.add_argument("--client", default=None)
    args = parser.parse_args()
    folder = args.client or next(
        (f for f in (os.path.join(here, "metrics_client"),
                     os.path.join(here, "..", "..", "client", "python", "metrics_client"))
         if os.path.exists(os.path.join(f, "_nvml.py"))), None)
    if folder is None:
        sys.exit("python_readings.py: no metrics_client folder; give --client")
    _nvml = load_client(folder)

    out = {"interval_seconds": args.interval, "series": [], "inventory": {},
           "gpu_processes": [], "notes": [], "errors": []}
    try:
        nvml = _nvml.Nvml(args.nvml_library)
    except _nvml.NvmlError as e:
        out["inventory"]["gpu_status"] = "NVML not available: %s" % e
        print(json.dumps(out))
        return
    try:
        time.sleep(args.interval)  # as the agent's --once waits
        inventory = nvml.describe()
        out["inventory"] = inventory
        index = {}
        for gpu in inventory["gpus"]:
            index[gpu["uuid"]] = gpu["index"]
            for mig in gpu["mig_devices"]:
                index[mig] = gpu["index"]
        try:
            readings = nvml.read()
        except _nvml.NvmlError as e:
            readings = []
            out["errors"].append(str(e))
        for uuid, values in readings:
            for name, (value, unit) in values.items():
                out["series"].append({"name": name, "unit": unit, "value": value,
                                      "gpu_index": index.get(uuid), "gpu_uuid": uuid})
        for uuid, processes in nvml.compute_processes():
            out["gpu_processes"].append({
                "gpu_index": index.get(uuid), "gpu_uuid": uuid,
                "processes": [{"pid": pid, "used_memory_bytes": used}
                              for pid, used in processes]})
            # The process alone (the agent's --pid counts its children too).
            if args.pid:
                used = sum(u for pid, u in processes if pid == args.pid and u is not None)
                out["series"].append({"name": "process_gpu_memory", "unit": "bytes",
                                      "value": used, "gpu_index": index.get(uuid),
                                      "gpu_uuid": uuid})
        out["notes"] = nvml.take_notes()
    finally:
        nvml.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
