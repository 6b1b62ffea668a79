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
        channels: samples per pixel in the message buffer (2 for packed 4:2:2, where a pixel pair shares U, V).
        bytes_per_pixel: bytes one pixel occupies in a row (``channels * bytes per sample``).
        order: sample layout: "bgr", "rgb", "bgra", "rgba", "mono" (8-bit packed, read directly by the fused
            kernel), "mono16" (16-bit grey, scaled to 8 bits by ``>> 8``), "uyvy", "yuyv" (4:2:2, BT.601
            video range as OpenCV), "bayer_rggb", "bayer_bggr", "bayer_gbrg", "bayer_grbg" (8-bit mosaic,
            bilinear demosaic as OpenCV).
        kernel: GPU preprocess entry point in ``kernels/preprocess.cu`` that reads this layout directly, or ""
            when the GPU path converts it to bgr8 first.
        cv_code: name of the OpenCV ``cv2.COLOR_*`` conversion to BGR used by the CPU path (the reference), or ""
            for layouts converted by channel selection.
        even_width: the layout needs an even width (4:2:2 pixel pairs).
    """

    name: str
    channels: int
    bytes_per_pixel: int
    order: str
    kernel: str
    cv_code: str = ""
    even_width: bool = False


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("bgr8", 3, 3, "bgr", "letterbox_u8"),
        Encoding("rgb8", 3, 3, "rgb", "letterbox_u8"),
        Encoding("bgra8", 4, 4, "bgra", "letterbox_u8"),
        Encoding("rgba8", 4, 4, "rgba", "letterbox_u8"),
        Encoding("mono8", 1, 1, "mono", "letterbox_u8"),
        Encoding("8UC3", 3, 3, "bgr", "letterbox_u8"),  # OpenCV's default channel order, as cv_bridge reads it
        Encoding("8UC1", 1, 1, "mono", "letterbox_u8"),
        Encoding("mono16", 1, 2, "mono16", "letterbox_u8"),  # the kernel reads the high byte (sample >> 8)
        # sensor_msgs image_encodings.hpp: yuv422 is UYVY byte order, yuv422_yuy2 is YUYV; uyvy/yuyv are aliases.
        Encoding("yuv422", 2, 2, "uyvy", "letterbox_yuv422", "COLOR_YUV2BGR_UYVY", True),
        Encoding("uyvy", 2, 2, "uyvy", "letterbox_yuv422", "COLOR_YUV2BGR_UYVY", True),
        Encoding("yuv422_yuy2", 2, 2, "yuyv", "letterbox_yuv422", "COLOR_YUV2BGR_YUYV", True),
        Encoding("yuyv", 2, 2, "yuyv", "letterbox_yuv422", "COLOR_YUV2BGR_YUYV", True),
        # OpenCV names a Bayer pattern by the 2x2 block starting at (1, 1), so ROS rggb is OpenCV's BayerBG
        # (the mapping cv_bridge uses).
        Encoding("bayer_rggb8", 1, 1, "bayer_rggb", "letterbox_bayer8", "COLOR_BayerBG2BGR"),
        Encoding("bayer_bggr8", 1, 1, "bayer_bggr", "letterbox_bayer8", "COLOR_BayerRG2BGR"),
        Encoding("bayer_gbrg8", 1, 1, "bayer_gbrg", "letterbox_bayer8", "COLOR_BayerGR2BGR"),
        Encoding("bayer_grbg8", 1, 1, "bayer_grbg", "letterbox_bayer8", "COLOR_BayerGB2BGR"),
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
