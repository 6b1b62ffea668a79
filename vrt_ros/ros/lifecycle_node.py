"""``LifecycleDetectorNode``: the detector as a managed (``rclpy.lifecycle``) node (DESIGN.md, "Managed variant").

The same :class:`~vrt_ros.ros.node.DetectorNode` code; only *when* its set-up steps run differs. The lifecycle
state machine is ROS 2's (``lifecycle_msgs``, services ``<node>/change_state``, ``<node>/get_state``, ... and
``<node>/transition_event``), so ``ros2 lifecycle set``, launch_ros's lifecycle events and lifecycle managers
drive it:

- constructed (``unconfigured``): parameters declared and validated (a bad value still fails construction, naming
  the parameter), ``/diagnostics`` published; nothing loaded, nothing subscribed; the engine's Python modules
  (``import torch`` for the torch engine) are imported in a background thread (:mod:`vrt_ros.ros.prefetch`). The schema's read-only
  parameters (model, engine, input, backend, cameras) can be changed in this state only.
- ``configure``: read the current parameters, check the model and labels files, build the pipeline (ONNX Runtime
  session, or the GPU engine, kernels and buffers), create the output publishers (lifecycle publishers). A failure
  logs the reason, releases what was made and returns FAILURE: the node stays ``unconfigured`` and can be
  configured again, e.g. after ``ros2 param set <node> model.path <file>``.
- ``activate``: enable the publishers, publish each camera's ``label_info``, subscribe to the cameras, start the
  worker.
- ``deactivate``: unsubscribe, let the frame in flight complete (and be published), drop the frames still waiting
  (counted as ``inactive``), disable the publishers. The pipeline and its GPU state stay.
- ``cleanup``: close the pipeline (engine, device and pinned buffers, stream; the torch engine also empties
  torch's cache) and destroy the publishers, so the GPU memory is given back; the process and its CUDA context stay.
- ``shutdown`` (from unconfigured, inactive or active): deactivate and clean up as needed; the node is
  ``finalized``. ``detector_node --lifecycle`` exits (code 0) when all its nodes are finalized.
- ``errorprocessing``: entered when a transition raises, or on a fatal fault while active (:mod:`vrt_ros.faults`:
  a poisoned CUDA context, or ``engine.max_consecutive_failures`` engine failures in a row; where the plain node
  exits, this one takes no further frame and deactivates with ERROR). It logs the reason, releases everything as
  ``cleanup`` does and returns to ``unconfigured``; /diagnostics report ERROR with the reason until the next
  successful configure. After a poisoned CUDA context (no configure can succeed in this process) or a failed
  release it goes to ``finalized`` instead, and ``detector_node --lifecycle`` exits with
  :data:`~vrt_ros.faults.EXIT_FATAL` so that ``respawn`` starts a fresh process. After a poisoned context the
  pipeline is not closed (its CUDA destructors would each fail, seconds in all); the ERROR goes to ``/diagnostics``
  at once (a bounded wait for its delivery) and ``main()`` ends the process without teardown, as the plain node's.

``/diagnostics`` carries ``lifecycle_state`` for every camera. While active the statuses are the plain node's;
unconfigured and inactive report OK with the state in the message (ERROR with the reason after a failed configure
or an error).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.executors import Executor
from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn

from vrt_ros.faults import EXIT_FATAL
from vrt_ros.inference.pipeline import Pipeline
from vrt_ros.ros import prefetch, stop
from vrt_ros.ros.node import DetectorNode
from vrt_ros.ros.wakeup import Wakeup
from vrt_ros.settings.config import DEFAULT_NODE_NAME

SUCCESS = TransitionCallbackReturn.SUCCESS
FAILURE = TransitionCallbackReturn.FAILURE
ERROR = TransitionCallbackReturn.ERROR

#: /diagnostics message per primary state other than active (no failure pending).
_STATE_MESSAGES = {
    "unconfigured": "unconfigured: nothing loaded (configure, then activate)",
    "inactive": "inactive: configured, not taking frames (activate to process)",
    "finalized": "finalized: shut down",
}


class LifecycleDetectorNode(LifecycleNodeMixin, DetectorNode):
    """The detector node as a managed node; starts ``unconfigured``.

    Args:
        node_name: ROS node name.
        pipeline: an already built pipeline to use at every configure instead of building one (tests, or sharing
            an engine); the node then never closes it.
        **kwargs: passed to ``rclpy.node.Node`` (``context``, ``namespace``, ``parameter_overrides``, ...).

    Raises:
        ConfigError: a bad parameter value or unknown parameter (names the parameter). Model, labels and backend
            faults are reported by ``configure`` (FAILURE with the reason logged), not by the constructor.
    """

    def __init__(self, node_name: str = DEFAULT_NODE_NAME, *, pipeline: Pipeline | None = None, **kwargs: Any) -> None:
        self._given_pipeline = pipeline
        self._state_lock = threading.RLock()  # transitions against diagnostics (multi-threaded executors)
        self._fault: str | None = None  # why processing failed while active; set by the worker
        self._fault_poisoned = False  # that failure poisoned the CUDA context: only a new process recovers
        self._failure = ""  # the last failed configure or error, shown on /diagnostics until a configure succeeds
        DetectorNode.__init__(self, node_name, pipeline=pipeline, **kwargs)

    def _setup(self, pipeline: Pipeline | None) -> None:
        """Construction: the always-present part only, then the lifecycle state machine and its services."""
        self._setup_node()
        LifecycleNodeMixin.__init__(self, enable_communication_interface=True)
        # Woken by the worker when the pipeline fails; runs in the default group, like the lifecycle services.
        self._fault_signal = Wakeup(self, self._on_fault)
        self.get_logger().info(
            f"managed node {self.get_fully_qualified_name()}: unconfigured; "
            f"ros2 lifecycle set {self.get_fully_qualified_name()} configure, then activate"
        )
        if pipeline is None:  # the engine's imports while unconfigured: configure then finds them done
            prefetch.start(str(self._params.values["backend"]), self.get_logger().info)

    # ------------------------------------------------------------------------------------------- state
    @property
    def lifecycle_state(self) -> str:
        """The current state's label: unconfigured, inactive, active, finalized, or a transition state."""
        machine = getattr(self, "_state_machine", None)
        return machine.current_state[1] if machine is not None else "unconfigured"

    def _read_only_reason(self) -> str | None:
        state = self.lifecycle_state
        return None if state == "unconfigured" else state

    def _create_output(self, msg_type: Any, topic: str, qos: Any) -> Any:
        return self.create_lifecycle_publisher(msg_type, topic, qos)

    def destroy_publisher(self, publisher: Any) -> bool:
        """Destroy a publisher, and forget it as a managed entity when it is a lifecycle publisher."""
        getattr(self, "_managed_entities", set()).discard(publisher)  # absent when construction failed early
        return super().destroy_publisher(publisher)

    # ------------------------------------------------------------------------------------------- transitions
    def _transition(self, name: str, step: Callable[[LifecycleState], TransitionCallbackReturn], state: LifecycleState):
        """Run one transition's step under the state lock; an exception is logged with its reason and becomes ERROR
        (rclpy would turn it into ERROR silently)."""
        with self._state_lock:
            try:
                return step(state)
            except Exception as exc:  # noqa: BLE001 - the reason goes to the log and to errorprocessing
                self._fault = self._fault or f"{name} raised {type(exc).__name__}: {exc}"
                self.get_logger().error(f"{name} failed: {type(exc).__name__}: {exc}")
                return ERROR

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transition("configure", self._do_configure, state)

    def _do_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        try:
            self._configure(self._given_pipeline)
        except Exception as exc:  # noqa: BLE001 - ConfigError, ModelError, BackendUnavailable, engine build errors
            self._failure = f"configure failed: {type(exc).__name__}: {exc}"
            self.get_logger().error(f"{self._failure} (fix the parameter and configure again)")
            self._cleanup()
            return FAILURE
        self._failure = ""
        period_ns = int(float(self._params.values["diagnostics_period_s"]) * 1e9)
        if self._diagnostics_timer.timer_period_ns != period_ns:
            self._diagnostics_timer.timer_period_ns = period_ns
        return LifecycleNodeMixin.on_configure(self, state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transition("activate", self._do_activate, state)

    def _do_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = LifecycleNodeMixin.on_activate(self, state)  # publishers first: the first frame's result is sent
        if result != SUCCESS:
            return result
        self._fault = None
        self._activate()
        self.get_logger().info(f"active: cameras {list(self._cameras)}")
        return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transition("deactivate", self._do_deactivate, state)

    def _do_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()  # the worker has stopped: self._fault is final
        LifecycleNodeMixin.on_deactivate(self, state)
        if self._fault is not None:
            return ERROR  # to errorprocessing, which logs and releases
        self.get_logger().info("inactive: not taking frames")
        return SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transition("cleanup", self._do_cleanup, state)

    def _do_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._cleanup()
        self.get_logger().info("unconfigured: pipeline released")
        return LifecycleNodeMixin.on_cleanup(self, state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        return self._transition("shutdown", self._do_shutdown, state)

    def _do_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._deactivate()
        self._cleanup()
        self.get_logger().info(f"finalized (shut down from {state.label})")
        return LifecycleNodeMixin.on_shutdown(self, state)

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._state_lock:
            reason = self._fault or f"a transition from {state.label} failed"
            self._fault = None
            self._failure = f"error: {reason}"
            poisoned, self._fault_poisoned = self._fault_poisoned, False
            self.get_logger().error(f"errorprocessing: {reason}; " + (
                "letting go of the pipeline (not closed: the CUDA context is poisoned)" if poisoned
                else "releasing the pipeline"))
            try:
                self._deactivate()
                self._cleanup(close_pipeline=not poisoned)  # poisoned: no CUDA destructors, the process ends
            except Exception as exc:  # noqa: BLE001 - cannot recover: finalized
                self._failure = f"error: {reason}; releasing failed: {type(exc).__name__}: {exc}"
                self.get_logger().error(self._failure)
                return FAILURE
            if poisoned:  # no configure can succeed in this process: finalized, and main() exits with EXIT_FATAL
                self.fatal_error = reason
                self.get_logger().error(f"the CUDA context is poisoned: finalized; exit status {EXIT_FATAL} "
                                        "(the launch file's respawn restarts the process, autostart configures it)")
                self.publish_fatal_diagnostics()  # delivered (bounded wait) before main() ends the process
                return FAILURE
            return LifecycleNodeMixin.on_error(self, state)

    # ------------------------------------------------------------------------------------------- processing faults
    def _on_fatal(self, reason: str) -> None:
        """Worker thread, on a fatal fault (:mod:`vrt_ros.faults`: a poisoned CUDA context, or
        ``engine.max_consecutive_failures`` engine failures in a row): take no further frame and wake
        :meth:`_on_fault` in the executor to deactivate with ERROR (errorprocessing). Unlike the plain node, the
        process stays up, unless the CUDA context is poisoned (see :meth:`on_error`)."""
        if self._fault is None:  # not under _state_lock: a deactivate holding it waits for this thread
            self._fault = reason
            self._fault_poisoned = self._worker.faults.poisoned
        self.get_logger().error(f"fatal: {reason}; going to errorprocessing")
        self._fault_signal.trigger()

    def _on_fault(self) -> None:
        with self._state_lock:
            if self._fault is not None and self.lifecycle_state == "active":
                self.trigger_deactivate()

    # ------------------------------------------------------------------------------------------- diagnostics
    def diagnostics(self) -> DiagnosticArray:
        """The plain node's statuses while active; in other states one status per camera of the ``cameras``
        parameter saying the state (ERROR with the reason after a failed configure or an error). Every status
        carries ``lifecycle_state``."""
        with self._state_lock:
            state = self.lifecycle_state
            if self._cameras:
                out = super().diagnostics()
            else:
                out = DiagnosticArray()
                out.header.stamp = self.get_clock().now().to_msg()
                out.status = [
                    DiagnosticStatus(name=f"{self.get_fully_qualified_name()}: {name}", hardware_id="none")
                    for name in self._params.values["cameras"]
                ]
            for status in out.status:
                if self._failure:
                    status.level = DiagnosticStatus.ERROR
                    status.message = f"{state}: {self._failure}"
                elif state != "active":
                    status.level = DiagnosticStatus.OK
                    status.message = _STATE_MESSAGES.get(state, state)
                status.values = [*status.values, KeyValue(key="lifecycle_state", value=state)]
            return out


def spin_until_finalized(executor: Executor, nodes: list[LifecycleDetectorNode], poll_s: float = 0.2) -> None:
    """Spin ``executor`` until every node in ``nodes`` is finalized, one stopped on a poisoned CUDA context
    (``fatal_error``), or the context shuts down."""
    while (executor.context.ok() and not stop.requested() and not all(n.lifecycle_state == "finalized" for n in nodes)
           and not any(n.fatal_error for n in nodes)):
        executor.spin_once(timeout_sec=poll_s)
