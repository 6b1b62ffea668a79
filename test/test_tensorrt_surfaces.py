"""Every TensorRT name the wrapper uses exists, or is guarded, in each TensorRT a robot may have (issue 28, item 2).

The names come from the wrapper's source (vrt_ros/engines/tensorrt.py and trt_*.py, read with ast by
test/trt_surface.py, typed through the TensorRT 10.13 stubs), never from a hand list. Evidence per TensorRT:

- TensorRT for RTX 1.7 (``tensorrt_rtx_bindings``, installed by scripts/test_extras.sh): imported, ``hasattr``;
- TensorRT 11.4 lean runtime (``tensorrt_lean_bindings``, scripts/test_extras.sh puts it off sys.path): imported for
  real in a subprocess, ``hasattr``; the wrapper only deserialises with it (no ``Builder``: the build path is guarded);
- the TensorRT 10.13 type stubs (``tensorrt-stubs``): declared there;
- TensorRT 10.3 (JetPack 6), 10.16 (the newest 10.x) and 11.4: **name present in the binary**, i.e. the name is a
  string in the compiled bindings library of the ``tensorrt-cu1x-bindings`` wheel (their TensorRT libraries are on
  no registry here, so they cannot be imported). That says the name is registered somewhere in the module, not on
  which class; "(tail)" marks a name found only as the end of a longer string (the linker merges "Builder" into
  "IBuilder"; weak evidence: "INT8" is also the end of "UINT8").

A name absent from a TensorRT is acceptable only when the wrapper reads it through hasattr/getattr ("guarded") or
when it sits behind a guard that is absent there too ("not reached"); "MISSING" fails the test. The table is written
to docs/tensorrt_surfaces.md (checked to be current) and printed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import trt_surface as ts

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ENGINES = REPO / "vrt_ros" / "engines"
VENV = Path(sys.prefix)
STAMPS = VENV / ".vrt-stamps"
EXTRAS = VENV / ".vrt-extras"
TABLE = REPO / "docs" / "tensorrt_surfaces.md"


def _why(extra: str, what: str) -> str:
    failed = STAMPS / f"{extra}.failed"
    detail = failed.read_text().strip() if failed.is_file() else "run `make test` (scripts/test_extras.sh) to get it"
    return f"{what} not available: {detail}"


def _wheel(prefix: str) -> Path | None:
    found = sorted((EXTRAS / "tensorrt-wheels").glob(f"{prefix}*.whl"))
    return found[0] if found else None


# ==============================================================================================================
# Evidence
# ==============================================================================================================
class Module:
    """``hasattr`` evidence from a module's attribute listing: {owner: [names] or None (no such owner)}."""

    def __init__(self, label: str, listing: dict, flavour: str) -> None:
        self.label, self.listing, self.flavour = label, listing, flavour

    def has(self, owner: str, name: str) -> bool:
        if owner == "flavour":
            return name == self.flavour
        names = self.listing.get(owner)
        return names is not None and name in names


def _listing(module, owners) -> dict:
    out = {"module": dir(module)}
    for owner in owners:
        obj = module
        for part in owner.split("."):
            obj = getattr(obj, part, None)
        out[owner] = None if obj is None else dir(obj)
    return out


LISTING_SCRIPT = """
import json, sys
import tensorrt_lean_libs  # loads the libraries
import tensorrt_lean_bindings as trt
owners = json.loads(sys.argv[1])
out = {"module": dir(trt), "__version__": trt.__version__}
for owner in owners:
    obj = trt
    for part in owner.split("."):
        obj = getattr(obj, part, None)
    out[owner] = None if obj is None else dir(obj)
print(json.dumps(out))
"""


class Binary:
    """"Name present in the binary" evidence from a bindings wheel's compiled module."""

    def __init__(self, label: str, wheel: Path, tmp: Path) -> None:
        self.label = label
        with zipfile.ZipFile(wheel) as z:
            so = next(n for n in z.namelist() if n.endswith(".so"))
            z.extract(so, tmp)
        self.whole, self.data = ts.binary_names(tmp / so)

    def evidence(self, name: str) -> str:
        return ts.binary_evidence(name, self.whole, self.data)

    def has(self, owner: str, name: str) -> bool:
        if owner == "flavour":
            return name == "tensorrt"
        return self.evidence(name) != ts.ABSENT


