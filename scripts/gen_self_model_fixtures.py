#!/usr/bin/env python3
"""Self-model parity fixtures from soul-protocol 0.4.0 (the reference).

Replays reference scenarios with ../shared/reference/ref_replay.py's harness (frozen
clock, seeded ids, PYTHONHASHSEED=0) and records the MemoryManager's self-model
(`to_dict()`) after every observe, for tests/self_model_parity.rs. Each fixture also
holds the scenario's lines, so the test needs nothing outside the repository.

Usage (from the project root):
    /work/refenv/bin/python scripts/gen_self_model_fixtures.py \
        [--shared ../shared/reference] [--out tests/fixtures/self_model]
"""

from __future__ import annotations

import os
import sys

# The self-model iterates Python sets of strings: pin the hash seed first.
if os.environ.get("PYTHONHASHSEED") != "0" or os.environ.get("TZ") != "UTC":
    os.execve(sys.executable, [sys.executable, *sys.argv],
              dict(os.environ, PYTHONHASHSEED="0", TZ="UTC"))

import argparse  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

# Scenario name -> record every observe (True) or only the final state (False).
SCENARIOS = {
    "p02_dev_qa_session": True,
    "p14_week_with_assistant": True,
    "p01_profile_onboarding": True,
    "p09_multi_user": True,
    "p15_long_single_user": False,
    "p16_long_multi_user_domains": False,
}


def snapshot(mgr) -> dict:
    sm = mgr.self_model
    sm = sm() if callable(sm) else sm
    return sm.to_dict()


def run(ref, scenario: Path, every: bool) -> dict:
    import datetime as dt

    from freezegun import freeze_time

    ref.patch_pydantic_now()
    ref.patch_uuid(0)
    rep = ref.Replayer()
    snaps = []
    freezer = freeze_time(dt.datetime(2000, 1, 1))
    frozen = freezer.start()
    try:
        lines = [raw for raw in scenario.read_text().splitlines() if raw.strip()]
        for i, raw in enumerate(lines, start=1):
            op = json.loads(raw)
            frozen.move_to(ref.parse_at(op["at"]))
            ref.Replayer.HANDLERS[op["op"]](rep, op, ref.parse_at(op["at"]))
            if op["op"] == "observe" and (every or i == len(lines)):
                snaps.append({"line": i, "self_model": snapshot(rep.mgr)})
    finally:
        freezer.stop()
    return {
        "scenario": scenario.name,
        "lines": lines,
        "snapshots": snaps,
        "final": snapshot(rep.mgr),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared/reference")
    ap.add_argument("--out", default="tests/fixtures/self_model")
    args = ap.parse_args()
    shared = Path(args.shared).resolve()
    sys.path.insert(0, str(shared))
    import ref_replay as ref  # noqa: PLC0415

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, every in SCENARIOS.items():
        data = run(ref, shared / "scenarios" / f"{name}.jsonl", every)
        (out / f"{name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {len(data['snapshots'])} snapshots", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
