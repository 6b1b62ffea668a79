"""Play a rosbag2 (mcap or sqlite3) into the ROS graph, publishing the stored CDR bytes unchanged.

No ``ros2 bag`` is needed: the bag is read with ``rosbags`` and every message is published as its raw serialized
bytes (``publisher.publish(bytes)``), so headers, stamps and payloads arrive exactly as recorded.

Function API (used by the demo and the tests)::

    with BagPlayer(node, "bags/vtest_raw_sqlite3", qos="reliable", remap={"/camera/image_raw": "/front/image_raw"}) as p:
        p.wait_for_subscribers(1, timeout_s=5.0)
        p.play(rate=1.0)

Console tool (``ros2 run vrt_ros replay``, or ``python -m vrt_ros.ros.replay`` in the venv):
``replay BAG [--rate R] [--loop] [--qos KEY] [--depth N] [--topic FROM=TO] [--only TOPIC]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from rclpy.duration import Duration
from rclpy.node import Node
from rosbags.rosbag2 import Reader

from vrt_ros.errors import ConfigError
from vrt_ros.ros.msgtypes import msg_class
from vrt_ros.ros.qos import make_qos, publisher_qos_events, resolve_topic
from vrt_ros.ros.tool import run_tool, tool_parser


@dataclass
class ReplayResult:
    """What a call to :meth:`BagPlayer.play` published.

    Attributes:
        published: messages published per output topic.
        loops: complete passes over the bag.
        wall_s: seconds spent playing.
    """

    published: dict[str, int] = field(default_factory=dict)
    loops: int = 0
    wall_s: float = 0.0

    @property
    def total(self) -> int:
        """Messages published on all topics."""
        return sum(self.published.values())


def parse_remap(items: Sequence[str]) -> dict[str, str]:
    """``["/a=/b", ...]`` → ``{"/a": "/b"}``.

    ``FROM=TO`` rather than ROS's ``FROM:=TO``: rclpy treats a bare ``a:=b`` on the command line as a (deprecated)
    global remap rule and removes it from the program's arguments.

    Raises:
        ConfigError: an item is not ``FROM=TO``.
    """
    out = {}
    for item in items:
        src, sep, dst = item.partition("=")
        if not sep or not src or not dst:
            raise ConfigError(f"--topic {item!r}: expected FROM=TO, e.g. /camera/image_raw=/front/image_raw")
        out[src] = dst
    return out


class BagPlayer:
    """Publishes the messages of one rosbag2 on the graph through an existing node.

    Args:
        node: the node that owns the publishers (it does not need to be spun).
        bag: rosbag2 directory (or its .mcap/.db3 file's folder); storage mcap or sqlite3.
        qos: QoS preset key (:data:`~vrt_ros.ros.qos.QOS_KEYS`); ``reliable`` by default so counting tests see
            every frame (best-effort big frames are dropped over DDS, see ENVIRONMENT.md).
        depth: publisher history depth, messages.
        remap: bag topic → published topic.
        topics: bag topics to play (all when empty).

    Raises:
        ConfigError: the bag cannot be opened, a requested topic is not in it, or a message type is not importable.
    """

    def __init__(
        self,
        node: Node,
        bag: str | Path,
        *,
        qos: str = "reliable",
        depth: int = 10,
        remap: Mapping[str, str] | None = None,
        topics: Sequence[str] = (),
    ) -> None:
        self._node = node
        self._path = Path(bag)
        try:
            self._reader = Reader(self._path)
            self._reader.open()
        except Exception as exc:  # rosbags raises its own error types for missing/unknown storage
            raise ConfigError(f"cannot open rosbag2 {self._path}: {exc}") from exc
        remap = dict(remap or {})
        available = {c.topic for c in self._reader.connections}
        missing = [t for t in topics if t not in available]
        if missing:
            self._reader.close()
            raise ConfigError(f"topics {missing} are not in {self._path} (it has {sorted(available)})")
        self._connections = [c for c in self._reader.connections if not topics or c.topic in topics]
        profile = make_qos(qos, depth, parameter="--qos")
        self._publishers = {}
        self._out_topic = {}
        for conn in self._connections:
            out = remap.get(conn.topic, conn.topic)
            if out not in self._publishers:
                resolved = resolve_topic(node, out)
                self._publishers[out] = node.create_publisher(
                    msg_class(conn.msgtype),
                    out,
                    profile,
                    event_callbacks=publisher_qos_events(node, resolved, profile, fix_hint="the replay --qos"),
                )
            self._out_topic[conn.id] = out

    @property
    def topics(self) -> list[str]:
        """Output topics (after remapping), one per publisher."""
        return list(self._publishers)

    @property
    def message_count(self) -> int:
        """Messages per pass over the bag (selected topics only)."""
        return sum(c.msgcount for c in self._connections)

    def wait_for_subscribers(self, count: int = 1, timeout_s: float = 5.0) -> bool:
        """Wait until every publisher has at least ``count`` matched subscriptions.

        Reliable, volatile publishers drop what they publish before discovery completes; waiting first makes a
        replay deterministic. Returns False on timeout (the caller decides whether that is an error).
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(p.get_subscription_count() >= count for p in self._publishers.values()):
                return True
            time.sleep(0.02)
        return all(p.get_subscription_count() >= count for p in self._publishers.values())

    def play(
        self, *, rate: float = 1.0, loops: int = 1, stop: threading.Event | None = None, on_message=None
    ) -> ReplayResult:
        """Publish the bag's messages in timestamp order, paced by their recorded timestamps.

        Args:
            rate: playback speed factor (2.0 = twice as fast); ``0`` publishes as fast as possible.
            loops: passes over the bag; ``0`` loops until ``stop`` is set.
            stop: optional event that ends playback early.
            on_message: optional callable ``(topic, timestamp_ns, raw)`` called after each publish.

        Returns:
            Counts per output topic, loops completed and wall time.
        """
        if rate < 0:
            raise ConfigError(f"--rate must be >= 0, got {rate}")
        result = ReplayResult(published={t: 0 for t in self._publishers})
        start = time.monotonic()
        offset_s = 0.0  # wall offset of the current loop relative to start
        while loops == 0 or result.loops < loops:
            first_ns = last_ns = None
            for conn, stamp_ns, raw in self._reader.messages(connections=self._connections):
                if stop is not None and stop.is_set():
                    result.wall_s = time.monotonic() - start
                    return result
                if first_ns is None:
                    first_ns = stamp_ns
                last_ns = stamp_ns
                if rate > 0:
                    due = start + offset_s + (stamp_ns - first_ns) / 1e9 / rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        if stop is not None:
                            if stop.wait(delay):
                                result.wall_s = time.monotonic() - start
                                return result
                        else:
                            time.sleep(delay)
                topic = self._out_topic[conn.id]
                self._publishers[topic].publish(raw)
                result.published[topic] += 1
                if on_message is not None:
                    on_message(topic, stamp_ns, raw)
            result.loops += 1
            if first_ns is None:
                break  # empty bag: nothing to loop over
            if rate > 0:
                # next loop starts one mean message period after the last message
                n = max(1, self.message_count - 1)
                period_s = (last_ns - first_ns) / 1e9 / rate / n if last_ns > first_ns else 0.0
                offset_s = time.monotonic() - start + period_s
        result.wall_s = time.monotonic() - start
        return result

    def wait_for_acknowledgments(self, timeout_s: float = 5.0) -> bool:
        """Wait until reliable subscribers acknowledged everything published (no-op for best effort).

        Called by :meth:`close`: destroying a reliable publisher (or ending the process) right after the last
        publish can lose the messages still in flight.
        """
        deadline = time.monotonic() + timeout_s
        ok = True
        for pub in self._publishers.values():
            left = max(0.0, deadline - time.monotonic())
            ok = pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9))) and ok
        return ok

    def close(self, ack_timeout_s: float = 5.0) -> None:
        """Wait for acknowledgments (up to ``ack_timeout_s``), destroy the publishers and close the bag.

        The node stays alive.
        """
        if ack_timeout_s > 0 and self._publishers:
            self.wait_for_acknowledgments(ack_timeout_s)
        for pub in self._publishers.values():
            self._node.destroy_publisher(pub)
        self._publishers.clear()
        self._reader.close()

    def __enter__(self) -> "BagPlayer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def play_bag(
    node: Node,
    bag: str | Path,
    *,
    rate: float = 1.0,
    loops: int = 1,
    qos: str = "reliable",
    depth: int = 10,
    remap: Mapping[str, str] | None = None,
    topics: Sequence[str] = (),
    wait_subscribers: int = 0,
    wait_timeout_s: float = 5.0,
    stop: threading.Event | None = None,
) -> ReplayResult:
    """Open ``bag``, optionally wait for subscribers, play it and close it. Arguments as in :class:`BagPlayer`."""
    with BagPlayer(node, bag, qos=qos, depth=depth, remap=remap, topics=topics) as player:
        if wait_subscribers > 0 and not player.wait_for_subscribers(wait_subscribers, wait_timeout_s):
            node.get_logger().warning(
                f"replay: fewer than {wait_subscribers} subscriber(s) on {player.topics} after {wait_timeout_s} s; "
                "playing anyway"
            )
        return player.play(rate=rate, loops=loops, stop=stop)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the ``replay`` console script."""
    p = tool_parser("replay", __doc__.split("\n\n")[0], "publisher")
    p.add_argument("bag", type=Path, help="rosbag2 directory (mcap or sqlite3 storage)")
    p.add_argument("--rate", type=float, default=1.0, help="speed factor; 0 = as fast as possible (default 1.0)")
    p.add_argument("--loop", action="store_true", help="repeat until interrupted")
    p.add_argument("--loops", type=int, default=1, help="number of passes (default 1; ignored with --loop)")
    p.add_argument("--topic", action="append", default=[], metavar="FROM=TO", help="publish bag topic FROM on TO (repeatable)")
    p.add_argument("--only", action="append", default=[], metavar="TOPIC", help="play only this bag topic (repeatable)")
    p.add_argument("--wait-subscribers", type=int, default=1, help="wait for this many subscribers per topic (default 1)")
    p.add_argument("--wait-timeout", type=float, default=5.0, help="seconds to wait for subscribers (default 5)")
    return p


def _replay(node: Node, args: argparse.Namespace) -> int:
    result = play_bag(
        node,
        args.bag,
        rate=args.rate,
        loops=0 if args.loop else args.loops,
        qos=args.qos,
        depth=args.depth,
        remap=parse_remap(args.topic),
        topics=args.only,
        wait_subscribers=args.wait_subscribers,
        wait_timeout_s=args.wait_timeout,
    )
    print(f"published {result.total} messages in {result.wall_s:.2f} s: {result.published}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``replay`` console script; ROS arguments after ``--ros-args`` go to rclpy."""
    return run_tool("replay", build_parser(), "vrt_replay", _replay, argv)


if __name__ == "__main__":
    sys.exit(main())
