"""pip's resolver for another machine: ``pip install --dry-run --only-binary=:all:`` for a target Python and
platform tags, against the package index, whatever this machine is (test_humble_install.py,
test_jetson_install.py). Skips the calling test with pip's last line when the index cannot answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

UNREACHABLE = ("Could not fetch URL", "NewConnectionError", "Network is unreachable", "Temporary failure in name")


def resolve(report: Path, python: str, platforms: list[str], constraints: list[Path],
            requirements: list[Path]) -> dict[str, str]:
    """{name: version} of what pip would install for ``python`` ("3.10") on ``platforms`` (wheel tags)."""
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
           str(report), "--python-version", python, "--only-binary=:all:"]
    for platform in platforms:
        cmd += ["--platform", platform]
    for c in constraints:
        cmd += ["-c", str(c)]
    for r in requirements:
        cmd += ["-r", str(r)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and any(s in proc.stderr for s in UNREACHABLE):
        pytest.skip(f"the package index is unreachable: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
