#!/usr/bin/env python3
"""Build recall parity fixtures for soulmem from soul-protocol 0.4.0.

Replays every scenario in /work/shared/reference/scenarios/ exactly as
/work/shared/reference/ref_replay.py does (same clock pinning, seeded ids,
PYTHONHASHSEED=0, TZ=UTC, graph mode "soul") and, right before each `recall`
op, records the complete memory state the recall will read:

* every store's entries in the store's own (insertion) order, all fields,
* custom layers, the knowledge graph (entities in order, edges),
* the lazily built BM25 corpus of the recall engine (contents in index order),

then the op itself, the ids and contents the reference returned, the activation
the reference computed for each ranked candidate (by id), which entries got their
access metadata bumped (with their new access counts) and the corpus size after.

Output: tests/fixtures/recall/<scenario>.jsonl, one JSON object per sampled
recall. Long scenarios (p15, p16) keep every SAMPLE_EVERY-th recall; the
replay itself still runs every op so the sampled states are exact.

Usage (from the repository root):
    /work/refenv/bin/python scripts/gen_recall_fixtures.py [SCENARIO_NAME ...]
Environment: RECALL_FIXTURE_DIR (output folder), RECALL_SAMPLE_EVERY (default 5).
"""

from __future__ import annotations

import json
import os
import sys

REF_DIR = "/work/shared/reference"
sys.path.insert(0, REF_DIR)

# Importing ref_replay re-executes this script with PYTHONHASHSEED=0 and TZ=UTC
# when they are not already set, so the set iteration orders match the goldens.
import ref_replay  # noqa: E402
from ref_replay import OpError, Replayer, parse_at, patch_pydantic_now, patch_uuid  # noqa: E402
from freezegun import freeze_time  # noqa: E402
import datetime as _dt  # noqa: E402
import soul_protocol.runtime.memory.recall as recall_mod  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.environ.get("RECALL_FIXTURE_DIR") or os.path.join(HERE, "..", "tests", "fixtures", "recall")
SCEN_DIR = os.path.join(REF_DIR, "scenarios")
GOLD_DIR = os.path.join(REF_DIR, "goldens")
# RECALL_SAMPLE_EVERY=1 keeps every recall of the long scenarios too (about 30 MB).
_EVERY = int(os.environ.get("RECALL_SAMPLE_EVERY", "5"))
LONG = {"p15_long_single_user": _EVERY, "p16_long_multi_user_domains": _EVERY}


def dump_entries(entries):
    return [e.model_dump(mode="json") for e in entries]


def all_entries(mgr):
    """(store name, entry) for every entry the manager holds."""
    for e in mgr._episodic._memories.values():
        yield "episodic", e
    for e in mgr._semantic._facts.values():
        yield "semantic", e
    for e in mgr._procedural._procedures.values():
        yield "procedural", e
    for e in mgr._social._entries.values():
        yield "social", e
    for name, store in mgr._custom_layers.items():
        for e in store.values():
            yield name, e


def snapshot(mgr) -> dict:
    strategy = mgr._recall_engine._strategy
    corpus = sorted(strategy._content_to_id.items(), key=lambda kv: int(kv[1].split("_")[1]))
    return {
        "episodic": dump_entries(mgr._episodic._memories.values()),
        "semantic": dump_entries(mgr._semantic._facts.values()),
        "procedural": dump_entries(mgr._procedural._procedures.values()),
        "social": dump_entries(mgr._social._entries.values()),
        "custom": {
            name: dump_entries(store.values()) for name, store in mgr._custom_layers.items()
        },
        "graph": mgr._graph.to_dict(),
        "bm25_corpus": [content for content, _ in corpus],
    }


