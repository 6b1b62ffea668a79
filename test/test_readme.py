"""The README is the way in (issue 37 item 1): at most 300 lines, the two set-up commands, the robot install, one
robot YAML, the generated headline table, and links into the docs that resolve (file and anchor)."""

from __future__ import annotations

import re
from pathlib import Path

from vrt_ros.settings.config import load_params_file

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug (mkdocs' anchors) for an ASCII heading: lower case, punctuation dropped, spaces
    to hyphens."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def test_readme_is_at_most_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_readme_gives_the_two_set_up_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    assert "colcon build" in text and "rosdep install" in text


def test_readme_links_into_the_docs_resolve():
    text = README.read_text()
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert len(links) >= 10
    for target, anchor in links:
        page = REPO / target
        assert page.is_file(), target
        if anchor:
            headings = [_slug(h) for h in re.findall(r"^#+ (.+)$", page.read_text(), re.M)]
            assert anchor in headings, f"{target}#{anchor}"


def test_no_doubled_heading():
    for page in [README, *(REPO / "docs").glob("*.md")]:
        for line in page.read_text().splitlines():
            if line.startswith("#"):
                assert not re.search(r"[^#\s]#{2,} ", line), f"{page.name}: {line}"


def test_readme_robot_yaml_is_valid(tmp_path):
    """The README's one robot YAML passes the node's own validation (the file the node would load)."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) == 1
    path = tmp_path / "my_robot.yaml"
    path.write_text(blocks[0])
    values = load_params_file(path)
    assert values["cameras"] == ["front", "rear"] and values["model.path"] == "/opt/models/yolox_nano.onnx"
