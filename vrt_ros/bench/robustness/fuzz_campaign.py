"""One node's fuzz campaign (:mod:`vrt_ros.bench.robustness.fuzz`): hypothesis draws each message, the campaign publishes it,
puts good frames between them (lock-step on their answers), samples the node's resident memory and, at the end,
checks the node's /diagnostics counters against what it sent (the checks are listed in :mod:`vrt_ros.bench.robustness.fuzz`).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
from rclpy.serialization import serialize_message

from vrt_ros.bench.robustness import fuzz_msgs as fm
from vrt_ros.depth import reasons as depth_reasons


class Campaign:
    """Publishes fuzzed and good messages through ``driver`` (a :class:`vrt_ros.bench.robustness.fuzz.Driver`) at the node
    process ``proc`` of input ``kind``; ``args``: the command's options (good_every, gap_ms, answer_timeout,
    rss_bound_mib, seed)."""

    def __init__(self, driver: Any, kind: str, proc: Any, args: Any) -> None:
        self.d, self.kind, self.proc, self.args = driver, kind, proc, args
        self.seq = 1  # the next message id (its header stamp, s)
        self.sent: Counter = Counter()  # colour frames per camera
        self.fuzzed = 0  # fuzzed messages (any topic)
        self.side = Counter()  # depth and camera_info messages sent
        self.good = 0
        self.missing_good: list[int] = []
        self.rss: list[int] = []
        self.since_good = 0
        self.crashed_at: int | None = None
        self._template = serialize_message(fm.good_image(0))  # a real frame's CDR bytes, mutated by raw_bytes

    # ------------------------------------------------------------------------------------------- sending
    def _colour(self, cam: str, msg: Any) -> None:
        self.d.pubs[cam].publish(msg)
        self.sent[cam] += 1

    def _pause(self) -> None:
        time.sleep(self.args.gap_ms / 1000.0)

    def _good_frames(self, seq: int | None = None) -> None:
        """A good frame on every camera (with ``seq`` as its id, else a fresh one), waiting for each answer."""
        seq = self._next() if seq is None else seq
        for cam in self.d.cams:
            self._colour(cam, fm.good_compressed(seq) if self.kind == "compressed" else fm.good_image(seq))
            self.good += 1
        for cam in self.d.cams:
            if not self.d.wait(lambda c=cam: self.d.answered(c, seq), self.args.answer_timeout):
                self.missing_good.append(seq)
        self.rss.append(rss_bytes(self.proc.pid))
        self.since_good = 0

    def _next(self) -> int:
        self.seq += 1
        return self.seq - 1

    def draw(self, data: Any) -> tuple:
        """Draw one step's messages (drawing only, so hypothesis sees the same draws for the same choices)."""
        if self.kind == "compressed":
            return ("colour", "camera", data.draw(fm.compressed()))
        if self.kind == "raw_bytes" and data.draw(st.booleans()):
            return ("bytes", "camera", data.draw(fm.mutated_bytes(self._template)))
        if self.kind == "depth":
            what = data.draw(st.sampled_from(["depth", "info", "both", "colour"]))
            info = data.draw(fm.camera_infos()) if what in ("info", "both") else None
            depth = data.draw(fm.images(depth=True)) if what in ("depth", "both") else None
            colour = data.draw(fm.images()) if what == "colour" else None
            return ("depth", what, info, depth, colour)
        return ("colour", data.draw(st.sampled_from(self.d.cams)), data.draw(fm.images()))

    def send(self, step: tuple) -> None:
        """Send one drawn step: its fuzzed message(s), then a good frame when one is due (depth: always)."""
        seq = self._next()
        self.fuzzed += 1
        if step[0] == "depth":
            self._depth_step(seq, *step[1:])
            return
        if step[0] == "bytes":  # the mutated frame keeps stamp 0 unless a mutation hit it: answers are counted
            self._colour(step[1], bytes(step[2]))
        else:
            self._colour(step[1], fm.stamp(step[2], seq))
        self._pause()
        self.since_good += 1
        if self.since_good >= self.args.good_every:
            self._good_frames()

    def _depth_step(self, seq: int, what: str, info: Any, depth: Any, colour: Any) -> None:
        """A fuzzed depth image, camera_info, both, or colour frame; the rest of the step good, all with ``seq``."""
        self.d.info_pub.publish(fm.stamp(info if info is not None else fm.good_info(seq), seq))
        self.d.depth_pub.publish(fm.stamp(depth if depth is not None else fm.good_depth(seq), seq))
        self.side.update(("camera_info", "depth"))
        self.fuzzed += what == "both"
        self._pause()
        if colour is not None:
            self._colour("camera", fm.stamp(colour, seq))
            self._pause()
            self._good_frames()
        else:
            self._good_frames(seq)

    def run(self, n: int) -> None:
        """Send ``n`` fuzzed messages (hypothesis's generate phase only: nothing to shrink, no example database)."""
        pubs = list(self.d.pubs.values()) + ([self.d.depth_pub, self.d.info_pub] if self.kind == "depth" else [])
        self.d.wait(lambda: self.proc.poll() is not None or all(p.get_subscription_count() > 0 for p in pubs), 120.0)
        self._good_frames()  # the node is up and answers before the first fuzzed message
        self.started = time.monotonic()
        while self.fuzzed < n and self.proc.poll() is None:
            left = n - self.fuzzed

            @seed(self.args.seed + self.seq)
            @settings(max_examples=left, phases=[Phase.generate], database=None, deadline=None,
                      suppress_health_check=list(HealthCheck))
            @given(st.data())
            def one(data):
                step = self.draw(data)
                if self.fuzzed < n and self.proc.poll() is None:
                    self.send(step)

            one()
        if self.proc.poll() is None:
            self._good_frames()
        else:
            self.crashed_at = self.seq
        self.elapsed = time.monotonic() - self.started

    # ------------------------------------------------------------------------------------------- checking
    def finish(self) -> dict:
        """Wait for the node's counters to settle; the figures and the checks."""
        d = self.d

        def settled() -> bool:
            with d.lock:
                return all(d.diag.get(c, {}).get("received") == str(self.sent[c])
                           and d.diag.get(c, {}).get("processed") == str(len(d.answers[c])) for c in d.cams)

        d.wait(settled, 20.0 if self.proc.poll() is None else 0.0)
        with d.lock:
            diag = {c: dict(d.diag.get(c, {})) for c in d.cams}
            answers = {c: len(d.answers[c]) for c in d.cams}
        dropped, depth = Counter(), Counter()
        received = processed = drops = 0
        for c in d.cams:
            v = diag[c]
            received += int(v.get("received", -1))
            processed += int(v.get("processed", -1))
            drops += int(v.get("dropped", -1))
            dropped.update({k[8:]: int(x) for k, x in v.items() if k.startswith("dropped.")})
            depth.update({k[6:]: int(x) for k, x in v.items() if k.startswith("depth.")})
        q = max(1, len(self.rss) // 4)
        first, last = max(self.rss[1:1 + q] or [0]), max(self.rss[-q:] or [0])
        growth_mib = (last - first) / 2 ** 20
        checks = {
            "node_alive": self.proc.poll() is None,
            "every_good_frame_answered": not self.missing_good,
            "received_equals_sent": received == sum(self.sent.values()),
            "processed_equals_answers": processed == sum(answers.values()),
            "every_drop_counted_under_a_reason": processed + drops == received and sum(dropped.values()) == drops,
            "engine_error_zero": dropped.get("engine_error", 0) == 0,
            "rss_flat": growth_mib < self.args.rss_bound_mib,
        }
        if self.kind == "depth":
            refusals = sum(n for k, n in depth.items() if k not in ("published", depth_reasons.NO_VALID_DEPTH))
            checks["every_3d_output_published_or_refused"] = depth.get("published", 0) + refusals == processed
            checks["depth_internal_error_zero"] = depth.get(depth_reasons.INTERNAL, 0) == 0
        sent = sum(self.sent.values()) + sum(self.side.values())
        return {
            "kind": self.kind, "fuzzed": self.fuzzed, "good": self.good, "sent": sent,
            "colour_frames_sent": sum(self.sent.values()), "side_messages_sent": dict(self.side),
            "received": received, "processed": processed, "answers": sum(answers.values()),
            "fuzzed_answered": processed - self.good, "dropped": drops,
            "dropped_by_reason": dict(sorted(dropped.items())),
            "depth": dict(sorted(depth.items())), "missing_good": self.missing_good[:20],
            "crashed_at_message": self.crashed_at, "campaign_s": round(getattr(self, "elapsed", 0.0), 1),
            "messages_per_s": round(sent / max(getattr(self, "elapsed", 1e-9), 1e-9), 1),
            "rss_mib": {"samples": len(self.rss), "first_quarter_max": round(first / 2 ** 20, 1),
                        "last_quarter_max": round(last / 2 ** 20, 1), "growth": round(growth_mib, 1),
                        "bound": self.args.rss_bound_mib},
            "checks": checks,
        }


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid``, bytes (``/proc/<pid>/statm``); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
