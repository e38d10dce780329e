#!/usr/bin/env python3
"""Write tests/fixtures/extract/reference_extract.jsonl from soul-protocol 0.4.0.

Run with the interpreter that has the reference installed:

    /work/refenv/bin/python scripts/gen_extract_fixtures.py

For every `observe` op of /work/shared/reference/scenarios/*.jsonl, the first 300
observes of /work/shared/locomo/scenarios/locomo-26.jsonl and a few synthetic edge
cases (SYNTHETIC), one line:

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


# Edge cases the scenarios do not reach (Unicode, line breaks, relation patterns).
SYNTHETIC = [
    ("I joined Stripe\n", ""),
    ("I just joined Acme\n", "Welcome!\n"),
    ("I'm from Zürich and I love Müsli", "Schön!"),
    ("I’m from Porto", "Curly apostrophe."),
    ("I use Gold for plating", ""),
    ("Priya reports to Tomas. Tomas manages Priya.", "Ana and Ben are colleagues."),
    ("Lena's manager is Omar and Omar is the CTO of Initech", "Sam founded Kitebird."),
    ("Mia is a friend of Noor. Noor works at Globex.", ""),
    ("he reports to Tomas", "Tomas joined acme"),
    ("I'm   building\ta   thing   with   spaces", ""),
    ("I am learning Rust and I am studying Go", "Try cargo. Install rustup. Run cargo build."),
    ("How do I deploy to AWS? How can we scale Redis?", "Use ECS for deployment, or use k8s instead of ECS."),
    ("Postgres vs MySQL for analytics", "SQLite compared to Postgres is lighter."),
    ("I keep getting CORS errors and seeing 502 error", ""),
    ("My favorite color is blue. My favorite coffee shop is Blue Door.", ""),
    ("I love python, I hate java, I don't like ruby, I dont like perl", ""),
    ("I work at Umbra Health and I work for Redshift Foods", ""),
    ("We're building Lighthouse. The app named Beacon-2 is live. My tool is Zed", ""),
    ("I manage the platform team at Zalando and I lead a small crew", ""),
    ("I'm interested in distributed systems and I'm working on soul protocol", ""),
    ("ÉCOLE Étienne visited Ørsted in Ålesund", "Ça va? Übung macht den Meister."),
    ("I moved to São Paulo last month", "Olá!"),
    ("i am a ½ marathon runner ² times", ""),
    ("I'm trying to learn 日本語 and 中文", "頑張って!"),
    ("Dr. Smith and Mrs. Jones met at St. Mary's", ""),
    ("hi", ""),
    ("", ""),
    ("...", "..."),
    ("I want to go. I need to Go. I have to GO", "Let's go."),
    ("I relocated to Lyon, I moved to Nice", ""),
    ("I prefer pandas.read_csv() over csv", "Check out polars. Look into duckdb."),
]


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
    pairs = []
    for path, limit in sources:
        name = os.path.basename(path)
        pairs += [(name, op.get("user", ""), op.get("agent", "") or "")
                  for op in observes(path, limit)]
    pairs += [("synthetic", u, a) for u, a in SYNTHETIC]
    lines = 0
    with open(OUT, "w", encoding="utf-8") as out:
        for name, user, agent in pairs:
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
