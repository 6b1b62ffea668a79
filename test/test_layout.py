"""The package's layout (issue 37): at most 10 modules flat under vrt_ros/, none over 450 lines, and
every old module name a user may import or run still works for one release (vrt_ros/_moved.py) and warns."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from vrt_ros import _moved

PACKAGE = Path(__file__).resolve().parents[1] / "vrt_ros"


def test_at_most_10_modules_flat_under_the_package():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 10, flat


def test_no_module_over_450_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}


def test_every_old_name_is_the_new_module_and_warns_naming_it():
    """Each old name, imported in a fresh vrt_ros state, is the new module object and warns naming it. A module whose
    library this machine lacks (rclpy, cuda-python, ...) may fail with ModuleNotFoundError for that library only."""
    for old, new in _moved.MOVED.items():
        assert importlib.util.find_spec(new) is not None, f"{old} points at {new}, which does not exist"
    code = ("import importlib, json, sys, warnings\n"
            "from vrt_ros import _moved\n"
            "out = {}\n"
            "for old, new in sorted(_moved.MOVED.items()):\n"
            "    for m in [m for m in sys.modules if m.startswith('vrt_ros.')]:\n"
            "        del sys.modules[m]\n"
            "    with warnings.catch_warnings(record=True) as got:\n"
            "        warnings.simplefilter('always')\n"
            "        try:\n"
            "            mod = importlib.import_module(old)\n"
            "        except ModuleNotFoundError as e:\n"
            "            out[old] = 'missing ' + str(e.name)\n"
            "            continue\n"
            "    warned = any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in got)\n"
            "    out[old] = 'ok' if mod is sys.modules[new] and mod.__name__ == new and warned else 'bad'\n"
            "print('RESULT ' + json.dumps(out))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.rsplit("RESULT ", 1)[1])
    bad = {o: r for o, r in got.items() if r != "ok" and not (r.startswith("missing ") and
                                                             not r.split()[1].startswith("vrt_ros"))}
    assert bad == {} and set(got) == set(_moved.MOVED), bad


def test_python_m_an_old_name_runs_the_new_module():
    """`python -m vrt_ros.config FILE` (a moved module a user types) validates the file, with a note naming the new
    name."""
    cfg = PACKAGE.parent / "config" / "default.yaml"
    out = subprocess.run([sys.executable, "-m", "vrt_ros.config", str(cfg)], capture_output=True, text=True,
                         cwd=PACKAGE.parent)
    new = subprocess.run([sys.executable, "-m", _moved.MOVED["vrt_ros.config"], str(cfg)], capture_output=True,
                         text=True, cwd=PACKAGE.parent)
    assert (out.returncode, out.stdout) == (new.returncode, new.stdout)
    assert f"python -m {_moved.MOVED['vrt_ros.config']}" in out.stderr
