"""The Fast DDS large-frames profile (``vrt_ros.ros.dds``): the packaged XML and when each command loads it.

Pure (no rclpy, no Fast DDS) except the ``ros`` test that starts a real participant in a subprocess and reads which
shared-memory segment it maps: that runs in the Jazzy leg (Fast DDS 2.14) and the Kilted leg (Fast DDS 3.2). That the
profile makes raw frames arrive is measured end to end by ``test_bench_ros_e2e.py`` and
``python -m vrt_ros.bench.transport.ros_e2e`` (results/bench/ros_e2e_dds.md).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from vrt_ros.errors import ConfigError
from vrt_ros.ros import dds

NS = "{http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles}"


def test_packaged_profile_is_the_default_participant_profile_with_a_segment_for_two_1080p_frames():
    root = ET.parse(dds.PROFILE).getroot()
    [participant] = root.iter(f"{NS}participant")
    assert participant.get("is_default_profile") == "true"
    rtps = participant.find(f"{NS}rtps")
    assert rtps.findtext(f"{NS}useBuiltinTransports").strip() == "false"
    used = [t.text.strip() for t in rtps.find(f"{NS}userTransports")]
    declared = {d.findtext(f"{NS}transport_id").strip(): d.findtext(f"{NS}type").strip()
                for d in root.iter(f"{NS}transport_descriptor")}
    # every transport the participant uses is declared; SHM for frames, UDPv4 kept for discovery and other hosts
    assert set(used) <= set(declared) and sorted(declared[t] for t in used) == ["SHM", "UDPv4"]
    segment = dds.shm_segment_bytes(dds.PROFILE)
    assert segment >= 2 * 1920 * 1080 * 3  # two bgr8 1920x1080 frames in flight
    assert segment <= 32 * 2**20  # and small enough for Docker's 64 MiB /dev/shm with a second such process


def test_auto_loads_the_profile_when_the_environment_does_not_configure_fast_dds():
    env = {"ROS_DOMAIN_ID": "3"}
    choice = dds.apply("auto", env)
    assert choice.profile == dds.PROFILE
    # only the variable this venv's Fast DDS reads (2.x in the Jazzy venv, 3.x in the Kilted one; both without
    # Fast DDS wheels, as in the Python 3.10 leg)
    assert {k: v for k, v in env.items() if k in dds.PROFILE_VARS} == {v: str(dds.PROFILE) for v in dds.read_vars()}
    assert dds.fastdds_major({}) in ((2, 3) if importlib.util.find_spec("rclpy") else (None,))
    assert "16 MiB" in choice.reason
    env = {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}
    assert dds.apply("auto", env).profile == dds.PROFILE


@pytest.mark.parametrize("major", [2, 3, 0])
@pytest.mark.parametrize("var", dds.PROFILE_VARS)
def test_auto_keeps_the_users_profile_and_makes_this_fast_dds_read_it(var, major):
    env = {var: "/etc/robot/fastdds.xml"}
    choice = dds.apply("auto", env, major=major)
    assert choice.profile is None and var in choice.reason
    # Fast DDS 2 (Jazzy) reads FASTRTPS_..., Fast DDS 3 FASTDDS_...: the user's file under the name it reads
    assert env == {v: "/etc/robot/fastdds.xml" for v in {var, *dds.read_vars(major=major)}}
    both = {dds.PROFILE_VARS[0]: "/a.xml", dds.PROFILE_VARS[1]: "/b.xml"}
    dds.apply("auto", both, major=major)
    assert both == {dds.PROFILE_VARS[0]: "/a.xml", dds.PROFILE_VARS[1]: "/b.xml"}  # two given: both kept


@pytest.mark.parametrize("major, wanted", [(2, ("FASTRTPS_DEFAULT_PROFILES_FILE",)),
                                           (3, ("FASTDDS_DEFAULT_PROFILES_FILE",)), (0, dds.PROFILE_VARS)])
def test_only_the_variable_each_fast_dds_reads_is_set(major, wanted):
    """Fast DDS 3 warns about the deprecated FASTRTPS_ name: each version gets only its own; unknown gets both."""
    env: dict = {}
    dds.apply("auto", env, major=major)
    assert sorted(env) == sorted(wanted)


def test_the_fast_dds_version_comes_from_the_wheels_else_from_ros_distro(monkeypatch):
    import importlib.metadata as md

    if dds.fastdds_major({}) is not None:  # Fast DDS wheels installed (the Jazzy and Kilted venvs)
        installed = md.version("ros-fastdds" if dds.fastdds_major({}) == 3 else "ros-fastrtps")
        assert int(installed.split(".")[0]) == dds.fastdds_major({"ROS_DISTRO": "humble"})  # the wheels win

    def absent(name):
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(md, "version", absent)  # a ROS install from apt: no pip metadata
    assert [dds.fastdds_major({"ROS_DISTRO": d}) for d in ("humble", "jazzy", "kilted", "lyrical", "")] == [2, 2, 3, 3, None]


def test_auto_keeps_builtin_transports_the_user_chose_and_warns_they_lose_frames():
    env = {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"}
    choice = dds.apply("auto", env)
    assert choice.profile is None and "LARGE_DATA" in choice.reason and "lost most raw frames" in choice.reason
    assert env == {"FASTDDS_BUILTIN_TRANSPORTS": "LARGE_DATA"}


@pytest.mark.parametrize("name", dds.CWD_PROFILES)
def test_auto_keeps_a_profile_fast_dds_loads_from_the_working_directory(tmp_path, name):
    (tmp_path / name).write_text(dds.PROFILE.read_text())
    choice = dds.choose("auto", {}, cwd=tmp_path)
    assert choice.profile is None and name in choice.reason
    # ... unless Fast DDS is told to skip that file
    assert dds.choose("auto", {"SKIP_DEFAULT_XML_FILE": "1"}, cwd=tmp_path).profile == dds.PROFILE


def test_auto_loads_nothing_for_another_middleware_and_none_loads_nothing():
    env = {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}
    choice = dds.apply("auto", env)
    assert choice.profile is None and "rmw_cyclonedds_cpp" in choice.reason and set(env) == {"RMW_IMPLEMENTATION"}
    env = {}
    assert dds.apply("none", env).profile is None and env == {}


def test_an_explicit_file_overrides_the_environment(tmp_path):
    own = tmp_path / "robot.xml"
    own.write_text(dds.PROFILE.read_text())
    env = {"FASTRTPS_DEFAULT_PROFILES_FILE": "/old.xml"}
    choice = dds.apply(str(own), env, major=2)
    assert choice.profile == own.resolve() and env["FASTRTPS_DEFAULT_PROFILES_FILE"] == str(own.resolve())


def test_a_missing_or_broken_profile_file_is_a_config_error_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"--dds-profile .*missing\.xml: no such file"):
        dds.choose(str(tmp_path / "missing.xml"), {})
    broken = tmp_path / "broken.xml"
    broken.write_text("<profiles><participant>")
    with pytest.raises(ConfigError, match="broken.xml"):
        dds.choose(str(broken), {})
    not_a_profile = tmp_path / "package.xml"
    not_a_profile.write_text("<package format='3'><name>x</name></package>")
    with pytest.raises(ConfigError, match=r"package.xml: root element 'package' is not <profiles>"):
        dds.choose(str(not_a_profile), {})
    bad_size = tmp_path / "bad_size.xml"
    bad_size.write_text(dds.PROFILE.read_text().replace("<segment_size>16777216<", "<segment_size>16MiB<"))
    with pytest.raises(ConfigError, match=r"bad_size.xml: segment_size '16MiB' is not a number of bytes"):
        dds.choose(str(bad_size), {})


def test_every_command_that_starts_rclpy_has_the_option():
    pytest.importorskip("rclpy", reason="the commands' modules import rclpy (not installed in this venv)")
    from vrt_ros.bench.transport import ros_e2e
    from vrt_ros.ros import main
    from vrt_ros.tools import record, replay

    positional = {"detector_node": [], "record": ["out.mcap", "/camera/image_raw"], "replay": ["bag"]}
    for parser in (main.build_parser(), record.build_parser(), replay.build_parser()):
        args = positional[parser.prog]
        assert parser.parse_args(args).dds_profile == "auto"
        assert parser.parse_args(args + ["--dds-profile", "none"]).dds_profile == "none"
    assert "--dds-profile" in ros_e2e.node_command(dds.PROFILE, "cpu", ros_e2e.Settings(dds_profile="none"))


def test_command_line_prints_the_path_for_a_camera_drivers_shell():
    out = subprocess.run([sys.executable, "-m", "vrt_ros.ros.dds", "--check"], capture_output=True, text=True,
                         timeout=60, check=True).stdout.splitlines()
    assert out[0] == str(dds.PROFILE)
    assert out[1] == f"shared-memory segment: {dds.shm_segment_bytes(dds.PROFILE)} bytes"
    assert out[2].startswith("auto here: ")


PROBE = """
import json, os, sys, time
from vrt_ros.ros import dds
dds.apply(sys.argv[1])
import rclpy
from std_msgs.msg import String
rclpy.init()
node = rclpy.create_node("dds_profile_probe")
node.create_publisher(String, "dds_profile_probe", 10)
time.sleep(0.5)
# the Fast DDS shared-memory segments this process mapped (its own; no peer shares its domain id)
segments = {f for f in (line.split()[-1] for line in open("/proc/self/maps") if "/dev/shm/fast" in line)
            if not f.endswith("_el") and "_port" not in f}
