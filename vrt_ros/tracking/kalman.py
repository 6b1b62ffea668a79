"""Constant-velocity Kalman filter over boxes as (centre x, centre y, aspect ratio, height), batched over tracks.

The motion model of SORT (Bewley et al. 2016, "Simple Online and Realtime Tracking") as written in DeepSORT
(Wojke et al. 2017, ``deep_sort/kalman_filter.py``) and reused unchanged by ByteTrack (Zhang et al. 2022,
``yolox/tracker/kalman_filter.py``): state ``(x, y, a, h, vx, vy, va, vh)``, observation ``(x, y, a, h)``, with
noise standard deviations proportional to the box height (:data:`STD_POSITION` = 1/20, :data:`STD_VELOCITY` =
1/160 of ``h``; 1e-2 / 1e-5 / 1e-1 for the aspect ratio's process, velocity and measurement noise):

- initiate: mean ``(z, 0)``, std ``(2 p h, 2 p h, 1e-2, 2 p h, 10 v h, 10 v h, 1e-5, 10 v h)``;
- predict: ``x' = F x``, ``P' = F P F^T + Q`` with ``F = [[I, dt I], [0, I]]`` and
  ``Q = diag(p h, p h, 1e-2, p h, v h, v h, 1e-5, v h)^2``;
- update: ``R = diag(p h, p h, 1e-1, p h)^2``, the standard gain ``K = P H^T (H P H^T + R)^-1``.

Two changes, both exact for the reference at its rate:

1. **Time, not frames.** The reference advances one frame per step. Here ``dt`` is the real stamp difference in
   units of :data:`REFERENCE_PERIOD_S` (1/30 s, the rate of the MOT17 sequences the noise was tuned on), velocities
   are per reference period and ``Q`` grows linearly with ``dt`` (a random walk's variance). At 30 Hz every step is
   the reference's; at 10 Hz one step predicts three reference frames of motion with three times the noise.
2. **Block form.** ``F``, ``Q``, ``R``, ``H`` and the initial ``P`` couple each coordinate only with its own
   velocity, so ``P`` stays four independent 2x2 blocks ``[[pp, pv], [pv, vv]]``: the 8x8 algebra becomes a few
   element-wise operations over all tracks at once (the same numbers; ``test/test_tracking.py`` compares with the
   8x8 reference).

Layout: one float64 column per track, in :data:`WIDTH` rows ``pos`` (4), ``vel`` (4), ``pp`` (4), ``pv`` (4),
``vv`` (4) (:data:`POS` ... :data:`VV`), each quantity contiguous over the tracks (numpy's loops over a (4, T) block
are one loop; over (T, 4) rows they are T loops of 4, several times slower at these sizes); positions in source
pixels (aspect ratio unitless), velocities per reference period. The tracker keeps these rows first in its own
per-track array.
"""

from __future__ import annotations

import numpy as np

#: The time unit of the filter, seconds: one frame of the 30 Hz sequences DeepSORT's noise weights were tuned on.
REFERENCE_PERIOD_S = 1.0 / 30.0
STD_POSITION = 1.0 / 20.0
STD_VELOCITY = 1.0 / 160.0
POS, VEL, PP, PV, VV = slice(0, 4), slice(4, 8), slice(8, 12), slice(12, 16), slice(16, 20)
WIDTH = 20
# Noise variances as (height^2 weight, constant) per coordinate x, y, a, h: the aspect ratio's is not height-scaled.
_INIT_POS = (np.array([4 * STD_POSITION**2, 4 * STD_POSITION**2, 0.0, 4 * STD_POSITION**2]), np.array([0, 0, 1e-2**2, 0]))
_INIT_VEL = (np.array([100 * STD_VELOCITY**2, 100 * STD_VELOCITY**2, 0.0, 100 * STD_VELOCITY**2]), np.array([0, 0, 1e-5**2, 0]))
_Q_POS = (np.array([STD_POSITION**2, STD_POSITION**2, 0.0, STD_POSITION**2]), np.array([0, 0, 1e-2**2, 0]))
_Q_VEL = (np.array([STD_VELOCITY**2, STD_VELOCITY**2, 0.0, STD_VELOCITY**2]), np.array([0, 0, 1e-5**2, 0]))
_R = (np.array([STD_POSITION**2, STD_POSITION**2, 0.0, STD_POSITION**2]), np.array([0, 0, 1e-1**2, 0]))


#: (cx, cy, w, h) = _TO_CENTRE @ (x1, y1, x2, y2) and back.
_TO_CENTRE = np.array([[0.5, 0, 0.5, 0], [0, 0.5, 0, 0.5], [-1.0, 0, 1.0, 0], [0, -1.0, 0, 1.0]])
_TO_CORNERS = np.linalg.inv(_TO_CENTRE)


