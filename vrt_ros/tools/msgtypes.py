"""Message types by name: the rclpy class of ``pkg/msg/Name``, and a rosbags typestore that knows it.

The replay and record tools move raw CDR bytes between rosbag2 files and the ROS graph, so they need only two
things per topic: the rclpy message class (to create the publisher/subscription) and, when writing a bag, the
message definition (``.msg`` text) that rosbag2 stores beside the data. rosbags ships the definitions of the
standard ROS 2 packages; others (vision_msgs, user packages) are read from the installed ``share/<pkg>/msg/*.msg``
files, found under ``$AMENT_PREFIX_PATH`` and the Python prefix (where the PyPI ROS wheels and our vision_msgs
build install them).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Iterable

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from vrt_ros.errors import ConfigError


def normalize_type(msgtype: str) -> str:
    """``pkg/Name`` or ``pkg/msg/Name`` → ``pkg/msg/Name``.

    Raises:
        ConfigError: the string is not of either form.
    """
    parts = msgtype.strip().split("/")
    if len(parts) == 2 and all(parts):
        return f"{parts[0]}/msg/{parts[1]}"
    if len(parts) == 3 and parts[1] == "msg" and parts[0] and parts[2]:
        return msgtype.strip()
    raise ConfigError(f"message type {msgtype!r} is not of the form 'pkg/msg/Name' (e.g. 'sensor_msgs/msg/Image')")


def msg_class(msgtype: str) -> type:
    """The rclpy message class of ``msgtype`` (``pkg/msg/Name``).

    Raises:
        ConfigError: the package is not importable or has no such message; the message says which.
    """
    pkg, _, name = normalize_type(msgtype).split("/")
    try:
        module = importlib.import_module(f"{pkg}.msg")
    except ImportError as exc:
        raise ConfigError(
            f"message package {pkg!r} (for {msgtype}) is not importable in this Python: install or source it"
        ) from exc
    try:
        return getattr(module, name)
    except AttributeError as exc:
        raise ConfigError(f"message package {pkg!r} has no message {name!r} (for {msgtype})") from exc


def _share_roots() -> list[Path]:
    roots = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    roots.append(Path(sys.prefix))
    return roots


def find_msg_file(msgtype: str) -> Path:
    """Locate the installed ``.msg`` definition of ``msgtype``.

    Raises:
        ConfigError: no ``share/<pkg>/msg/<Name>.msg`` under ``$AMENT_PREFIX_PATH`` or the Python prefix.
    """
    pkg, _, name = normalize_type(msgtype).split("/")
    tried = []
    for root in _share_roots():
        candidate = root / "share" / pkg / "msg" / f"{name}.msg"
        if candidate.is_file():
            return candidate
        tried.append(str(candidate))
    raise ConfigError(f"no message definition for {msgtype}; looked in: {', '.join(tried)}")


def _referenced_types(fields) -> Iterable[str]:
    """Names of message types referenced by rosbags field definitions (nested, sequences and arrays)."""
    for _name, desc in fields:
        node = desc
        while True:
            kind, arg = node
            if kind.name == "NAME":
                yield arg
                break
            if kind.name in ("SEQUENCE", "ARRAY"):
                node = arg[0]
                continue
            break


def typestore_for(msgtypes: Iterable[str]) -> Typestore:
    """A rosbags typestore (ROS 2 Jazzy definitions) that also knows ``msgtypes`` and everything they reference.

    Args:
        msgtypes: ``pkg/msg/Name`` strings.

    Raises:
        ConfigError: a definition cannot be found (see :func:`find_msg_file`).
    """
    store = get_typestore(Stores.ROS2_JAZZY)
    pending = [normalize_type(t) for t in msgtypes]
    while pending:
        msgtype = pending.pop()
        if msgtype in store.fielddefs:
            continue
        types = get_types_from_msg(find_msg_file(msgtype).read_text(), msgtype)
        store.register(types)
        for _consts, fields in types.values():
            pending.extend(t for t in _referenced_types(fields) if t not in store.fielddefs)
    return store
