"""``detector_node --warm-standby`` with the real node on ONNX Runtime (issue 27): the process tree it makes, its
end on Ctrl-C and when the supervisor is killed, and the options it refuses. Fault → detections again through the
standby: test/test_bench_recovery_respawn.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy not installed (run `make test`, which sets up .venv)")
pytest.importorskip("onnxruntime", reason="onnxruntime not installed")
pytest.importorskip("onnx", reason="onnx not installed (test dependency)")

from rclpy.node import Node  # noqa: E402

from ros_testing import private_context, unique_namespace  # noqa: E402
from synthetic_models import blob_end2end  # noqa: E402
from test_node import wait_until  # noqa: E402

pytestmark = pytest.mark.ros
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def blob_model(tmp_path_factory) -> Path:
    return blob_end2end(tmp_path_factory.mktemp("models") / "blob.onnx", 320, 320)


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def _supervisor(model: Path, ns: str = ""):
    """``detector_node --warm-standby`` on the CPU; yields (the process, its children once there are two: the
    node's child and, once that child's node is up and reported, its standby). Whatever is left at the end is
    killed, children first (an orphan would hold the output pipe open)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.ros.main", "--warm-standby", "--ros-args", "-p", "backend:=cpu",
         "-p", f"model.path:={model}", "-r", f"__ns:={ns or unique_namespace()}"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    children: list[int] = []
    try:
        wait_until(lambda: len(_children(proc.pid)) == 2 or proc.poll() is not None, 60.0)
        children += _children(proc.pid)
        yield proc, children
    finally:
        for pid in [*children, proc.pid]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)


@pytest.mark.slow
def test_ctrl_c_to_the_supervisor_ends_the_node_and_the_standby_with_status_0(blob_model):
    """One detector node in the graph; the standby's only node is hidden (``ros2 node list`` leaves it out), in
    the default namespace whatever the command line remaps; Ctrl-C ends both children and the supervisor with 0."""
    ns = unique_namespace()
    with _supervisor(blob_model, ns) as (proc, children):
        assert len(children) == 2 and proc.poll() is None, children
        with private_context() as ctx:
            probe = Node("probe", context=ctx)
            hidden = {(f"_vrt_standby_{pid}", "/") for pid in children}
            seen = lambda: set(probe.get_node_names_and_namespaces())  # noqa: E731
            assert wait_until(lambda: ("vrt_detector", ns) in seen() and len(hidden & seen()) == 1, 30.0), seen()
            assert [n for n, _ in seen() if "vrt" in n and not n.startswith("_")] == ["vrt_detector"]
            probe.destroy_node()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0, out
        assert "Traceback" not in out and "restart" not in out
        assert wait_until(lambda: not any(_alive(p) for p in children), 10.0)


@pytest.mark.slow
def test_children_do_not_outlive_a_killed_supervisor(blob_model):
    """SIGKILL to the supervisor (launch's last resort): its children get SIGKILL from the kernel
    (PR_SET_PDEATHSIG), the node and the standby alike; none is left holding the GPU or the topics."""
    with _supervisor(blob_model) as (proc, children):
        assert len(children) == 2 and proc.poll() is None, children
        proc.kill()
        proc.wait(10)
        assert wait_until(lambda: not any(_alive(p) for p in children), 10.0), [p for p in children if _alive(p)]


@pytest.mark.parametrize("extra, words", [(("--lifecycle",), "--warm-standby is not for --lifecycle nodes"),
                                          (("--restart-delay", "-1"), "--restart-delay must be >= 0 s"),
                                          (("--takeover-timeout", "-2"), "--takeover-timeout must be >= 0 s"),
                                          (("--restart-delay-max", "-1"), "--restart-delay-max must be >= 0 s")])
def test_refused_options_one_line_exit_2(blob_model, extra, words):
    proc = subprocess.run([sys.executable, "-m", "vrt_ros.ros.main", "--warm-standby", *extra, "--ros-args", "-p",
                           f"model.path:={blob_model}"], env=_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_HC_23_children_of_main_called_with_argv_run_the_supervisors_own_vrt_ros(tmp_path):
    """``main(argv)`` from code, with another copy of ``vrt_ros`` in the working folder and first on PYTHONPATH
    (one that exits 7): the children run this copy (its start-up failure on the missing model: status 2, naming
    the file), not the one ``python -m`` would find (issue 33)."""
    fake = tmp_path / "vrt_ros" / "ros"
    fake.mkdir(parents=True)
    for init in (tmp_path / "vrt_ros" / "__init__.py", fake / "__init__.py"):
        init.write_text("")
    (fake / "main.py").write_text("import sys\nprint('the other copy', file=sys.stderr)\nsys.exit(7)\n")
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); from vrt_ros.ros.main import main; "
            f"sys.exit(main(['detector_node', '--warm-standby', '--ros-args', '-p', 'backend:=cpu', "
            f"'-p', 'model.path:=/nonexistent/model.onnx']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert proc.returncode == 2 and "/nonexistent/model.onnx" in proc.stderr, proc.stderr
    assert "the other copy" not in proc.stderr


@pytest.mark.parametrize("when", ["0.1 s after start", "as its first child starts"])
def test_HC_23_a_supervisor_killed_early_leaves_no_process_2_s_later(blob_model, when):
    """SIGKILL to ``detector_node --warm-standby`` 0.1 s after its start, and as its node's child starts (still in
    its imports, before any code of ours could run in it): nothing of it is left 2 s later (issue 33)."""
    from test_standby_hc23 import _tagged

    tag = f"VRT_HC23_{os.getpid()}_{when[:3]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrt_ros.ros.main", "--warm-standby", "--ros-args", "-p", "backend:=cpu",
         "-p", f"model.path:={blob_model}", "-r", f"__ns:={unique_namespace()}"],
        env=dict(_env(), VRT_HC23_TAG=tag), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + (0.1 if when.startswith("0.1") else 60.0)
        while time.monotonic() < end and not _children(proc.pid) and proc.poll() is None:
            time.sleep(0.005)
        proc.kill()
        proc.wait(10)
        wait_until(lambda: not _tagged(tag), 2.0)
        assert _tagged(tag) == []
    finally:
        for pid in _tagged(tag):
            os.kill(pid, signal.SIGKILL)
