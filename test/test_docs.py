"""The docs site (issue 37 item 2): generated blocks agree with their sources, the parameter reference is the schema,
every page is in the nav, and the site builds with ``mkdocs build --strict`` (the docs leg of ``make test`` runs the
same build: scripts/docs_build.sh)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from vrt_ros.settings import config

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _docs_gen():
    spec = importlib.util.spec_from_file_location("docs_gen", REPO / "scripts" / "docs_gen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _block(path: Path, name: str) -> str:
    gen = _docs_gen()
    blocks = dict(gen.BLOCK.findall(path.read_text()))
    assert name in blocks, f"{path.name} lacks the <!-- gen:{name} --> block"
    return blocks[name].rstrip("\n")


def test_every_generated_block_and_picture_is_current():
    assert _docs_gen().stale() == [], "regenerate with: python scripts/docs_gen.py"


def test_parameter_page_is_the_schema():
    table = _block(DOCS / "parameters.md", "params")
    assert table == config.markdown_table()
    rows = [line for line in table.splitlines()[2:]]
    assert [r.split(" | ")[0].strip("| `") for r in rows] == [p.name for p in config.PARAMS]
    # the columns the issue asks for: name, type, default, range, read-only, meaning
    assert table.splitlines()[0] == "| parameter | type | default | range / choices | read-only | description |"


def test_a_schema_change_makes_the_parameter_page_stale(monkeypatch):
    """Page and schema disagree -> the check names the page's block (so the docs leg and the test above fail)."""
    gen = _docs_gen()
    changed = tuple(dataclasses.replace(p, default=0.5) if p.name == "score_threshold" else p for p in config.PARAMS)
    monkeypatch.setattr(config, "PARAMS", changed)
    assert "docs/parameters.md: block params" in gen.stale()


def test_a_changed_result_makes_the_performance_page_stale(monkeypatch):
    gen = _docs_gen()
    def other() -> str:
        return "| other |"

    other.__doc__ = gen.GENERATORS["dds-floor"].__doc__  # the same source, other results
    monkeypatch.setitem(gen.GENERATORS, "dds-floor", other)
    assert gen.stale() == ["docs/performance.md: block dds-floor"]


def test_an_unknown_or_unterminated_block_is_an_error():
    gen = _docs_gen()
    with pytest.raises(ValueError, match="unknown generated block 'nope'"):
        gen.render("<!-- gen:nope -->\nx\n<!-- gen:end -->\n", "page.md", {})
    with pytest.raises(ValueError, match="page.md: a <!-- gen:NAME --> block without its <!-- gen:end -->"):
        gen.render("<!-- gen:params -->\nx\n", "page.md", {})


def _nav_files(nav) -> list[str]:
    out = []
    for item in nav:
        for value in (item.values() if isinstance(item, dict) else [item]):
            out += _nav_files(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_nav():
    nav = _nav_files(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages


def test_the_site_fetches_nothing():
    """Offline: no web fonts (the theme's default is Google Fonts), no plugin that downloads at build time."""
    cfg = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert cfg["theme"]["font"] is False
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in cfg.get("plugins", [])]
    assert not {"privacy", "social"} & set(plugins), plugins  # both download at build time


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="mkdocs not installed in this interpreter's environment (requirements/test-docs.txt; "
                           "make test installs it; the docs leg of make test fails without it)")
def test_site_builds_strict(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    r = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "site" / "parameters.html").is_file()
    for page in (tmp_path / "site").glob("*.html"):  # nothing the browser would load from elsewhere
        html = page.read_text()
        assert not re.search(r'(src|href)="https?://[^"]*\.(js|css|woff2?)"', html), page.name
        assert "fonts.googleapis" not in html and "fonts.gstatic" not in html, page.name
