"""Where the DDS floor of raw frames goes (issue 22, item 2): one variant of the transport per row, each measured
with fresh processes in one run.

Usage::

    python -m vrt_ros.bench.transport.dds_floor [--sizes 640x480,1920x1080] [--frames 100] [--rate 10]
                                      [--variants shipped,shm_only,...] [--domain-id 68] [--out results/bench]

Per variant and size: a relay process and a publisher process (:mod:`vrt_ros.bench.transport.dds_floor_procs`), both with the
variant's Fast DDS profile and settings; the publisher sends ``--frames`` bgr8 frames at ``--rate`` Hz after 10
warm-up frames and measures the ``publish`` call and stamp → answer received; both report their CPU time. Variants
(:data:`VARIANTS`):

- ``shipped``: vrt_ros's large-frames profile (shared memory, 16 MiB segment, plus UDPv4), reliable, typed;
- ``shm_only``: the same segment, no UDPv4 transport;
- ``udp_only``: UDPv4 alone (what every frame costs when shared memory is off);
- ``shm_big_messages``: shared memory alone with ``maxMessageSize`` 8 MiB (half the segment), so a frame travels as
  one message, not as fragments of Fast DDS's default 65500-byte message size; ``shm_big_messages_udp``: the same
  beside UDPv4 (whose 64 kB datagrams then bound the writer's fragment size again);
- ``default_profile``: Fast DDS's built-in transports (512 KiB shared-memory segment);
- ``best_effort``: shipped, best-effort QoS on both sides (no acknowledgements, no resends);
- ``sync_publish`` / ``async_publish``: shipped with ``RMW_FASTRTPS_PUBLICATION_MODE`` SYNCHRONOUS / ASYNCHRONOUS
  (the publish call delivers itself, or hands the frame to Fast DDS's thread);
- ``raw_subscription``: shipped, the relay subscribes ``raw=True`` (no Python message on its side);
- ``preserialized``: shipped, the publisher publishes bytes serialized once (only the stamp rewritten per frame).

Writes ``dds_floor.json`` and ``dds_floor.md`` to ``--out`` and prints the table. DDS stays on this machine:
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and ``ROS_DOMAIN_ID=--domain-id`` in both processes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from vrt_ros.bench.common import write_result, say
from vrt_ros.bench.stats import ratio, summary

_TRANSPORTS = {
    "shm": """    <transport_descriptor><transport_id>shm</transport_id><type>SHM</type>
      <segment_size>16777216</segment_size></transport_descriptor>""",
    "udp": """    <transport_descriptor><transport_id>udp</transport_id><type>UDPv4</type></transport_descriptor>""",
    # shared memory whose messages may be as large as half the segment: a 6.2 MB frame is one message instead of
    # about 95 fragments of 64 kB (Fast DDS's default maxMessageSize, 65500 bytes, for every transport)
    "shm_big": """    <transport_descriptor><transport_id>shm_big</transport_id><type>SHM</type>
      <segment_size>16777216</segment_size><maxMessageSize>8388608</maxMessageSize></transport_descriptor>""",
}


def profile_xml(transports: tuple[str, ...]) -> str:
    """A Fast DDS participant profile using exactly ``transports`` (keys of the shipped profile's two)."""
    descriptors = "\n".join(_TRANSPORTS[t] for t in transports)
    users = "".join(f"<transport_id>{t}</transport_id>" for t in transports)
    return f"""<?xml version="1.0" encoding="UTF-8" ?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <transport_descriptors>
{descriptors}
  </transport_descriptors>
  <participant profile_name="dds_floor" is_default_profile="true">
    <rtps><userTransports>{users}</userTransports><useBuiltinTransports>false</useBuiltinTransports></rtps>
  </participant>
</profiles>
"""


@dataclass(frozen=True)
class Variant:
    """One row: the transports (None: Fast DDS's built-in ones), QoS, publication mode and the two sides' options."""

    name: str
    transports: tuple[str, ...] | None = ("shm", "udp")
    qos: str = "reliable"
    publication_mode: str | None = None
    raw: bool = False
    preserialized: bool = False
    env: dict[str, str] = field(default_factory=dict)


VARIANTS = {v.name: v for v in (
    Variant("shipped"),
    Variant("shm_only", transports=("shm",)),
    Variant("udp_only", transports=("udp",)),
    Variant("shm_big_messages", transports=("shm_big",)),
    Variant("shm_big_messages_udp", transports=("shm_big", "udp")),
    Variant("default_profile", transports=None),
    Variant("best_effort", qos="best_effort"),
    Variant("sync_publish", publication_mode="SYNCHRONOUS"),
    Variant("async_publish", publication_mode="ASYNCHRONOUS"),
    Variant("raw_subscription", raw=True),
    Variant("preserialized", preserialized=True),
)}


def _env(variant: Variant, domain_id: int, tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS",
              "RMW_FASTRTPS_PUBLICATION_MODE"):
        env.pop(k, None)
    env.update(ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1")
    if variant.transports is not None:
        xml = tmp / f"{variant.name}.xml"
        xml.write_text(profile_xml(variant.transports))
        env["FASTRTPS_DEFAULT_PROFILES_FILE"] = env["FASTDDS_DEFAULT_PROFILES_FILE"] = str(xml)
    if variant.publication_mode:
        env["RMW_FASTRTPS_PUBLICATION_MODE"] = variant.publication_mode
    repo = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([repo] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _last_json(text: str) -> dict:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no result line in: {text[-500:]}")


def run_variant(variant: Variant, size: str, frames: int, rate: float, domain_id: int, tmp: Path,
                depth: int = 1) -> dict:
    """Relay + publisher processes for one variant and size; the row's figures."""
    env = _env(variant, domain_id, tmp)
    mod = [sys.executable, "-m", "vrt_ros.bench.transport.dds_floor_procs"]
    relay = subprocess.Popen(mod + ["relay", "--qos", variant.qos, "--depth", str(depth)]
                             + (["--raw"] if variant.raw else []), env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pub = subprocess.run(mod + ["publish", size, "--frames", str(frames), "--rate", str(rate), "--qos", variant.qos]
                             + (["--preserialized"] if variant.preserialized else []),
                             env=env, capture_output=True, text=True, timeout=120 + frames / rate)
    finally:
        relay.send_signal(signal.SIGINT)
        relay_out, _ = relay.communicate(timeout=30)
    got = _last_json(pub.stdout + pub.stderr)
    rel = _last_json(relay_out)
    row = {"variant": variant.name, "size": size, "sent": got["sent"], "answered": got["answered"],
           "publish_ms": summary(got["publish_ms"]), "publisher_cpu_ms_per_frame": 1e3 * got["cpu_s"] / got["sent"],
           "relay_cpu_ms_per_frame": 1e3 * rel["relay_cpu_s"] / max(rel["relayed"], 1)}
    row["latency_ms"] = summary(got["latency_ms"]) if got["latency_ms"] else None
    return row


def to_markdown(result: dict) -> str:
    lines = [
        "# Where the DDS floor goes: raw bgr8 frames between two processes (`python -m vrt_ros.bench.transport.dds_floor`)",
        "",
        f"Machine: {result['machine']}; rmw_fastrtps (Fast DDS {result.get('fastdds', '?')}); {result['frames']} "
        f"frames per row at {result['rate']:g} Hz after 10 warm-up frames; ms. Each row: fresh publisher and relay "
        "processes; `stamp → answer` is the zero-work relay's answer received by the publisher.",
        "",
        "| size | variant | answered | stamp → answer p50 / p99 | vs shipped | publish call p50 / p99 | publisher CPU / frame | relay CPU / frame |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    shipped = {r["size"]: r for r in result["rows"] if r["variant"] == "shipped"}
    for r in result["rows"]:
        lat = r["latency_ms"]
        base = shipped.get(r["size"], {}).get("latency_ms")
        rel = ratio(lat["p50"], base["p50"]) if lat and base else None
        lat_s = f"{lat['p50']:.2f} / {lat['p99']:.2f}" if lat else "–"
        lines.append(f"| {r['size']} | {r['variant']} | {r['answered']} / {r['sent']} | {lat_s} | "
                     f"{'–' if rel is None else f'{rel:.2f}x'} | {r['publish_ms']['p50']:.2f} / {r['publish_ms']['p99']:.2f} | "
                     f"{r['publisher_cpu_ms_per_frame']:.2f} | {r['relay_cpu_ms_per_frame']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m vrt_ros.bench.transport.dds_floor", description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="640x480,1920x1080")
    ap.add_argument("--frames", type=int, default=100)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--domain-id", type=int, default=68)
    ap.add_argument("--depth", type=int, default=1,
                    help="the relay's subscription depth (default 1, the node's input.depth; deeper: none replaced)")
    ap.add_argument("--out", default="results/bench")
    args = ap.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        fastdds = version("ros-fastrtps")
    except PackageNotFoundError:
        fastdds = "?"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            for name in names:
                say(f"{size} {name}")
                rows.append(run_variant(VARIANTS[name], size, args.frames, args.rate, args.domain_id, Path(tmp),
                                        args.depth))
    result = {"machine": f"{platform.node()} ({os.cpu_count()} CPUs)", "fastdds": fastdds, "frames": args.frames,
              "rate": args.rate, "rows": rows}
    write_result(args.out, "dds_floor", result, to_markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
