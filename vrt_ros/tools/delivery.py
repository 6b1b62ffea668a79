"""What a publishing tool (``replay``, ``publish_images``) waits for so that nothing it publishes is lost.

Before the first message: every publisher has matched its subscribers, then :data:`SETTLE_S` more (a best-effort
subscriber drops what arrives before its own side of the match completes). After the last message: reliable
subscribers acknowledged everything, and best-effort ones, which send no acknowledgments, had
:data:`DELIVERY_GRACE_S` to take it (destroying a publisher, or ending the process, right after the last publish can
lose the messages still in flight). Both ends stay quiet when Ctrl-C shut the context down meanwhile: then nothing can
be delivered any more.
"""

from __future__ import annotations

import time
from typing import Iterable

from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import ReliabilityPolicy

#: Seconds waited after every output topic matched before the first publish: the subscriber's side of the match
#: completes moments after the publisher's, and a best-effort subscriber drops what arrives before it.
SETTLE_S = 0.25
#: Seconds the publishers are kept after the last publish when a best-effort subscriber is matched (best effort
#: has no acknowledgments to wait for; destroying the publisher at once can lose the last message in flight).
DELIVERY_GRACE_S = 0.3


def wait_for_subscribers(publishers: Iterable, count: int = 1, timeout_s: float = 5.0) -> bool:
    """Wait until every one of ``publishers`` has at least ``count`` matched subscriptions, then :data:`SETTLE_S`.

    Returns:
        False on timeout (the caller decides whether that is an error).
    """
    publishers = list(publishers)
    deadline = time.monotonic() + timeout_s
    while True:
        if all(p.get_subscription_count() >= count for p in publishers):
            time.sleep(SETTLE_S)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def wait_for_acknowledgments(node: Node, publishers: Iterable, timeout_s: float = 5.0) -> bool:
    """Wait (``timeout_s`` in all) until reliable subscribers acknowledged everything ``publishers`` published
    (no-op for best effort). False on timeout, or when ``node``'s context was shut down (Ctrl-C)."""
    deadline = time.monotonic() + timeout_s
    ok = True
    for pub in publishers:
        left = max(0.0, deadline - time.monotonic())
        try:
            ok = pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9))) and ok
        except Exception:  # rclpy's RCLError "publisher's context is invalid": Ctrl-C shut the context down
            if node.context.ok():
                raise
            return False
    return ok


def wait_for_delivery(node: Node, publishers: Iterable, timeout_s: float = 5.0) -> bool:
    """:func:`wait_for_acknowledgments` (up to ``timeout_s``), then :data:`DELIVERY_GRACE_S` when a best-effort
    subscriber is matched. False when a reliable subscriber did not acknowledge in time or the context is gone."""
    publishers = list(publishers)
    ok = wait_for_acknowledgments(node, publishers, timeout_s)
    try:
        best_effort = any(
            info.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
            for pub in publishers
            for info in node.get_subscriptions_info_by_topic(pub.topic_name)
        )
    except Exception:  # rclpy's RCLError "context is invalid": Ctrl-C's handler shuts the context down from its
        if node.context.ok():  # own thread, so it can land after the caller's check; then nothing is delivered
            raise
        return False
    if best_effort:
        time.sleep(DELIVERY_GRACE_S)
    return ok
