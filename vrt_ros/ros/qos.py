"""QoS presets by short key, and warnings that name both sides of an incompatible QoS match.

The keys are the values of the ``input.qos`` parameter (and of the replay/record tools' ``--qos``):

=============== =========== ============ ==========
key             reliability durability   history
=============== =========== ============ ==========
``sensor_data`` best effort volatile     keep last
``default``     reliable    volatile     keep last
``reliable``    reliable    volatile     keep last
``best_effort`` best effort volatile     keep last
=============== =========== ============ ==========

``sensor_data`` and ``default`` follow rclpy's ``qos_profile_sensor_data`` / ``qos_profile_default``; the depth is
always the caller's. A best-effort subscription matches any publisher; a reliable one does not match a best-effort
publisher (handed case HC-06), which is why the node logs the mismatch instead of staying silent.
"""

from __future__ import annotations

try:
    from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
except ImportError:  # ROS 2 Humble: the same classes lived in rclpy.qos_event
    from rclpy.qos_event import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSCompatibility,
    QoSPolicyKind,
    QoSProfile,
    ReliabilityPolicy,
    qos_check_compatible,
)

from vrt_ros.errors import ConfigError

#: Reliability of each preset key; everything else is keep-last + volatile with the caller's depth.
_RELIABILITY: dict[str, ReliabilityPolicy] = {
    "sensor_data": ReliabilityPolicy.BEST_EFFORT,
    "default": ReliabilityPolicy.RELIABLE,
    "reliable": ReliabilityPolicy.RELIABLE,
    "best_effort": ReliabilityPolicy.BEST_EFFORT,
}

#: The accepted preset keys, in documentation order.
QOS_KEYS: tuple[str, ...] = tuple(_RELIABILITY)


def make_qos(key: str, depth: int, *, parameter: str = "input.qos") -> QoSProfile:
    """Build a keep-last, volatile QoS profile from a preset key.

    Args:
        key: one of :data:`QOS_KEYS`.
        depth: history depth in messages, ``>= 1``.
        parameter: parameter name reported in errors.

    Returns:
        A new profile (callers may modify it).

    Raises:
        ConfigError: unknown key or depth < 1; the message names ``parameter`` and the accepted keys.
    """
    if key not in _RELIABILITY:
        raise ConfigError(f"{parameter}: unknown QoS preset {key!r}; expected one of {', '.join(QOS_KEYS)}")
    if int(depth) < 1:
        raise ConfigError(f"{parameter}: QoS depth must be >= 1, got {depth}")
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=int(depth),
        reliability=_RELIABILITY[key],
        durability=DurabilityPolicy.VOLATILE,
    )


def resolve_topic(node, topic: str) -> str:
    """Fully qualified topic name as the node resolves it (remappings included where rclpy can tell).

    ``Node.resolve_topic_name`` exists from ROS 2 Iron on; on Humble a relative name is joined to the node's
    namespace (remappings are then not reflected, which only affects log messages and graph look-ups).
    """
    if hasattr(node, "resolve_topic_name"):
        return node.resolve_topic_name(topic)
    if topic.startswith("/"):
        return topic
    return f"{node.get_namespace().rstrip('/')}/{topic}"


def latched_qos(depth: int = 1) -> QoSProfile:
    """Reliable, transient-local, keep-last QoS for once-published topics such as ``label_info``."""
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


def describe_qos(profile: QoSProfile) -> str:
    """Short human-readable form, e.g. ``reliability=best_effort durability=volatile depth=1``."""
    return (
        f"reliability={_policy_name(profile.reliability)} durability={_policy_name(profile.durability)} "
        f"history={_policy_name(profile.history)} depth={profile.depth}"
    )


def _policy_name(policy: object) -> str:
    name = getattr(policy, "name", str(policy))
    return name.lower()


def _kind_name(kind: int) -> str:
    try:
        return QoSPolicyKind(kind).name.lower()
    except ValueError:
        return f"policy {kind}"


def _mismatch_lines(node, topic: str, own: QoSProfile, own_is_subscriber: bool) -> list[str]:
    """One line per endpoint on the other side whose QoS does not match ``own``."""
    lines = []
    try:
        others = (
            node.get_publishers_info_by_topic(topic) if own_is_subscriber else node.get_subscriptions_info_by_topic(topic)
        )
    except Exception:  # graph queries fail while the context shuts down; the warning still goes out
        others = []
    for info in others:
        pub, sub = (info.qos_profile, own) if own_is_subscriber else (own, info.qos_profile)
        compatibility, reason = qos_check_compatible(pub, sub)
        if compatibility != QoSCompatibility.OK:
            who = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
            side = "publisher" if own_is_subscriber else "subscriber"
            lines.append(f"{side} {who} offers [{describe_qos(info.qos_profile)}]: {reason.strip()}")
    return lines


def _mismatch_detail(node, topic: str, own: QoSProfile, own_is_subscriber: bool, event) -> str:
    """The other side(s) of an incompatible-QoS event, or the policy the event names when the graph shows none."""
    lines = _mismatch_lines(node, topic, own, own_is_subscriber=own_is_subscriber)
    return "; ".join(lines) if lines else f"last incompatible policy: {_kind_name(event.last_policy_kind)}"


def subscription_qos_events(node, topic: str, own: QoSProfile, parameter: str = "input.qos") -> SubscriptionEventCallbacks:
    """Event callbacks for a subscription that log a warning naming both sides of a QoS mismatch.

    Args:
        node: the rclpy node owning the subscription (used for its logger and graph queries).
        topic: fully resolved topic name of the subscription.
        own: the subscription's QoS profile.
        parameter: the parameter a user changes to fix it, named in the warning.

    Returns:
        Callbacks to pass as ``event_callbacks`` to ``create_subscription``.
    """

    def on_incompatible(event) -> None:
        detail = _mismatch_detail(node, topic, own, True, event)
        node.get_logger().warning(
            f"incompatible QoS on {topic}: this subscription requests [{describe_qos(own)}] but {detail} "
            f"(total {event.total_count}); no messages will arrive from it. Set {parameter} to match the publisher "
            f"(e.g. 'sensor_data' accepts best-effort and reliable publishers)."
        )

    return SubscriptionEventCallbacks(incompatible_qos=on_incompatible)


def publisher_qos_events(node, topic: str, own: QoSProfile, fix_hint: str = "--qos") -> PublisherEventCallbacks:
    """Event callbacks for a publisher that log a warning naming both sides of a QoS mismatch.

    Args:
        node: the rclpy node owning the publisher.
        topic: fully resolved topic name of the publisher.
        own: the publisher's QoS profile.
        fix_hint: the option or parameter a user changes to fix it, named in the warning.
    """

    def on_incompatible(event) -> None:
        detail = _mismatch_detail(node, topic, own, False, event)
        node.get_logger().warning(
            f"incompatible QoS on {topic}: this publisher offers [{describe_qos(own)}] but {detail} "
            f"(total {event.total_count}); that subscriber receives nothing. Change {fix_hint} to match."
        )

    return PublisherEventCallbacks(incompatible_qos=on_incompatible)