class StubEvidence:
    label = "10.13 stubs"

    def __init__(self, stubs: ts.Stubs) -> None:
        self.stubs = stubs

    def has(self, owner: str, name: str):
        if owner == "flavour":
            return name == "tensorrt"
        return bool(self.stubs.has(owner, name))


@pytest.fixture(scope="module")
def stubs(tmp_path_factory) -> ts.Stubs:
    wheel = _wheel("tensorrt_stubs-")
    if wheel is None:
        pytest.skip(_why("tensorrt_wheels", "the TensorRT 10.13 type stubs (tensorrt-stubs)"))
    tmp = tmp_path_factory.mktemp("stubs")
    with zipfile.ZipFile(wheel) as z:
        z.extract("tensorrt_bindings/tensorrt.pyi", tmp)
    return ts.Stubs(tmp / "tensorrt_bindings" / "tensorrt.pyi")


@pytest.fixture(scope="module")
def names(stubs) -> list[ts.Name]:
    return ts.collect(ENGINES, stubs)


@pytest.fixture(scope="module")
def sources(stubs, names, tmp_path_factory) -> list:
    owners = sorted({n.owner for n in names if n.owner != ts.MODULE})
    out, missing = [], []
    try:
        import tensorrt_rtx_bindings as rtx

        out.append(Module(f"RTX {rtx.__version__}", _listing(rtx, owners), "tensorrt_rtx"))
    except Exception as exc:  # noqa: BLE001 - ImportError, or its libraries failing to load
        missing.append(_why("tensorrt_rtx", f"TensorRT for RTX ({exc})"))
    lean = EXTRAS / "tensorrt-lean"
    if (lean / "tensorrt_lean_bindings").is_dir():
        proc = subprocess.run([sys.executable, "-c", LISTING_SCRIPT, json.dumps(owners)], capture_output=True,
                              text=True, timeout=120, cwd="/", env={**os.environ, "PYTHONPATH": str(lean)})
        assert proc.returncode == 0, f"the lean runtime does not import: {proc.stderr[-2000:]}"
        listing = json.loads(proc.stdout.strip().splitlines()[-1])
        out.append(Module(f"lean {listing['__version__']}", listing, "tensorrt"))
    else:
        missing.append(_why("tensorrt_lean", "the TensorRT 11 lean runtime"))
    out.append(StubEvidence(stubs))
    tmp = tmp_path_factory.mktemp("bindings")
    for prefix, label in (("tensorrt_cu12_bindings-10.3.", "10.3 binary"), ("tensorrt_cu12_bindings-10.16.", "10.16 binary"),
                          ("tensorrt_cu13_bindings-11.4.", "11.4 binary")):
        wheel = _wheel(prefix)
        if wheel is None:
            missing.append(_why("tensorrt_wheels", f"the {label} ({prefix})"))
        else:
            out.append(Binary(label, wheel, tmp / label.replace(" ", "_")))
    if missing:
        pytest.skip("; ".join(missing))
    return out


def _cell(name: ts.Name, source) -> str:
    v = ts.verdict(name, source.has)
    if isinstance(source, Binary) and v == "ok" and source.evidence(name.name) == ts.TAIL:
        return "ok (tail)"
    return v


def table(names, sources) -> str:
    head = "| TensorRT name the wrapper uses | " + " | ".join(s.label for s in sources) + " |"
    rows = [head, "| --- |" + " --- |" * len(sources)]
    for n in names:
        rows.append(f"| `{n.qualname}` | " + " | ".join(_cell(n, s) for s in sources) + " |")
    return "\n".join(rows)


