"""The OpenTelemetry Collector configuration docs/otlp.md shows, checked as
YAML (no Collector is installable here): it parses; every component a
pipeline names is configured; both exporters carry the token header and
point at metricsd's ports; the resource gets a trial id; and each host metric
it enables is one the mapping table turns into a series.

Usage: /usr/bin/python3 otel_collector_config_test.py REPOSITORY_ROOT
"""

import pathlib
import re
import sys
import unittest

import yaml

ROOT = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else ".")


def collector_section():
    doc = (ROOT / "docs" / "otlp.md").read_text()
    return doc[doc.index("## A Collector"):]


def collector_config():
    blocks = re.findall(r"```yaml\n(.*?)```", collector_section(), re.S)
    if len(blocks) != 1:
        raise AssertionError(f"expected one yaml block under 'A Collector', found {len(blocks)}")
    return yaml.safe_load(blocks[0])


class CollectorConfigTest(unittest.TestCase):
    def setUp(self):
        self.config = collector_config()

    def test_pipelines_name_configured_components(self):
        pipelines = self.config["service"]["pipelines"]
        self.assertIn("metrics", pipelines)
        for name, pipeline in pipelines.items():
            for kind in ("receivers", "processors", "exporters"):
                for component in pipeline.get(kind, []):
                    self.assertIn(component, self.config[kind], f"{name}.{kind}")

    def test_exporters_send_the_token_to_metricsd(self):
        exporters = self.config["exporters"]
        for name in ("otlp", "otlphttp"):
            headers = exporters[name]["headers"]
            self.assertRegex(headers["authorization"], r"^Bearer \$\{env:[A-Z_]+\}$", name)
        # otlp takes host:port (gRPC port); otlphttp a base URL to which the
        # Collector adds /v1/metrics (HTTP port).
        self.assertRegex(exporters["otlp"]["endpoint"], r"^[a-z0-9.-]+:\d+$")
        self.assertRegex(exporters["otlphttp"]["endpoint"], r"^https?://[a-z0-9.-]+:\d+$")

    def test_resource_has_a_trial_and_a_host(self):
        processors = self.config["processors"]
        keys = {a["key"]: a for a in processors["resource"]["attributes"]}
        self.assertRegex(str(keys["trial.id"]["value"]), r"^[1-9]\d*$")
        self.assertEqual(keys["trial.id"]["action"], "upsert")
        self.assertIn("system", processors["resourcedetection"]["detectors"])  # host.name

    def test_enabled_host_metrics_are_mapped(self):
        scrapers = self.config["receivers"]["hostmetrics"]["scrapers"]
        self.assertLessEqual({"cpu", "memory", "network", "disk"}, set(scrapers))
        mapping = (ROOT / "docs" / "otlp.md").read_text()
        mapping = mapping[mapping.index("## What is stored"):mapping.index("## What is refused")]
        enabled = [metric for scraper in scrapers.values() if scraper
                   for metric, settings in scraper.get("metrics", {}).items()
                   if settings.get("enabled")]
        # The Collector leaves these off by default; without them there is
        # no CPU share and no available memory.
        self.assertIn("system.cpu.utilization", enabled)
        self.assertIn("system.linux.memory.available", enabled)
        for metric in enabled:
            self.assertIn(f"`{metric}`", mapping)


if __name__ == "__main__":
    unittest.main()
