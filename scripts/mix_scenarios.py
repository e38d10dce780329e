#!/usr/bin/env python3
"""Write mixed scenarios for differential testing against soul-protocol 0.4.0.

Each scenario is a seeded random walk over the ops of the public reference
scenarios (/work/shared/reference/scenarios/*.jsonl): observe, recall, remember,
forget and facts ops drawn with fixed weights, at increasing times (a minute to
a few days apart, some at the same second) written in UTC, with an offset or
naive, each observe and remember given a random owner (none, mia, theo, sana)
and domain (default, work, home), some recalls given a user or domain filter or
another limit. More than half of the texts are mutated: capitalised words are
swapped for others seen in the scenarios (names, places, tools), and some texts
are lower-cased or lose their final punctuation, so extraction, dedup,
supersede, the graph and ranking meet combinations the public set does not hold.

Then the reference's output is written beside each scenario by
/work/shared/reference/ref_replay.py (run with the interpreter given by
--python, one with soul-protocol 0.4.0 and freezegun installed).

Output: DIR/mix-SEED.jsonl and DIR/mix-SEED.reference.jsonl.

Usage (from the repository root):
    python3 scripts/mix_scenarios.py --python /tmp/refenv/bin/python \
        --out tests/scenarios/mixed --ops 400 501 502 503 504
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import random
import re
import subprocess
import sys
from pathlib import Path

SHARED = Path("/work/shared/reference")
WEIGHTS = [("observe", 55), ("recall", 25), ("remember", 10), ("forget", 3), ("facts", 4)]
USERS = [None, None, "mia", "theo", "sana"]
DOMAINS = [None, None, "work", "home"]
GAPS_MIN = [0, 0, 1, 2, 5, 10, 30, 90, 600, 1440, 4000]
GAPS_S = [0, 0, 17]


def stamp(at: dt.datetime, style: float) -> str:
    """`at` (UTC) as UTC, +02:00, naive (read as UTC) or -05:00."""
    if style < 0.6:
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style < 0.8:
        return (at + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+02:00")
    if style < 0.9:
        return at.strftime("%Y-%m-%dT%H:%M:%S")
    return (at - dt.timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%S-05:00")
CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")


def load_pool() -> dict[str, list[dict]]:
    pool: dict[str, list[dict]] = {}
    for path in sorted(glob.glob(str(SHARED / "scenarios" / "*.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    op = json.loads(line)
                    pool.setdefault(op["op"], []).append(op)
    return pool


def scenario(seed: int, n_ops: int, pool: dict[str, list[dict]]) -> list[dict]:
    rng = random.Random(seed)
    words = sorted(
        {
            w
            for ops in pool.values()
            for op in ops
            for key in ("user", "agent", "content", "query")
            if isinstance(op.get(key), str)
            for w in CAPITALISED.findall(op[key])
        }
    )

    def mutate(text: str) -> str:
        text = CAPITALISED.sub(lambda m: rng.choice(words) if rng.random() < 0.5 else m[0], text)
        if rng.random() < 0.1:
            text = text.lower()
        if rng.random() < 0.1:
            text = text.rstrip(".!?")
        return text

    kinds = [k for k, _ in WEIGHTS]
    weights = [w for _, w in WEIGHTS]
    at = dt.datetime(2024, 1, 1, 8, 0)
    out = []
    for i in range(n_ops):
        kind = rng.choices(kinds, weights)[0]
        op = dict(rng.choice(pool[kind]))
        at += dt.timedelta(minutes=rng.choice(GAPS_MIN), seconds=rng.choice(GAPS_S))
        op["at"] = stamp(at, rng.random())
        if kind in ("observe", "remember"):
            op.pop("user_id", None)
            op.pop("domain", None)
            user, domain = rng.choice(USERS), rng.choice(DOMAINS)
            if user:
                op["user_id"] = user
            if domain:
                op["domain"] = domain
            if rng.random() < 0.6:
                for key in ("user", "agent", "content"):
                    if isinstance(op.get(key), str):
                        op[key] = mutate(op[key])
        if kind in ("recall", "forget") and rng.random() < 0.5:
            op["query"] = mutate(op["query"])
        if kind == "recall":
            if rng.random() < 0.3:
                op["user_id"] = rng.choice(USERS[2:])
            if rng.random() < 0.15:
                op["domain"] = rng.choice(DOMAINS[2:])
            if rng.random() < 0.2:
                op["limit"] = rng.choice([1, 3, 5, 20])
        op["tag"] = f"mix:{kind}:{i}"
        out.append(op)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("seeds", nargs="+", type=int)
    ap.add_argument("--ops", type=int, default=400, help="ops per scenario")
    ap.add_argument("--out", default="tests/scenarios/mixed", help="output folder")
    ap.add_argument("--python", required=True, help="interpreter with soul-protocol 0.4.0")
    args = ap.parse_args()
    pool = load_pool()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        path = out_dir / f"mix-{seed}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for op in scenario(seed, args.ops, pool):
                fh.write(json.dumps(op, ensure_ascii=False) + "\n")
        with open(out_dir / f"mix-{seed}.reference.jsonl", "w", encoding="utf-8") as fh:
            subprocess.run(
                [args.python, str(SHARED / "ref_replay.py"), str(path)], stdout=fh, check=True
            )
        print(f"wrote {path} and its reference output", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
