"""The fuzz campaign's markdown (:mod:`vrt_ros.bench.robustness.fuzz`): one row per node, the drop reasons, the failed checks."""

from __future__ import annotations


def markdown(out: dict) -> str:
    """The campaign's result ``out`` (the JSON :func:`vrt_ros.bench.robustness.fuzz.main` writes) as markdown."""
    lines = [
        f"# Fuzz campaign: {out['messages_sent']} messages ({out['messages_fuzzed']} fuzzed), "
        f"{'all checks hold' if out['ok'] else 'CHECKS FAILED'}",
        "",
        f"`{out['command']}`: backend {out['backend']}, model {out['model']}, seed {out['seed']}, a good frame after "
        f"every {out['good_every']} fuzzed messages, {out['gap_ms']} ms after each; {out['wall_s']} s wall.",
        "",
        "| node | fuzzed | good | sent | received | processed (answers) | fuzzed accepted | dropped | engine_error | "
        "RSS MiB first/last quarter (growth) | msg/s | exit | checks |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, r in out["kinds"].items():
        failed = [k for k, ok in r["checks"].items() if not ok]
        m = r["rss_mib"]
        lines.append(
            f"| {kind} | {r['fuzzed']} | {r['good']} | {r['sent']} | {r['received']} | {r['processed']} "
            f"({r['answers']}) | {r['fuzzed_answered']} | {r['dropped']} | "
            f"{r['dropped_by_reason'].get('engine_error', 0)} | {m['first_quarter_max']}/{m['last_quarter_max']} "
            f"({m['growth']:+}) | {r['messages_per_s']} | {r['exit_status']} | "
            f"{'all ' + str(len(r['checks'])) + ' hold' if not failed else 'FAILED: ' + ', '.join(failed)} |")
    lines += ["", "Drop reasons (colour frames, per node):", ""]
    for kind, r in out["kinds"].items():
        reasons = ", ".join(f"`{k}` {n}" for k, n in r["dropped_by_reason"].items()) or "none"
        lines.append(f"- {kind}: {reasons}")
        if r["depth"]:
            lines.append(f"  - 3D output: " + ", ".join(f"`{k}` {n}" for k, n in r["depth"].items()))
    lines += ["", "Checks per node: " + ", ".join(f"`{k}`" for k in next(iter(out["kinds"].values()))["checks"]),
              f"(RSS: the largest sample of the last quarter minus the largest of the first, below "
              f"{out['rss_bound_mib']} MiB).", ""]
    return "\n".join(lines)