def run_scenario(name: str) -> list[dict]:
    with open(os.path.join(SCEN_DIR, name + ".jsonl"), encoding="utf-8") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    gold = []
    with open(os.path.join(GOLD_DIR, name + ".out.jsonl"), encoding="utf-8") as fh:
        gold = [json.loads(ln) for ln in fh if ln.strip()]

    patch_pydantic_now()
    patch_uuid(0)
    rep = Replayer(graph_mode="soul")
    every = LONG.get(name, 1)
    records: list[dict] = []
    recall_no = 0
    freezer = freeze_time(_dt.datetime(2000, 1, 1))
    frozen = freezer.start()
    try:
        for idx, raw in enumerate(lines):
            op = json.loads(raw)
            at = parse_at(op["at"])
            frozen.move_to(at)
            handler = Replayer.HANDLERS[op["op"]]
            if op["op"] != "recall":
                try:
                    handler(rep, op, at)
                except Exception:  # the harness reports op errors and carries on
                    pass
                continue
            keep = recall_no % every == 0
            recall_no += 1
            state = snapshot(rep.mgr) if keep else None
            before = {(s, e.id): e.access_count for s, e in all_entries(rep.mgr)}
            captured: list = []
            scores: dict = {}
            real_recall = rep.mgr.recall
            real_act = recall_mod.compute_activation

            def traced_act(entry, *args, **kwargs):
                value = real_act(entry, *args, **kwargs)
                scores[entry.id] = value
                return value

            recall_mod.compute_activation = traced_act

            async def wrapped(*args, **kwargs):
                res = await real_recall(*args, **kwargs)
                captured.extend(res)
                return res

            rep.mgr.recall = wrapped
            try:
                out = handler(rep, op, at)
                error = None
            except Exception as exc:
                out = {}
                error = f"{type(exc).__name__}: {exc}"
            finally:
                del rep.mgr.recall
                recall_mod.compute_activation = real_act
            if not keep:
                continue
            bumped = [
                [s, e.id, e.access_count]
                for s, e in all_entries(rep.mgr)
                if e.access_count != before.get((s, e.id))
            ]
            g = gold[idx]
            if error is None and g.get("results") != out.get("results"):
                raise SystemExit(f"{name}: op {idx + 1} differs from the golden")
            records.append(
                {
                    "scenario": name,
                    "line": idx + 1,
                    "op": op,
                    "now": at.isoformat(),
                    "state": state,
                    "result_ids": [e.id for e in captured],
                    "results": out.get("results"),
                    "error": error,
                    "bumped": bumped,
                    "activations": scores,
                    "corpus_len_after": len(rep.mgr._recall_engine._strategy._content_to_id),
                }
            )
    finally:
        freezer.stop()
    return records


def pyset_cases() -> dict:
    """Python str hashes and set iteration orders under PYTHONHASHSEED=0.

    soulmem re-creates CPython's set layout to sum BM25 terms and walk graph terms in
    the reference's order; these cases pin that re-creation.
    """
    import random

    from soul_protocol.runtime.memory.search import _expand_synonyms, tokenize

    rng = random.Random(7)
    alpha = "abcdefghijklmnopqrstuvwxyz"
    cases: dict = {"hashes": {}, "adds": [], "queries": []}
    for s in ["", "user", "a", "Python", "José", "日本", "😀x", "abcdefgh", "abcdefghi", "Figma"]:
        cases["hashes"][s] = hash(s)
    words = ["Alice", "Bob", "user", "Python", "Figma", "Postgres", "Rust", "Acme Corp",
             "Lisbon", "Go", "José", "Ünï", "日本語", "Mia", "Theo", "Sana"]
    for _ in range(200):
        seq = []
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.4:
                seq.append(rng.choice(words))
            else:
                seq.append("".join(rng.choice(alpha) for _ in range(rng.randint(1, 10))))
        s = set()
        for w in seq:
            s.add(w)
        cases["adds"].append({"seq": seq, "order": list(s)})
    queries = []
    for f in sorted(os.listdir(SCEN_DIR)):
        if f.endswith(".jsonl"):
            with open(os.path.join(SCEN_DIR, f), encoding="utf-8") as fh:
                for ln in fh:
                    if ln.strip() and json.loads(ln).get("op") == "recall":
                        queries.append(json.loads(ln)["query"])
    syn = ["database", "sql", "python", "test", "deploy", "api", "http", "error", "repo",
           "cli", "config", "frontend", "docker", "auth"]
    for _ in range(200):
        words_q = []
        for _ in range(rng.randint(1, 12)):
            rand_word = "".join(rng.choice(alpha) for _ in range(rng.randint(3, 8)))
            words_q.append(rng.choice(syn + [rand_word]))
        queries.append(" ".join(words_q))
    for q in queries:
        cases["queries"].append({"q": q, "order": list(_expand_synonyms(tokenize(q)))})
    return cases


def main() -> int:
    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "pyset_cases.json"), "w", encoding="utf-8") as fh:
        json.dump(pyset_cases(), fh, ensure_ascii=False)
    names = sorted(f[:-6] for f in os.listdir(SCEN_DIR) if f.endswith(".jsonl"))
    names = [n for n in names if len(sys.argv) < 2 or n in sys.argv[1:]]
    total = 0
    for name in names:
        records = run_scenario(name)
        path = os.path.join(OUT_DIR, name + ".jsonl")
        with open(path, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        size = os.path.getsize(path)
        total += size
        print(f"{name}: {len(records)} recalls, {size // 1024} KiB", file=sys.stderr)
    print(f"total {total / 1e6:.2f} MB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
