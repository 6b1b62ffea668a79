"""Publish image files as a camera: a folder of images, one image, or a video file, so a model can be tried on your
own pictures without writing a publisher.

Console tool (``ros2 run vrt_ros publish_images``, or ``python -m vrt_ros.tools.publish_images`` in the venv)::

    publish_images SOURCE [--topic /camera/image_raw] [--rate HZ] [--frame-id ID] [--compressed [--format jpeg|png]
                   [--quality Q]] [--loop | --loops N] [--wait-subscribers N] [--wait-timeout S] [--no-wait]
                   [--qos KEY] [--depth N] [--dds-profile auto|none|FILE]

- SOURCE: a folder (its image files, :data:`IMAGE_SUFFIXES`, in name order; files OpenCV cannot read are skipped with
  a warning), one image file, or a video file (any container OpenCV's ``VideoCapture`` opens: .mp4, .avi, .mkv...).
  Images are read with OpenCV as 8-bit BGR (grey images become three equal channels; alpha is dropped).
- Each frame is a ``sensor_msgs/Image`` ``bgr8`` on ``--topic`` (``step`` = 3 x width, source pixels unchanged), or with
  ``--compressed`` a ``sensor_msgs/CompressedImage`` (JPEG, ``--quality``, or PNG) on ``<topic>/compressed``, the
  image_transport name the node subscribes with ``input.compressed: true``. ``header.stamp`` is the tool's ROS clock
  when the frame is published, ``header.frame_id`` is ``--frame-id`` (an optical frame, REP-103).
- Paced at ``--rate`` frames per second (default 10; 0: as fast as possible); a video's own frame rate is not used.
- Before the first frame it waits for ``--wait-subscribers`` subscribers (the node) up to ``--wait-timeout`` s, and
  after the last it keeps the publisher until the frames are delivered (:mod:`vrt_ros.tools.delivery`), as ``replay``.
- It loads the Fast DDS large-frame profile for itself (``--dds-profile auto``, :mod:`vrt_ros.ros.dds`): raw frames
  from a publisher without it never reach another process.

Prints ``published N frames from SOURCE on TOPIC in S s``; exit code 2 with one line naming the source when it
holds no readable image or video.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from vrt_ros.ros import stop

if stop.process_entry(__name__, sys.argv[0], "publish_images"):
    stop.install("publish_images")  # before rclpy's imports: a signal during them is a stop too

import numpy as np  # noqa: E402
from rclpy.node import Node  # noqa: E402

from vrt_ros.errors import ConfigError  # noqa: E402
from vrt_ros.ros.qos import make_qos  # noqa: E402
from vrt_ros.tools import delivery  # noqa: E402
from vrt_ros.tools.tool import run_tool, tool_parser  # noqa: E402

#: File name suffixes read as images from a folder (lower case); anything else in the folder is ignored.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".pgm", ".ppm", ".pnm")
DEFAULT_TOPIC = "/camera/image_raw"
#: Default ``header.frame_id``: the camera's optical frame (REP-103: z forward, x right, y down).
DEFAULT_FRAME_ID = "camera_optical_frame"


def _read_bgr(path: Path):
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_COLOR)  # 8-bit BGR; grey becomes 3 channels, alpha dropped
    return image if image is not None and image.size else None


class ImageSource:
    """The frames of a folder of images, one image file or a video file, in order.

    Args:
        path: the folder, image or video.

    Attributes:
        kind: ``"folder"``, ``"image"`` or ``"video"``.
        files: a folder's image files in name order (one for an image; empty for a video).

    Raises:
        ConfigError: ``path`` does not exist, is a folder without image files, or a file OpenCV reads neither as an
            image nor as a video (names the path).
    """

    def __init__(self, path: str | Path) -> None:
        import cv2

        self.path = Path(path)
        if self.path.is_dir():
            self.kind = "folder"
            self.files = sorted(p for p in self.path.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
            if not self.files:
                raise ConfigError(f"{self.path}: no image files in this folder (looked for "
                                  f"{', '.join(IMAGE_SUFFIXES)})")
        elif self.path.is_file():
            self.kind = "image" if self.path.suffix.lower() in IMAGE_SUFFIXES else "video"
            self.files = [self.path] if self.kind == "image" else []
            if self.kind == "image" and _read_bgr(self.path) is None:
                raise ConfigError(f"{self.path}: OpenCV cannot read this image")
            if self.kind == "video":
                cap = cv2.VideoCapture(str(self.path))
                ok = cap.isOpened() and cap.read()[0]
                cap.release()
                if not ok:
                    raise ConfigError(f"{self.path}: OpenCV reads no frame of this file (neither an image, by its "
                                      f"suffix, nor a video it can open)")
        else:
            raise ConfigError(f"{self.path} does not exist (expected a folder of images, an image or a video file)")

    def frames(self, warn=print) -> Iterator[tuple[str, np.ndarray]]:
        """One pass: ``(name, bgr)`` per frame, ``bgr`` (H, W, 3) uint8. A folder's unreadable file is skipped with
        ``warn(line)``; a video's frames are named ``<file>#<index>``."""
        if self.kind != "video":
            for f in self.files:
                image = _read_bgr(f)
                if image is None:
                    warn(f"publish_images: {f}: OpenCV cannot read this image; skipped")
                    continue
                yield f.name, image
            return
        import cv2

        cap = cv2.VideoCapture(str(self.path))
        try:
            index = 0
            while True:
                ok, image = cap.read()
                if not ok:
                    return
                yield f"{self.path.name}#{index}", image
                index += 1
        finally:
            cap.release()


