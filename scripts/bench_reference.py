#!/usr/bin/env python3
"""Time soul-protocol 0.4.0 on scenario files, op by op: the Python side of
`soulctl bench replay`, whose table and JSON it mirrors.

    python3 -m venv /tmp/sp && /tmp/sp/bin/pip install soul-protocol==0.4.0
    /tmp/sp/bin/python scripts/bench_reference.py [--json OUT] SCENARIO.jsonl...

The scenarios (SCENARIO_FORMAT.md) are replayed in order into one in-memory
MemoryManager with the heuristic engine (no LLM), as the reference oracle
replays them, without its frozen clock (which would slow every call): each
`observe` is the manager's observe of the exchange at its `at` time followed
by the knowledge-graph update soul-protocol's Soul.observe makes with the
entities found; each `recall` the manager's recall with the op's filters;
each `remember` the manager's add of the entry (or its layer's store, for a
custom layer); each `forget` the manager's forget of the query; each `facts`
a read of every semantic fact, superseded ones included. Ops of another
kind are counted and skipped.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time

logging.disable(logging.CRITICAL)

try:
    from soul_protocol.runtime.memory.manager import MemoryManager
    from soul_protocol.runtime.types import (
        CoreMemory,
        Interaction,
        MemoryEntry,
        MemorySettings,
        MemoryType,
        MemoryVisibility,
    )
except ImportError:
    sys.exit("needs soul-protocol 0.4.0: pip install soul-protocol==0.4.0 (in a virtualenv)")


def drive(coro):
    """Runs a coroutine that never waits (the reference's memory is in-process)."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a reference coroutine waited on something")


def parse_at(text: str) -> dt.datetime:
    """RFC 3339 to a naive UTC datetime (no offset: UTC)."""
    text = text.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    when = dt.datetime.fromisoformat(text)
    if when.tzinfo is not None:
        when = when.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return when


def observe(mgr: MemoryManager, op: dict) -> None:
    interaction = Interaction.from_pair(
        op["user"], op.get("agent") or "", timestamp=parse_at(op["at"])
    )
    result = drive(
        mgr.observe(interaction, user_id=op.get("user_id"), domain=op.get("domain") or "default")
    )
    # The graph update Soul.observe makes with what observe found.
    graph = []
    for ent in result["entities"]:
        rels = [{"target": "user", "relation": ent["relation"]}] if ent.get("relation") else []
        graph.append(
            {"name": ent["name"], "entity_type": ent.get("type", "unknown"), "relationships": rels}
        )
    if graph:
        drive(mgr.update_graph(graph))


def recall(mgr: MemoryManager, op: dict) -> None:
    types = op.get("types")
    limit = op.get("limit")
    drive(
        mgr.recall(
            op["query"],
            limit=10 if limit is None else limit,
            types=[MemoryType(t) for t in types] if types is not None else None,
            min_importance=op.get("min_importance") or 0,
            requester_id=op.get("requester_id"),
            bond_strength=float(op.get("bond_strength", 100.0)),
            user_id=op.get("user_id"),
            layer=op.get("layer"),
            domain=op.get("domain"),
        )
    )


def remember(mgr: MemoryManager, op: dict) -> None:
    fields = dict(
        content=op["content"],
        importance=op.get("importance", 5),
        entities=list(op.get("entities") or []),
        visibility=MemoryVisibility(op.get("visibility") or "bonded"),
        domain=op.get("domain") or "default",
        user_id=op.get("user_id"),
    )
    layer = op.get("layer")
    if layer is None:
        drive(mgr.add(MemoryEntry(type=MemoryType(op["type"]), **fields)))
    else:
        drive(mgr.layer(layer).store(MemoryEntry(type=MemoryType.SEMANTIC, layer=layer, **fields)))


def forget(mgr: MemoryManager, op: dict) -> None:
    drive(mgr.forget(op["query"]))


def facts(mgr: MemoryManager, op: dict) -> None:
    mgr._semantic.facts(include_superseded=True)


OPS = {"observe": observe, "recall": recall, "remember": remember, "forget": forget, "facts": facts}


def quantile(values: list[float], p: float) -> float:
    """Nearest rank, as soulctl's."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = min(max(int(-(-p * len(ordered) // 1)), 1), len(ordered))
    return ordered[rank - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenarios", nargs="+")
    ap.add_argument("--json", help="also write the figures as JSON")
    args = ap.parse_args()
    ops = []
    for path in args.scenarios:
        with open(path, encoding="utf-8") as f:
            ops.extend(json.loads(line) for line in f if line.strip())
    out = open(args.json, "w", encoding="utf-8") if args.json else None
    mgr = MemoryManager(core=CoreMemory(), settings=MemorySettings())
    timed: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    skipped: dict[str, int] = {}
    started = time.perf_counter()
    for i, op in enumerate(ops, 1):
        name = op.get("op")
        run = OPS.get(name)
        if run is None:
            skipped[str(name)] = skipped.get(str(name), 0) + 1
            continue
        t = time.perf_counter()
        try:
            run(mgr, op)
        except Exception:  # noqa: BLE001 (counted, as soulctl counts an op's error)
            errors[name] = errors.get(name, 0) + 1
        timed.setdefault(name, []).append((time.perf_counter() - t) * 1e3)
        if i % 200 == 0 or i == len(ops):
            print(f"\r{i}/{len(ops)} ops", end="", file=sys.stderr, flush=True)
    total_s = time.perf_counter() - started
    print(file=sys.stderr)
    print("| op | count | errors | p50_ms | p99_ms | mean_ms | total_s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    by_op = {}
    for name in sorted(timed):
        each = timed[name]
        p50, p99, mean = quantile(each, 0.5), quantile(each, 0.99), sum(each) / len(each)
        err = errors.get(name, 0)
        print(f"| {name} | {len(each)} | {err} | {p50:.3f} | {p99:.3f} | {mean:.3f} | {sum(each) / 1e3:.2f} |")
        by_op[name] = {
            "count": len(each),
            "errors": err,
            "p50_ms": p50,
            "p99_ms": p99,
            "mean_ms": mean,
            "total_s": sum(each) / 1e3,
        }
    print(f"{sum(len(v) for v in timed.values())} ops in {total_s:.2f} s", end="")
    print(f" ({sum(skipped.values())} skipped: {skipped})" if skipped else "")
    if out is not None:
        json.dump(
            {
                "engine": "soul-protocol 0.4.0",
                "profile": "reference",
                "store": "memory",
                "scenarios": args.scenarios,
                "ops": len(ops),
                "total_s": total_s,
                "by_op": by_op,
                "skipped": skipped,
            },
            out,
            indent=2,
        )
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
