"""scripts/seg_picture.py (issue 37): ``--help`` prints its usage (it took ``--help`` for the shared folder and
failed with a traceback); a missing photo is one line naming it; on a real photo it draws the model's detections.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "seg_picture.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_help_prints_the_usage():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: scripts/seg_picture.py") and "--photo" in proc.stdout, proc.stdout


def test_a_missing_photo_is_one_line_naming_it(shared_dir, tmp_path):
    proc = _run(str(shared_dir), str(tmp_path / "out.jpg"), "--photo", "nope.png")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"seg_picture: photo {shared_dir / 'models/seg/photos/nope.png'} does not exist")
    assert "Traceback" not in proc.stderr and not (tmp_path / "out.jpg").exists()


def test_draws_the_models_detections_on_a_real_photo(shared_dir, tmp_path):
    seg = shared_dir / "models" / "seg"
    photo = next(p for p in sorted((seg / "photos").glob("*.png")))
    expected = json.loads((seg / "masks" / "reference.json").read_text())["photos"][photo.name]
    out = tmp_path / "drawn.jpg"
    proc = _run(str(shared_dir), str(out), "--photo", photo.name)
    assert proc.returncode == 0, proc.stderr
    n = int(proc.stdout.split(": ", 1)[1].split(" detections")[0])
    assert n == len(expected["detections"]) > 0, (proc.stdout, expected["detections"])  # the package's own count
    import cv2

    drawn, original = cv2.imread(str(out)), cv2.imread(str(photo))
    assert drawn.shape == original.shape
    assert (cv2.absdiff(drawn, original).max(axis=2) > 60).mean() > 0.001  # masks and boxes drawn, not a copy
