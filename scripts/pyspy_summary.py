"""Summarise py-spy's raw collapsed stacks (``py-spy record --format raw --threads``): per thread, its share of the
samples and its top leaf frames (where it was when sampled, idle waits included with ``--idle``).

Usage: python scripts/pyspy_summary.py FILE [--top 12]  (written by scripts/gpu_profile_rows.sh)
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")


def summarise(lines: list[str], top: int) -> list[str]:
    """Markdown lines: per thread (by samples, most first), its samples and top ``top`` leaf frames."""
    per_thread: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in lines:
        m = _LINE.match(line.strip())
        if not m:
            continue
        frames = m["stack"].split(";")
        per_thread[frames[0]][frames[-1] if len(frames) > 1 else "(no Python frame)"] += int(m["count"])
    total = sum(sum(c.values()) for c in per_thread.values()) or 1
    out = []
    for thread, leaves in sorted(per_thread.items(), key=lambda kv: -sum(kv[1].values())):
        n = sum(leaves.values())
        out.append(f"- **{thread}**: {n} samples ({100 * n / total:.0f} % of all)")
        for leaf, k in leaves.most_common(top):
            out.append(f"  - {100 * k / n:5.1f} %  {leaf}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    print("\n".join(summarise(args.file.read_text().splitlines(), args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
