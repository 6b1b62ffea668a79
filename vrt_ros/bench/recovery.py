"""How fast the node is back (issue 27, item 3): process start → first detection, cold and warm, and fault →
detections again under the launch file's ``respawn``, three faults in a row, each with its breakdown.

Usage::

    python -m vrt_ros.bench.recovery [--model PATH] [--backend cpu] [--repeats 3] [--faults 3] [--respawn-delay 0.5]
                                     [--import-runs 9] [--domain-id 83] [--no-launch] [--out results/bench]

- **imports**: ``import vrt_ros.ros.main`` in ``--import-runs`` fresh interpreters (the median and all runs, s).
- **start**: the node process (:mod:`vrt_ros.bench.recovery_probe`: ``detector_node`` with time marks) started next to
  a camera publishing a photo at ``--rate`` Hz; the time to the first ``detections`` message received, split into
  interpreter start, imports, node set-up (``rclpy.init``, parameters), pipeline build (model load, ONNX Runtime
  session or GPU engine) and first frame (subscription matched, first frame processed and its answer received).
  *cold*: an empty ``XDG_CACHE_HOME`` (the engine caches: TensorRT plans, kernels); *warm*: the same cache again.
  The OS page cache is not dropped (no root): a cold start here has the files in memory already.
- **respawn**: ``colcon build`` of this checkout into a temporary workspace whose installed ``detector_node`` is the
  probe with ``--fault-after N`` (each process processes N frames, then its pipeline raises a poisoned-context CUDA
  error), run by the real ``ros2 launch vrt_ros detector.launch.py respawn:=true respawn_delay:=D``. Per fault: the
  ERROR on ``/diagnostics`` (fault → received here), the exit (fault → launch reports the exit), the delay (→ launch
  starts the process again), the new process's start (interpreter, imports, node, pipeline) and first frame (→ the
  first detection received). Needs the launch stack in the venv (``make test`` installs it from
  ../shared/ros2_launch); ``--no-launch`` leaves it out.

Times are wall-clock (``time.time()`` in both processes on one machine); the marks come from the probe's
``RECOVERY`` lines, launch's ``process started`` / ``process has died`` lines (the time this process read them) and
the messages received here. Frames come every 1/``--rate`` s, so "first frame" includes up to one frame period.
Writes ``recovery.json`` and ``recovery.md`` into ``--out`` and prints the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vrt_ros.bench.common import library_versions, say, write_result
from vrt_ros.bench.recovery_procs import Camera, Output, build_workspace, interrupt, params_file

REPO = Path(__file__).resolve().parents[2]
_IMPORT = ("import sys, time; t = time.perf_counter(); import vrt_ros.ros.main; "
           "print(time.perf_counter() - t, len(sys.modules))")
#: The start's components, in order: (key, from mark, to mark).
START_PARTS = (("interpreter", "popen", "start"), ("imports", "start", "imported"), ("node", "imported", "pipeline_begin"),
               ("pipeline", "pipeline_begin", "pipeline_end"), ("matched", "pipeline_end", "matched"),
               ("frame_wait", "matched", "frame_begin"), ("inference", "frame_begin", "frame_end"), ("answer", "frame_end", "first_detection"))
RESPAWN_PARTS = (("exit", "fault", "exit_seen"), ("delay", "exit_seen", "started_seen"),
                 ("interpreter", "started_seen", "start"), ("imports", "start", "imported"),
                 ("node", "imported", "pipeline_begin"), ("pipeline", "pipeline_begin", "pipeline_end"),
                 ("matched", "pipeline_end", "matched"), ("frame_wait", "matched", "frame_begin"),
                 ("inference", "frame_begin", "frame_end"),
                 ("answer", "frame_end", "first_detection"))


def import_times(runs: int, env: dict[str, str], trees: dict[str, Path | None]) -> dict[str, dict]:
    """``import vrt_ros.ros.main`` in ``runs`` fresh interpreters per tree (None: this checkout; else a folder holding
    another version's ``vrt_ros``, put first on PYTHONPATH), the trees taking turns: per tree the seconds of each
    run, their median and the number of modules loaded."""
    out = {name: {"runs_s": []} for name in trees}
    for _ in range(runs):
        for name, tree in trees.items():
            run_env = env if tree is None else dict(env, PYTHONPATH=f"{tree}{os.pathsep}{env.get('PYTHONPATH', '')}")
            proc = subprocess.run([sys.executable, "-c", _IMPORT], env=run_env, cwd=tree, capture_output=True,
                                  text=True, check=True)
            seconds, modules = proc.stdout.split()[-2:]
            out[name]["runs_s"].append(float(seconds))
            out[name]["modules"] = int(modules)
    for row in out.values():
        row["median_s"] = statistics.median(row["runs_s"])
    return out


def imports_markdown(result: dict) -> str:
    lines = ["# `import vrt_ros.ros.main` (issue 27 item 2)", "", f"Command: `{result['command']}`  ",
             f"Machine: {result['machine']}; {result['versions']}", "",
             "| tree | median (s) | min | max | runs | modules loaded |", "|---|---|---|---|---|---|"]
    for name, row in result["imports"].items():
        lines.append(f"| {name} | {row['median_s']:.3f} | {min(row['runs_s']):.3f} | {max(row['runs_s']):.3f} | "
                     f"{len(row['runs_s'])} | {row['modules']} |")
    lines += ["", "Each run a fresh interpreter (`time.perf_counter()` around the import), the trees taking turns. "
              "What must not be imported is held by test/test_import_budget.py.", ""]
    return "\n".join(lines)


def parts(marks: dict[str, float], spec) -> dict[str, float | None]:
    """Each component's seconds (None where a mark is missing), and ``total`` (first mark to last)."""
    out = {key: (marks[b] - marks[a]) if a in marks and b in marks else None for key, a, b in spec}
    first, last = spec[0][1], spec[-1][2]
    out["total"] = marks[last] - marks[first] if first in marks and last in marks else None
    return out


def start_once(env: dict[str, str], params: Path, camera: Camera, timeout_s: float) -> dict:
    """One node process from start to its first detection (then Ctrl-C); the marks and the breakdown."""
    camera.reset()
    popen = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "vrt_ros.bench.recovery_probe", "--ros-args", "--params-file",
                             str(params), "-r", f"__ns:={camera.namespace}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    output = Output(proc)
    try:
        first = camera.first_detection_after(popen, timeout_s)
    finally:
        interrupt(proc)
        output.join()
    if first is None:
        raise RuntimeError(f"no detection within {timeout_s} s of the start:\n{output.text()[-3000:]}")
    marks = {"popen": popen, **output.instances()[0], "first_detection": first}
    matched = camera.first_match_after(popen)
    if matched is not None:
        marks["matched"] = matched
    return {"marks": marks, "seconds": parts(marks, START_PARTS)}


def start_runs(repeats: int, env: dict[str, str], params: Path, camera: Camera, timeout_s: float) -> dict:
    """``repeats`` x (cold: an empty XDG_CACHE_HOME; warm: the same cache once more)."""
    runs: dict[str, list] = {"cold": [], "warm": []}
    for i in range(repeats):
        with tempfile.TemporaryDirectory(prefix="vrt_recovery_cache_") as cache:
            for label in ("cold", "warm"):
                run = start_once(dict(env, XDG_CACHE_HOME=cache), params, camera, timeout_s)
                say(f"start {label} {i + 1}/{repeats}: {run['seconds']['total']:.2f} s")
                runs[label].append(run)
    return runs


def respawn_run(env: dict[str, str], params: Path, camera: Camera, faults: int, fault_after: int, delay: float,
                timeout_s: float) -> dict:
    """``faults`` faults in a row under the real launch with respawn; per fault, the marks and the breakdown."""
    with tempfile.TemporaryDirectory(prefix="vrt_recovery_ws_") as tmp:
        ws_env = build_workspace(Path(tmp), env, fault_after)
        camera.reset()
        t0 = time.time()
        proc = subprocess.Popen(["ros2", "launch", "vrt_ros", "detector.launch.py", "respawn:=true",
                                 f"respawn_delay:={delay}", f"params_file:={params}",
                                 f"namespace:={camera.namespace.lstrip('/')}"], env=ws_env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        output = Output(proc)
        try:
            end = t0 + timeout_s
            while time.time() < end and proc.poll() is None:
                inst = output.instances()
                if len(inst) > faults and "pipeline_end" in inst[faults] and \
                        camera.first_detection_after(inst[faults]["pipeline_end"], 0.0) is not None:
                    break
                time.sleep(0.1)
        finally:
            interrupt(proc)
            output.join()
    inst = output.instances()
    if len(inst) <= faults:
        raise RuntimeError(f"{len(inst)} process starts seen, {faults + 1} needed:\n{output.text()[-4000:]}")
    rows = []
    for k in range(faults):
        after = inst[k + 1]
        marks = {"fault": inst[k].get("fault"), "exit_seen": inst[k].get("exit_seen"),
                 "exit_code": inst[k].get("exit_code"), **{m: after[m] for m in after if m not in ("fault", "exit_seen", "exit_code")}}
        marks = {m: v for m, v in marks.items() if v is not None}
        error = camera.first_error_after(marks.get("fault", t0))
        if error is not None:
            marks["diagnostics_error"] = error
        matched = camera.first_match_after(after["started_seen"])
        if matched is not None:
            marks["matched"] = matched
        first = camera.first_detection_after(after.get("pipeline_end", after["started_seen"]), 0.0)
        if first is not None:
            marks["first_detection"] = first
        seconds = parts(marks, RESPAWN_PARTS)
        seconds["diagnostics_error"] = error - marks["fault"] if error is not None and "fault" in marks else None
        rows.append({"marks": marks, "seconds": seconds})
        say(f"fault {k + 1}: back after {seconds['total']} s")
    return {"respawn_delay_s": delay, "fault_after_frames": fault_after, "faults": rows}


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _cell(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def to_markdown(result: dict) -> str:
    imp = result["imports"]["this checkout"]
    lines = [
        "# Recovery bench (issue 27)", "",
        f"Command: `{result['command']}`  ", f"Machine: {result['machine']}; backend `{result['backend']}`, model "
        f"`{result['model']}`, camera {result['rate_hz']} Hz 640x480 bgr8; {result['versions']}", "",
        "## Imports", "",
        f"`import vrt_ros.ros.main`: median {imp['median_s']:.3f} s over {len(imp['runs_s'])} fresh interpreters "
        f"(min {min(imp['runs_s']):.3f}, max {max(imp['runs_s']):.3f}).", "",
        "## Process start → first detection (s, median of the runs)", "",
        "| start | " + " | ".join(k for k, _, _ in START_PARTS) + " | total | runs |",
        "|---|" + "---|" * (len(START_PARTS) + 2),
    ]
    for label, runs in result["start"].items():
        med = {k: _median(r["seconds"][k] for r in runs) for k in [*(p[0] for p in START_PARTS), "total"]}
        lines.append(f"| {label} | " + " | ".join(_cell(med[k]) for k in med) + f" | "
                     + ", ".join(_cell(r["seconds"]["total"]) for r in runs) + " |")
    lines += ["", "cold: an empty XDG_CACHE_HOME (ONNX Runtime keeps no cache there, so cold and warm differ by the "
              "noise; the OS page cache is not dropped).", ""]
    respawn = result.get("respawn")
    if respawn is None:
        lines += ["## Fault → detections again", "", result.get("respawn_skipped", "not run"), ""]
        return "\n".join(lines)
    keys = ["diagnostics_error", *(p[0] for p in RESPAWN_PARTS), "total"]
    lines += [f"## Fault → detections again (`ros2 launch vrt_ros detector.launch.py respawn:=true "
              f"respawn_delay:={respawn['respawn_delay_s']}`, s)", "",
              "| fault | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for i, row in enumerate(respawn["faults"]):
        lines.append(f"| {i + 1} | " + " | ".join(_cell(row["seconds"].get(k)) for k in keys) + " |")
    lines += ["", "diagnostics_error: fault → the ERROR received on /diagnostics in the bench's process; exit: fault → "
              "launch reports the exit (status 3); delay: → launch starts the process again (respawn_delay plus "
              "launch's own time); interpreter … first_frame: the new process, as in the start table; total: fault → "
              "first detection of the new process.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(Path(os.environ.get("VRT_SHARED_DIR", REPO.parent / "shared"))
                                          / "models" / "yolox_nano.onnx"))
    p.add_argument("--backend", default="cpu")
    p.add_argument("--image", default=None, help="the camera's photo (default: a shared photo, else a test pattern)")
    p.add_argument("--rate", type=float, default=10.0, help="camera frames per second")
    p.add_argument("--repeats", type=int, default=3, help="cold + warm start pairs")
    p.add_argument("--faults", type=int, default=3)
    p.add_argument("--fault-after", type=int, default=10, help="frames each process answers before its fault")
    p.add_argument("--respawn-delay", type=float, default=0.5)
    p.add_argument("--import-runs", type=int, default=9)
    p.add_argument("--imports-only", action="store_true",
                   help="only the import time: writes import_time.json/.md instead of recovery.*")
    p.add_argument("--compare-tree", default=None, metavar="DIR",
                   help="with --imports-only: also time the vrt_ros in DIR (e.g. `git archive main vrt_ros`)")
    p.add_argument("--compare-label", default=None, help="the --compare-tree row's name (default: DIR)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for one start, or for the respawn run")
    p.add_argument("--domain-id", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "83")))
    p.add_argument("--no-launch", action="store_true", help="leave out the respawn run")
    p.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = p.parse_args(argv)
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(args.domain_id))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    model = Path(args.model)
    if not model.is_file():
        print(f"recovery: model {model} not found (--model)", file=sys.stderr)
        return 2
    result = {"command": "python -m vrt_ros.bench.recovery " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores", "backend": args.backend,
              "model": model.name, "rate_hz": args.rate,
              "versions": library_versions(("onnxruntime", "numpy", "opencv-python-headless"))}
    say("imports ...")
    trees = {"this checkout": None}
    if args.compare_tree:
        trees[args.compare_label or args.compare_tree] = Path(args.compare_tree)
    result["imports"] = import_times(args.import_runs, env, trees)
    if args.imports_only:
        write_result(args.out, "import_time", result, imports_markdown(result))
        return 0
    with tempfile.TemporaryDirectory(prefix="vrt_recovery_") as tmp, \
            Camera(args.image, args.rate) as camera:
        params = params_file(Path(tmp), model, args.backend)
        result["start"] = start_runs(args.repeats, env, params, camera, args.timeout)
        if args.no_launch:
            result["respawn_skipped"] = "not run (--no-launch)"
        else:
            try:
                result["respawn"] = respawn_run(env, params, camera, args.faults, args.fault_after,
                                                args.respawn_delay, args.timeout)
            except (RuntimeError, FileNotFoundError, subprocess.CalledProcessError) as exc:
                result["respawn_skipped"] = f"not run: {exc}"
                say(result["respawn_skipped"])
    write_result(args.out, "recovery", result, to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