@dataclass
class PublishResult:
    """What :func:`publish` did: frames published, passes completed, wall time (s)."""

    published: int = 0
    loops: int = 0
    wall_s: float = 0.0


class FramePublisher:
    """Turns BGR frames into camera messages on one topic (raw ``bgr8`` or compressed), stamped by ``node``'s clock.

    Args:
        node: the node owning the publisher.
        topic: the raw image topic; with ``compressed`` the messages go to ``<topic>/compressed``.
        compressed: publish ``sensor_msgs/CompressedImage`` instead of ``sensor_msgs/Image``.
        fmt: ``jpeg`` or ``png`` (compressed only).
        quality: JPEG quality 1..100.
        frame_id: ``header.frame_id``.
        qos, depth: publisher QoS preset key and history depth.

    Raises:
        ConfigError: a bad ``fmt``, ``quality`` or ``qos`` (names the option).
    """

    def __init__(self, node: Node, topic: str, *, compressed: bool = False, fmt: str = "jpeg", quality: int = 90,
                 frame_id: str = DEFAULT_FRAME_ID, qos: str = "reliable", depth: int = 10) -> None:
        from sensor_msgs.msg import CompressedImage, Image

        if fmt not in ("jpeg", "png"):
            raise ConfigError(f"--format {fmt!r}: expected jpeg or png")
        if not 1 <= quality <= 100:
            raise ConfigError(f"--quality {quality}: expected 1..100")
        self._node, self._compressed, self._fmt, self._quality, self._frame_id = node, compressed, fmt, quality, frame_id
        self.topic = f"{topic.rstrip('/')}/compressed" if compressed else topic
        self.publisher = node.create_publisher(CompressedImage if compressed else Image, self.topic,
                                               make_qos(qos, depth, parameter="--qos"))

    def message(self, bgr: np.ndarray):
        """The message for one (H, W, 3) uint8 BGR frame, stamped now."""
        import cv2
        from sensor_msgs.msg import CompressedImage
        from std_msgs.msg import Header

        from vrt_ros.ros.convert import bgr_to_image_msg

        header = Header(stamp=self._node.get_clock().now().to_msg(), frame_id=self._frame_id)
        if not self._compressed:
            return bgr_to_image_msg(bgr, header)
        params = [cv2.IMWRITE_JPEG_QUALITY, self._quality] if self._fmt == "jpeg" else []
        ok, data = cv2.imencode(".jpg" if self._fmt == "jpeg" else ".png", bgr, params)
        if not ok:
            raise ConfigError(f"OpenCV could not encode a {bgr.shape[1]}x{bgr.shape[0]} frame as {self._fmt}")
        return CompressedImage(header=header, format=f"bgr8; {self._fmt} compressed bgr8", data=data.tobytes())

    def publish(self, bgr: np.ndarray) -> None:
        self.publisher.publish(self.message(bgr))


