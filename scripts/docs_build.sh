#!/usr/bin/env bash
# The docs leg of `make test`: build the mkdocs site (mkdocs.yml, docs/) with --strict, so that a broken link or
# anchor, a page missing from the nav, or a stale generated block fails the run. Offline: the build and the built
# site fetch nothing (mkdocs.yml: theme fonts off, no privacy/social plugin).
#
# Usage: scripts/docs_build.sh VENV     (mkdocs and mkdocs-material pinned in requirements/test-docs.txt, installed
#                                        by scripts/test_extras.sh); the site goes to build/site/ (ignored by git).
# Steps: 1. scripts/docs_gen.py --check: every generated block (parameters, performance tables) matches its source;
#        2. mkdocs build --strict.
set -uo pipefail

venv="${1:?usage: $0 VENV}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ ! -x "$venv/bin/mkdocs" ]; then
  echo "docs: error: $venv/bin/mkdocs not found: scripts/test_extras.sh $venv installs requirements/test-docs.txt" >&2
  [ -f "$venv/.vrt-stamps/docs.failed" ] && cat "$venv/.vrt-stamps/docs.failed" >&2
  exit 1
fi
start=$SECONDS
PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" scripts/docs_gen.py --check || {
  echo "docs: error: a generated block is stale (above); regenerate with: $venv/bin/python scripts/docs_gen.py" >&2
  exit 1
}
"$venv/bin/mkdocs" build --strict --site-dir "$repo/build/site" || {
  echo "docs: error: mkdocs build --strict failed (the warnings above name the page and the link or anchor)" >&2
  exit 1
}
echo "docs: site built in $((SECONDS - start)) s: $repo/build/site/index.html"
