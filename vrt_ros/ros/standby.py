"""``detector_node --warm-standby``: a standby process takes over within a second of a fatal fault (issues 27, 33).

After a fatal GPU fault the node's process must end (its CUDA context is unusable) and a new one must start. Most of
a new process's start is not the node: on the H200 ``import torch`` alone took 4.1 s of the 7–10 s from fault to
detections under ``respawn``. With ``--warm-standby`` the process started (by ``ros2 launch``, or by hand) is a
small supervisor that runs the node in a child process, the *active* one, and keeps a second child ready, the
*standby*: an interpreter that has imported ``vrt_ros.ros.main`` and every package the active child's node(s) had
imported (the engine's library: torch, TensorRT, ONNX Runtime), has called ``rclpy.init`` and made a hidden node with no
topics (:func:`participant_node`: rmw creates the DDS participant with a context's first node) and waits, before any
detector node and any CUDA call: it has no topics and no GPU memory, and its participant is known to the cameras'
processes by the time it takes over (on the 2-core CPU machine the new node's first frame then came 0.03–0.10 s
after its subscription, against 0.4–2.4 s of discovery for a new process). When the active child ends with status 3
(:data:`~vrt_ros.faults.EXIT_FATAL`) or dies of a signal the supervisor did not send (a crash), the supervisor waits
the restart delay and tells the standby to go on: ``rclpy.init``, the nodes, the engine (from the disk cache), the
first frame. A new standby is started at once and warms up while the new active child runs.

The restart delay backs off (:mod:`vrt_ros.ros.supervisor_states`): ``--restart-delay`` after a healthy run (the
node ran ``--restart-healthy`` s after its node(s) were up), doubled for each further restart in a row without one,
at most ``--restart-delay-max``; each restart's line says ``backing off N s`` and why. A standby that dies before
it is needed is reaped and replaced (spaced out the same way when it keeps dying); one that does not answer ``go``
within ``--takeover-timeout`` (30 s more while it is still importing) is killed and a new process starts cold.
The supervisor has no ROS node: the back-off is in its log (stderr, which launch writes to the process's log), not
on ``/diagnostics``.

What the supervisor does not restart: status 0 (an orderly shutdown), 2 (a start-up failure: configuration, model
or backend; a restart would fail the same way) and any other status; it then ends with that status (a signal's
death as ``128 + signal``), and ``respawn`` (when set) restarts the whole process as before. Ctrl-C or SIGTERM to the
supervisor, at any moment, goes to the active child (also one started or told ``go`` while the signal came), whose
exit status the supervisor then returns (during the restart delay: the status of the child that ended; before any
child: 0); no child is started or told ``go`` after it; the standby is told to end (SIGKILL after 2 s, the active
child after 10 s). Children run in their own session (a terminal's Ctrl-C reaches the supervisor only, which
forwards it) and are killed when the supervisor dies: ``PR_SET_PDEATHSIG`` with SIGKILL is set between fork and exec,
before the child runs any instruction of its own. Not with ``--lifecycle``: a managed node's restart
belongs to its lifecycle manager, which must configure and activate the new process.

The cost: the standby's memory (the interpreter and its imports: about 1 GiB of host memory with torch, none on the
GPU) and its imports' CPU time once per restart, while the active child runs.

Protocol, one Unix socket pair per child, text lines: child → supervisor ``imports a,b,c`` (the top-level packages
and the ``vrt_ros`` modules it has imported: after its nodes are up and again at a fatal exit); supervisor →
standby ``import a,b,c`` (import these, errors ignored; it answers ``ready``) and ``go N`` (take over: restart N; it
answers ``going N`` at once). The child learns its
socket and role from :data:`FD_ENV` and :data:`ROLE_ENV`.
"""

from __future__ import annotations

import importlib
import os
import socket
import sys
from typing import Callable, Sequence

from vrt_ros.ros import stop
from vrt_ros.ros.supervisor import FD_ENV, ROLE_ENV, Supervisor, exit_status  # noqa: F401 - the supervisor's side



