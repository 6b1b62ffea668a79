"""What ``launch/detector.launch.py`` makes of its arguments and of its node processes' exits. Pure Python (the launch
file imports it; tested without the launch stack).

- :func:`parse_node_names`: ``node_names`` as ROS users write lists: ``[a,b]``, ``['a', 'b']``, ``a,b`` or ``a b``.
- :func:`exit_verdict`: what an exited node process means for the launch: a start-up failure (exit status 2) is
  never respawned and ends the launch; any other non-zero status ends it unless the process is respawned.
- :func:`start_up_reason`: the reason ``detector_node`` printed before exiting (its ``detector_node: ...`` lines).
"""

from __future__ import annotations

import re
from typing import Iterable

from vrt_ros.errors import ConfigError

#: Exit statuses of ``detector_node`` (vrt_ros.ros.main): a start-up failure, a fatal fault.
EXIT_STARTUP, EXIT_FATAL = 2, 3
#: A ROS node name (rcl/validate_node_name.h: letters, digits, '_'; not starting with a digit).
_NODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: The prefix of the lines ``detector_node`` prints to stderr when it ends on an error.
_REASON_PREFIX = "detector_node: "


def parse_node_names(text: str) -> list[str]:
    """The node names in ``text``: a YAML-style list (``[a,b]``, ``['a', "b"]``), commas or spaces.

    Raises:
        ConfigError: no name, a name that is not a valid ROS node name, or a name given twice (names the argument).
    """
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1]
    names = [n.strip().strip("'\"") for n in re.split(r"[,\s]+", body) if n.strip().strip("'\"")]
    if not names:
        raise ConfigError(f"node_names:={text!r}: no node name")
    bad = [n for n in names if not _NODE_NAME.match(n)]
    if bad:
        raise ConfigError(f"node_names:={text!r}: {bad[0]!r} is not a valid ROS node name (letters, digits, '_'; "
                          "not starting with a digit); write node_names:='[a, b]', 'a,b' or 'a b'")
    if len(set(names)) != len(names):
        raise ConfigError(f"node_names:={text!r}: a name is given twice")
    return names


def start_up_reason(lines: Iterable[str]) -> str:
    """The reason from the lines a ``detector_node`` process printed: its ``detector_node: ...`` lines (the first
    one that says why, e.g. ``start-up failed: ...``), without the prefix; ``""`` when there is none."""
    reasons = [line.strip()[len(_REASON_PREFIX):] for line in lines if line.strip().startswith(_REASON_PREFIX)]
    return reasons[0] if reasons else ""


def exit_verdict(node: str, returncode: int, respawn: bool, reason: str = "") -> str | None:
    """What a node process's exit means for the launch: None (nothing: a clean exit, or a fault ``respawn``
    restarts), or the one line that ends the launch, naming the node, the exit status and the reason."""
    if returncode == 0 or (respawn and returncode != EXIT_STARTUP):
        return None
    why = f": {reason}" if reason else ""
    if returncode == EXIT_STARTUP:
        what = f"node {node} failed at start-up (exit status {EXIT_STARTUP}{why}); not respawned (it would fail again)"
    elif returncode == EXIT_FATAL:
        what = f"node {node} stopped on a fatal fault (exit status {EXIT_FATAL}{why}); respawn:=true restarts it"
    else:
        what = f"node {node} exited with status {returncode}{why}"
    return f"{what}; ending the launch (ros2 launch exits with status 1)"
