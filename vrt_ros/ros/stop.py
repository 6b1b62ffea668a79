"""A stop at any moment (issue 33): SIGINT and SIGTERM of a console process (``detector_node``, ``replay``, ``record``)
become one orderly stop request, whatever the process is doing when they arrive.

Standard library only, so a process installs it before its heavy imports. What it does:

- :func:`install` sets a handler for SIGINT and SIGTERM and a wakeup pipe (``signal.set_wakeup_fd``) read by a small
  daemon thread: the signal is seen at once even while the main thread is inside a long C call (an executor's
  wait, a model load), where a Python handler would only run when the call returns.
- A signal before :func:`started_ros` (the imports, the arguments) ends the process at once with status 0: nothing
  exists yet that needs a teardown.
- The first signal records the request (:func:`requested`, :func:`signal_name`), calls the wakers registered with
  :func:`on_request` (a :class:`~vrt_ros.ros.wakeup.Wakeup`'s ``trigger``: the spin loop returns and sees the request;
  ``EventsExecutor.wake`` from another thread does not end a ``spin_once``) and arms the deadline; with
  ``raise_first`` (the console tools, plain loops with no stop check) it also raises ``KeyboardInterrupt`` in the
  main thread, once. Later signals are ignored: a second Ctrl-C (``ros2 launch`` forwards one after the terminal's)
  never lands in the teardown.
- The deadline: :data:`STOP_DEADLINE_S` after the first signal a process still running prints one line and ends
  with status 0 through :func:`exit_process` (streams
  flushed, ``os._exit``): a start-up step or a teardown that does not return (a long engine
  build, a library's destructor) cannot keep a stopped process alive. Should even that thread not get the GIL,
  ``faulthandler`` ends the process at :data:`HARD_DEADLINE_S` with the threads' stacks on stderr and status 1.

rclpy must not install its own handlers (``rclpy.init(signal_handler_options=SignalHandlerOptions.NO)``): on SIGTERM
they shut the context down under a node still being built (``RCLError: ... context is invalid``). rclpy's
``EventsExecutor`` installs asio handlers for both signals when it is made and resets them to the default action
when it is destroyed: call :func:`reinstall` after each.

Exit statuses on a stop (README "Stopping"): 0 for a requested stop, at any moment; a node that had already stopped
on a fatal fault keeps 3; 1 only when the hard deadline had to end a hung process.
"""

from __future__ import annotations

import ctypes
import faulthandler
import logging
import os
import signal
import sys
import threading
from typing import Callable

#: Seconds from the first signal to the forced end of a process that is still running (the stop must take < 2 s).
STOP_DEADLINE_S = 1.5
#: Seconds from the first signal to ``faulthandler``'s end of the process (stacks on stderr, status 1).
HARD_DEADLINE_S = 1.9
SIGNALS = (signal.SIGINT, signal.SIGTERM)

_lock = threading.Lock()
_request = threading.Event()
_state: dict = {"signum": None, "raise_first": False, "prog": "", "installed": False, "wakers": [],
                "importing": True}


def started_ros() -> None:
    """The process is about to call ``rclpy.init``: from now on a stop is an orderly one (until then nothing exists
    that needs a teardown, and a stop during the imports ends the process at once, status 0)."""
    _state["importing"] = False


def requested() -> bool:
    """True once a stop signal arrived."""
    return _request.is_set()


def signal_name() -> str:
    """The first stop signal's name (``SIGINT``), or '' when none arrived."""
    signum = _state["signum"]
    return signal.Signals(signum).name if signum else ""


def on_request(waker: Callable[[], None]) -> None:
    """Call ``waker()`` (from any thread; it must be thread-safe, e.g. ``Wakeup.trigger``) on the stop request, at once
    when it already arrived."""
    with _lock:
        _state["wakers"].append(waker)
        now = _request.is_set()
    if now:
        _wake(waker)


def forget(waker: Callable[[], None]) -> None:
    """Remove a waker (before the object it wakes is destroyed)."""
    with _lock:
        if waker in _state["wakers"]:
            _state["wakers"].remove(waker)


