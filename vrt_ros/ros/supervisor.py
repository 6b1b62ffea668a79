"""The ``--warm-standby`` supervisor's process side (issue 27, issue 33): its children, their sockets and its loop.

What it does and why: :mod:`vrt_ros.ros.standby` (the module docstring, and the child's side of the protocol); its
states and back-off, a pure table: :mod:`vrt_ros.ros.supervisor_states`. ``detector_node``'s options for it:
:func:`add_arguments`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Sequence

from vrt_ros.ros.supervisor_states import Backoff, Machine, State, restarted

#: Environment of a supervised child: its socket's file descriptor, and its role (``active`` or ``standby``).
FD_ENV, ROLE_ENV = "VRT_STANDBY_FD", "VRT_STANDBY_ROLE"
#: Seconds a standby has to end after it was told to (end of file on its socket) before SIGKILL; and the active
#: child after the stop was passed on to it (the node's own stop is within 2 s; launch SIGKILLs after 5 s anyway).
STANDBY_END_S, ACTIVE_END_S = 2.0, 10.0
#: A standby told ``go`` while still importing (not ``ready``) has this much longer than ``--takeover-timeout`` to
#: answer: its wait reads ``go`` only after the import in progress (``import torch``: about 4 s on the H200).
WARMING_EXTRA_S = 30.0
_STOPS = (signal.SIGINT, signal.SIGTERM)
#: ``prctl`` option (linux/prctl.h): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def node_command(argv: Sequence[str]) -> list[str]:
    """The children's command line for ``main(argv)`` called with an explicit ``argv``: this interpreter runs this
    copy's ``vrt_ros.ros.main`` with ``argv[1:]``. Not ``python -m vrt_ros.ros.main``, which resolves the package
    from the working folder and ``sys.path`` and may find another installed copy: the folder that holds this
    ``vrt_ros`` goes first on the child's ``sys.path`` (in place of the working folder ``-c`` puts there)."""
    parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = f"import sys; sys.path[0] = {parent!r}; from vrt_ros.ros.main import main; sys.exit(main())"
    return [sys.executable, "-c", code, *argv[1:]]


def _die_with(parent: int) -> Callable[[], None]:
    """A ``preexec_fn``: between fork and exec, before the child runs any instruction of its program, ask the kernel
    for SIGKILL when ``parent`` dies (``PR_SET_PDEATHSIG``, kept across exec), SIGKILL at once when it is already
    gone (re-parented before the call)."""
    libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

    def preexec() -> None:
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:
                os.kill(os.getpid(), signal.SIGKILL)

    return preexec


class _Child:
    """One child process and the supervisor's end of its socket, with what it said: ``imports`` (its node(s) are
    up: :attr:`reported_at`), ``ready`` (a standby's imports done), ``going`` (a standby's answer to ``go``)."""

    def __init__(self, command: Sequence[str], role: str) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ, **{FD_ENV: str(theirs.fileno()), ROLE_ENV: role})
        self.proc = subprocess.Popen(list(command), env=env, pass_fds=(theirs.fileno(),), start_new_session=True,
                                     preexec_fn=_die_with(os.getpid()))
        theirs.close()
        self.sock, self.role, self.started = ours, role, time.monotonic()
        self.imports: list[str] = []
        self.reported_at: float | None = None
        self.imports_sent = self.readies = 0
        self.ready_at: float | None = None
        self.go_deadline: float | None = None  # set with ``go``, cleared by ``going``
        self.eof = False
        self._buffer = b""

    @property
    def ready(self) -> bool:
        return self.readies >= self.imports_sent > 0

    def send(self, line: str) -> bool:
        try:
            self.sock.sendall((line + "\n").encode())
        except OSError:
            return False
        if line.startswith("import "):
            self.imports_sent += 1
        return True

    def read(self) -> None:
        """Read what the child sent; :attr:`eof` at end of file (the child ended or closed it)."""
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.eof = True
            return
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        now = time.monotonic()
        for line in lines:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word == "imports":
                self.imports = [n for n in rest.split(",") if n]
                self.reported_at = self.reported_at or now
            elif word == "ready":
                self.readies += 1
                self.ready_at = self.ready_at or (now if self.ready else None)
            elif word == "going":
                self.go_deadline = None

    def close(self) -> None:
        self.sock.close()
        self.eof = True


