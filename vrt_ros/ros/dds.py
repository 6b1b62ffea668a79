"""The Fast DDS profile for processes that move raw camera frames between processes (``fastdds_large_frames.xml``).

Why: Fast DDS's built-in shared-memory transport uses a 512 KiB segment per participant, smaller than one raw
frame, so the frames a process publishes to another process on the same host overflow it and are lost in bursts
(measured with Fast DDS's defaults, results/bench/ros_e2e_dds.md: 0–1 of 150 1280x720 bgr8 frames reached a
best-effort subscriber, and 127–133 a reliable depth-1 subscriber whose process was busy; 150 of 150 with the
profile). The fix belongs to the *publishing* process (the segment is the writer's): :data:`PROFILE` gives it a
16 MiB segment (two 1920x1080 bgr8 frames in flight; frames larger than the segment, such as 3840x2160 bgr8, need
a profile of their own with a larger ``segment_size``).

Fast DDS reads its profile file name from the environment when the process creates its first participant
(``rclpy.init``), so :func:`apply` must run before that. What this module sets, and when (:func:`choose`):

- ``--dds-profile auto`` (the default of every vrt_ros command): the packaged profile, unless Fast DDS is already
  configured (``FASTRTPS_DEFAULT_PROFILES_FILE``, ``FASTDDS_DEFAULT_PROFILES_FILE`` or ``FASTDDS_BUILTIN_TRANSPORTS``
  set, or a ``DEFAULT_FASTRTPS_PROFILES.xml`` / ``DEFAULT_FASTDDS_PROFILES.xml`` in the working directory, which
  Fast DDS loads by itself: the user's choice is kept) or ``RMW_IMPLEMENTATION`` names another middleware. When
  the user's file is set under the other version's name only, :func:`apply` copies it to the name this Fast DDS
  reads;
- ``--dds-profile none``: nothing (Fast DDS defaults, or whatever the environment says);
- ``--dds-profile FILE``: that profile file, overriding the environment.

Only the variable the installed Fast DDS reads is set (:func:`read_vars`): Fast DDS 2.x (ROS 2 Humble, Jazzy) reads
``FASTRTPS_DEFAULT_PROFILES_FILE``, Fast DDS 3.x (Kilted, Lyrical) ``FASTDDS_DEFAULT_PROFILES_FILE`` (the old name
too, with a deprecation warning). The version comes from the wheels' metadata (``ros-fastrtps`` 2.x /
``ros-fastdds`` 3.x), else from ``ROS_DISTRO``; when neither says, both names are set. This module imports neither
rclpy nor Fast DDS.

Command line: ``python -m vrt_ros.ros.dds`` prints the packaged profile's path (for the camera driver's shell:
``export FASTRTPS_DEFAULT_PROFILES_FILE=$(python -m vrt_ros.ros.dds)``); ``--check`` also prints its SHM segment
size and what ``auto`` would do in the current environment.
"""

from __future__ import annotations

import argparse
import os
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import MutableMapping, Sequence

from vrt_ros.errors import ConfigError

