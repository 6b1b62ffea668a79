"""Play a rosbag2 (mcap or sqlite3) into the ROS graph, publishing the stored CDR bytes unchanged.

No ``ros2 bag`` is needed: the bag is read with ``rosbags`` and every message is published as its raw serialized
bytes (``publisher.publish(bytes)``), so headers, stamps and payloads arrive exactly as recorded.

Function API (used by the demo and the tests)::

    with BagPlayer(node, "bags/vtest_raw_sqlite3", qos="reliable", remap={"/camera/image_raw": "/front/image_raw"}) as p:
        p.wait_for_subscribers(1, timeout_s=5.0)
        p.play(rate=1.0)

Console tool (``ros2 run vrt_ros replay``, or ``python -m vrt_ros.tools.replay`` in the venv):
``replay BAG [--rate R] [--loop] [--qos KEY] [--depth N] [--topic FROM=TO] [--only TOPIC] [--clock [HZ]]
[--no-wait]``.

Nothing is lost at either end: before the first message the player waits until every output topic has matched
its subscribers (``--wait-timeout``; ``--no-wait`` skips it) and then :data:`SETTLE_S` more, because a
best-effort subscriber drops what arrives before its own side of the match completes; after the last message it
keeps its publishers until reliable subscribers acknowledged everything and best-effort ones had
:data:`DELIVERY_GRACE_S` to take it. ``--clock`` publishes ``/clock`` (``rosgraph_msgs/Clock``) from the bag's
timestamps, as ``ros2 bag play --clock`` does, so nodes with ``use_sim_time`` run on bag time.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from vrt_ros.ros import stop

if stop.process_entry(__name__, sys.argv[0], "replay"):
    stop.install("replay")  # before rclpy's imports: a signal during them is a stop too

from rclpy.node import Node  # noqa: E402
from rosbags.rosbag2 import Reader  # noqa: E402

from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.tools import delivery  # noqa: E402
from vrt_ros.tools.delivery import DELIVERY_GRACE_S, SETTLE_S  # noqa: E402,F401 (documented here)
from vrt_ros.ros.qos import make_qos, publisher_qos_events, resolve_topic  # noqa: E402
from vrt_ros.tools.msgtypes import msg_class  # noqa: E402
from vrt_ros.tools.tool import run_tool, tool_parser  # noqa: E402


#: Default ``--clock`` rate, Hz (as ``ros2 bag play --clock``).
DEFAULT_CLOCK_HZ = 40.0
CLOCK_TOPIC = "/clock"


def sim_time_ns(first_ns: int, next_ns: int, loop_start_s: float, now_s: float, rate: float) -> int:
    """The ``/clock`` value between two messages: bag time advancing ``rate`` times as fast as the wall clock.

    Args:
        first_ns: bag timestamp of the current loop's first message, ns.
        next_ns: bag timestamp of the next message to publish, ns (the clock never runs past it).
        loop_start_s: monotonic wall time at which the current loop started (its first message was due), s.
        now_s: monotonic wall time now, s.
        rate: playback speed factor; 0 (as fast as possible): the clock stays at ``next_ns``.

    Returns:
        ``min(next_ns, first_ns + (now_s - loop_start_s) * rate * 1e9)``, never below ``first_ns``.
    """
    if rate <= 0:
        return next_ns
    t = first_ns + int(max(0.0, now_s - loop_start_s) * rate * 1e9)
    return max(first_ns, min(next_ns, t))


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


def parse_remap(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``["/a=/b", "/a=/c", ...]`` → ``{"/a": ("/b", "/c")}``: one bag topic may be published on several topics
    (each ``FROM=TO`` adds one; a repeated identical item counts once).

    ``FROM=TO`` rather than ROS's ``FROM:=TO``: rclpy treats a bare ``a:=b`` on the command line as a (deprecated)
    global remap rule and removes it from the program's arguments.

    Raises:
        ConfigError: an item is not ``FROM=TO``.
    """
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        src, sep, dst = item.partition("=")
        if not sep or not src or not dst:
            raise ConfigError(f"--topic {item!r}: expected FROM=TO, e.g. /camera/image_raw=/front/image_raw")
        if dst not in out.get(src, ()):
            out[src] = out.get(src, ()) + (dst,)
    return out


