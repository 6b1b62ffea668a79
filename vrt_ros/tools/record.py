"""Record topics to a rosbag2 (mcap or sqlite3) or to JSON lines, subscribing with ``raw=True``.

Messages are received as serialized CDR bytes and written unchanged to the bag (with the receive time as the bag
timestamp, as ``ros2 bag record`` does), so nothing is lost or re-encoded. The JSON-lines format deserializes each
message with rclpy and writes one object per line: ``{"topic", "type", "t_ns", "msg"}`` (byte arrays as base64).

Function API (used by the demo and the tests)::

    with Recorder(node, {"/front/detections": "vision_msgs/msg/Detection2DArray"}, "out/dets", fmt="mcap") as rec:
        ...  # spin the node; rec.counts() tells how many messages arrived per topic

Console tool (``ros2 run vrt_ros record``, or ``python -m vrt_ros.tools.record`` in the venv):
``record OUTPUT TOPIC[:TYPE] ... [--format mcap|sqlite3|jsonl] [--qos KEY] [--duration S]``. The format follows
the output's name when ``--format`` is not given (:func:`infer_format`): ``-`` (standard output) and ``*.jsonl``
are JSON lines, a name without a suffix is an mcap bag directory, anything else is refused. ``record - /diagnostics``
prints a topic as JSON lines: the venv's way to watch a topic where there is no ``ros2 topic echo``.
"""

from __future__ import annotations

import argparse
import array
import base64
import json
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from vrt_ros.ros import stop

if stop.process_entry(__name__, sys.argv[0], "record"):
    stop.install("record")  # before rclpy's imports: a signal during them is a stop too

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from rclpy.serialization import deserialize_message  # noqa: E402
from rosbags.rosbag2 import StoragePlugin, Writer  # noqa: E402

from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.ros.qos import make_qos, resolve_topic, subscription_qos_events  # noqa: E402
from vrt_ros.tools.msgtypes import msg_class, normalize_type, typestore_for  # noqa: E402
from vrt_ros.tools.tool import run_tool, tool_parser  # noqa: E402


#: Output formats: rosbag2 storages and JSON lines.
FORMATS: tuple[str, ...] = ("mcap", "sqlite3", "jsonl")
#: The output name that means standard output (JSON lines only).
STDOUT = "-"


def infer_format(output: str | Path, fmt: str | None) -> str:
    """The output format for ``output``: ``fmt`` when given and consistent with the name, else from the name.

    ``-`` (standard output) and names ending in ``.jsonl`` are JSON lines; a name without a suffix is a bag
    directory (mcap unless ``fmt`` says sqlite3).

    Raises:
        ConfigError: a name that is neither (``out.json``, ``out.mcap``...) without ``--format``, a bag format for
            ``-`` or a ``.jsonl`` name, or an unknown format.
    """
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"record format {fmt!r} unknown; expected one of {', '.join(FORMATS)}")
    name = str(output)
    jsonl_name = name == STDOUT or name.lower().endswith(".jsonl")
    if jsonl_name:
        if fmt not in (None, "jsonl"):
            raise ConfigError(f"record output {name!r} is JSON lines by its name but --format is {fmt}: give a bag "
                              f"directory name (no suffix) for {fmt}, or drop --format")
        return "jsonl"
    if fmt is not None:
        return fmt
    if Path(name).suffix:
        raise ConfigError(f"record output {name!r}: cannot tell the format from the name; use a .jsonl file or '-' "
                          "(standard output) for JSON lines, a directory name without a suffix for an mcap bag, or "
                          "give --format mcap|sqlite3|jsonl")
    return "mcap"


def message_to_dict(msg: Any) -> Any:
    """A JSON-serialisable form of an rclpy message: nested dicts, lists, numbers, strings.

    Byte arrays (``uint8[]``, ``byte[]``) become ``{"base64": ...}``; a single ``byte`` field (e.g.
    ``DiagnosticStatus.level``) becomes its integer value.
    """
    if hasattr(msg, "get_fields_and_field_types"):
        out = {}
        for name, ftype in msg.get_fields_and_field_types().items():
            value = getattr(msg, name)
            if ftype == "octet" and isinstance(value, (bytes, bytearray)) and len(value) == 1:
                out[name] = value[0]
            else:
                out[name] = message_to_dict(value)
        return out
    if isinstance(msg, (bytes, bytearray)) or (isinstance(msg, array.array) and msg.typecode in ("B", "b")):
        return {"base64": base64.b64encode(bytes(msg)).decode("ascii")}
    if isinstance(msg, (list, tuple, array.array)):
        return [message_to_dict(v) for v in msg]
    if hasattr(msg, "tolist"):  # numpy arrays used by rclpy for fixed-size numeric arrays
        return msg.tolist()
    return msg


class _BagSink:
    def __init__(self, path: Path, storage: str, types: Mapping[str, str]) -> None:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        store = typestore_for(types.values())
        self._writer = Writer(path, version=8, storage_plugin=plugin)
        self._writer.open()
        self._conns = {t: self._writer.add_connection(t, normalize_type(m), typestore=store) for t, m in types.items()}

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes) -> None:
        self._writer.write(self._conns[topic], t_ns, raw)

    def close(self) -> None:
        self._writer.close()


