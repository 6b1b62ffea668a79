"""``detector_node --warm-standby``: a standby process takes over within a second of a fatal fault (issue 27).

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
``--restart-delay`` seconds and tells the standby to go on: ``rclpy.init``, the nodes, the engine (from the disk
cache), the first frame. A new standby is started at once and warms up while the new active child runs.

What the supervisor does not restart: status 0 (an orderly shutdown), 2 (a start-up failure: configuration, model
or backend; a restart would fail the same way) and any other status; it then ends with that status (a signal's
death as ``128 + signal``), and ``respawn`` (when set) restarts the whole process as before. Ctrl-C or SIGTERM to the
supervisor goes to the active child, whose exit status the supervisor then returns; the standby is told to end.
Children run in their own session (a terminal's Ctrl-C reaches the supervisor only, which forwards it) and are
killed when the supervisor dies (``PR_SET_PDEATHSIG`` with SIGKILL: the supervisor ends only after its active child
did, unless it was killed itself). Not with ``--lifecycle``: a managed node's restart
belongs to its lifecycle manager, which must configure and activate the new process.

The cost: the standby's memory (the interpreter and its imports: about 1 GiB of host memory with torch, none on the
GPU) and its imports' CPU time once per restart, while the active child runs.

Protocol, one Unix socket pair per child, text lines: child → supervisor ``imports a,b,c`` (the top-level packages
and the ``vrt_ros`` modules it has imported: after its nodes are up and again at a fatal exit); supervisor →
standby ``import a,b,c`` (import these, errors ignored) and ``go N`` (take over: restart N). The child learns its
socket and role from :data:`FD_ENV` and :data:`ROLE_ENV`.
"""

from __future__ import annotations

import importlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Sequence

from vrt_ros.faults import EXIT_FATAL

#: Environment of a supervised child: its socket's file descriptor, and its role (``active`` or ``standby``).
FD_ENV, ROLE_ENV = "VRT_STANDBY_FD", "VRT_STANDBY_ROLE"
#: The supervisor does not restart after these statuses (an orderly end, a start-up failure).
NO_RESTART = (0, 2)


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
        try:
            self._sock.sendall(("imports " + ",".join(imported_names()) + "\n").encode())
        except OSError:
            pass

    def wait_for_go(self, importer: Callable[[str], object] = importlib.import_module) -> bool:
        """The standby's wait: import what the supervisor sends until it says ``go``.

        Returns:
            True on ``go`` (this process is the active one now; :attr:`restart` is set); False when the supervisor
            closed the socket or went away, or on Ctrl-C: the process should end quietly (status 0).
        """
        try:
            for line in self._reader:
                word, _, rest = line.strip().partition(" ")
                if word == "go":
                    self.role, self.restart = "active", int(rest or 0)
                    return True
                if word == "import":
                    for name in filter(None, rest.split(",")):
                        try:
                            importer(name)
                        except Exception:  # noqa: BLE001 - one that fails here fails again in the node's own path, with its message
                            pass
        except (KeyboardInterrupt, OSError):
            return False
        return False


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


class _Child:
    """One child process and the supervisor's end of its socket."""

    def __init__(self, command: Sequence[str], role: str) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, **{FD_ENV: str(theirs.fileno()), ROLE_ENV: role})
        self.proc = subprocess.Popen(list(command), env=env, pass_fds=(theirs.fileno(),), start_new_session=True)
        theirs.close()
        self.sock, self.started = ours, time.monotonic()
        self.imports: list[str] = []
        self._buffer = b""

    def send(self, line: str) -> bool:
        try:
            self.sock.sendall((line + "\n").encode())
            return True
        except OSError:
            return False

    def read(self) -> bool:
        """Read what the child sent (its ``imports`` lines); False at end of file (the child ended)."""
        try:
            data = self.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            return False
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "imports":
                self.imports = [n for n in rest.split(",") if n]
        return True

    def close(self) -> None:
        self.sock.close()


