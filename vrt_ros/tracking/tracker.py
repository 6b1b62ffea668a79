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
of that class (a robot's consumers read one id as one object of one class; ByteTrack is class-agnostic; classes are
kept apart in the overlap test by float64 class keys, :func:`~vrt_ros.tracking.association.class_offsets`, while the IoU
is taken on the boxes' own coordinates: exact for class ids up to 10 000 and beyond); IoU is not
fused with the score (ByteTrack's MOT17 option); the stamps decide everything time-related, and the tracker resets
(every track dropped, ids never reused) when a stamp goes back or jumps forward by more than ``max_lost_s``: a bag
replayed with ``--loop``, a sim clock restarted, a camera that stopped and came back. A frame whose time is an
estimate (``estimated=True``: the node's time for an unstamped frame) never resets the tracks nor moves time back,
and the next stamp is checked against the last measured one.

**Oriented boxes** (``theta`` given, ``yolov8_obb``: the boxes are rectangles in their own axes): the Kalman filter
runs on the own-axis rectangle (centre, aspect, height), a track's angle is its last matched detection's, and the
overlap of every association is the probabilistic IoU of :mod:`vrt_ros.boxes.rotated` (the rotated NMS's), so two thin
objects crossing at different angles are told apart (:func:`~vrt_ros.tracking.association.rotated_pairs`). The
tracker never tells the kinds apart itself: the detections' :class:`~vrt_ros.boxes.kinds.BoxGeometry` gives the angles
(zeros for axis-aligned boxes) and the IoU of the pairs (:meth:`~vrt_ros.boxes.kinds.BoxGeometry.pairs`).

Ids come from a :class:`~vrt_ros.tracking.ids.TrackIds` (the node keeps one per camera for its whole life; its
format tells processes apart), never reused by the tracker, also across resets.

Pure numpy + SciPy; no ROS, no GPU. Not thread-safe: one tracker per camera, driven by one thread.
"""

from __future__ import annotations

import numpy as np

from vrt_ros.boxes.kinds import BoxGeometry, geometry_of
from vrt_ros.tracking import kalman
from vrt_ros.tracking.association import class_offsets, match_pairs
from vrt_ros.tracking.ids import TrackIds
from vrt_ros.types import TrackerParams

#: Minimum IoU of the second association (confirmed tracks against low-score detections), ByteTrack's 0.5.
SECOND_MIN_IOU = 0.5
#: Minimum IoU of an unconfirmed track and a high-score detection, ByteTrack's 0.7 cost.
UNCONFIRMED_MIN_IOU = 0.3
#: The id given to a detection that is not on a confirmed track.
NO_TRACK = -1
# Per-track column: the Kalman state (kalman.WIDTH rows), then these rows: class offset (class_offsets), angle (oriented boxes), matched
# frames (a track is confirmed when they reach min_hits: they only grow, as a tentative track that misses is
# removed), _TRACKED = 1 - lost (a multiplier), the last match's time. The ids (int64) are a parallel array.
_XOFF, _THETA, _HITS, _TRACKED, _LAST = range(kalman.WIDTH, kalman.WIDTH + 5)
_ROW = kalman.WIDTH + 5
_VH = kalman.VEL.start + 3  # the height velocity


class ByteTracker:
    """The tracks of one camera.

    Args:
        params: the settings.
        ids: where new tracks get their ids (the node passes the camera's, kept for the node's life); None: a
            counter of its own giving 1, 2, 3, ...

    Attributes:
        resets: how many times the tracker reset itself on a stamp jump (not counting :meth:`reset` calls).
        reset_reason: why the last :meth:`update` reset the tracker (a sentence naming the jump), else None.
    """

    def __init__(self, params: TrackerParams, ids: TrackIds | None = None) -> None:
        self.params = params
        self._max_lost_ns = int(round(params.max_lost_s * 1e9))
        self._max_lost_s = self._max_lost_ns * 1e-9
        self.ids = TrackIds(0) if ids is None else ids
        self.resets = 0
        self.reset_reason: str | None = None
        self.reset()

    def reset(self) -> None:
        """Drop every track (ids already given are never given again) and forget the last stamp."""
        self._s = np.zeros((_ROW, 0))  # one column per track: Kalman state, class offset, angle, hits, lost, last match
        self._ids = np.zeros(0, np.int64)  # each column's track id
        self._stamp_ns: int | None = None  # the time of the last frame (measured or estimated)
        self._measured_ns: int | None = None  # the last measured stamp (the reference of the jump checks)
        self._epoch_ns = 0  # the last-match times are seconds since this stamp

    def __len__(self) -> int:
        """Tracks held (tentative, tracked and lost)."""
        return int(self._s.shape[1])

    @property
    def confirmed_count(self) -> int:
        """Confirmed tracks held (tracked or lost)."""
        return int(np.count_nonzero(self._s[_HITS] >= self.params.min_hits))

    def update(self, stamp_ns: int, boxes: np.ndarray, scores: np.ndarray, class_ids: np.ndarray,
               theta: np.ndarray | None = None, estimated: bool = False) -> np.ndarray:
        """Advance to a frame and associate its detections.

        Args:
            stamp_ns: the frame's header stamp, integer ns (any epoch: only differences matter).
            boxes: (N, 4) x1, y1, x2, y2 in source pixels (float32 or float64); oriented boxes: the rectangle in its
                own axes.
            scores: (N,) in [0, 1]; detections below ``low_score`` are ignored.
            class_ids: (N,) int class indices (any int32 value).
            theta: (N,) radians for oriented boxes (``Detections.theta``), else None.
            estimated: ``stamp_ns`` is an estimate (an unstamped frame timed by the node): it neither resets the
                tracks nor moves time back.

        Returns:
            (N,) int64: each detection's track id (>= 1) when it is on a confirmed track after this frame, else
            :data:`NO_TRACK`. Ids increase and are never reused by this tracker.
        """
        p = self.params
        stamp_ns = int(stamp_ns)
        self.reset_reason = None
        last = self._stamp_ns
        if last is None:
            self._epoch_ns = last = stamp_ns
        elif estimated:
            stamp_ns = max(stamp_ns, last)
        else:
            gap = stamp_ns - (last if self._measured_ns is None else self._measured_ns)
            if gap < 0 or gap > self._max_lost_ns:
                self.reset_reason = (f"stamp jumped {'back' if gap < 0 else 'forward'} by {abs(gap) / 1e9:.3f} s"
                                     + ("" if gap < 0 else f" (more than tracking.max_lost_s {p.max_lost_s:g})"))
                self.resets += 1
                self.reset()
                self._epoch_ns = last = stamp_ns
        if not estimated:
            self._measured_ns = stamp_ns
        stamp_ns = max(stamp_ns, last)  # after an estimate a little ahead of this stamp: time stands still
        dt = (stamp_ns - last) * 1e-9 / kalman.REFERENCE_PERIOD_S
        self._stamp_ns = stamp_ns
        now = (stamp_ns - self._epoch_ns) * 1e-9
        boxes = np.asarray(boxes).reshape(-1, 4)
        scores = np.asarray(scores).reshape(-1)
        class_ids = np.asarray(class_ids).reshape(-1)
        out = np.empty(scores.shape[0], np.int64)
        out.fill(NO_TRACK)
        order = (-scores).argsort(kind="stable")  # best first, ties in input order (pipelines give them so)
        ranked = scores[order]
        n_cand = int(np.count_nonzero(ranked >= p.low_score))  # a prefix (low_score <= high_score)
        n_high = int(np.count_nonzero(ranked[:n_cand] >= p.high_score))
        cand = order[:n_cand]
        s = self._s
        births = cand[:n_high]
        geometry = geometry_of(theta)
        theta = np.asarray(geometry.angles(scores.shape[0], theta), np.float32)
        if s.shape[1] and n_cand:
            births = births[self._associate(s, dt, now, boxes[cand], class_ids[cand], n_high, cand, out,
                                            theta[cand], geometry)]
        elif s.shape[1]:
            kalman.predict(s, dt)
            self._end_frame(s, np.zeros(s.shape[1], bool), s[_HITS] >= p.min_hits, now)
        if births.shape[0]:
            self._born(births, boxes, class_ids, theta, now, out)
        return out

    def _associate(self, s: np.ndarray, dt: float, now: float, det_boxes: np.ndarray, det_cls: np.ndarray,
                   n_high: int, cand: np.ndarray, out: np.ndarray, det_theta: np.ndarray,
                   geometry: BoxGeometry) -> np.ndarray:
        """Steps 1-5 of the module docstring; returns which of the ``n_high`` high detections are left unmatched.

        The IoU is taken on the pairs of boxes of one class that may overlap, by the detections' kind of box
        (:meth:`vrt_ros.boxes.kinds.BoxGeometry.pairs`: the area IoU of axis-aligned boxes, the probabilistic IoU of
        oriented ones), and each step matches its subset of those pairs: the same numbers and the same assignments
        as slicing the full track x detection IoU matrix, in far fewer numpy calls."""
        p = self.params
        n_tracks, n_cand = s.shape[1], cand.shape[0]
        s[_VH] *= s[_TRACKED]  # ByteTrack: a lost track's height velocity is zeroed before predicting
        kalman.predict(s, dt)
        cwh = s[kalman.POS].copy()  # cx, cy, w, h of the predicted boxes
        cwh[2] *= cwh[3]
        rows, cols, iou = geometry.pairs(cwh, s[_THETA], s[_XOFF], det_boxes, det_theta, class_offsets(det_cls))
        split = int(cols.searchsorted(n_high))  # the pairs come by detection: those of high ones first
        det_of = np.empty(n_tracks, np.intp)  # matched column of ``cand`` per track
        det_of.fill(-1)
        free = np.ones(n_high, bool)  # the high detections not matched yet
        confirmed = s[_HITS] >= p.min_hits
        first = confirmed.nonzero()[0]
        rows_h, cols_h, iou_h = rows[:split], cols[:split], iou[:split]
        if first.shape[0] and n_high:
            sel = iou_h >= p.min_iou
            if first.shape[0] < n_tracks:
                sel &= confirmed[rows_h]
            r, c = match_pairs(rows_h[sel], cols_h[sel], iou_h[sel], first, _arange(0, n_high))
            det_of[r] = c
            free[c] = False
        if n_high < n_cand:
            second = confirmed & (det_of < 0)
            second &= s[_TRACKED] > 0
            second_ids = second.nonzero()[0]
            if second_ids.shape[0]:
                rows_l, cols_l, iou_l = rows[split:], cols[split:], iou[split:]
                sel = iou_l >= SECOND_MIN_IOU
                sel &= second[rows_l]
                r, c = match_pairs(rows_l[sel], cols_l[sel], iou_l[sel], second_ids, _arange(n_high, n_cand))
                det_of[r] = c
        if first.shape[0] < n_tracks and np.count_nonzero(free):
            tentative = ~confirmed
            sel = free[cols_h] & (iou_h >= UNCONFIRMED_MIN_IOU)
            sel &= tentative[rows_h]
            r, c = match_pairs(rows_h[sel], cols_h[sel], iou_h[sel], tentative.nonzero()[0], free.nonzero()[0])
            det_of[r] = c
            free[c] = False
        matched = det_of >= 0
        hit = matched.nonzero()[0]
        if hit.shape[0]:
            on = det_of[hit]
            g = s[:, hit]
            kalman.update(g, det_boxes[on])
            g[_HITS] += 1.0
            g[_LAST] = now
            g[_THETA] = det_theta[on]
            s[:, hit] = g
            out[cand[on]] = np.where(g[_HITS] >= p.min_hits, self._ids[hit], NO_TRACK)
        self._end_frame(s, matched, confirmed, now)
        return free

    def _end_frame(self, s: np.ndarray, matched: np.ndarray, confirmed: np.ndarray, now: float) -> None:
        """Steps 4-7 bookkeeping: matched tracks are tracked, unmatched confirmed ones become lost, unmatched
        tentative ones and lost ones past ``max_lost_s`` are removed; ``matched``, ``confirmed`` (T,) bool (the
        latter as at the frame's start)."""
        s[_TRACKED] = matched
        keep = confirmed | matched  # an unconfirmed track that missed is removed
        keep &= (now - s[_LAST]) <= self._max_lost_s  # so is one unmatched for longer than max_lost_s
        if np.count_nonzero(keep) < keep.shape[0]:
            self._s = s[:, keep]
            self._ids = self._ids[keep]

    def _born(self, dets: np.ndarray, boxes: np.ndarray, class_ids: np.ndarray, theta: np.ndarray, now: float,
              out: np.ndarray) -> None:
        m = dets.shape[0]
        cols = np.zeros((_ROW, m))
        cols[: kalman.WIDTH] = kalman.initiate(boxes[dets])
        ids = self.ids.take(m)
        cols[_XOFF] = class_offsets(class_ids[dets])
        cols[_THETA] = theta[dets]
        cols[_HITS] = 1.0
        cols[_TRACKED] = 1.0
        cols[_LAST] = now
        if self.params.min_hits <= 1:
            out[dets] = ids
        if self._s.shape[1]:
            self._s = np.concatenate([self._s, cols], axis=1)
            self._ids = np.concatenate([self._ids, ids])
        else:
            self._s, self._ids = cols, ids


def _arange(start: int, stop: int) -> np.ndarray:
    """``np.arange(start, stop)`` (intp), a view of a shared one where it is long enough (a slice costs less)."""
    return _ARANGE[start:stop] if stop <= _ARANGE.shape[0] else np.arange(start, stop)


_ARANGE = np.arange(1024)
_ARANGE.flags.writeable = False
