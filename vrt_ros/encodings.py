"""The one table of supported raw image encodings (``sensor_msgs/Image.encoding``).

Every consumer (validation, CPU conversion, GPU kernels) looks encodings up here; adding an encoding means adding a
row here plus its conversions. Names follow ``sensor_msgs/image_encodings.hpp``.
"""

from __future__ import annotations

from dataclasses import dataclass

from vrt_ros.errors import FrameError


@dataclass(frozen=True)
class Encoding:
    """One raw pixel format.

    Attributes:
        name: ROS encoding string.
        channels: samples per pixel in the message buffer.
        bytes_per_pixel: bytes one pixel occupies in a row (``channels * bytes per sample``).
        order: sample order in the buffer: "bgr", "rgb", "bgra", "rgba" or "mono".
        kernel: name of the GPU preprocess entry point in ``kernels/preprocess.cu`` that reads this format.
    """

    name: str
    channels: int
    bytes_per_pixel: int
    order: str
    kernel: str


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("bgr8", 3, 3, "bgr", "letterbox_u8"),
        Encoding("rgb8", 3, 3, "rgb", "letterbox_u8"),
        Encoding("bgra8", 4, 4, "bgra", "letterbox_u8"),
        Encoding("rgba8", 4, 4, "rgba", "letterbox_u8"),
        Encoding("mono8", 1, 1, "mono", "letterbox_u8"),
    )
}

# Index of blue, green and red in a pixel's samples, for each order (mono: all three read sample 0).
BGR_INDEX: dict[str, tuple[int, int, int]] = {
    "bgr": (0, 1, 2),
    "rgb": (2, 1, 0),
    "bgra": (0, 1, 2),
    "rgba": (2, 1, 0),
    "mono": (0, 0, 0),
}


def lookup(name: str) -> Encoding:
    """Return the table row for ``name``.

    Raises:
        FrameError: (reason ``unknown_encoding``) the encoding is not in the table; the message lists the supported ones.
    """
    try:
        return ENCODINGS[name]
    except KeyError:
        supported = ", ".join(sorted(ENCODINGS))
        raise FrameError(
            f"image encoding {name!r} is not supported (supported: {supported})", reason="unknown_encoding"
        ) from None