def exit_status(returncode: int) -> int:
    """A ``Popen.returncode`` as a process exit status: a death by signal N (``-N``) as ``128 + N``, as a shell
    reports it."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """The ``--warm-standby`` supervisor (see the module docstring), driven by :class:`~vrt_ros.ros.supervisor_states.
    Machine`: one loop over its children's sockets, their ends, its own deadlines and the signals it got. A signal
    handler only records the signal (and wakes the loop through ``signal.set_wakeup_fd``); the loop passes it on to
    whichever child is active when it looks (a child started while the signal came gets it too: it is never lost)
    and checks for one right before it starts a child or says ``go`` (none starts after a stop it saw).

    Args:
        command: the command line of each child (the same ``detector_node`` command, which finds its role in the
            environment).
        delay_s: the first restart delay, s (``--restart-delay``; launch's ``respawn_delay``).
        log: where the supervisor's lines go (default: stderr, prefixed ``detector_node: standby:``).
        delay_max_s: the longest back-off, s (``--restart-delay-max``).
        healthy_s: a node that ran this long after its report resets the back-off, s (``--restart-healthy``).
        takeover_s: a standby that does not answer ``go`` within this time is killed and a cold start follows, s
            (``--takeover-timeout``; :data:`WARMING_EXTRA_S` more for one still importing).
    """

    def __init__(self, command: Sequence[str], delay_s: float, log: Callable[[str], None] | None = None,
                 delay_max_s: float = 30.0, healthy_s: float = 1.0, takeover_s: float = 2.0) -> None:
        self.command, self.delay_s, self.takeover_s = list(command), float(delay_s), float(takeover_s)
        self._log = log or (lambda text: print(f"detector_node: standby: {text}", file=sys.stderr, flush=True))
        self.machine = Machine()
        self.backoff = Backoff(delay_s, delay_max_s, healthy_s)
        self._standby_backoff = Backoff(0.0, delay_max_s, healthy_s)  # a standby that keeps dying, spaced out too
        self.restarts = 0
        self._stopping: int | None = None  # the last signal received
        self._signals = self._forwarded = 0
        self._stop_at: float | None = None
        self._active: _Child | None = None
        self._standby: _Child | None = None
        self._imports: list[str] = []  # what the children reported, in order
        self._restart_at = self._standby_at = 0.0
        self._last: int | None = None  # the last active child's returncode

    def _signal(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        """SIGINT / SIGTERM: recorded; the loop stops restarting and passes each one on to the active child (launch
        follows a SIGINT with a SIGTERM when the process has not ended)."""
        self._stopping, self._signals = signum, self._signals + 1

    def run(self) -> int:
        """Supervise until the active child ends with a status that is not restarted, or a stop; returns the
        process's exit status: the active child's (``128 + N`` for a death by signal N), on a stop during the
        restart delay the last child's, 0 when a stop came before any child. Must run in the main thread."""
        wake, wake_in = socket.socketpair()
        for s in (wake, wake_in):
            s.setblocking(False)
        previous_fd = signal.set_wakeup_fd(wake_in.fileno(), warn_on_full_buffer=False)
        previous = {s: signal.signal(s, self._signal) for s in _STOPS}
        try:
            if self._stopping is None:
                self._active = _Child(self.command, "active")
            while not self._step(wake):
                pass
            return 0 if self._last is None else exit_status(self._last)
        finally:
            signal.set_wakeup_fd(previous_fd)
            for s, handler in previous.items():
                signal.signal(s, handler)
            for child in (self._active, self._standby):
                if child is not None:
                    child.close()
                    _reap(child.proc, 0.0)
            wake.close()
            wake_in.close()

    def _step(self, wake: socket.socket) -> bool:
        """One turn of the loop; True when the supervisor is done."""
        if self._stopping is not None and not self.machine.stopping:
            self._log(f"stopping on {signal.Signals(self._stopping).name}: the children end, none starts")
            self.machine.on("stop")
        if self.machine.stopping:
            self._stop_children()
            if self._active is None and self._standby is None:
                return True
        self._select(wake)
        now = time.monotonic()
        self._check_standby(now)
        self._check_active(now)
        if self.machine.state is State.BACKING_OFF and now >= self._restart_at:
            self._restart()
        if self._standby is None and self._imports and now >= self._standby_at:
            self._start_standby()
        return False

    def _select(self, wake: socket.socket) -> None:
        """Wait until a child says something or ends, a signal, or the next deadline (at most 0.5 s)."""
        now, ends = time.monotonic(), [0.5]
        if self.machine.state is State.BACKING_OFF:
            ends.append(self._restart_at - now)
        if self._standby is None and self._imports:
            ends.append(self._standby_at - now)
        if self._active is not None and self._active.go_deadline is not None:
            ends.append(self._active.go_deadline - now)
        children = [c for c in (self._active, self._standby) if c is not None]
        if any(c.eof for c in children) or self.machine.stopping:
            ends.append(0.05)  # a child that closed its socket is ending: poll its process
        with selectors.DefaultSelector() as sel:
            sel.register(wake, selectors.EVENT_READ)
            for c in children:
                if not c.eof:
                    sel.register(c.sock, selectors.EVENT_READ, c)
            for key, _ in sel.select(max(0.0, min(ends))):
                if key.data is None:
                    with contextlib.suppress(OSError):
                        wake.recv(4096)
                else:
                    key.data.read()
        new = [n for n in (self._active.imports if self._active else []) if n not in self._imports]
        if new:
            self._imports += new
            if self._standby is not None:
                self._standby.send("import " + ",".join(new))

    def _stop_children(self) -> None:
        """Pass each signal on to the active child; tell the standby to end (end of file); SIGKILL whichever has
        not ended :data:`STANDBY_END_S` / :data:`ACTIVE_END_S` after the stop."""
        now = time.monotonic()
        if self._stop_at is None:
            self._stop_at = now
            if self._standby is not None:
                self._standby.close()
        active = self._active
        if active is not None and self._signals > self._forwarded and active.proc.poll() is None:
            active.proc.send_signal(self._stopping)
        self._forwarded = self._signals
        for child, limit in ((self._standby, STANDBY_END_S), (active, ACTIVE_END_S)):
            if child is not None and child.proc.poll() is None and now - self._stop_at > limit:
                self._log(f"{child.role} process {child.proc.pid} did not end {limit:g} s after the stop: SIGKILL")
                child.proc.kill()

    def _check_standby(self, now: float) -> None:
        """A standby that became ready, or that ended: reaped and replaced (spaced out when it keeps dying)."""
        sb = self._standby
        if sb is None:
            return
        if sb.ready and not self.machine.standby_ready and not self.machine.stopping:
            self.machine.on("standby_ready")
            self._log(f"standby process {sb.proc.pid} ready ({now - sb.started:.1f} s after its start)")
        status = sb.proc.poll()
        if status is None:
            return
        sb.close()
        self._standby = None
        if self.machine.stopping:
            return
        if self.machine.standby_ready:
            self.machine.on("standby_lost")
        delay, why = self._standby_backoff.delay(None if sb.ready_at is None else now - sb.ready_at)
        self._standby_at = now + delay
        self._log(f"standby process {sb.proc.pid} ended with status {exit_status(status)} before it was needed: a "
                  f"new one starts in {delay:g} s" + ("" if why == "restart delay" else f" (backing off: {why})"))

    def _check_active(self, now: float) -> None:
        """The active child's end (a restart with back-off, or the end of the supervisor) or its missed ``go``."""
        a = self._active
        if a is None:
            return
        status = a.proc.poll()
        if status is None:
            if a.go_deadline is not None and now >= a.go_deadline and not self.machine.stopping:
                self._log(f"standby process {a.proc.pid} did not take over: no answer to go within "
                          f"{self.takeover_s:g} s; killed, a new process starts cold")
                a.proc.kill()
                _reap(a.proc)
                a.close()
                self.machine.on("takeover_timeout")
                self._active = self._cold_start() if self._stopping is None else None
            return
        a.close()
        self._active, self._last = None, status
        if self.machine.stopping:
            return
        if not restarted(status):
            self.machine.on("ended_final")
            return
        delay, why = self.backoff.delay(None if a.reported_at is None else now - a.reported_at)
        self.machine.on("ended_restart")
        self._restart_at = now + delay
        self._log(f"node process {a.proc.pid} ended with status {exit_status(status)}; restart {self.restarts + 1} "
                  f"in {delay:g} s (backing off {delay:g} s: {why})")

    def _restart(self) -> None:
        """The delay is over: the standby takes over, else a cold start; never once a stop came (held signals)."""
        if self._stopping is not None:  # a signal since this turn's start: the next turn stops
            return
        self.machine.on("delay_elapsed")
        self.restarts += 1
        self._active = self._take_over() or self._cold_start()

    def _take_over(self) -> _Child | None:
        """Tell the standby to go on (logged first: its output follows the line), with a deadline for its answer;
        None when there is none or it has ended (then logged as not taking over)."""
        standby, self._standby = self._standby, None
        if standby is None:
            return None
        if standby.proc.poll() is None:
            self._log(f"standby process {standby.proc.pid} takes over (started "
                      f"{time.monotonic() - standby.started:.1f} s ago{'' if standby.ready else ', still importing'})")
            if standby.send(f"go {self.restarts}"):
                standby.role = "active"
                standby.go_deadline = time.monotonic() + self.takeover_s + (0 if standby.ready else WARMING_EXTRA_S)
                return standby
            self._log(f"standby process {standby.proc.pid} did not take over: its socket is closed")
        standby.close()
        _reap(standby.proc, 0.0)
        return None

    def _cold_start(self) -> _Child:
        self._log("no standby ready: a new process starts cold")
        return _Child(self.command, "active")

    def _start_standby(self) -> None:
        """A new standby, told to import what the children reported so far (only once one has reported: a standby
        started before that would import nothing the node needs); never once stopping."""
        if self._stopping is None and not self.machine.stopping and self._standby is None:
            self._standby = _Child(self.command, "standby")
            self._standby.send("import " + ",".join(self._imports))
            self._log(f"standby process {self._standby.proc.pid} started")


def _reap(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Wait for ``proc``; SIGKILL after ``timeout_s``."""
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``detector_node``'s ``--warm-standby`` options (README "Warm standby")."""
    p.add_argument(
        "--warm-standby", action="store_true",
        help="run the node(s) in a child process with a standby process ready (imports done, DDS participant up, "
             "no node, no GPU memory) that takes over after a fatal fault (exit status 3) or a crash: back in about "
             "a second instead of a new process's start (vrt_ros.ros.standby); not with --lifecycle")
    p.add_argument("--restart-delay", type=float, default=0.5, metavar="S",
                   help="--warm-standby: seconds from a fatal exit to the take-over (default 0.5, launch's "
                        "respawn_delay); doubled for each restart in a row without a healthy run")
    p.add_argument("--restart-delay-max", type=float, default=30.0, metavar="S",
                   help="--warm-standby: the longest restart delay of the back-off (default 30)")
    p.add_argument("--restart-healthy", type=float, default=1.0, metavar="S",
                   help="--warm-standby: a node that ran this long after its node(s) were up resets the back-off "
                        "(default 1)")
    p.add_argument("--takeover-timeout", type=float, default=2.0, metavar="S",
                   help="--warm-standby: a standby that does not answer 'go' within this time is killed and a new "
                        "process starts cold (default 2)")


def refused(args: argparse.Namespace) -> str | None:
    """Why ``args`` cannot run a supervisor (one line), or None."""
    if args.lifecycle:
        return ("--warm-standby is not for --lifecycle nodes (a managed node's restart is its lifecycle manager's: it "
                "must configure and activate the new process)")
    for name in ("restart_delay", "restart_delay_max", "restart_healthy", "takeover_timeout"):
        if getattr(args, name) < 0:
            return f"--{name.replace('_', '-')} must be >= 0 s, got {getattr(args, name)}"
    return None


def from_args(args: argparse.Namespace, command: Sequence[str]) -> Supervisor:
    """The supervisor of ``command`` with the options of ``args`` (:func:`add_arguments`)."""
    return Supervisor(command, args.restart_delay, delay_max_s=args.restart_delay_max,
                      healthy_s=args.restart_healthy, takeover_s=args.takeover_timeout)