class _JsonlSink:
    def __init__(self, path: Path, types: Mapping[str, str]) -> None:
        self._stdout = str(path) == STDOUT
        if self._stdout:
            self._file = sys.stdout
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w", encoding="utf-8", buffering=1)  # line-buffered: readable while recording
        self._classes = {t: msg_class(m) for t, m in types.items()}

    def write(self, topic: str, msgtype: str, t_ns: int, raw: bytes) -> None:
        msg = deserialize_message(raw, self._classes[topic])
        line = {"topic": topic, "type": msgtype, "t_ns": t_ns, "msg": message_to_dict(msg)}
        self._file.write(json.dumps(line) + "\n")
        if self._stdout:
            self._file.flush()  # a pipe is block-buffered: each message is readable as it arrives

    def close(self) -> None:
        if not self._stdout:
            self._file.close()


def discover_types(node: Node, topics: Sequence[str], timeout_s: float = 5.0) -> dict[str, str]:
    """Wait until every topic appears in the graph and return ``{resolved topic: type}``.

    Raises:
        ConfigError: a topic did not appear within ``timeout_s`` seconds, or has several types.
    """
    wanted = {resolve_topic(node, t): t for t in topics}
    deadline = time.monotonic() + timeout_s
    while True:
        graph = dict(node.get_topic_names_and_types())
        found = {t: graph[t] for t in wanted if t in graph}
        if len(found) == len(wanted) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise ConfigError(f"topics {missing} did not appear within {timeout_s} s; give their types as TOPIC:TYPE")
    multi = {t: v for t, v in found.items() if len(v) != 1}
    if multi:
        raise ConfigError(f"topics with several types cannot be recorded without TOPIC:TYPE: {multi}")
    return {t: v[0] for t, v in found.items()}


def _adapted_qos(node: Node, topic: str, base: QoSProfile) -> QoSProfile:
    """Match the publishers, as rosbag2 does: transient-local when all offer it, best-effort when any is."""
    infos = node.get_publishers_info_by_topic(topic)
    if not infos:
        return base
    profile = QoSProfile(history=base.history, depth=base.depth, reliability=base.reliability, durability=base.durability)
    if all(i.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL for i in infos):
        profile.durability = DurabilityPolicy.TRANSIENT_LOCAL
    if any(i.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT for i in infos):
        profile.reliability = ReliabilityPolicy.BEST_EFFORT
    return profile


