"""``sensor_msgs/Image`` and ``sensor_msgs/CompressedImage`` read straight from their serialized form (CDR).

Why: with a ``raw=True`` subscription rclpy hands the callback the message's serialized bytes, skipping the
conversion into a Python message (for ``Image`` that conversion copies ``data`` once more into an
``array.array``; issue 22). The node needs only the header, the geometry and a view of the pixel bytes, which sit
at known offsets of the buffer, so this module reads them there: ``data`` stays a zero-copy ``memoryview`` into the
bytes rclpy returned.

Format: the ROS 2 default, XCDR1 little-endian (encapsulation header ``00 01 00 00``; OMG DDS-XTypes 1.3, 7.4.3.5:
each primitive aligned to its size, counted from the end of the 4-byte encapsulation header; a string is a uint32
length including the terminating NUL, its bytes and the NUL; a sequence is a uint32 count and its elements), the
writer side of which is :mod:`vrt_ros.ros.cdr`. Layouts (sensor_msgs / std_msgs, field order as upstream):
``Header{Time stamp{int32 sec; uint32 nanosec}; string frame_id}``,
``Image{Header header; uint32 height; uint32 width; string encoding; uint8 is_bigendian; uint32 step; uint8[] data}``,
``CompressedImage{Header header; string format; uint8[] data}``.

Any other encapsulation (big-endian XCDR1 ``00 00``, XCDR2 ``00 06`` / ``00 07`` ..., parameter lists) is refused
with reason ``unsupported_cdr``; a buffer that ends early or whose lengths point past its end with ``bad_cdr``:
both are :class:`~vrt_ros.errors.FrameError`, so the node drops and counts such a frame like any other bad frame.
Nothing here imports rclpy: the values returned have the attribute names of the messages (``msg.header.stamp.sec``,
``msg.encoding``, ``msg.data``, ...), so the rest of the node reads them as it reads messages.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from vrt_ros.errors import FrameError

#: Encapsulation identifiers (OMG DDS-XTypes 1.3, 7.6.3.1.2) by their two first bytes, for the error message.
_ENCAPSULATIONS = {
    b"\x00\x00": "CDR big-endian",
    b"\x00\x01": "CDR little-endian",
    b"\x00\x02": "PL_CDR big-endian",
    b"\x00\x03": "PL_CDR little-endian",
    b"\x00\x06": "XCDR2 big-endian",
    b"\x00\x07": "XCDR2 little-endian",
    b"\x00\x08": "delimited XCDR2 big-endian",
    b"\x00\x09": "delimited XCDR2 little-endian",
    b"\x00\x0a": "PL_CDR2 big-endian",
    b"\x00\x0b": "PL_CDR2 little-endian",
}
_CDR_LE = b"\x00\x01"
_HEAD = struct.Struct("<iII")  # stamp.sec, stamp.nanosec, frame_id length (4-aligned at offset 0)
_U32 = struct.Struct("<I")


@dataclass(frozen=True)
class Stamp:
    """``builtin_interfaces/Time``: ``sec`` (int32, may be negative) and ``nanosec`` (uint32)."""

    sec: int
    nanosec: int


@dataclass(frozen=True)
class Header:
    """``std_msgs/Header`` as read from the bytes: ``stamp`` and ``frame_id``."""

    stamp: Stamp
    frame_id: str


@dataclass(frozen=True)
class RawImage:
    """A ``sensor_msgs/Image`` read from its serialized bytes; ``data`` is a read-only view into them (no copy)."""

    header: Header
    height: int
    width: int
    encoding: str
    is_bigendian: int
    step: int
    data: memoryview


@dataclass(frozen=True)
class RawCompressedImage:
    """A ``sensor_msgs/CompressedImage`` read from its serialized bytes; ``data`` is a read-only view into them."""

    header: Header
    format: str
    data: memoryview


class _Reader:
    """Reads aligned CDR primitives from ``buf`` (``buf[0:4]`` is the encapsulation header)."""

    def __init__(self, buf: memoryview, what: str) -> None:
        self.buf = buf
        self.pos = 4
        self.what = what

    def _fail(self, field: str, need: int) -> FrameError:
        return FrameError(
            f"serialized {self.what} ends inside '{field}' (needs {need} bytes at offset {self.pos}, the message has "
            f"{len(self.buf)})", reason="bad_cdr")

    def align(self, n: int) -> None:
        self.pos += -(self.pos - 4) % n

    def u32(self, field: str) -> int:
        self.align(4)
        if self.pos + 4 > len(self.buf):
            raise self._fail(field, 4)
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return value

    def u8(self, field: str) -> int:
        if self.pos + 1 > len(self.buf):
            raise self._fail(field, 1)
        value = self.buf[self.pos]
        self.pos += 1
        return value

    def string(self, field: str) -> str:
        n = self.u32(field)
        if n > len(self.buf) - self.pos:
            raise FrameError(f"serialized {self.what}: string '{field}' declares {n} bytes at offset {self.pos}, only "
                             f"{len(self.buf) - self.pos} remain", reason="bad_cdr")
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        raw = raw.split(b"\x00", 1)[0]  # a C string, as rosidl reads it: up to the first NUL
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError(f"serialized {self.what}: string '{field}' is not UTF-8 ({exc})", reason="bad_cdr") from exc

    def octets(self, field: str) -> memoryview:
        n = self.u32(field)
        if n > len(self.buf) - self.pos:
            raise FrameError(f"serialized {self.what}: '{field}' declares {n} bytes at offset {self.pos}, only "
                             f"{len(self.buf) - self.pos} remain", reason="bad_cdr")
        view = self.buf[self.pos:self.pos + n]
        self.pos += n
        return view

    def header(self) -> Header:
        if len(self.buf) < 4 + _HEAD.size:
            raise self._fail("header", _HEAD.size)
        sec, nanosec, _ = _HEAD.unpack_from(self.buf, 4)
        self.pos = 12
        return Header(Stamp(sec, nanosec), self.string("header.frame_id"))


def _open(data, what: str) -> _Reader:
    buf = memoryview(data).toreadonly().cast("B")
    if len(buf) < 4:
        raise FrameError(f"serialized {what} is {len(buf)} bytes, shorter than its 4-byte encapsulation header",
                         reason="bad_cdr")
    kind = bytes(buf[:2])
    if kind != _CDR_LE:
        name = _ENCAPSULATIONS.get(kind, f"unknown encapsulation 0x{kind.hex()}")
        raise FrameError(f"serialized {what} uses {name}; only little-endian XCDR1 (00 01, the ROS 2 default) is read "
                         "here: set input.raw_subscription false to let rclpy convert it", reason="unsupported_cdr")
    return _Reader(buf, what)


def read_image(data) -> RawImage:
    """Read a serialized ``sensor_msgs/Image``.

    Args:
        data: the serialized message (``bytes`` from a ``raw=True`` subscription, or any buffer), encapsulation
            header included.

    Returns:
        The message's fields; ``data`` is a read-only ``memoryview`` of the pixel bytes inside ``data`` (uint8).
        Trailing bytes after ``data`` (alignment padding some writers add) are ignored.

    Raises:
        FrameError: reason ``unsupported_cdr`` (not little-endian XCDR1) or ``bad_cdr`` (ends early, a length past
            the end, a string that is not UTF-8). The geometry is not validated here (:mod:`vrt_ros.intake.frames` does).
    """
    r = _open(data, "sensor_msgs/Image")
    header = r.header()
    height = r.u32("height")
    width = r.u32("width")
    encoding = r.string("encoding")
    is_bigendian = r.u8("is_bigendian")
    step = r.u32("step")
    return RawImage(header, height, width, encoding, is_bigendian, step, r.octets("data"))


def read_compressed(data) -> RawCompressedImage:
    """Read a serialized ``sensor_msgs/CompressedImage`` (see :func:`read_image` for ``data``, the result's ``data``
    and the errors raised)."""
    r = _open(data, "sensor_msgs/CompressedImage")
    header = r.header()
    fmt = r.string("format")
    return RawCompressedImage(header, fmt, r.octets("data"))