# ==============================================================================================================
# The tests
# ==============================================================================================================
def test_every_name_exists_or_is_guarded_in_every_tensorrt(names, sources):
    text = table(names, sources)
    print("\n" + text)
    bad = [f"{n.qualname} ({n.where}) in {s.label}" for n in names for s in sources if _cell(n, s) == "MISSING"]
    assert not bad, "unguarded TensorRT names missing:\n" + "\n".join(bad) + "\n" + text
    doc = TABLE.read_text() if TABLE.is_file() else ""
    if os.environ.get("VRT_WRITE_SURFACES") and text not in doc:  # VRT_WRITE_SURFACES=1 pytest ... rewrites it
        start, end = doc.find("| TensorRT name"), doc.find("\n\n", doc.find("| TensorRT name"))
        TABLE.write_text(doc[:start] + text + (doc[end:] if end > 0 else "\n"))
        doc = TABLE.read_text()
    assert text in doc, (f"{TABLE.relative_to(REPO)} is out of date (VRT_WRITE_SURFACES=1 rewrites it): replace its "
                         f"table with\n{text}")


def test_the_collector_finds_the_calls_of_every_layer(names):
    """The ast collection sees the build path, the runtime path, the logger and the enum members compared by name."""
    got = {n.qualname for n in names}
    assert {"Builder.build_serialized_network", "IBuilderConfig.set_memory_pool_limit", "OnnxParser.parse_from_file",
            "Runtime.deserialize_cuda_engine", "ICudaEngine.get_tensor_profile_shape",
            "IExecutionContext.execute_async_v3", "ILogger.log", "TensorIOMode.INPUT", "DataType.HALF",
            "ILogger.Severity.WARNING", "BuilderFlag.FP16", "IBuilderConfig.int8_calibrator"} <= got, sorted(got)
    assert len(names) >= 60


def test_the_removed_apis_are_seen_missing_where_they_are_removed(names, sources):
    """The evidence discriminates: what TensorRT 11 and RTX removed is absent there, and guarded in the wrapper."""
    by = {s.label.split()[0] if not isinstance(s, Binary) else s.label: s for s in sources}
    name = {n.qualname: n for n in names}
    rtx, lean, b11, b103 = by["RTX"], by["lean"], by["11.4 binary"], by["10.3 binary"]
    assert not rtx.has("BuilderFlag", "FP16") and not lean.has("BuilderFlag", "FP16")  # strongly typed only
    assert not lean.has("module", "Builder")  # the lean runtime cannot build
    for q in ("IInt8EntropyCalibrator2", "IBuilderConfig.int8_calibrator"):
        assert _cell(name[q], b11) in ("guarded", "not reached") and _cell(name[q], b103) == "ok", q
        assert _cell(name[q], rtx) in ("guarded", "not reached"), q
    assert _cell(name["BuilderFlag.FP16"], lean) in ("guarded", "not reached")
    assert _cell(name["Builder.build_serialized_network"], lean) == "not reached"


def test_a_removed_guard_is_reported_missing(stubs, sources, tmp_path):
    """Negative control: with the build path's `hasattr(trt, "Builder")` guard or the INT8 guard taken out of a copy
    of the wrapper, the check reports the names the lean runtime / TensorRT 11.4 lack as MISSING."""
    for f in ENGINES.glob("*.py"):
        (tmp_path / f.name).write_text(f.read_text())
    build = tmp_path / "trt_build.py"
    text = build.read_text()
    assert 'if not hasattr(trt, "Builder"):' in text
    build.write_text(text.replace('if not hasattr(trt, "Builder"):', "if False:"))
    precision = tmp_path / "trt_precision.py"
    text = precision.read_text()
    guard = 'if base is None or not hasattr(trt.BuilderFlag, "INT8"):'
    assert guard in text
    precision.write_text(text.replace(guard, "if False:"))
    names = {n.qualname: n for n in ts.collect(tmp_path, stubs)}
    by = {s.label: s for s in sources}
    lean = next(s for s in sources if s.label.startswith("lean"))
    assert _cell(names["Builder.build_serialized_network"], lean) == "MISSING"
    assert _cell(names["IBuilderConfig.int8_calibrator"], by["11.4 binary"]) == "MISSING"
