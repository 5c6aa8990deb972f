"""Bench results as JSON files, one per bench and commit, under bench/results/.

Each bench script ends with `record("<bench>", figures)`: the figures it printed, as a
dict, written to `bench/results/<bench>-<short commit>.json` together with what they
were measured on - the commit (`git rev-parse HEAD`), whether the tree had changes
not committed (`dirty`; files under bench/results/ do not count), the date, the
machine (cores, load average) and the command line arguments. A later run on the same
commit adds its figures to the file (a figure of the same name is replaced), and its
date, machine and arguments are kept beside the earlier runs' in `runs`.

`python bench/results.py [BENCH ...]` prints the newest result of each bench (or of
those named) as a Markdown table: the figures the docs quote come from there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout.strip()


def _rounded(value: Any) -> Any:
    """Floats to 4 significant digits: what a bench measures, not its float noise."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, Mapping):
        return {name: _rounded(item) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


def record(bench: str, figures: Mapping[str, Any]) -> Path:
    """Write one run's figures with its commit, date, machine and arguments; return the
    file written."""
    commit = _git("rev-parse", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--", ".", ":(exclude)bench/results"))
    result = {
        "bench": bench,
        "commit": commit,
        "dirty": dirty,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"nproc": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]},
        "argv": sys.argv[1:],
        "figures": _rounded(dict(figures)),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}-{commit[:12]}.json"
    if path.exists():  # another run of this commit: keep its figures too
        earlier = json.loads(path.read_text())
        result["figures"] = {**earlier["figures"], **result["figures"]}
        runs = earlier.get("runs") or [{k: earlier[k] for k in ("date", "machine", "argv")}]
        result["runs"] = [*runs, {k: result[k] for k in ("date", "machine", "argv")}]
        result["dirty"] = earlier["dirty"] or dirty
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"results written to {path.relative_to(ROOT)}")
    return path


def _rows(figures: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for name, value in figures.items():
        if isinstance(value, Mapping):
            rows += _rows(value, f"{prefix}{name}: ")
        else:
            rows.append((f"{prefix}{name}", value))
    return rows


def newest(bench: str) -> dict[str, Any] | None:
    """The newest result of one bench, by its date."""
    found = [json.loads(p.read_text()) for p in RESULTS.glob(f"{bench}-*.json")]
    return max(found, key=lambda r: r["date"]) if found else None


def table(benches: list[str]) -> str:
    lines = ["| bench | figure | value | commit, date, load |", "|---|---|---|---|"]
    for bench in benches:
        result = newest(bench)
        if result is None:
            continue
        when = (
            f"{result['commit'][:12]}{' (dirty)' if result['dirty'] else ''}, "
            f"{result['date'][:10]}, {result['machine']['load'][0]:.1f}"
        )
        for name, value in _rows(result["figures"]):
            shown = f"{value:.2f}" if isinstance(value, float) else value
            lines.append(f"| {bench} | {name} | {shown} | {when} |")
    return "\n".join(lines)


if __name__ == "__main__":
    named = sys.argv[1:] or sorted({p.stem.rsplit("-", 1)[0] for p in RESULTS.glob("*.json")})
    print(table(named))
