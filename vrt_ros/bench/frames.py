"""The frames the benchmark replays: real frames from the shared bags and photos, scaled and re-encoded.

Sources, in order: every frame of ``data/bags/*`` (``sensor_msgs/Image`` or ``CompressedImage``, read with
rosbags, decoded with :mod:`vrt_ros.intake.frames` / :mod:`vrt_ros.intake.compressed`), then every photo of ``data/images``
and of any extra folders (decoded with OpenCV). Each is resized (``cv2.INTER_LINEAR``, aspect not kept) to the
benchmark size and encoded as the message payload of a ``sensor_msgs/Image``: ``bgr8`` (3 bytes a pixel) or
``yuv422`` (UYVY byte order, BT.601 video range, 2 bytes a pixel), each frame its own ``bytes`` object as a
message's data would be.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from vrt_ros.types import ImageSpec

log = logging.getLogger(__name__)

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png")
ENCODINGS = ("bgr8", "yuv422")
BYTES_PER_PIXEL = {"bgr8": 3, "yuv422": 2}
# BT.601 video range (ITU-R BT.601, 8-bit): rows Y, U, V over (R, G, B), offsets 16, 128, 128.
_BT601 = np.array([[0.257, 0.504, 0.098], [-0.148, -0.291, 0.439], [0.439, -0.368, -0.071]], np.float32)
_BT601_OFFSET = np.array([16.0, 128.0, 128.0], np.float32)


def _bag_frames(bag: Path) -> list[np.ndarray]:
    """Every image of a rosbag2 folder, decoded to BGR uint8 (H, W, 3)."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from vrt_ros.intake import frames as vframes
    from vrt_ros.intake.compressed import decode_compressed

    store = get_typestore(Stores.ROS2_JAZZY)
    out = []
    with Reader(bag) as reader:
        conns = [c for c in reader.connections if c.msgtype in ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")]
        for conn, _, raw in reader.messages(connections=conns):
            msg = store.deserialize_cdr(raw, conn.msgtype)
            if conn.msgtype.endswith("CompressedImage"):
                out.append(decode_compressed(msg.format, msg.data))
            else:
                spec = ImageSpec(msg.width, msg.height, msg.encoding, msg.step, bool(msg.is_bigendian))
                out.append(vframes.to_bgr(spec, msg.data).copy())
    return out


def load_sources(shared: Path | None, extra_dirs: Iterable[Path] = (), limit: int = 64) -> tuple[list[np.ndarray], list[str]]:
    """Decode the source frames (BGR uint8, any size).

    Args:
        shared: a folder laid out as ``../shared`` (``data/bags``, ``data/images``), or None.
        extra_dirs: more photo folders (e.g. the CenterFace crowd photo's asset folder); a file name already
            taken from an earlier folder is skipped.
        limit: most frames kept.

    Returns:
        ``(frames, descriptions)``: the frames and one line per source (path and frame count).

    Raises:
        ValueError: no frame was found.
    """
    import cv2

    frames: list[np.ndarray] = []
    notes: list[str] = []
    if shared is not None:
        for bag in sorted((shared / "data" / "bags").glob("*")):
            if not (bag / "metadata.yaml").is_file():
                continue
            try:
                got = _bag_frames(bag)
            except ImportError as exc:
                notes.append(f"{bag.name}: skipped (rosbags not importable: {exc})")
                continue
            frames += got
            notes.append(f"{bag.name}: {len(got)} frames {got[0].shape[1]}x{got[0].shape[0]}" if got else f"{bag.name}: empty")
    photo_dirs = ([shared / "data" / "images"] if shared is not None else []) + [Path(d) for d in extra_dirs]
    seen: set[str] = set()  # one photo per file name (the registry assets repeat some of the shared photos)
    for d in photo_dirs:
        for p in sorted(d.glob("*")) if d.is_dir() else []:
            if p.suffix.lower() in PHOTO_SUFFIXES and p.name not in seen:
                seen.add(p.name)
                img = cv2.imread(str(p), cv2.IMREAD_COLOR)
                if img is not None:
                    frames.append(img)
                    notes.append(f"{p.name}: {img.shape[1]}x{img.shape[0]}")
    if not frames:
        raise ValueError(f"no frames found (shared folder {shared}, photo folders {list(extra_dirs)})")
    return frames[:limit], notes


def bgr_to_uyvy(bgr: np.ndarray) -> np.ndarray:
    """Encode a BGR uint8 (H, W, 3) image (W even) as 4:2:2 UYVY bytes (H, 2W), BT.601 video range.

    Y, U, V per pixel with ``cv2.transform`` (rounded, saturated); U and V of a pixel pair are the rounded mean
    of the pair's two pixels (what ``cv2.COLOR_YUV2BGR_UYVY`` inverts).

    Raises:
        ValueError: odd width.
    """
    import cv2

    h, w = bgr.shape[:2]
    if w % 2:
        raise ValueError(f"4:2:2 needs an even width, got {w}")
    m = np.concatenate([_BT601[:, ::-1], _BT601_OFFSET[:, None]], axis=1)  # columns B, G, R, offset
    yuv = cv2.transform(np.ascontiguousarray(bgr), m)  # (H, W, 3) uint8: Y, U, V
    out = np.empty((h, w // 2, 4), np.uint8)
    pair = yuv.reshape(h, w // 2, 2, 3).astype(np.uint16)
    out[..., 0] = (pair[:, :, 0, 1] + pair[:, :, 1, 1] + 1) >> 1
    out[..., 1] = yuv[:, 0::2, 0]
    out[..., 2] = (pair[:, :, 0, 2] + pair[:, :, 1, 2] + 1) >> 1
    out[..., 3] = yuv[:, 1::2, 0]
    return out.reshape(h, 2 * w)


def make_messages(sources: Sequence[np.ndarray], width: int, height: int, encoding: str) -> list[tuple[ImageSpec, bytes]]:
    """The replayed messages for one size and encoding: ``(spec, data)`` per source frame.

    Raises:
        ValueError: unknown encoding (one of :data:`ENCODINGS`).
    """
    import cv2

    if encoding not in BYTES_PER_PIXEL:
        raise ValueError(f"encoding {encoding!r} is not one of {ENCODINGS}")
    step = width * BYTES_PER_PIXEL[encoding]
    spec = ImageSpec(width=width, height=height, encoding=encoding, step=step)
    out = []
    for src in sources:
        img = cv2.resize(src, (width, height), interpolation=cv2.INTER_LINEAR)
        payload = img if encoding == "bgr8" else bgr_to_uyvy(img)
        out.append((spec, payload.tobytes()))
    return out


#: How the benchmark hands each frame to the code under test (``--message``).
MESSAGE_STATES = ("fresh", "cold")


class FreshMessages:
    """The replayed messages as a node receives them: each frame's bytes written just before it is handed over.

    rclpy writes every received message into memory (deserialisation) right before the subscription callback, so
    the bytes a node reads are recently written and mostly in the CPU caches. Indexing this sequence copies the
    frame's bytes into one reused buffer (``bytearray``, outside any timed region of the benchmark, which takes the
    message before starting its clock) and returns ``(spec, memoryview)`` over it. The alternative, ``cold``, hands
    over the pre-built ``bytes`` objects in rotation, which at 1920x1080 are read from main memory (55 frames of
    6.2 MB exceed the caches): the slowest case, not what a node sees.

    Only the latest item is valid: the next access overwrites the buffer (every loop of the benchmark uses one
    frame at a time).

    Args:
        messages: ``(spec, data)`` per frame, as :func:`make_messages` returns.
    """

    def __init__(self, messages: Sequence[tuple[ImageSpec, bytes]]) -> None:
        self._messages = messages
        self._buffer = bytearray(max(len(d) for _, d in messages))

    def __len__(self) -> int:
        return len(self._messages)

    def __getitem__(self, i: int) -> tuple[ImageSpec, memoryview]:
        spec, data = self._messages[i]
        view = memoryview(self._buffer)[: len(data)]
        view[:] = data
        return spec, view


def as_received(messages: Sequence[tuple[ImageSpec, bytes]], state: str) -> Sequence:
    """``messages`` in the given :data:`MESSAGE_STATES` state (``fresh``: :class:`FreshMessages`).

    Raises:
        ValueError: unknown state.
    """
    if state == "fresh":
        return FreshMessages(messages)
    if state == "cold":
        return messages
    raise ValueError(f"message state {state!r} is not one of {MESSAGE_STATES}")