class Recorder:
    """Subscribes (raw) to topics through an existing node and writes every message to one output.

    Args:
        node: node that owns the subscriptions; the caller spins it (any executor).
        topics: ``{topic: type}`` (type ``pkg/msg/Name``, or None to look it up in the graph) or a list of topics
            (types looked up). Relative names resolve in the node's namespace.
        output: bag directory (must not exist) for mcap/sqlite3, a ``.jsonl`` file, or ``-`` (standard output).
        fmt: one of :data:`FORMATS`; None: from the output's name (:func:`infer_format`).
        qos: QoS preset key; ``reliable`` by default. For topics whose types are looked up, the profile is adapted
            to the publishers already present (transient-local for latched topics such as ``label_info``).
        depth: subscription history depth.
        discover_timeout_s: how long to wait for topics whose type is looked up.
        limit: take at most this many messages in total (``record --count``; 0: no limit). Counted as they arrive,
            so the messages already on their way to the writer when the limit is reached are not written too.

    Raises:
        ConfigError: unknown format, undiscoverable topic, unknown message type, or the output already exists.
    """

    def __init__(
        self,
        node: Node,
        topics: Mapping[str, str | None] | Sequence[str],
        output: str | Path,
        *,
        fmt: str | None = "mcap",
        qos: str = "reliable",
        depth: int = 10,
        discover_timeout_s: float = 5.0,
        limit: int = 0,
    ) -> None:
        fmt = infer_format(output, fmt)
        self._limit, self._taken = int(limit), 0
        self._node = node
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._closed = False
        spec = dict(topics) if isinstance(topics, Mapping) else {t: None for t in topics}
        resolved = {resolve_topic(node, t): (normalize_type(m) if m else None) for t, m in spec.items()}
        unknown = [t for t, m in resolved.items() if m is None]
        discovered = discover_types(node, unknown, discover_timeout_s) if unknown else {}
        self._types = {t: m or discovered[t] for t, m in resolved.items()}
        for msgtype in self._types.values():
            msg_class(msgtype)  # fail before creating the output
        self._counts = {topic: 0 for topic in self._types}
        out = Path(output)
        if fmt != "jsonl" and out.exists():
            raise ConfigError(f"record output {out} already exists; rosbag2 writes a new directory")
        self.output_closed = False
        """True when the output stopped taking messages (standard output closed by its reader)."""
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer_error: BaseException | None = None
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._write_loop, args=(out, fmt, ready), name="vrt_record_writer", daemon=True
        )
        self._thread.start()
        ready.wait()
        if self._writer_error is not None:
            raise self._writer_error
        base = make_qos(qos, depth, parameter="--qos")
        self._subs = []
        for topic, msgtype in self._types.items():
            profile = _adapted_qos(node, topic, base) if topic in discovered else base
            self._subs.append(
                node.create_subscription(
                    msg_class(msgtype),
                    topic,
                    self._make_callback(topic, msgtype),
                    profile,
                    event_callbacks=subscription_qos_events(node, topic, profile, parameter="the record --qos"),
                    raw=True,
                )
            )

    def _write_loop(self, out: Path, fmt: str, ready: threading.Event) -> None:
        """Owns the sink: sqlite3 objects may only be used in the thread that created them."""
        try:
            sink = _JsonlSink(out, self._types) if fmt == "jsonl" else _BagSink(out, fmt, self._types)
        except BaseException as exc:  # reported to the constructor's thread
            self._writer_error = exc
            ready.set()
            return
        ready.set()
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    break
                topic, msgtype, t_ns, raw = item
                try:
                    sink.write(topic, msgtype, t_ns, raw)
                except BrokenPipeError:  # `record - TOPIC | head`: the reader left; stop quietly
                    self.output_closed = True
                    break
                with self._lock:
                    self._counts[topic] += 1
        finally:
            try:
                sink.close()
            except BrokenPipeError:
                pass

    def _make_callback(self, topic: str, msgtype: str):
        def on_message(raw: bytes) -> None:
            with self._lock:
                if self._closed or (self._limit and self._taken >= self._limit):
                    return
                self._taken += 1
            self._queue.put((topic, msgtype, self._node.get_clock().now().nanoseconds, raw))

        return on_message

    @property
    def types(self) -> dict[str, str]:
        """``{resolved topic: type}`` being recorded."""
        return dict(self._types)

    def counts(self) -> dict[str, int]:
        """Messages written to the output so far, per resolved topic."""
        with self._lock:
            return dict(self._counts)

    def wait_for(self, counts: Mapping[str, int], timeout_s: float) -> bool:
        """Block until each topic (relative or resolved) has at least the given count; False on timeout.

        The node must be spun by another thread meanwhile.
        """
        wanted = {resolve_topic(self._node, t): n for t, n in counts.items()}
        deadline = time.monotonic() + timeout_s
        while True:
            have = self.counts()
            if all(have.get(t, 0) >= n for t, n in wanted.items()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)

    def close(self) -> None:
        """Destroy the subscriptions and finish the output (writes the bag's metadata.yaml)."""
        for sub in self._subs:
            self._node.destroy_subscription(sub)
        self._subs.clear()
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_topic_args(items: Sequence[str]) -> dict[str, str | None]:
    """``["/a", "/b:pkg/msg/T"]`` → ``{"/a": None, "/b": "pkg/msg/T"}``."""
    out: dict[str, str | None] = {}
    for item in items:
        topic, sep, msgtype = item.partition(":")
        out[topic] = msgtype if sep else None
    return out


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the ``record`` console script."""
    p = tool_parser("record", __doc__.split("\n\n")[0], "subscription")
    p.add_argument("output", type=Path, help="bag directory to create (no suffix), a .jsonl file, or - for JSON lines "
                                             "on standard output (e.g. record - /diagnostics to watch a topic)")
    p.add_argument("topics", nargs="+", metavar="TOPIC[:TYPE]", help="topics to record, optionally with their type")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="output format (default: from the output's name: '-' and *.jsonl are jsonl, no suffix is mcap)")
    p.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds (default: until Ctrl-C)")
    p.add_argument("--count", type=int, default=0, help="stop after this many messages in total (default: no limit)")
    p.add_argument("--discover-timeout", type=float, default=5.0, help="seconds to wait for untyped topics (default 5)")
    return p


def _record(node: Node, args: argparse.Namespace) -> int:
    recorder = Recorder(
        node,
        parse_topic_args(args.topics),
        args.output,
        fmt=args.format,
        qos=args.qos,
        depth=args.depth,
        discover_timeout_s=args.discover_timeout,
        limit=max(args.count, 0),
    )
    where = "standard output" if str(args.output) == STDOUT else args.output
    for topic, msgtype in recorder.types.items():  # subscribed: a replay may start now
        node.get_logger().info(f"recording {topic} ({msgtype}) to {where}")
    try:
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        start = time.monotonic()
        while rclpy.ok():
            executor.spin_once(timeout_sec=0.1)
            if args.duration > 0 and time.monotonic() - start >= args.duration:
                break
            if args.count > 0 and sum(recorder.counts().values()) >= args.count:
                break
            if recorder.output_closed:
                break
        return 0
    finally:
        recorder.close()
        # the summary goes to stderr when the messages go to stdout
        print(f"recorded {recorder.counts()} to {where}", file=sys.stderr if str(args.output) == STDOUT else sys.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``record`` console script; ROS arguments after ``--ros-args`` go to rclpy."""
    return run_tool("record", build_parser(), "vrt_record", _record, argv)


if __name__ == "__main__":
    sys.exit(main())
