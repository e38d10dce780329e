#!/usr/bin/env python3
"""Build parity fixtures for soulmem's write-path judges from soul-protocol 0.4.0.

Run with the reference's interpreter (soul-protocol 0.4.0 installed):

    /work/refenv/bin/python scripts/gen_judge_fixtures.py [SCENARIO_DIR] [OUT_DIR]

Defaults: /work/shared/reference/scenarios and tests/fixtures/judge. Every expected
value comes from the reference's own functions, applied to the texts of every
`observe` op of the scenarios and to fact-like strings derived from them:

- sentiment.jsonl     detect_sentiment on user, agent and combined texts, plus every
                      lexicon word alone, negated, intensified and diminished
- significance.jsonl  compute_significance / overall_significance / is_significant,
                      compute_salience, generate_abstract and the episodic importance,
                      with the previous observes of the scenario as recent episodes
- dedup.jsonl         reconcile_fact of each derived fact against a window of earlier
                      facts plus perturbed copies (SKIP / MERGE / CREATE)
- pairs.jsonl         _jaccard_similarity and _token_overlap_score of fact pairs
- contradiction.jsonl ContradictionDetector.detect_heuristic (and _find_similar) for
                      derived facts and for raw user texts against windows of facts
- verb_facts.jsonl    _extract_verb_facts of every text and fact

Deterministic: a seeded RNG, scenario files in name order.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

from soul_protocol.runtime.cognitive.engine import compute_salience, generate_abstract
from soul_protocol.runtime.memory import sentiment as sent
from soul_protocol.runtime.memory.attention import (
    compute_significance,
    is_significant,
    overall_significance,
)
from soul_protocol.runtime.memory.contradiction import (
    ContradictionDetector,
    _extract_verb_facts,
)
from soul_protocol.runtime.memory.dedup import _jaccard_similarity, reconcile_fact
from soul_protocol.runtime.memory.manager import (
    FACT_PATTERNS,
    _clean_captured,
    _token_overlap_score,
)
from soul_protocol.runtime.memory.search import tokenize
from soul_protocol.runtime.types import Interaction, MemoryEntry, MemoryType

ROOT = Path(__file__).resolve().parent.parent
SCEN = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/work/shared/reference/scenarios")
OUT = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "judge"
WINDOW = 12
RNG = random.Random(20240201)

CORE_VALUE_SETS = [
    [],
    ["honesty", "learning", "curiosity"],
    ["helping people ship reliable software", "python", "kindness"],
]

DETECTOR = ContradictionDetector()


def run_sync(coro):
    """Drive a coroutine that never awaits anything pending."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("coroutine suspended")


def entry(fid: str, content: str) -> MemoryEntry:
    return MemoryEntry(type=MemoryType.SEMANTIC, content=content, id=fid)


def extract_facts(user: str, agent: str) -> list[str]:
    """FACT_PATTERNS over `user. agent`, as the reference extractor (no pre-filter)."""
    user = user.rstrip(" .")
    agent = agent.rstrip(" .")
    combined = f"{user}. {agent}" if agent else user
    out: list[str] = []
    for pattern, _importance, template in FACT_PATTERNS:
        for m in pattern.finditer(combined):
            groups = [_clean_captured(g) for g in m.groups()]
            if not all(groups):
                continue
            content = template.format(*groups)
            if content not in out:
                out.append(content)
    return out


CAP = re.compile(r"\b[A-Z][a-z]{2,}\b")

TEMPLATES = [
    "User lives in {0}",
    "User moved to {0}",
    "I moved to {0} last month",
    "User is based in {0}",
    "I'm based in {0}",
    "I live in {0}, near the river",
    "User works at {0}",
    "User joined {0}",
    "I work @ {0} now",
    "User is a engineer at {0}",
    "I am a designer at {0}. I live in {1}",
    "User prefers {0}",
    "User likes {0}",
    "User dislikes {0}",
    "User doesn't like {0}",
    "I don't like {0}",
    "User hates {0}",
    "User is {0}",
    "User is not {0}",
    "User's favorite city is {0}",
    "The release codename is {0}",
    "the project lead is {0} now",
    "User's name is {0}",
    "User can speak {0}",
    "User can't speak {0}",
    "User no longer works at {0}",
    "User left {0}",
    "User will visit {0}",
    "User won't visit {0}",
    "User has a dog named {0}",
    "User uses {0}",
    "User is building {0} with {1}",
    "Ravi lives in {0}",
]


