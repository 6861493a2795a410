"""bench/forecast_choice.py: a period without enough history before it is a clear error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_first_period_before_the_history_a_choice_needs_exits_with_a_message(
        shared_data, tmp_path):
    # us-2022's data begin on 2022-01-01: a choice on 2022-01-03 has 2 days of history, under
    # the 17 it needs; the script said so in a worker's traceback before
    out = tmp_path / "r.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "forecast_choice.py"),
                          "--catalog", "us-2022", "--data-dir", str(shared_data),
                          "--from", "2022-01-03", "--to", "2022-01-03",
                          "--sites", "us-bpat-seattle", "--out", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr
    assert "error: the forecast stopped at the first site-period: " in run.stderr
    assert "2 days of history; a model choice needs at least 17" in run.stderr
    assert "move --from later" in run.stderr
    assert "Traceback" not in run.stderr
    assert not out.exists()
