"""Smoke test of ``bench/tokens.py``: a quick 10-turn run writes the issue's JSON shape, and
its figures hold together (statekeeper's requests are the model activity's, with caching)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STRATEGIES = {"statekeeper", "naive", "naive_cached", "window"}
FIELDS = {"input_tokens", "cost_weighted_tokens", "max_context_tokens", "per_call_max_over_min_after_10",
          "fact_retained"}


def test_quick_run_writes_the_json_shape(tmp_path):
    out = tmp_path / "tokens.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "tokens.py"), "--quick", "--turns", "10", "--json",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "statekeeper" in done.stdout and "modelled" in done.stdout
    figures = json.loads(out.read_text())
    assert list(figures) == ["runs"]
    (run,) = figures["runs"]
    assert set(run) == {"turns", "strategies"} and run["turns"] == 10
    assert set(run["strategies"]) == STRATEGIES
    for strategy in run["strategies"].values():
        assert set(strategy) == FIELDS
        assert strategy["input_tokens"] > 0 and strategy["cost_weighted_tokens"] > 0
        assert strategy["per_call_max_over_min_after_10"] is None  # no turn after the 10th
    naive, cached = run["strategies"]["naive"], run["strategies"]["naive_cached"]
    assert naive["input_tokens"] == cached["input_tokens"]  # the same prompts, priced differently
    assert cached["cost_weighted_tokens"] < naive["cost_weighted_tokens"]
    assert run["strategies"]["statekeeper"]["fact_retained"] is True