# Synthetic edge cases: empty and white-space texts, Python-only white space
# (U+001C..U+001F), trailing newlines (Python's `$`), non-ASCII letters and digits,
# profile accidents from QUIRKS.md.
EDGE_PAIRS = [
    ("", ""),
    ("   ", "\t"),
    ("I live in Oslo\n", "Noted.\n"),
    ("I live in Oslo\nand I work at Aker\n", ""),
    ("Zürich Café Straße 2024-02 ² ٣ Über Ånd", "OK"),
    ("I'm based in Lisbon. I am based in Porto", "Nice."),
    ("I don't like cilantro at all", "Noted"),
    ("Ravi lives in Chennai, and our taxi moved to the left lane", "Ok"),
    ("I live in oslo. i work @ aker solutions as a welder", "Cool"),
    ("The release codename is Osprey now.\nThe team lead is Mia", "Got it"),
    ("I am not happy, I am not sad, I am extremely   tired!!!", "Rest."),
    ("My name is Ana and I work at Arup in the long-span bridges team since 2019", "Great"),
    ("User: nested\nAgent: text? yes! no.", "Agent: reply"),
    ("a" * 450 + " tail", "b " * 300),
    ("word " * 120 + "end. Next sentence", ""),
]

# Python-only white space (U+001C..U+001F) is checked where soulmem's judges split
# text themselves (sentiment, verb facts, the pre-filter). The shared tokenizer
# (`text::tokenize`) still splits only on Rust white space, so these texts stay out
# of the significance / dedup fixtures until it is fixed.
EDGE_SPLIT_ONLY = ["happy\x1csad\x1fnot\x1dgreat", "I live in\x1cOslo", "x\x1ey z"]


def perturb(text: str) -> list[str]:
    """Near copies of a fact: none (CREATE), or a mix that lands in MERGE / SKIP."""
    roll = RNG.random()
    if roll < 0.35:
        return []
    words = text.split()
    out = []
    if len(words) > 3 and RNG.random() < 0.6:
        i = RNG.randrange(1, len(words))
        out.append(" ".join(words[:i] + words[i + 1 :]))
    if RNG.random() < 0.6:
        extra = RNG.sample(["every", "day", "at", "home", "now", "again", "for", "work", "on", "weekends"], RNG.randrange(1, 5))
        out.append(text + " " + " ".join(extra))
    if len(words) > 2 and RNG.random() < 0.5:
        w = list(words)
        w[RNG.randrange(len(w))] = RNG.choice(["Lisbon", "coffee", "Rust", "tea", "weekends"])
        out.append(" ".join(w))
    if RNG.random() < 0.15:
        out.append(text.upper() if RNG.random() < 0.5 else text + ".")
    return out


def write(name: str, rows: list[dict]) -> None:
    path = OUT / name
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{name}: {len(rows)} rows", file=sys.stderr)


