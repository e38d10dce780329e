#!/usr/bin/env python3
"""Write tests/fixtures/extract/reference_extract.jsonl from soul-protocol 0.4.0.

Run with the interpreter that has the reference installed:

    /work/refenv/bin/python scripts/gen_extract_fixtures.py

For every `observe` op of /work/shared/reference/scenarios/*.jsonl and the first
300 observes of /work/shared/locomo/scenarios/locomo-26.jsonl, one line:

    {"src", "user", "agent",
     "facts":    [{"content", "importance", "category", "abstract"}, ...],
     "entities": [{"name", "type", "relation", "relationships"}, ...],
     "graph":    [{"name", "entity_type", "relationships"}, ...]}

`facts` is MemoryManager.extract_facts on an empty semantic store, enriched the way
CognitiveProcessor._enrich_facts does (category, abstract); `entities` is
MemoryManager.extract_entities; `graph` is what Soul.observe (step 7) hands to
update_graph for those entities.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import sys

logging.disable(logging.CRITICAL)

from soul_protocol.runtime.cognitive.engine import (  # noqa: E402
    classify_memory_category,
    generate_abstract,
)
from soul_protocol.runtime.memory.manager import MemoryManager  # noqa: E402
from soul_protocol.runtime.types import CoreMemory, Interaction, MemorySettings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "extract", "reference_extract.jsonl")
REFERENCE_SCENARIOS = sorted(glob.glob("/work/shared/reference/scenarios/*.jsonl"))
LOCOMO = "/work/shared/locomo/scenarios/locomo-26.jsonl"
LOCOMO_LIMIT = 300


def observes(path: str, limit: int | None = None):
    n = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            op = json.loads(line)
            if op.get("op") != "observe":
                continue
            if limit is not None and n >= limit:
                return
            n += 1
            yield op


def soul_graph(entities: list[dict]) -> list[dict]:
    """The entity list Soul.observe step 7 passes to MemoryManager.update_graph."""
    out = []
    for ent in entities:
        rels = []
        if ent.get("relation"):
            rels.append({"target": "user", "relation": ent["relation"]})
        out.append({"name": ent["name"], "entity_type": ent.get("type", "unknown"),
                    "relationships": rels})
    return out


def main() -> int:
    mgr = MemoryManager(CoreMemory(), MemorySettings())
    sources = [(p, None) for p in REFERENCE_SCENARIOS] + [(LOCOMO, LOCOMO_LIMIT)]
    lines = 0
    with open(OUT, "w", encoding="utf-8") as out:
        for path, limit in sources:
            name = os.path.basename(path)
            for op in observes(path, limit):
                user = op.get("user", "")
                agent = op.get("agent", "") or ""
                inter = Interaction.from_pair(user, agent)
                facts = []
                for f in mgr.extract_facts(inter):
                    cat = classify_memory_category(f.content)
                    facts.append({
                        "content": f.content,
                        "importance": f.importance,
                        "category": cat.value if cat is not None else None,
                        "abstract": generate_abstract(f.content),
                    })
                ents = mgr.extract_entities(inter)
                rec = {
                    "src": name,
                    "user": user,
                    "agent": agent,
                    "facts": facts,
                    "entities": [
                        {"name": e["name"], "type": e["type"], "relation": e["relation"],
                         "relationships": e["relationships"]}
                        for e in ents
                    ],
                    "graph": soul_graph(ents),
                }
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                lines += 1
    print(f"wrote {lines} observes to {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