def _wake(waker: Callable[[], None]) -> None:
    try:
        waker()
    except Exception:  # noqa: BLE001 - an executor or node already shut down: nothing to wake
        pass


def _record(signum: int) -> bool:
    """Record the first stop request; True if this call was the first."""
    with _lock:
        if _request.is_set():
            return False
        _state["signum"] = signum
        _request.set()
        if _state["importing"]:  # no DDS participant, no node, no file open: nothing to tear down
            exit_process(0)
        wakers = list(_state["wakers"])
        timer = threading.Timer(STOP_DEADLINE_S, _overrun)
        timer.daemon = True
    faulthandler.dump_traceback_later(HARD_DEADLINE_S, exit=True)
    timer.start()
    for waker in wakers:
        _wake(waker)
    return True


def _handler(signum, frame) -> None:  # noqa: ARG001 - signal handler signature
    first = _record(signum)
    if first and _state["raise_first"]:
        raise KeyboardInterrupt


def _watch(fd: int) -> None:
    """The wakeup pipe's reader: the request is recorded even while the main thread is in a long C call."""
    while True:
        try:
            data = os.read(fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            # only while this module's handler is the process's (a supervisor may have set its own since)
            if signum in SIGNALS and not _state["raise_first"] and signal.getsignal(signum) is _handler:
                _record(signum)


def _overrun() -> None:
    print(f"{_state['prog']}: stop: {STOP_DEADLINE_S} s after {signal_name()} the start-up step or teardown under way "
          f"had not returned; the process ends without it", file=sys.stderr)
    exit_process(0)


def exit_process(status: int) -> None:
    """End the process with ``status`` at once; never returns. Python's ``sys.stdout``/``sys.stderr``, Python logging's
    handlers and C stdio (``fflush(NULL)``: rcutils' console and log-file output) are flushed first; nothing else runs
    (no ``finally`` blocks, atexit handlers or destructors)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    logging.shutdown()
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(status)


def install(prog: str, raise_first: bool = False) -> bool:
    """Install the stop handling in this process (main thread only; idempotent). Only for the process's own
    entry point (:func:`process_entry`, or a ``main()`` given no ``argv``), never for a ``main(argv)`` called inside
    another program (a test runner): the handling owns the process's signals and :func:`end_process` ends it.

    Args:
        prog: the process's name in the deadline's line (``detector_node``).
        raise_first: the first signal also raises ``KeyboardInterrupt`` in the main thread (tools whose loops do not
            check :func:`requested`).
    Returns:
        False when not called from the main thread (nothing installed: an embedding program owns its signals).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    _state["prog"], _state["raise_first"] = prog, raise_first
    reinstall()
    if not _state["installed"]:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        threading.Thread(target=_watch, args=(read_fd,), name="vrt_stop_signals", daemon=True).start()
        _state["installed"] = True
    return True


def reinstall() -> None:
    """Set this module's handler for SIGINT and SIGTERM again (after a library replaced or reset them)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _handler)


def installed() -> bool:
    """True once :func:`install` ran in this process."""
    return bool(_state["installed"])


def owns_process() -> bool:
    """True when this module's handling is the process's (installed from the main thread, its handler still set for
    SIGINT): the process may end through :func:`end_process`."""
    return _state["installed"] and signal.getsignal(signal.SIGINT) is _handler


def end_process(status: int) -> None:
    """End the process with ``status`` once its orderly teardown is done, without the interpreter's finalization:
    Python resets its signal handlers to the default action there (``_PySignal_Fini``), so a second Ctrl-C landing
    in the last few hundred ms (module teardown, the DDS and ONNX Runtime destructors) killed the process (status -2)
    after a clean stop. Streams and logging are flushed first. Does nothing (returns) unless :func:`owns_process`."""
    if owns_process():
        exit_process(status)


def process_entry(module_name: str, argv0: str, program: str) -> bool:
    """True when ``module_name`` runs as the process (``python -m``) or ``argv0`` is its console script ``program``:
    only then may a module install process-wide signal handling at import."""
    return module_name == "__main__" or os.path.basename(argv0) == program
