"""One camera's multi-object tracker: ByteTrack association over Kalman-predicted boxes, with time-based loss.

The association is ByteTrack's (Zhang et al. 2022, "ByteTrack: Multi-Object Tracking by Associating Every Detection
Box", ECCV; ``yolox/tracker/byte_tracker.py``, ``BYTETracker.update``), per frame:

1. every track's box is predicted to the frame's stamp (:mod:`vrt_ros.tracking.kalman`, the real stamp difference);
2. detections are split by score: *high* (>= ``high_score``) and *low* (>= ``low_score`` and below ``high_score``);
3. first association: confirmed tracks, tracked and lost, against the high detections, cost ``1 - IoU``, pairs
   below ``min_iou`` not allowed (ByteTrack: ``match_thresh`` 0.8, i.e. IoU >= 0.2);
4. second association: the confirmed tracks still unmatched and not lost against the low detections, IoU >= 0.5
   (:data:`SECOND_MIN_IOU`, ByteTrack's 0.5); those still unmatched become lost;
5. unconfirmed tracks against the high detections left, IoU >= 0.3 (:data:`UNCONFIRMED_MIN_IOU`, ByteTrack's 0.7
   cost); an unconfirmed track that misses a frame is removed (ByteTrack's rule);
6. every high detection left starts a new track, confirmed after ``min_hits`` matched frames in a row (the birth
   frame counts; ByteTrack's rule is ``min_hits`` = 2 and a detection threshold 0.1 above ``high_score``);
7. a lost track is removed when its last match is more than ``max_lost_s`` before the frame (ByteTrack: 30
   frames at 30 Hz, a frame count; here a time, so 10 and 30 Hz cameras and dropped frames behave alike).

Differences from the reference, on purpose: a track keeps the class it was born with and only matches detections
of that class (a robot's consumers read one id as one object of one class; ByteTrack is class-agnostic); IoU is not
fused with the score (ByteTrack's MOT17 option); the stamps decide everything time-related, and the tracker resets
(every track dropped, ids never reused) when a stamp goes back or jumps forward by more than ``max_lost_s``: a bag
replayed with ``--loop``, a sim clock restarted, a camera that stopped and came back.

Pure numpy + SciPy; no ROS, no GPU. Not thread-safe: one tracker per camera, driven by one thread.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.tracking import kalman
from vrt_ros.tracking.association import iou_matrix, match
from vrt_ros.types import TrackerParams

#: Minimum IoU of the second association (confirmed tracks against low-score detections), ByteTrack's 0.5.
SECOND_MIN_IOU = 0.5
#: Minimum IoU of an unconfirmed track and a high-score detection, ByteTrack's 0.7 cost.
UNCONFIRMED_MIN_IOU = 0.3
#: The id given to a detection that is not on a confirmed track.
NO_TRACK = -1
# Per-track column: the Kalman state (kalman.WIDTH rows), then these rows (_TRACKED = 1 - lost, a multiplier).
_ID, _CLS, _HITS, _CONFIRMED, _TRACKED, _LAST = range(kalman.WIDTH, kalman.WIDTH + 6)
#: Class index x this is added to x coordinates before the IoU, so boxes of two classes never overlap (the trick of
#: torchvision's batched_nms): one IoU matrix serves every class.
_CLASS_OFFSET = 1e5
_X_COLUMNS = np.array([1.0, 0.0, 1.0, 0.0])
_ROW = kalman.WIDTH + 6
_VH = kalman.VEL.start + 3  # the height velocity


class ByteTracker:
    """The tracks of one camera.

    Args:
        params: the settings.

    Attributes:
        resets: how many times the tracker reset itself on a stamp jump (not counting :meth:`reset` calls).
        reset_reason: why the last :meth:`update` reset the tracker (a sentence naming the jump), else None.
    """

    def __init__(self, params: TrackerParams) -> None:
        self.params = params
        self._max_lost_ns = int(round(params.max_lost_s * 1e9))
        self._max_lost_s = self._max_lost_ns * 1e-9
        self._next_id = 1
        self.resets = 0
        self.reset_reason: str | None = None
        self.reset()

    def reset(self) -> None:
        """Drop every track (ids already given are never given again) and forget the last stamp."""
        self._s = np.zeros((_ROW, 0))  # one column per track: Kalman state, id, class, hits, confirmed, lost, last match
        self._stamp_ns: int | None = None
        self._epoch_ns = 0  # the last-match times are seconds since this stamp

    def __len__(self) -> int:
        """Tracks held (tentative, tracked and lost)."""
        return int(self._s.shape[1])

    @property
    def confirmed_count(self) -> int:
        """Confirmed tracks held (tracked or lost)."""
        return int(np.count_nonzero(self._s[_CONFIRMED]))

    def update(self, stamp_ns: int, boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray) -> np.ndarray:
        """Advance to a frame and associate its detections.

        Args:
            stamp_ns: the frame's header stamp, integer ns (any epoch: only differences matter).
            boxes: (N, 4) x1, y1, x2, y2 in source pixels (float32 or float64).
            scores: (N,) in [0, 1]; detections below ``low_score`` are ignored.
            class_ids: (N,) int class indices.

        Returns:
            (N,) int64: each detection's track id (>= 1) when it is on a confirmed track after this frame, else
            :data:`NO_TRACK`. Ids increase and are never reused by this tracker.
        """
        p = self.params
        stamp_ns = int(stamp_ns)
        self.reset_reason = None
        if self._stamp_ns is None:
            self._epoch_ns = stamp_ns
            dt = 0.0
        else:
            gap = stamp_ns - self._stamp_ns
            if gap < 0 or gap > self._max_lost_ns:
                self.reset_reason = (f"stamp jumped {'back' if gap < 0 else 'forward'} by {abs(gap) / 1e9:.3f} s"
                                     + ("" if gap < 0 else f" (more than tracking.max_lost_s {p.max_lost_s:g})"))
                self.resets += 1
                self.reset()
                self._epoch_ns = stamp_ns
                gap = 0
            dt = gap * 1e-9 / kalman.REFERENCE_PERIOD_S
        self._stamp_ns = stamp_ns
        now = (stamp_ns - self._epoch_ns) * 1e-9
        boxes = np.asarray(boxes).reshape(-1, 4)
        scores = np.asarray(scores).reshape(-1)
        out = np.full(scores.shape[0], NO_TRACK, np.int64)
        cand = (scores >= p.low_score).nonzero()[0]
        ranked = scores[cand]
        if cand.shape[0] > 1 and (ranked[1:] > ranked[:-1]).any():  # pipelines give them best first already
            cand = cand[np.argsort(-ranked, kind="stable")]
        n_high = int(np.count_nonzero(scores[cand] >= p.high_score))
        s = self._s
        births = cand[:n_high]
        if s.shape[1] and cand.shape[0]:
            births = births[self._associate(s, dt, now, boxes[cand], np.asarray(class_ids).reshape(-1)[cand], n_high, cand,
                                            out)]
        elif s.shape[1]:
            kalman.predict(s, dt)
            self._end_frame(s, np.full(s.shape[1], -1, np.intp), now)
        if births.shape[0]:
            self._born(births, boxes, class_ids, now, out)
        return out

    def _associate(self, s: np.ndarray, dt: float, now: float, det_boxes: np.ndarray, det_cls: np.ndarray,
                   n_high: int, cand: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Steps 1-5 of the module docstring; returns which of the ``n_high`` high detections are left unmatched."""
        p = self.params
        raw_boxes = det_boxes
        s[_VH] *= s[_TRACKED]  # ByteTrack: a lost track's height velocity is zeroed before predicting
        kalman.predict(s, dt)
        track_boxes = kalman.xyah_to_xyxy(s[kalman.POS])
        if det_cls.shape[0] and (det_cls.max() > 0 or s[_CLS].max() > 0):
            track_boxes[:, ::2] += (s[_CLS] * _CLASS_OFFSET)[:, None]
            det_boxes = det_boxes + (det_cls * _CLASS_OFFSET)[:, None] * _X_COLUMNS
        iou = iou_matrix(track_boxes, det_boxes)
        det_of = np.full(s.shape[1], -1, np.intp)  # matched column of ``cand`` per track
        high_left = np.ones(n_high, bool)
        confirmed = s[_CONFIRMED] > 0
        first = confirmed.nonzero()[0]
        if first.shape[0] and n_high:
            r, c = match(iou[:, :n_high] if first.shape[0] == s.shape[1] else iou[first, :n_high], p.min_iou)
            det_of[first[r]] = c
            high_left[c] = False
        if n_high < cand.shape[0]:
            second = (confirmed & (det_of < 0) & (s[_TRACKED] > 0)).nonzero()[0]
            if second.shape[0]:
                r, c = match(iou[second, n_high:], SECOND_MIN_IOU)
                det_of[second[r]] = n_high + c
        tentative = (~confirmed).nonzero()[0]
        if tentative.shape[0] and high_left.any():
            left = high_left.nonzero()[0]
            r, c = match(iou[np.ix_(tentative, left)], UNCONFIRMED_MIN_IOU)
            det_of[tentative[r]] = left[c]
            high_left[left[c]] = False
        hit = (det_of >= 0).nonzero()[0]
        if hit.shape[0]:
            matched = det_of[hit]
            g = s[:, hit]
            kalman.update(g, raw_boxes[matched])
            g[_HITS] += 1.0
            g[_TRACKED] = 1.0
            g[_LAST] = now
            g[_CONFIRMED] += g[_HITS] >= p.min_hits
            np.minimum(g[_CONFIRMED], 1.0, out=g[_CONFIRMED])
            s[:, hit] = g
            on_track = g[_CONFIRMED] > 0
            out[cand[matched[on_track]]] = g[_ID, on_track]
        self._end_frame(s, det_of, now)
        return high_left

    def _end_frame(self, s: np.ndarray, det_of: np.ndarray, now: float) -> None:
        """Steps 4-7 bookkeeping: unmatched confirmed tracks become lost, unmatched tentative ones and lost ones
        past ``max_lost_s`` are removed."""
        missed = det_of < 0
        confirmed = s[_CONFIRMED] > 0
        s[_TRACKED, missed] = 0.0
        keep = confirmed | ~missed  # an unconfirmed track that missed is removed
        keep &= (now - s[_LAST]) <= self._max_lost_s  # so is one unmatched for longer than max_lost_s
        if not keep.all():
            self._s = s[:, keep]

    def _born(self, dets: np.ndarray, boxes: np.ndarray, class_ids: np.ndarray, now: float, out: np.ndarray) -> None:
        m = dets.shape[0]
        cols = np.zeros((_ROW, m))
        cols[: kalman.WIDTH] = kalman.initiate(boxes[dets])
        ids = np.arange(self._next_id, self._next_id + m, dtype=np.int64)
        self._next_id += m
        cols[_ID] = ids
        cols[_CLS] = np.asarray(class_ids).reshape(-1)[dets]
        cols[_HITS] = 1.0
        cols[_TRACKED] = 1.0
        cols[_LAST] = now
        if self.params.min_hits <= 1:
            cols[_CONFIRMED] = 1.0
            out[dets] = ids
        self._s = np.concatenate([self._s, cols], axis=1) if self._s.shape[1] else cols