def marker(m) -> dict:
    return {"valence": m.valence, "arousal": m.arousal, "label": m.label}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    sentiment_rows: list[dict] = []
    significance_rows: list[dict] = []
    dedup_rows: list[dict] = []
    pair_rows: list[dict] = []
    contra_rows: list[dict] = []
    verb_rows: list[dict] = []
    seen_sent: set[str] = set()
    seen_verb: set[str] = set()

    def add_sentiment(text: str) -> None:
        if text in seen_sent:
            return
        seen_sent.add(text)
        sentiment_rows.append({"text": text, **marker(sent.detect_sentiment(text))})

    def add_verb(text: str) -> None:
        if text in seen_verb:
            return
        seen_verb.add(text)
        facts = _extract_verb_facts(text)
        verb_rows.append({"text": text, "facts": [[k, v] for k, v in facts.items()]})

    lexicon = (
        list(sent.POSITIVE_WORDS)
        + list(sent.NEGATIVE_WORDS)
        + list(sent.INTENSIFIERS)
        + list(sent.DIMINISHERS)
    )
    for t in EDGE_SPLIT_ONLY:
        add_sentiment(t)
        add_verb(t)
        for u in EDGE_SPLIT_ONLY:
            pair_rows.append({"a": t, "b": u, "overlap": _token_overlap_score(t, u)})
    for w in lexicon:
        for t in (w, f"not {w}", f"very {w}!", f"slightly {w}", f"I don't feel {w}", f"{w} (so) {w}"):
            add_sentiment(t)

    caps_pool: list[str] = []
    scenarios = [
        (scen.stem, [json.loads(line) for line in scen.read_text(encoding="utf-8").splitlines() if line.strip()])
        for scen in sorted(SCEN.glob("*.jsonl"))
    ]
    scenarios.append(("zz_edge", [{"op": "observe", "user": u, "agent": a} for u, a in EDGE_PAIRS]))
    for stem, ops in scenarios:
        observes = [op for op in ops if op.get("op") == "observe"]
        recent: list[str] = []
        facts: list[tuple[str, str]] = []
        for n, op in enumerate(observes):
            user = op.get("user", "")
            agent = op.get("agent", "")
            add_sentiment(user)
            add_sentiment(agent)
            add_sentiment(f"{user} {agent}")

            values = CORE_VALUE_SETS[n % len(CORE_VALUE_SETS)]
            inter = Interaction.from_pair(user, agent)
            somatic = sent.detect_sentiment(user)
            score = compute_significance(inter, values, recent[:10])
            combined = f"{user} {agent}"
            token_count = len(tokenize(combined))
            overall = overall_significance(score, token_count=token_count)
            importance = 5
            if somatic.arousal > 0.3:
                importance = min(9, 5 + int(somatic.arousal * 4))
            significance_rows.append(
                {
                    "scenario": stem,
                    "user": user,
                    "agent": agent,
                    "core_values": values,
                    # The previous observes of the scenario, newest first (the
                    # parity test rebuilds them from the preceding rows).
                    "recent_count": len(recent[:10]),
                    "somatic": marker(somatic),
                    "novelty": score.novelty,
                    "emotional_intensity": score.emotional_intensity,
                    "goal_relevance": score.goal_relevance,
                    "content_richness": score.content_richness,
                    "token_count": token_count,
                    "overall": overall,
                    "is_significant": is_significant(score, token_count=token_count),
                    "salience": compute_salience(score),
                    "abstract": generate_abstract(f"User: {user}\nAgent: {agent}"),
                    "importance": importance,
                }
            )
            recent.insert(0, f"User: {user}\nAgent: {agent}")

            caps_pool.extend(CAP.findall(combined))
            add_verb(user)
            new_facts = extract_facts(user, agent)
            # Template facts seeded by this op's capitalised words keep verb-fact,
            # negation and entity-attribute checks busy.
            caps = CAP.findall(combined) or [RNG.choice(caps_pool or ["Paris"])]
            for _ in range(2):
                tpl = RNG.choice(TEMPLATES)
                a = RNG.choice(caps)
                b = RNG.choice(caps_pool or caps)
                new_facts.append(tpl.format(a, b))

            for fact in new_facts:
                add_verb(fact)
                if len(observes) > 100 and RNG.random() < 0.6:
                    facts.append((f"f{stem[:3]}_{len(facts)}", fact))
                    continue
                window = facts[-WINDOW:]
                extra = [(f"p{len(dedup_rows)}_{i}", c) for i, c in enumerate(perturb(fact))]
                existing = list(window)
                for e in extra:
                    existing.insert(RNG.randrange(len(existing) + 1), e)
                if RNG.random() < 0.3 and existing:
                    # A duplicate content under a second id, to pin the tie-break.
                    fid, c = RNG.choice(existing)
                    existing.insert(RNG.randrange(len(existing) + 1), (fid + "_dup", c))
                entries = [entry(i, c) for i, c in existing]
                action, target = reconcile_fact(fact, entries)
                sim = None
                if target is not None:
                    sim = _jaccard_similarity(fact, dict(existing)[target])
                dedup_rows.append(
                    {
                        "new": fact,
                        "existing": [list(e) for e in existing],
                        "action": action,
                        "target": target,
                        "similarity": sim,
                    }
                )
                for _fid, c in existing[-3:]:
                    pair_rows.append(
                        {
                            "a": fact,
                            "b": c,
                            "similarity": _jaccard_similarity(fact, c),
                            "overlap": _token_overlap_score(fact, c),
                        }
                    )

                contra_existing = [(i, c) for i, c in existing if not i.startswith("p")]
                contra_existing += [(f"t{len(contra_rows)}_{k}", RNG.choice(TEMPLATES).format(RNG.choice(caps), RNG.choice(caps))) for k in range(3)]
                for c in contra_existing:
                    add_verb(c[1])
                contra_rows.append(contradiction_row(fact, contra_existing, "fact"))
                facts.append((f"f{stem[:3]}_{len(facts)}", fact))

            # Step 4d: the raw user text against the window of facts (own facts included).
            if len(observes) <= 100 or n % 2 == 0:
                contra_rows.append(contradiction_row(user, facts[-WINDOW:], "raw"))

    write("sentiment.jsonl", sentiment_rows)
    write("significance.jsonl", significance_rows)
    write("dedup.jsonl", dedup_rows)
    write("pairs.jsonl", pair_rows)
    write("contradiction.jsonl", contra_rows)
    write("verb_facts.jsonl", verb_rows)


def contradiction_row(new: str, existing: list[tuple[str, str]], kind: str) -> dict:
    entries = [entry(i, c) for i, c in existing]
    similar = DETECTOR._find_similar(new, entries)
    results = run_sync(DETECTOR.detect_heuristic(new, entries))
    return {
        "kind": kind,
        "new": new,
        "existing": [list(e) for e in existing],
        "similar": [[e.id, s] for s, e in similar],
        "results": [
            {"old_id": r.old_memory_id, "reason": r.reason, "confidence": r.confidence}
            for r in results
        ],
    }


if __name__ == "__main__":
    main()