def xyxy_to_xyah(boxes: np.ndarray) -> np.ndarray:
    """(N, 4) x1, y1, x2, y2 → (4, N) float64 rows centre x, centre y, width / height, height (heights below
    1e-3 px are taken as 1e-3 so the aspect ratio stays finite)."""
    out = _TO_CENTRE @ np.asarray(boxes, np.float64).T
    np.maximum(out[3], 1e-3, out=out[3])
    out[2] /= out[3]
    return out


def xyah_to_xyxy(xyah: np.ndarray) -> np.ndarray:
    """(4, N) rows centre x, centre y, aspect, height → (N, 4) float64 x1, y1, x2, y2."""
    return xyah_to_corners(xyah).T


def xyah_to_corners(xyah: np.ndarray) -> np.ndarray:
    """(4, N) rows centre x, centre y, aspect, height → (4, N) float64 rows x1, y1, x2, y2 (a new array)."""
    cwh = xyah.copy()
    cwh[2] *= cwh[3]
    return _TO_CORNERS @ cwh


def initiate(boxes: np.ndarray) -> np.ndarray:
    """Columns of new tracks, one per box ((M, 4) xyxy source pixels), with the reference's initial covariance:
    (:data:`WIDTH`, M) float64."""
    z = xyxy_to_xyah(boxes)
    cols = np.zeros((WIDTH, z.shape[1]))
    cols[POS] = z
    h2 = z[3] * z[3]
    cols[PP] = np.multiply.outer(_INIT_POS[0], h2) + _INIT_POS[1][:, None]
    cols[VV] = np.multiply.outer(_INIT_VEL[0], h2) + _INIT_VEL[1][:, None]
    return cols


def predict(s: np.ndarray, dt: float) -> None:
    """Advance every column of ``s`` (>= :data:`WIDTH`, T) in place by ``dt`` reference periods (>= 0: the stamp
    difference / :data:`REFERENCE_PERIOD_S`): ``pos += dt vel``, ``pp += 2 dt pv + dt^2 vv + dt q_p``,
    ``pv += dt vv``, ``vv += dt q_v`` with the noise ``q = h^2 w + c`` (the linear part is one product with a
    :data:`WIDTH` x :data:`WIDTH` matrix, kept per ``dt``: a camera's steps repeat)."""
    if not s.shape[1] or dt == 0.0:
        return
    m, w, c = _step(dt)
    h2 = s[3] * s[3]
    s[:WIDTH] = m @ s[:WIDTH]
    noise = w * h2
    noise += c
    s[PP.start:WIDTH] += noise


_STEPS: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _step(dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The transition matrix and the noise weights of rows ``PP`` to ``VV`` (height-squared factor and constant,
    (12, 1) each) for ``dt``; cached (at most 64 distinct steps kept)."""
    got = _STEPS.get(dt)
    if got is None:
        m = np.eye(WIDTH)
        for k in range(4):
            m[POS.start + k, VEL.start + k] = dt  # pos += dt vel
            m[PP.start + k, PV.start + k] = 2.0 * dt  # pp += 2 dt pv + dt^2 vv
            m[PP.start + k, VV.start + k] = dt * dt
            m[PV.start + k, VV.start + k] = dt  # pv += dt vv
        zero = np.zeros(4)
        w = (dt * np.concatenate([_Q_POS[0], zero, _Q_VEL[0]]))[:, None]
        c = (dt * np.concatenate([_Q_POS[1], zero, _Q_VEL[1]]))[:, None]
        if len(_STEPS) >= 64:
            _STEPS.clear()
        got = _STEPS[dt] = (m, w, c)
    return got


def update(g: np.ndarray, boxes: np.ndarray) -> None:
    """Correct the track columns ``g`` (>= :data:`WIDTH`, M; e.g. ``s[:, index]``, written back by the caller) in
    place with their measured boxes (M, 4) xyxy source pixels."""
    mean = g[:8].reshape(2, 4, -1)  # [0] pos, [1] vel
    cov = g[PP.start:PV.stop].reshape(2, 4, -1)  # [0] pp, [1] pv
    h2 = g[3] * g[3]
    s = _R_W * h2
    s += _R_C
    s += g[PP]
    gain = cov / s  # [0] k_p, [1] k_v
    innovation = xyxy_to_xyah(boxes)
    innovation -= g[POS]
    mean += gain * innovation
    g[VV] -= gain[1] * g[PV]
    np.subtract(1.0, gain[0], out=gain[0])
    cov *= gain[0]


_R_W, _R_C = _R[0][:, None], _R[1][:, None]