def exit_status(returncode: int) -> int:
    """A ``Popen.returncode`` as a process exit status: a death by signal N (``-N``) as ``128 + N``, as a shell
    reports it."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """The ``--warm-standby`` supervisor (see the module docstring).

    Args:
        command: the command line of each child (the same ``detector_node`` command, which finds its role in the
            environment).
        delay_s: seconds from a fatal exit to the standby's ``go`` (``--restart-delay``; launch's
            ``respawn_delay``).
        log: where the supervisor's lines go (default: stderr, prefixed ``detector_node: standby:``).
    """

    def __init__(self, command: Sequence[str], delay_s: float, log: Callable[[str], None] | None = None) -> None:
        self.command, self.delay_s = list(command), float(delay_s)
        self._log = log or (lambda text: print(f"detector_node: standby: {text}", file=sys.stderr, flush=True))
        self.restarts = 0
        self._stopping: int | None = None  # the signal received, once one was
        self._active: _Child | None = None
        self._standby: _Child | None = None
        self._imports: list[str] = []  # what the children reported, in order

    def _signal(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        """SIGINT / SIGTERM: stop restarting, pass the signal on to the active child (each time: launch follows a
        SIGINT with a SIGTERM when the process has not ended)."""
        self._stopping = signum
        if self._active is not None and self._active.proc.poll() is None:
            self._active.proc.send_signal(signum)

    def run(self) -> int:
        """Supervise until the active child ends with a status that is not restarted, or a signal; returns the
        process's exit status (see the module docstring)."""
        previous = {s: signal.signal(s, self._signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._active = _Child(self.command, "active")
            while True:
                active = self._active
                self._watch(active)
                status = active.proc.wait()
                active.close()
                if self._stopping is not None or not self._restarts_after(status):
                    return exit_status(status)
                self._log(f"node process {active.proc.pid} ended with status {exit_status(status)}; restart "
                          f"{self.restarts + 1} in {self.delay_s:g} s")
                if self._sleep(self.delay_s):
                    return exit_status(status)
                self.restarts += 1
                self._active = self._take_over() or self._cold_start()
                self._start_standby()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if self._standby is not None:
                self._standby.close()  # end of file: it ends
                _reap(self._standby.proc)

    def _take_over(self) -> _Child | None:
        """Tell the standby to go on (logged first: its output follows the line); None when there is none or it
        has ended."""
        standby, self._standby = self._standby, None
        if standby is None:
            return None
        if standby.proc.poll() is None:
            self._log(f"standby process {standby.proc.pid} takes over (started "
                      f"{time.monotonic() - standby.started:.1f} s ago)")
            if standby.send(f"go {self.restarts}"):
                return standby
        standby.close()
        return None

    def _cold_start(self) -> _Child:
        self._log("no standby ready: a new process starts cold")
        return _Child(self.command, "active")

    def _start_standby(self) -> None:
        """A new standby, told to import what the children reported so far (once the first active child has
        reported: a standby started before that would import nothing the node needs)."""
        if self._imports and self._standby is None and self._stopping is None:
            self._standby = _Child(self.command, "standby")
            self._standby.send("import " + ",".join(self._imports))

    def _watch(self, active: _Child) -> None:
        """Read the active child's reports until it ends (its socket's end of file); new names go to the standby
        (started after the first report)."""
        with selectors.DefaultSelector() as sel:
            sel.register(active.sock, selectors.EVENT_READ)
            while True:
                alive = active.read() if sel.select(timeout=1.0) else active.proc.poll() is None
                new = [n for n in active.imports if n not in self._imports]
                if new:
                    self._imports += new
                    if self._standby is None:
                        self._start_standby()
                    else:
                        self._standby.send("import " + ",".join(new))
                if not alive:
                    return

    @staticmethod
    def _restarts_after(returncode: int) -> bool:
        """A fatal fault (status 3) or a death by a signal (a crash, or the OOM killer's SIGKILL)."""
        return returncode == EXIT_FATAL or returncode < 0

    def _sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless a signal stops the supervisor; True when one did."""
        end = time.monotonic() + seconds
        while self._stopping is None and (left := end - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self._stopping is not None


def _reap(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Wait for ``proc``; SIGKILL after ``timeout_s``."""
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
