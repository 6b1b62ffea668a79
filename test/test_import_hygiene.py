"""The module graph's layering (DESIGN.md, "Layers"; docs/ARCHITECTURE.md).

- `import vrt_ros` and every core module import no ROS, CUDA, TensorRT, torch or ONNX Runtime;
- imports point downward only: ros + tools + bench -> inference -> gpu + engines -> core, counting the
  lazy imports inside functions too (a lazy import upward is still an arrow that runs back up);
- the graph has no circle;
- each module imports on its own (a fresh interpreter state for vrt_ros, so an import-order dependency shows).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("rclpy", "cuda", "tensorrt", "torch", "onnxruntime", "tensorrt_lean_bindings", "tensorrt_rtx_bindings", "cupy")
PACKAGE = Path(__file__).resolve().parents[1] / "vrt_ros"

#: Existing packages whose contents the move changes: their new docstring (only a docstring-only __init__ is rewritten).
FACES = {
    "ros": "The ROS edge of vrt_ros, the node's side of it: the node (:mod:`~vrt_ros.ros.node`, its worker, cameras, "
           "parameters, QoS, message conversion, diagnostics, depth input), ``main()`` (init, executor, shutdown), "
           "the managed node, the warm-standby supervisor and the Fast DDS profile (``dds_profile``). The command-line "
           "tools are in :mod:`vrt_ros.tools`.",
    "tools": "Command-line tools apart from the node: ``replay`` and ``record`` (rosbag2 through rosbags), the demo "
             "(``demo``, ``make demo``) with its bag, report and embedded assets, ``python -m "
             "vrt_ros.tools.batch_model`` (a batch-N model from a batch-1 ONNX).",
}
#: Layers, top (4) to bottom (1): a module may import its own layer or lower ones.
LAYERS = {
    4: 'ros edge + tools + bench (vrt_ros.ros, vrt_ros.tools, vrt_ros.bench)',
    3: 'inference (vrt_ros.inference: pipeline + backends)',
    2: 'gpu + engines',
    1: 'core',
}
#: The layer of each sub-package that is not core (the first name under vrt_ros).
LAYER_OF = {'ros': 4, 'tools': 4, 'bench': 4, 'inference': 3, 'gpu': 2, 'engines': 2}


def layer(module: str) -> int:
    """The layer of a module, by its dotted name (docs/ARCHITECTURE.md, "Layers")."""
    parts = module.split(".")
    return LAYER_OF.get(parts[1], 1) if len(parts) > 1 else 1


def modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the vrt_ros modules it imports anywhere in its file (top level or inside a function)."""
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in mods else base)
        edges[name] = {m for m in found if m in mods and m != name}
    return edges


def test_every_module_is_in_a_layer_and_the_package_is_read():
    mods = modules()
    assert {"vrt_ros", "vrt_ros.inference.pipeline", "vrt_ros.model.model_setup", "vrt_ros.inference.backends.cpu", "vrt_ros.gpu.runtime",
            "vrt_ros.ros.node"} <= set(mods)
    assert {layer(m) for m in mods} == set(LAYERS)


def test_imports_point_downward_only():
    edges = import_edges(modules())
    upward = [f"{m} ({LAYERS[layer(m)]}) imports {t} ({LAYERS[layer(t)]})"
              for m, targets in sorted(edges.items()) for t in sorted(targets) if layer(t) > layer(m)]
    assert upward == [], "imports running back up:\n" + "\n".join(upward)


def test_module_graph_has_no_circle():
    edges = import_edges(modules())
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path)
        path.pop()
        state[node] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m, [])
    assert circles == [], "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_each_module_imports_in_isolation():
    """Each module imports with no other vrt_ros module loaded before it. A module whose library is not installed
    here (cuda-python, TensorRT or torch on a machine without a GPU; rclpy and the message packages in the Python 3.10
    leg) may fail with ModuleNotFoundError for that library only (not a core module); an import circle or a missing vrt_ros
    name fails."""
    names = sorted(m for m in modules() if not m.endswith(".__main__"))  # __main__ runs its command on import
    code = (
        "import importlib, json, sys\n"
        f"names = {names!r}\n"
        f"core = {sorted(m for m in names if layer(m) == 1)!r}\n"
        "bad = {}\n"
        "for n in names:\n"
        "    for m in [m for m in sys.modules if m == 'vrt_ros' or m.startswith('vrt_ros.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(n)\n"
        "    except ModuleNotFoundError as e:\n"
        "        if n in core or (e.name or 'vrt_ros').split('.')[0] == 'vrt_ros':\n"
        "            bad[n] = repr(e)\n"
        "    except Exception as e:\n"
        "        bad[n] = repr(e)\n"
        "print('RESULT ' + json.dumps(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent)
    bad = json.loads(out.stdout.rsplit("RESULT ", 1)[1])
    assert bad == {}, f"modules failing to import on their own: {bad}"


def test_core_imports_no_heavy_library():
    core = sorted(m for m in modules() if layer(m) == 1)
    # The package faces and the thin entry points above the core import nothing heavy either.
    light = core + ["vrt_ros.inference.pipeline", "vrt_ros.gpu", "vrt_ros.bench", "vrt_ros.inference.backends"]
    assert {"vrt_ros", "vrt_ros.types", "vrt_ros.heads", "vrt_ros.model.model_setup", "vrt_ros.settings.config"} <= set(core)
    code = (
        "import sys\n"
        f"for m in {light!r}: __import__(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core modules imported {out.stdout.strip()}"
