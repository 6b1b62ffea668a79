"""The README's parameter table is generated from the schema; this keeps it from drifting."""

from __future__ import annotations

import re
from pathlib import Path

from vrt_ros.config import markdown_table

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_parameter_table_matches_schema():
    text = README.read_text()
    m = re.search(r"<!-- params:begin -->\n(.*?)\n<!-- params:end -->", text, re.S)
    assert m, "README.md lacks the params:begin/params:end markers"
    assert m.group(1).strip() == markdown_table().strip(), "regenerate with: python -m vrt_ros.config --markdown"


def test_readme_gives_the_two_set_up_commands():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
