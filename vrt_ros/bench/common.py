"""What the benchmark commands share: size arguments, library versions, option defaults for ``--quick``."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any, Mapping


def parse_size(text: str, even_width: bool = False) -> tuple[int, int]:
    """``"WIDTHxHEIGHT"`` -> (width, height) in pixels, both >= 2 (and an even width when 4:2:2 frames are made).

    Raises:
        argparse.ArgumentTypeError: not of that form, or too small / odd.
    """
    w, _, h = text.lower().partition("x")
    try:
        size = int(w), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"size {text!r} is not WIDTHxHEIGHT") from None
    if min(size) < 2 or (even_width and size[0] % 2):
        need = "width must be even (4:2:2) and both >= 2" if even_width else "both sides must be >= 2"
        raise argparse.ArgumentTypeError(f"size {text!r}: {need}")
    return size


def library_versions(dists: tuple[str, ...]) -> dict[str, str]:
    """Versions of vrt_ros, Python and each installed distribution of ``dists`` (absent ones are left out)."""
    from importlib import metadata

    import vrt_ros

    out = {"vrt_ros": vrt_ros.__version__, "python": platform.python_version()}
    for dist in dists:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def picker(args: argparse.Namespace, quick: Mapping[str, Any]):
    """``pick(name, default)``: the option's value when given, else the ``--quick`` value when quick, else default."""

    def pick(name: str, default):
        value = getattr(args, name)
        if value is not None:
            return value
        return quick.get(name, default) if args.quick else default

    return pick


def say(msg: str) -> None:
    """Progress to stderr (stdout carries the tables)."""
    print(msg, file=sys.stderr, flush=True)


def write_result(out: str | Path, stem: str, result: dict, markdown: str) -> None:
    """Write ``<stem>.json`` and ``<stem>.md`` into ``out`` (created) and print the markdown."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (folder / f"{stem}.md").write_text(markdown)
    print(markdown)
