"""The signal vocabulary: every series name the samplers send with its
unit, the optional NVML signals with their calls and scales, the label
rule's and the inventory's bounds, and the devices left out. It is the
repository's table (common/vocabulary/signals.json), which metrics-agent is
built from too, shipped in the package as signals.json.

Read once at import; immutable after.
"""
import json
from importlib import resources
from typing import Dict, FrozenSet, List, Tuple

_TABLE = json.loads(resources.files(__package__).joinpath("signals.json").read_text())

# name -> unit
UNITS: Dict[str, str] = {s["name"]: s["unit"] for s in _TABLE["signals"]}

# The GPU signals some GPUs or drivers do not answer: name, unit, NVML call,
# its leading int arguments (NVML's enum values), whether it answers an
# unsigned long long (else an unsigned int), and the factor to the unit.
OPTIONAL_NVML: List[Tuple[str, str, str, Tuple[int, ...], bool, float]] = [
    (s["name"], s["unit"], s["nvml"]["call"], tuple(s["nvml"]["args"]),
     s["nvml"]["type"] == "ull", float(s["nvml"]["scale"]))
    for s in _TABLE["signals"] if s.get("nvml", {}).get("optional")]

MAX_LABEL_LENGTH: int = _TABLE["labels"]["max_length"]
MAX_UNIT_LENGTH: int = _TABLE["labels"]["max_unit_length"]
MAX_INVENTORY_TEXT: int = _TABLE["inventory"]["max_text"]
MAX_INVENTORY_GPUS: int = _TABLE["inventory"]["max_gpus"]
MAX_MIG_DEVICES_PER_GPU: int = _TABLE["inventory"]["max_mig_devices_per_gpu"]
NETWORK_DEVICES_LEFT_OUT: FrozenSet[str] = frozenset(_TABLE["left_out"]["network_devices"])


def measurement(name: str, value: float) -> Tuple[str, float, str]:
    """(name, value, unit) of a vocabulary signal; KeyError for a name the
    table lacks."""
    return name, value, UNITS[name]
