"""Issue 33 item 4: ``make test`` (scripts/test_legs.sh) runs every leg even when one fails, prints each leg's result
and exits non-zero when any failed; PYTEST_ARGS runs the main leg only, with them. Stand-in legs (LEG_* variables)
instead of the real ones (too heavy here); the main leg's stand-in is scripts/run_tests.sh's exit-code-5 handling
checked on a fake venv whose "python -m pytest" exits 5."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "test_legs.sh"


def _legs(tmp_path: Path, *args: str, **legs: str) -> subprocess.CompletedProcess:
    log = tmp_path / "ran.txt"
    env = dict(os.environ)
    for name in ("MAIN", "PY310", "KILTED", "AARCH64", "DOCS"):
        status = legs.get(name.lower(), "0")
        leg = tmp_path / f"leg_{name}.sh"
        leg.write_text(f'#!/bin/sh\necho {name} "$@" >>{log}\nexit {status}\n')
        leg.chmod(0o755)
        env[f"LEG_{name}"] = str(leg)
    out = subprocess.run(["bash", str(SCRIPT), "VENV", *args], env=env, capture_output=True, text=True, timeout=60)
    out.ran = log.read_text().split("\n")[:-1] if log.exists() else []  # type: ignore[attr-defined]
    return out


def test_every_leg_runs_when_the_main_leg_fails(tmp_path):
    r = _legs(tmp_path, main="1", kilted="3")
    assert r.ran == ["MAIN VENV", "PY310", "KILTED", "AARCH64", "DOCS"], r.stdout  # type: ignore[attr-defined]
    assert r.returncode != 0
    summary = r.stdout[r.stdout.index("legs: summary"):]
    assert "main: FAILED (exit status 1" in summary and "kilted: FAILED (exit status 3" in summary
    assert "py310: passed" in summary and "aarch64: passed" in summary


def test_all_legs_passing_exit_0(tmp_path):
    r = _legs(tmp_path)
    assert r.returncode == 0 and r.stdout.count(": passed (") == 5, r.stdout


def test_pytest_args_run_the_main_leg_only_with_them(tmp_path):
    r = _legs(tmp_path, "-k", "foo", "-x")
    assert r.ran == ["MAIN VENV -k foo -x"]  # type: ignore[attr-defined]
    assert r.returncode == 0 and r.stdout.count("skipped (PYTEST_ARGS given") == 4, r.stdout


def test_dry_run_lists_the_real_legs(tmp_path):
    r = subprocess.run(["bash", str(SCRIPT), ".venv"], env=dict(os.environ, LEGS_DRY_RUN="1"), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0
    assert [line.split(":")[1].strip() for line in r.stdout.splitlines()[:5]] == ["main", "py310", "kilted", "aarch64", "docs"]
    assert "scripts/run_tests.sh .venv" in r.stdout and "scripts/test_aarch64_qemu.sh --leg" in r.stdout
    assert "scripts/docs_build.sh .venv" in r.stdout


def test_main_leg_turns_pytest_exit_5_into_a_failure(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text("#!/bin/sh\nexit 5\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEG_")}
    env.update(LEG_PY310="true", LEG_KILTED="true", LEG_AARCH64="true", LEG_DOCS="true")
    r = subprocess.run(["bash", str(SCRIPT), str(venv)], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "collected no tests" in r.stderr and "main: FAILED (exit status 1" in r.stdout, r.stdout + r.stderr