def _destinations(remap: Mapping[str, str | Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """``remap`` with every value as a tuple of output topics (a plain string is one topic)."""
    return {src: (dst,) if isinstance(dst, str) else tuple(dict.fromkeys(dst)) for src, dst in remap.items()}


class BagPlayer:
    """Publishes the messages of one rosbag2 on the graph through an existing node.

    Args:
        node: the node that owns the publishers (it does not need to be spun).
        bag: rosbag2 directory (or its .mcap/.db3 file's folder); storage mcap or sqlite3.
        qos: QoS preset key (:data:`~vrt_ros.ros.qos.QOS_KEYS`); ``reliable`` by default so counting tests see
            every frame (best-effort big frames are dropped over DDS, see ENVIRONMENT.md).
        depth: publisher history depth, messages.
        remap: bag topic → published topic, or a sequence of topics: the bag topic is published on each of them.
        topics: bag topics to play (all when empty).
        clock_hz: publish ``/clock`` from the bag's timestamps at this rate (and at every message); 0: no clock.

    Raises:
        ConfigError: the bag cannot be opened, a requested or remapped topic is not in it (the bag's topics are
            listed), or a message type is not importable.
    """

    def __init__(
        self,
        node: Node,
        bag: str | Path,
        *,
        qos: str = "reliable",
        depth: int = 10,
        remap: Mapping[str, str | Sequence[str]] | None = None,
        topics: Sequence[str] = (),
        clock_hz: float = 0.0,
    ) -> None:
        self._node = node
        self._path = Path(bag)
        try:
            self._reader = Reader(self._path)
            self._reader.open()
        except Exception as exc:  # rosbags raises its own error types for missing/unknown storage
            raise ConfigError(f"cannot open rosbag2 {self._path}: {exc}") from exc
        remap = _destinations(remap or {})
        available = {c.topic for c in self._reader.connections}
        missing = [t for t in topics if t not in available]
        if missing:
            self._reader.close()
            raise ConfigError(f"topics {missing} are not in {self._path} (it has {sorted(available)})")
        unmapped = [f"{src}={dst}" for src, dsts in remap.items() if src not in available for dst in dsts]
        if unmapped:
            self._reader.close()
            raise ConfigError(f"--topic {', '.join(unmapped)}: not a topic of {self._path}; FROM must be one of "
                              f"the bag's topics: {', '.join(sorted(available))}")
        if clock_hz < 0:
            self._reader.close()
            raise ConfigError(f"--clock must be >= 0 Hz, got {clock_hz}")
        self._connections = [c for c in self._reader.connections if not topics or c.topic in topics]
        profile = make_qos(qos, depth, parameter="--qos")
        self._publishers = {}
        self._out_topic = {}
        for conn in self._connections:
            outs = remap.get(conn.topic, (conn.topic,))
            for out in outs:
                if out not in self._publishers:
                    resolved = resolve_topic(node, out)
                    self._publishers[out] = node.create_publisher(
                        msg_class(conn.msgtype),
                        out,
                        profile,
                        event_callbacks=publisher_qos_events(node, resolved, profile, fix_hint="the replay --qos"),
                    )
            self._out_topic[conn.id] = outs
        self._clock_pub = None
        self._clock_period_s = 1.0 / clock_hz if clock_hz > 0 else float("inf")
        if clock_hz > 0:
            from rosgraph_msgs.msg import Clock

            self._clock_msg = Clock()
            self._clock_pub = node.create_publisher(Clock, CLOCK_TOPIC, make_qos("best_effort", 1, parameter="--clock"))

    def _publish_clock(self, t_ns: int) -> None:
        stamp = self._clock_msg.clock
        stamp.sec, stamp.nanosec = divmod(int(t_ns), 1_000_000_000)
        self._clock_pub.publish(self._clock_msg)

    def _sleep_until(self, due: float, stop: threading.Event | None, clock_at) -> bool:
        """Sleep until monotonic time ``due`` (publishing ``/clock`` meanwhile, ``clock_at(now)``); True when stopped."""
        while True:
            now = time.monotonic()
            if self._clock_pub is not None:
                self._publish_clock(clock_at(now))
            remaining = due - now
            if remaining <= 0:
                return False
            step = min(remaining, self._clock_period_s)
            if stop is not None:
                if stop.wait(step):
                    return True
            else:
                time.sleep(step)

    @property
    def topics(self) -> list[str]:
        """Output topics (after remapping), one per publisher."""
        return list(self._publishers)

    @property
    def message_count(self) -> int:
        """Messages per pass over the bag (selected topics only)."""
        return sum(c.msgcount for c in self._connections)

    def wait_for_subscribers(self, count: int = 1, timeout_s: float = 5.0) -> bool:
        """Wait until every publisher has at least ``count`` matched subscriptions, then :data:`SETTLE_S` more
        (:func:`vrt_ros.tools.delivery.wait_for_subscribers`): reliable, volatile publishers drop what they publish
        before discovery completes; waiting first makes a replay deterministic. Returns False on timeout (the caller
        decides whether that is an error).
        """
        return delivery.wait_for_subscribers(self._publishers.values(), count, timeout_s)

    def unmatched_topics(self, count: int = 1) -> list[str]:
        """Output topics with fewer than ``count`` matched subscriptions."""
        return [t for t, p in self._publishers.items() if p.get_subscription_count() < count]

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
        if self._clock_pub is not None and self.message_count:  # nodes with use_sim_time get the bag's start before the first message
            self._publish_clock(self._reader.start_time)
        start = time.monotonic()
        offset_s = 0.0  # wall offset of the current loop relative to start
        while loops == 0 or result.loops < loops:
            first_ns = last_ns = None
            for conn, stamp_ns, raw in self._reader.messages(connections=self._connections):
                if stop is not None and stop.is_set():
                    result.wall_s = time.monotonic() - start
                    return result
                if first_ns is None:
                    first_ns = stamp_ns  # a new loop: /clock jumps back to the bag's start
                last_ns = stamp_ns
                if rate > 0:
                    loop_start = start + offset_s
                    due = loop_start + (stamp_ns - first_ns) / 1e9 / rate
                    clock_at = lambda now, f=first_ns, n=stamp_ns, s0=loop_start: sim_time_ns(f, n, s0, now, rate)  # noqa: E731
                    if self._sleep_until(due, stop, clock_at):
                        result.wall_s = time.monotonic() - start
                        return result
                if self._clock_pub is not None:
                    self._publish_clock(stamp_ns)
                for topic in self._out_topic[conn.id]:
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
        """Wait until reliable subscribers acknowledged everything published (no-op for best effort;
        :func:`vrt_ros.tools.delivery.wait_for_acknowledgments`)."""
        return delivery.wait_for_acknowledgments(self._node, self._publishers.values(), timeout_s)

    def wait_for_delivery(self, timeout_s: float = 5.0) -> bool:
        """Keep the publishers until what was published is delivered (:func:`vrt_ros.tools.delivery.wait_for_delivery`:
        reliable subscribers acknowledged it, up to ``timeout_s``; best-effort ones had :data:`DELIVERY_GRACE_S`).

        Returns False when a reliable subscriber did not acknowledge in time.
        """
        return delivery.wait_for_delivery(self._node, self._publishers.values(), timeout_s)

    def close(self, ack_timeout_s: float = 5.0) -> None:
        """Wait for delivery (:meth:`wait_for_delivery`, up to ``ack_timeout_s``), destroy the publishers and close
        the bag. The node stays alive.
        """
        if ack_timeout_s > 0 and self._publishers and self._node.context.ok():  # after Ctrl-C nothing is delivered
            self.wait_for_delivery(ack_timeout_s)
        for pub in self._publishers.values():
            self._node.destroy_publisher(pub)
        self._publishers.clear()
        if self._clock_pub is not None:
            self._node.destroy_publisher(self._clock_pub)
            self._clock_pub = None
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
    remap: Mapping[str, str | Sequence[str]] | None = None,
    topics: Sequence[str] = (),
    wait_subscribers: int = 0,
    wait_timeout_s: float = 5.0,
    stop: threading.Event | None = None,
    clock_hz: float = 0.0,
) -> ReplayResult:
    """Open ``bag``, optionally wait for subscribers, play it, wait for delivery and close it. Arguments as in
    :class:`BagPlayer`."""
    with BagPlayer(node, bag, qos=qos, depth=depth, remap=remap, topics=topics, clock_hz=clock_hz) as player:
        if wait_subscribers > 0:
            node.get_logger().info(f"replay: waiting up to {wait_timeout_s:g} s for {wait_subscribers} subscriber(s) "
                                   f"on {', '.join(player.topics)} (--no-wait skips this)")
            if not player.wait_for_subscribers(wait_subscribers, wait_timeout_s):
                node.get_logger().warning(
                    f"replay: fewer than {wait_subscribers} subscriber(s) on {player.unmatched_topics(wait_subscribers)} "
                    f"after {wait_timeout_s} s (--wait-timeout); playing anyway"
                )
        return player.play(rate=rate, loops=loops, stop=stop)


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the ``replay`` console script."""
    p = tool_parser("replay", __doc__.split("\n\n")[0], "publisher")
    p.add_argument("bag", type=Path, help="rosbag2 directory (mcap or sqlite3 storage)")
    p.add_argument("--rate", type=float, default=1.0, help="speed factor; 0 = as fast as possible (default 1.0)")
    p.add_argument("--loop", action="store_true", help="repeat until interrupted")
    p.add_argument("--loops", type=int, default=1, help="number of passes (default 1; ignored with --loop)")
    p.add_argument("--topic", action="append", default=[], metavar="FROM=TO", help="publish bag topic FROM on TO (repeatable; the same FROM with two TOs is published on both)")
    p.add_argument("--only", action="append", default=[], metavar="TOPIC", help="play only this bag topic (repeatable)")
    p.add_argument("--wait-subscribers", type=int, default=1, help="wait for this many subscribers per topic (default 1)")
    p.add_argument("--wait-timeout", type=float, default=5.0, help="seconds to wait for subscribers (default 5)")
    p.add_argument("--no-wait", action="store_true", help="publish at once, without waiting for subscribers")
    p.add_argument("--clock", type=float, nargs="?", const=DEFAULT_CLOCK_HZ, default=0.0, metavar="HZ",
                   help=f"publish /clock from the bag's timestamps (rate-scaled) at HZ (default {DEFAULT_CLOCK_HZ:g}) "
                        "and at every message, for nodes with use_sim_time")
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
        wait_subscribers=0 if args.no_wait else args.wait_subscribers,
        wait_timeout_s=args.wait_timeout,
        clock_hz=args.clock,
    )
    print(f"published {result.total} messages in {result.wall_s:.2f} s: {result.published}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``replay`` console script; ROS arguments after ``--ros-args`` go to rclpy."""
    return run_tool("replay", build_parser(), "vrt_replay", _replay, argv)


if __name__ == "__main__":
    sys.exit(main())