print(json.dumps({"segments": sorted(os.path.getsize(f) for f in segments if os.path.exists(f)),
                  "vars": sorted(k for k in os.environ if k.endswith("_DEFAULT_PROFILES_FILE"))}))
node.destroy_node()
rclpy.shutdown()
"""


@pytest.mark.ros
@pytest.mark.parametrize("option", ["auto", "none"])
def test_the_profile_takes_effect_in_a_real_participant_of_this_fast_dds(option):
    """``auto``: the participant maps a shared-memory segment of the profile's size (16 MiB, not Fast DDS's 512 KiB
    default), with only the profile variable this Fast DDS reads set, and Fast DDS 3 logs no deprecation warning for
    the old name. ``none``: default segments only."""
    pytest.importorskip("rclpy", reason="rclpy (the ros-<distro>-rclpy wheels) is not installed")
    env = {k: v for k, v in os.environ.items() if k not in dds.PROFILE_VARS + dds.TRANSPORT_VARS}
    proc = subprocess.run([sys.executable, "-c", PROBE, option], capture_output=True, text=True, timeout=120, env=env,
                          cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    segment = dds.shm_segment_bytes(dds.PROFILE)
    print(f"\nFast DDS {dds.fastdds_major()}.x, --dds-profile {option}: segments {got['segments']}, set {got['vars']}")
    if option == "auto":
        assert got["vars"] == sorted(dds.read_vars()) and len(got["vars"]) == 1
        assert max(got["segments"]) >= segment, got
        assert "deprecated" not in proc.stderr, proc.stderr[-2000:]
    else:
        assert got["vars"] == [] and got["segments"] and max(got["segments"]) < segment, got


@pytest.mark.ros
def test_the_other_versions_variable_is_why_only_one_is_set():
    """What each Fast DDS does with the other version's variable, for real: 2.x ignores FASTDDS_DEFAULT_PROFILES_FILE
    (so setting only that name would lose the profile), 3.x reads FASTRTPS_DEFAULT_PROFILES_FILE but warns that it
    is deprecated (so setting both names warns on every start)."""
    pytest.importorskip("rclpy", reason="rclpy (the ros-<distro>-rclpy wheels) is not installed")
    major = dds.fastdds_major()
    other = {2: "FASTDDS_DEFAULT_PROFILES_FILE", 3: "FASTRTPS_DEFAULT_PROFILES_FILE"}[major]
    env = {k: v for k, v in os.environ.items() if k not in dds.PROFILE_VARS + dds.TRANSPORT_VARS}
    env[other] = str(dds.PROFILE)
    proc = subprocess.run([sys.executable, "-c", PROBE, "none"], capture_output=True, text=True, timeout=120, env=env,
                          cwd="/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    big = max(got["segments"]) >= dds.shm_segment_bytes(dds.PROFILE)
    if major == 2:
        assert not big, got  # the profile was not loaded
    else:
        assert big and "deprecated" in proc.stderr, (got, proc.stderr[-2000:])