#: The packaged profile (installed with the Python package).
PROFILE = Path(__file__).with_name("fastdds_large_frames.xml")
#: Environment variables naming a Fast DDS XML profile file: Fast DDS 2.x, then 3.x.
PROFILE_VARS = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
#: Other environment variables through which the user already configures Fast DDS's transports.
TRANSPORT_VARS = ("FASTDDS_BUILTIN_TRANSPORTS",)
#: Profile files Fast DDS 2.x / 3.x load by themselves from the working directory (unless SKIP_DEFAULT_XML_FILE=1).
CWD_PROFILES = ("DEFAULT_FASTRTPS_PROFILES.xml", "DEFAULT_FASTDDS_PROFILES.xml")
#: ``RMW_IMPLEMENTATION`` values that use Fast DDS (unset also means Fast DDS, the ROS 2 default).
FASTDDS_RMWS = ("rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp")
#: ``--dds-profile`` keywords.
AUTO, NONE = "auto", "none"
_NS = "{http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles}"


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` decided.

    Attributes:
        profile: the profile file to load, or None to leave Fast DDS as the environment configures it.
        reason: one line for the log, saying what was chosen and why.
    """

    profile: Path | None
    reason: str


def shm_segment_bytes(path: str | Path) -> int | None:
    """The ``segment_size`` (bytes) of the first SHM transport descriptor in a Fast DDS XML profile, or None.

    Raises:
        ConfigError: the file is missing, is not well-formed XML, is not a Fast DDS profile file (root ``profiles``
            or ``dds`` in the Fast DDS namespace), or its ``segment_size`` is not a whole number of bytes (names the
            file).
    """
    p = Path(path)
    try:
        root = ET.parse(p).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ConfigError(f"Fast DDS profile {p}: {exc}") from exc
    if root.tag not in (f"{_NS}profiles", f"{_NS}dds"):
        raise ConfigError(f"Fast DDS profile {p}: root element {root.tag!r} is not <profiles> or <dds> in {_NS[1:-1]}")
    for desc in root.iter(f"{_NS}transport_descriptor"):
        if (desc.findtext(f"{_NS}type") or "").strip() == "SHM":
            size = desc.findtext(f"{_NS}segment_size")
            if size is None:
                return None
            try:
                return int(size.strip())
            except ValueError:
                raise ConfigError(f"Fast DDS profile {p}: segment_size {size!r} is not a number of bytes") from None
    return None


_DISTRO_MAJOR = {"humble": 2, "iron": 2, "jazzy": 2, "kilted": 3, "lyrical": 3, "rolling": 3}


def fastdds_major(environ: MutableMapping[str, str] | None = None) -> int | None:
    """The major version of the Fast DDS rclpy will load (2 or 3), or None when unknown. From the installed wheels'
    metadata (``ros-fastdds`` is 3.x, ``ros-fastrtps`` 2.x), else ``ROS_DISTRO`` (humble/iron/jazzy: 2;
    kilted/lyrical/rolling: 3)."""
    import importlib.metadata as md

    for dist in ("ros-fastdds", "ros-fastrtps"):
        try:
            return int(md.version(dist).split(".")[0])
        except (md.PackageNotFoundError, ValueError):
            continue
    env = os.environ if environ is None else environ
    return _DISTRO_MAJOR.get(env.get("ROS_DISTRO", "").lower())


def read_vars(environ: MutableMapping[str, str] | None = None, major: int | None = None) -> tuple[str, ...]:
    """The profile variable(s) this installation's Fast DDS reads: ``FASTRTPS_DEFAULT_PROFILES_FILE`` for 2.x,
    ``FASTDDS_DEFAULT_PROFILES_FILE`` for 3.x, both when unknown (``major``: default :func:`fastdds_major`; 0 =
    unknown)."""
    major = fastdds_major(environ) if major is None else major
    return PROFILE_VARS[:1] if major == 2 else PROFILE_VARS[1:] if major and major >= 3 else PROFILE_VARS


def choose(option: str = AUTO, environ: MutableMapping[str, str] | None = None, cwd: Path | None = None) -> Choice:
    """Decide which Fast DDS profile a process should load (see the module docstring).

    Args:
        option: ``auto``, ``none`` or a profile file path (the ``--dds-profile`` option).
        environ: the environment to read (default ``os.environ``); not modified.
        cwd: the working directory Fast DDS will look in (default the current one).

    Raises:
        ConfigError: ``option`` names a file that does not exist or is not XML (names ``--dds-profile``).
    """
    env = os.environ if environ is None else environ
    if option == NONE:
        return Choice(None, "--dds-profile none: Fast DDS as the environment configures it")
    if option != AUTO:
        path = Path(option).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"--dds-profile {option}: no such file (expected a Fast DDS XML profile, 'auto' or 'none')")
        shm_segment_bytes(path)  # well-formed XML, or a ConfigError naming the file
        return Choice(path, f"Fast DDS profile {path} (--dds-profile)")
    rmw = env.get("RMW_IMPLEMENTATION", "")
    if rmw and rmw not in FASTDDS_RMWS:
        return Choice(None, f"RMW_IMPLEMENTATION={rmw} is not Fast DDS: no Fast DDS profile loaded")
    for var in PROFILE_VARS + TRANSPORT_VARS:
        if env.get(var):
            note = ""
            if var in TRANSPORT_VARS:
                note = (" (warning: Fast DDS's built-in transports lost most raw frames between processes here, "
                        "results/bench/ros_e2e_dds.md)")
            return Choice(None, f"{var}={env[var]} is set: Fast DDS configured by the environment, kept as it is{note}")
    if env.get("SKIP_DEFAULT_XML_FILE") != "1":
        here = Path.cwd() if cwd is None else Path(cwd)
        for name in CWD_PROFILES:
            if (here / name).is_file():
                return Choice(None, f"{here / name} is loaded by Fast DDS from the working directory: kept as it is")
    segment = shm_segment_bytes(PROFILE)
    mib = f"{segment / 2**20:g} MiB" if segment else "its"
    return Choice(PROFILE, f"Fast DDS profile {PROFILE} (shared-memory segment {mib} for raw frames)")


def apply(option: str = AUTO, environ: MutableMapping[str, str] | None = None, major: int | None = None) -> Choice:
    """:func:`choose`, then set the profile variable this Fast DDS reads (:func:`read_vars`; ``major`` overrides the
    detected version) in ``environ`` (default ``os.environ``) when a profile was chosen; with ``auto`` and a user's
    profile under the other version's name only, copy it to the name this Fast DDS reads.

    Must run before the process's first ``rclpy.init``: Fast DDS reads the variables when it creates the first
    participant, later changes have no effect.

    Raises:
        ConfigError: as :func:`choose`.
    """
    env = os.environ if environ is None else environ
    choice = choose(option, env)
    wanted = read_vars(env, major)
    if choice.profile is not None:
        for var in wanted:
            env[var] = str(choice.profile)
    elif option == AUTO:
        given = [var for var in PROFILE_VARS if env.get(var)]
        if given:  # the user's file under the other version's name only: make this Fast DDS read it
            for var in wanted:
                if not env.get(var):
                    env[var] = env[given[0]]
    return choice


def publisher_fix() -> str:
    """What to set in a frame publisher's environment (its own process, started anew) so that its raw frames reach
    other processes: the packaged profile under the variable each Fast DDS version reads (:data:`PROFILE_VARS`)."""
    return (f"set {PROFILE_VARS[0]} (Fast DDS 2: Humble, Jazzy) or {PROFILE_VARS[1]} (Fast DDS 3: Kilted and "
            f"later) to {PROFILE} in the publisher's environment and restart it (`python -m vrt_ros.ros.dds` prints "
            "that path), or give it a profile of its own with a shared-memory segment larger than one frame")


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Add the ``--dds-profile {auto,none,FILE}`` option (default ``auto``) to a command's parser."""
    parser.add_argument(
        "--dds-profile", default=AUTO, metavar="auto|none|FILE",
        help="Fast DDS profile for this process: auto (default: vrt_ros's large-frames profile unless the "
             "environment configures Fast DDS), none, or an XML file",
    )


def program_name(argv0: str | None = None) -> str:
    """How the user called this tool, for ``--help``: ``dds_profile`` (the console script, also under ``ros2 run``)
    or ``python -m vrt_ros.ros.dds``."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return "python -m vrt_ros.ros.dds" if name in ("dds.py", "__main__.py", "-m", "-c", "") else name


def main(argv: Sequence[str] | None = None) -> int:
    """Print the packaged profile's path (``--check``: also its segment size and what ``auto`` would do)."""
    ap = argparse.ArgumentParser(prog=program_name(), description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="also print the SHM segment size and the auto choice here")
    args = ap.parse_args(argv)
    print(PROFILE)
    if args.check:
        segment = shm_segment_bytes(PROFILE)
        print(f"shared-memory segment: {segment} bytes" if segment else "no SHM transport in the profile")
        print(f"auto here: {choose(AUTO).reason}")
        print(f"this Fast DDS ({fastdds_major() or 'version unknown'}) reads: {', '.join(read_vars())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
