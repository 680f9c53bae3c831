#!/usr/bin/python3
"""Makes the C++ header of the signal vocabulary from signals.json:

    make_signals.py signals.json out/common/vocabulary/signals.h

One constant per signal (kGpuPower: name and unit), the optional NVML
signals in table order with their call, arguments, width and scale, and the
label, inventory and device rules. Refuses a table it cannot express (a
repeated name, an NVML call of a shape the agent cannot make), naming the
entry.
"""
import json
import re
import sys
import textwrap

# The shapes of optional NVML calls the agent can make: (arguments, type).
SHAPES = {(0, "uint"), (1, "uint"), (0, "ull"), (2, "ull")}


def fail(message):
    sys.exit("make_signals.py: " + message)


def constant(name):
    return "k" + "".join(part.capitalize() for part in name.split("_"))


def comment(text):
    return ["// " + line for line in textwrap.wrap(text, 76)]


def cpp_string(text):
    if not re.fullmatch(r"[ -~]*", text) or '"' in text or "\\" in text:
        fail("%r is not plain printable ASCII" % text)
    return '"%s"' % text


def main(source, out):
    with open(source) as f:
        table = json.load(f)
    labels, inventory = table["labels"], table["inventory"]
    seen = set()
    lines = [
        "// Made by common/vocabulary/make_signals.py from common/vocabulary/signals.json;",
        "// edit the table, not this file.",
        "#ifndef METRICS_COMMON_VOCABULARY_SIGNALS_H_",
        "#define METRICS_COMMON_VOCABULARY_SIGNALS_H_",
        "",
        "#include <cstddef>",
        "",
        "#include \"absl/strings/string_view.h\"",
        "",
        "namespace metrics::signals {",
        "",
        "struct Signal {",
        "  absl::string_view name;",
        "  absl::string_view unit;",
        "};",
        "",
    ]
    optional = []
    for i, s in enumerate(table["signals"]):
        name, unit = s["name"], s["unit"]
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            fail("signals[%d]: %r is not a lower_snake_case name" % (i, name))
        if name in seen:
            fail("signals[%d]: %s is listed twice" % (i, name))
        if len(name) > labels["max_length"] or len(unit) > labels["max_unit_length"]:
            fail("signals[%d]: %s's name or unit is longer than a label may be" % (i, name))
        seen.add(name)
        lines.append("// %s, %s: %s." % (s["scope"], unit, s["source"]))
        lines.append("inline constexpr Signal %s{%s, %s};" % (constant(name), cpp_string(name),
                                                            cpp_string(unit)))
        nvml = s.get("nvml", {})
        if nvml.get("optional"):
            shape = (len(nvml["args"]), nvml["type"])
            if shape not in SHAPES:
                fail("signals[%d]: %s: no NVML call of %d arguments answering %s" %
                     ((i, name) + shape))
            optional.append((name, nvml))
    lines += [
        "",
        "// A GPU signal some GPUs or drivers do not answer: the NVML call, its",
        "// leading int arguments (NVML's enum values), whether it answers an",
        "// unsigned long long (else an unsigned int), and the factor to the unit.",
        "struct OptionalNvmlSignal {",
        "  Signal signal;",
        "  const char* call;",
        "  int arg_count;",
        "  int args[2];",
        "  bool wide;",
        "  double scale;",
        "};",
        "",
        "inline constexpr OptionalNvmlSignal kOptionalNvmlSignals[] = {",
    ]
    for name, nvml in optional:
        args = list(nvml["args"]) + [0] * (2 - len(nvml["args"]))
        lines.append("    {%s, %s, %d, {%d, %d}, %s, %r}," % (
            constant(name), cpp_string(nvml["call"]), len(nvml["args"]), args[0], args[1],
            "true" if nvml["type"] == "ull" else "false", float(nvml["scale"])))
    lines += [
        "};",
        "",
        *comment(labels["about"]),
        "inline constexpr size_t kMaxLabelLength = %d;" % labels["max_length"],
        "inline constexpr size_t kMaxUnitLength = %d;" % labels["max_unit_length"],
        "",
        *comment(inventory["about"]),
        "inline constexpr size_t kMaxInventoryText = %d;" % inventory["max_text"],
        "inline constexpr size_t kMaxInventoryGpus = %d;" % inventory["max_gpus"],
        "inline constexpr size_t kMaxMigDevicesPerGpu = %d;" % inventory["max_mig_devices_per_gpu"],
        "",
        *comment(table["left_out"]["about"]),
        "inline constexpr absl::string_view kNetworkDevicesLeftOut[] = {%s};" % ", ".join(
            cpp_string(d) for d in table["left_out"]["network_devices"]),
        "",
        "}  // namespace metrics::signals",
        "",
        "#endif  // METRICS_COMMON_VOCABULARY_SIGNALS_H_",
        "",
    ]
    text = "\n".join(lines)
    try:
        with open(out) as f:
            if f.read() == text:
                return  # unchanged: nothing that includes it rebuilds
    except FileNotFoundError:
        pass
    with open(out, "w") as f:
        f.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_signals.py signals.json out.h")
    main(sys.argv[1], sys.argv[2])
