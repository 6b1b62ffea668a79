"""How fast the node is back (issue 27, item 3): process start → first detection, cold and warm, lifecycle configure
time, and fault → detections again under respawn, three faults in a row, each with its breakdown.

Usage::

    python -m vrt_ros.bench.restart.recovery [--model PATH] [--backend cpu|cuda] [--repeats 3] [--faults 3]
                                     [--respawn launch|supervisor|standby] [--respawn-delay 0.5] [--lifecycle-repeats 3]
                                     [--lifecycle-only] [--import-runs 9] [--domain-id 83] [--no-launch]
                                     [--name recovery] [--out results/bench]

- **imports**: ``import vrt_ros.ros.main`` in ``--import-runs`` fresh interpreters (the median and all runs, s).
- **start**: the node process (:mod:`vrt_ros.bench.restart.recovery_probe`: ``detector_node`` with time marks) started next to
  a camera publishing a photo at ``--rate`` Hz; the time to the first ``detections`` message received, split into
  interpreter start, imports, node set-up (``rclpy.init``, parameters), pipeline build (model load, ONNX Runtime
  session or GPU engine) and first frame (subscription matched, first frame processed and its answer received).
  *cold*: an empty ``XDG_CACHE_HOME`` (the engine caches: TensorRT plans, kernels); *warm*: the same cache again.
  The OS page cache is not dropped (no root): a cold start here has the files in memory already.
- **respawn** (:mod:`vrt_ros.bench.restart.recovery_respawn`): the probe with ``--fault-after N`` (each process processes N
  frames, then its pipeline raises a poisoned-context CUDA error) restarted by ``--respawn``: ``launch`` (default)
  ``colcon build``s this checkout into a temporary workspace whose installed ``detector_node`` is the probe and runs
  the real ``ros2 launch vrt_ros detector.launch.py respawn:=true respawn_delay:=D`` (needs the launch stack in the
  venv: ``make test`` installs it from ../shared/ros2_launch); ``supervisor`` restarts the same command line from a
  small supervisor in this process, as launch's ``respawn: true`` + ``respawn_delay`` does (no colcon, no launch:
  for a machine whose ROS is a bundle of rclpy and messages). Per fault: the ERROR on ``/diagnostics`` (fault →
  received here), the exit (fault → the respawner sees the exit), the delay (→ the process started again), the new
  process's start (interpreter, imports, node, pipeline) and first frame (→ the first detection received).
  ``--no-launch`` leaves the respawn run out.
- **lifecycle** (:mod:`vrt_ros.bench.restart.recovery_lifecycle`): ``detector_node --lifecycle``'s ``configure`` through its
  ``change_state`` service, request → response, cold, warm and again after cleanup, ``--lifecycle-repeats`` times
  (0 leaves it out), split into dispatch, backend, engine, warmup and outputs. ``--lifecycle-only``: only this part
  (and the imports), written as ``recovery_lifecycle.*`` unless ``--name`` says otherwise.

Every process gets ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID=--domain-id``. Times are
wall-clock (``time.time()`` in all processes on one machine); the marks come from the probe's ``RECOVERY`` lines,
launch's ``process started`` / ``process has died`` lines (the time this process read them) or the supervisor's
start and ``waitpid``, and the messages received here. Frames come every 1/``--rate`` s, so "first frame" includes
up to one frame period. Writes ``<name>.json`` and ``<name>.md`` into ``--out`` and prints the tables.
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
from vrt_ros.bench.restart.recovery_lifecycle import lifecycle_markdown, lifecycle_runs
from vrt_ros.bench.restart.recovery_procs import Camera, Output, interrupt, params_file, parts
from vrt_ros.bench.restart.recovery_respawn import RESPAWNERS, respawn_markdown, respawn_run, standby_run, supervised_run
from vrt_ros.bench.restart.recovery_respawn import RESPAWN_PARTS  # noqa: F401 - re-exported (test/test_launch_real.py)

REPO = Path(__file__).resolve().parents[3]
_IMPORT = ("import sys, time; t = time.perf_counter(); import vrt_ros.ros.main; "
           "print(time.perf_counter() - t, len(sys.modules))")
#: The start's components, in order: (key, from mark, to mark).
START_PARTS = (("interpreter", "popen", "start"), ("imports", "start", "imported"), ("node", "imported", "pipeline_begin"),
               ("pipeline", "pipeline_begin", "pipeline_end"), ("matched", "pipeline_end", "matched"),
               ("frame_wait", "matched", "frame_begin"), ("inference", "frame_begin", "frame_end"), ("answer", "frame_end", "first_detection"))


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


def start_once(env: dict[str, str], params: Path, camera: Camera, timeout_s: float) -> dict:
    """One node process from start to its first detection (then Ctrl-C); the marks and the breakdown."""
    camera.reset()
    popen = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "vrt_ros.bench.restart.recovery_probe", "--ros-args", "--params-file",
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


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _cell(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def to_markdown(result: dict) -> str:
    """The result as markdown: imports, the start table, the respawn table and the lifecycle configure table
    (each part that ran; s)."""
    imp = result["imports"]["this checkout"]
    camera = f", camera {result['rate_hz']} Hz 640x480 bgr8" if "start" in result else ""
    lines = [
        "# Recovery bench (issue 27)", "",
        f"Command: `{result['command']}`  ", f"Machine: {result['machine']}; backend `{result['backend']}`, model "
        f"`{result['model']}`{camera}; {result['versions']}", "",
        "## Imports", "",
        f"`import vrt_ros.ros.main`: median {imp['median_s']:.3f} s over {len(imp['runs_s'])} fresh interpreters "
        f"(min {min(imp['runs_s']):.3f}, max {max(imp['runs_s']):.3f}).", "",
    ]
    if "start" in result:
        lines += ["## Process start → first detection (s, median of the runs)", "",
                  "| start | " + " | ".join(k for k, _, _ in START_PARTS) + " | total | runs |",
                  "|---|" + "---|" * (len(START_PARTS) + 2)]
        for label, runs in result["start"].items():
            med = {k: _median(r["seconds"][k] for r in runs) for k in [*(p[0] for p in START_PARTS), "total"]}
            lines.append(f"| {label} | " + " | ".join(_cell(med[k]) for k in med) + " | "
                         + ", ".join(_cell(r["seconds"]["total"]) for r in runs) + " |")
        cache = ("ONNX Runtime keeps no cache there, so cold and warm differ by the noise" if result["backend"] == "cpu"
                 else "no TensorRT plan, kernel or engine cache")
        lines += ["", f"cold: an empty XDG_CACHE_HOME ({cache}; the OS page cache is not dropped).", ""]
        respawn = result.get("respawn")
        if respawn is None:
            lines += ["## Fault → detections again", "", result.get("respawn_skipped", "not run"), ""]
        else:
            lines += respawn_markdown(respawn, _cell)
    if "lifecycle" in result:
        lines += lifecycle_markdown(result["lifecycle"], _cell)
    elif "lifecycle_skipped" in result:
        lines += ["## Lifecycle configure", "", result["lifecycle_skipped"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(Path(os.environ.get("VRT_SHARED_DIR", REPO.parent / "shared"))
                                          / "models" / "yolox_nano.onnx"))
    p.add_argument("--backend", default="cpu", help="the node's backend parameter: cpu, cuda or auto")
    p.add_argument("--image", default=None, help="the camera's photo (default: a shared photo, else a test pattern)")
    p.add_argument("--rate", type=float, default=10.0, help="camera frames per second")
    p.add_argument("--repeats", type=int, default=3, help="cold + warm start pairs")
    p.add_argument("--faults", type=int, default=3)
    p.add_argument("--fault-after", type=int, default=10, help="frames each process answers before its fault")
    p.add_argument("--fault-kind", choices=("raised", "illegal_address"), default="raised",
                   help="raised: the pipeline raises a poisoned-context CUDA error's text; illegal_address (cuda "
                        "backend): a real illegal memory access on the pipeline's stream")
    p.add_argument("--respawn", choices=RESPAWNERS, default="launch",
                   help="what restarts the node after a fault: launch (ros2 launch ... respawn:=true, over a colcon "
                        "workspace), supervisor (the bench restarts the same command line itself) or standby (the "
                        "node's own --warm-standby)")
    p.add_argument("--respawn-delay", type=float, default=0.5, help="seconds from an exit to the restart")
    p.add_argument("--warm-standby", action="store_true",
                   help="--respawn launch: with warm_standby:=true (the node process's standby takes over)")
    p.add_argument("--lifecycle-repeats", type=int, default=3,
                   help="cold + warm detector_node --lifecycle processes whose configure is timed (0: none)")
    p.add_argument("--lifecycle-only", action="store_true",
                   help="only the imports and the lifecycle configure: writes recovery_lifecycle.json/.md")
    p.add_argument("--configure-after", type=float, default=0.0, metavar="S",
                   help="lifecycle: send each process's first configure S s after its service appeared (default 0: at "
                        "once, as autostart does; a later configure finds the background imports done)")
    p.add_argument("--import-runs", type=int, default=9)
    p.add_argument("--imports-only", action="store_true",
                   help="only the import time: writes import_time.json/.md instead of recovery.*")
    p.add_argument("--compare-tree", default=None, metavar="DIR",
                   help="with --imports-only: also time the vrt_ros in DIR (e.g. `git archive main vrt_ros`)")
    p.add_argument("--compare-label", default=None, help="the --compare-tree row's name (default: DIR)")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for one start, one lifecycle transition, or the respawn run")
    p.add_argument("--domain-id", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "83")))
    p.add_argument("--no-launch", action="store_true", help="leave out the respawn run")
    p.add_argument("--name", default=None,
                   help="the files' stem (default recovery; recovery_lifecycle with --lifecycle-only)")
    p.add_argument("--out", default=str(REPO / "results" / "bench"))
    args = p.parse_args(argv)
    if args.warm_standby and args.respawn != "launch":
        p.error("--warm-standby goes with --respawn launch (--respawn standby runs the node's standby without launch)")
    os.environ.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(args.domain_id))
    env = dict(os.environ, PYTHONUNBUFFERED="1", VRT_RECOVERY_FAULT=args.fault_kind)
    model = Path(args.model)
    if not model.is_file():
        print(f"recovery: model {model} not found (--model)", file=sys.stderr)
        return 2
    dists = ("onnxruntime", "numpy", "opencv-python-headless") + (() if args.backend == "cpu" else
                                                                 ("torch", "cuda-python", "cuda-core", "tensorrt"))
    result = {"command": "python -m vrt_ros.bench.restart.recovery " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores", "backend": args.backend,
              "model": model.name, "rate_hz": args.rate, "domain_id": args.domain_id, "versions": library_versions(dists)}
    say("imports ...")
    trees = {"this checkout": None}
    if args.compare_tree:
        trees[args.compare_label or args.compare_tree] = Path(args.compare_tree)
    result["imports"] = import_times(args.import_runs, env, trees)
    if args.imports_only:
        write_result(args.out, "import_time", result, imports_markdown(result))
        return 0
    with tempfile.TemporaryDirectory(prefix="vrt_recovery_") as tmp:
        params = params_file(Path(tmp), model, args.backend)
        if not args.lifecycle_only:
            with Camera(args.image, args.rate) as camera:
                result["start"] = start_runs(args.repeats, env, params, camera, args.timeout)
                if args.no_launch:
                    result["respawn_skipped"] = "not run (--no-launch)"
                else:
                    run = {"supervisor": supervised_run, "standby": standby_run}.get(args.respawn, respawn_run)
                    extra = {"warm_standby": True} if args.warm_standby else {}
                    try:
                        result["respawn"] = run(env, params, camera, args.faults, args.fault_after,
                                                args.respawn_delay, args.timeout, **extra)
                        result["respawn"]["fault_kind"] = args.fault_kind
                    except (RuntimeError, FileNotFoundError, subprocess.CalledProcessError) as exc:
                        result["respawn_skipped"] = f"not run ({args.respawn}): {exc}"
                        say(result["respawn_skipped"])
        if args.lifecycle_repeats > 0:
            try:
                result["lifecycle"] = lifecycle_runs(args.lifecycle_repeats, env, params,
                                                     f"/recovery_lifecycle_{os.getpid()}", args.timeout,
                                                     args.configure_after)
            except (RuntimeError, ImportError) as exc:
                result["lifecycle_skipped"] = f"not run: {exc}"
                say(result["lifecycle_skipped"])
        else:
            result["lifecycle_skipped"] = "not run (--lifecycle-repeats 0)"
    name = args.name or ("recovery_lifecycle" if args.lifecycle_only else "recovery")
    write_result(args.out, name, result, to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