def _wait_until(due: float, stop_event: threading.Event | None) -> bool:
    """Sleep until monotonic time ``due``; True when ``stop_event`` was set meanwhile."""
    wait = due - time.monotonic()
    if stop_event is not None:
        return stop_event.wait(max(0.0, wait))
    if wait > 0:
        time.sleep(wait)
    return False


def publish(source: ImageSource, out: FramePublisher, *, rate: float = 10.0, loops: int = 1,
            stop_event: threading.Event | None = None, warn=print) -> PublishResult:
    """Publish ``source``'s frames through ``out`` at ``rate`` frames/s (0: as fast as possible), ``loops`` passes
    (0: until ``stop_event`` is set).

    Raises:
        ConfigError: ``rate`` < 0, or a pass that published no frame (every file unreadable).
    """
    if rate < 0:
        raise ConfigError(f"--rate must be >= 0, got {rate}")
    result = PublishResult()
    start = time.monotonic()
    while loops == 0 or result.loops < loops:
        before = result.published
        for _, bgr in source.frames(warn):
            if _wait_until(start + result.published / rate if rate > 0 else 0.0, stop_event):
                result.wall_s = time.monotonic() - start
                return result
            out.publish(bgr)
            result.published += 1
        if result.published == before:
            raise ConfigError(f"{source.path}: no frame could be read")
        result.loops += 1
    result.wall_s = time.monotonic() - start
    return result


def build_parser() -> argparse.ArgumentParser:
    """Command-line options of the ``publish_images`` console script."""
    p = tool_parser("publish_images", __doc__.split("\n\n")[0], "publisher")
    p.add_argument("source", type=Path, help="a folder of images, one image file, or a video file")
    p.add_argument("--topic", default=DEFAULT_TOPIC, help=f"raw image topic (default {DEFAULT_TOPIC}; with "
                   "--compressed the messages go to <topic>/compressed)")
    p.add_argument("--rate", type=float, default=10.0, help="frames per second; 0 = as fast as possible (default 10)")
    p.add_argument("--frame-id", default=DEFAULT_FRAME_ID, help=f"header.frame_id (default {DEFAULT_FRAME_ID})")
    p.add_argument("--compressed", action="store_true", help="publish sensor_msgs/CompressedImage on <topic>/compressed")
    p.add_argument("--format", choices=("jpeg", "png"), default="jpeg", help="compressed format (default jpeg)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality 1..100 (default 90)")
    p.add_argument("--loop", action="store_true", help="repeat until interrupted")
    p.add_argument("--loops", type=int, default=1, help="number of passes (default 1; ignored with --loop)")
    p.add_argument("--wait-subscribers", type=int, default=1, help="wait for this many subscribers (default 1)")
    p.add_argument("--wait-timeout", type=float, default=10.0, help="seconds to wait for subscribers (default 10)")
    p.add_argument("--no-wait", action="store_true", help="publish at once, without waiting for subscribers")
    return p


def _publish_images(node: Node, args: argparse.Namespace) -> int:
    source = ImageSource(args.source)
    out = FramePublisher(node, args.topic, compressed=args.compressed, fmt=args.format, quality=args.quality,
                         frame_id=args.frame_id, qos=args.qos, depth=args.depth)
    log = node.get_logger()
    try:
        if not args.no_wait and args.wait_subscribers > 0:
            log.info(f"publish_images: waiting up to {args.wait_timeout:g} s for {args.wait_subscribers} "
                     f"subscriber(s) on {out.topic} (--no-wait skips this)")
            if not delivery.wait_for_subscribers([out.publisher], args.wait_subscribers, args.wait_timeout):
                log.warning(f"publish_images: fewer than {args.wait_subscribers} subscriber(s) on {out.topic} after "
                            f"{args.wait_timeout:g} s (--wait-timeout); publishing anyway")
        result = publish(source, out, rate=args.rate, loops=0 if args.loop else args.loops, warn=log.warning)
    finally:
        if node.context.ok():
            delivery.wait_for_delivery(node, [out.publisher])
    print(f"published {result.published} frames from {args.source} on {out.topic} in {result.wall_s:.2f} s")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``publish_images`` console script; ROS arguments after ``--ros-args`` go to rclpy."""
    return run_tool("publish_images", build_parser(), "vrt_publish_images", _publish_images, argv)


if __name__ == "__main__":
    sys.exit(main())
