"""The training-loop example of docs/python.md, run as written against a
real metricsd (with a stand-in train_step), so the documented example
cannot rot."""
import os
import re

from conftest import REPO_ROOT


def test_the_training_loop_example_runs_as_documented(metricsd, admin, trial, tmp_path,
                                                      monkeypatch):
    with open(os.path.join(REPO_ROOT, "docs", "python.md")) as f:
        doc = f.read()
    section = doc.split("## A training loop", 1)[1]
    example = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(example.strip().splitlines()) <= 12
    token_file = tmp_path / "token"
    token_file.write_text(metricsd.mint_token("reporter", trial) + "\n")
    monkeypatch.setenv("METRICS_TRIAL", str(trial))
    monkeypatch.setenv("METRICS_SERVER", metricsd.address)
    monkeypatch.setenv("METRICS_TOKEN_FILE", str(token_file))
    exec(compile(example, "docs/python.md", "exec"),
         {"train_step": lambda step: 1.0 / (step + 1)})
    series = {s.name: s for s in admin.list_series(trial)}
    assert series["loss"].sample_count == 1000
    assert series["samples_per_second"].unit == "samples/s"
    assert "memory_free" in series  # the profiler's host series