def imported_names(modules: Sequence[str] | None = None) -> list[str]:
    """What a standby should import to match this process: the top-level package of every imported module and every
    ``vrt_ros`` module, in import order, without ``__main__`` and private or test-only top-level names.

    Args:
        modules: module names in import order (default: ``sys.modules``).
    Returns:
        the names, each once.
    """
    out: dict[str, None] = {}
    for name in (list(sys.modules) if modules is None else modules):
        root = name.split(".", 1)[0]
        if root.startswith("_") or root in ("pytest", "conftest"):  # "_": __main__, _io, _pytest, ...
            continue
        out.setdefault(name if root == "vrt_ros" else root, None)
    return list(out)


class ChildLink:
    """A supervised child's end of its socket (:func:`child_link` makes it)."""

    def __init__(self, sock: socket.socket, role: str) -> None:
        self._sock, self.role = sock, role
        self._reader = sock.makefile("r", encoding="utf-8")
        self.restart = 0  # the N of the ``go N`` this process took over with
        self.placeholder = None  # a standby's participant_node(), held for the life of the process

    @property
    def standby(self) -> bool:
        return self.role == "standby"

    def report(self) -> None:
        """Send this process's :func:`imported_names` to the supervisor (errors ignored: it may be gone)."""
        self._send("imports " + ",".join(imported_names()))

    def wait_for_go(self, importer: Callable[[str], object] = importlib.import_module) -> bool:
        """The standby's wait: import what the supervisor sends until it says ``go``.

        A stop request (:mod:`vrt_ros.ros.stop`: SIGINT or SIGTERM, whose handler does not raise in a node process)
        ends the wait at once: its waker shuts the socket's receiving side down, so the blocked read returns (end of
        file) instead of waiting for the stop's 1.5 s deadline.

        Returns:
            True on ``go`` (this process is the active one now; :attr:`restart` is set); False when the supervisor
            closed the socket or went away, or on a stop (Ctrl-C, SIGTERM): the process should end quietly (status 0).
        """
        stop.on_request(self._end_wait)  # at once when the request came before the wait
        try:
            for line in self._reader:
                if stop.requested():
                    return False
                word, _, rest = line.strip().partition(" ")
                if word == "go":
                    self.role, self.restart = "active", int(rest or 0)
                    self._send(f"going {self.restart}")  # the supervisor's take-over deadline ends here
                    return True
                if word == "import":
                    for name in filter(None, rest.split(",")):
                        try:
                            importer(name)
                        except Exception:  # noqa: BLE001 - one that fails here fails again in the node's own path, with its message
                            pass
                    self._send("ready")  # imports done: a take-over from here on is answered at once
        except (KeyboardInterrupt, OSError):
            return False
        finally:
            stop.forget(self._end_wait)  # the active child's socket stays open for its reports
        return False

    def _end_wait(self) -> None:
        """The stop's waker: end :meth:`wait_for_go`'s read (from the signal handler or the stop's watcher thread)."""
        try:
            self._sock.shutdown(socket.SHUT_RD)
        except OSError:  # already closed
            pass

    def _send(self, line: str) -> None:
        try:
            self._sock.sendall((line + "\n").encode())
        except OSError:  # the supervisor is gone: the next read ends the wait
            pass


#: The standby's hidden node (a leading underscore: ``ros2 node list`` leaves it out): rmw creates a context's DDS
#: participant with its first node, so the standby makes one before it waits, and keeps it (the participant goes
#: with a context's last node).
PLACEHOLDER_NODE = "_vrt_standby"


def participant_node():
    """The standby's :data:`PLACEHOLDER_NODE` in the default context (after ``rclpy.init``): no /rosout, no parameter
    services, no topics; only its DDS participant, which the cameras' processes discover while the standby waits."""
    from rclpy.node import Node

    return Node(f"{PLACEHOLDER_NODE}_{os.getpid()}", enable_rosout=False, start_parameter_services=False,
                use_global_arguments=False)  # the command line's remaps and parameters are the detector nodes'



def child_link() -> ChildLink | None:
    """This process's link to its supervisor when it is a ``--warm-standby`` child, else None."""
    fd, role = os.environ.get(FD_ENV), os.environ.get(ROLE_ENV)
    if not fd or role not in ("active", "standby"):
        return None
    for key in (FD_ENV, ROLE_ENV):  # not inherited by what this process starts
        os.environ.pop(key, None)
    os.set_inheritable(int(fd), False)
    return ChildLink(socket.socket(fileno=int(fd)), role)
