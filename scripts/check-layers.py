#!/usr/bin/env python3
"""The crates' folders are the stages of the data flow (docs/DESIGN.md,
"Code layout"): a crate may use crates of its own stage or of earlier
ones, never a later one. Reads `cargo metadata`; exits 1 naming each
dependency that goes against the flow."""

import json
import subprocess
import sys
from pathlib import Path

STAGES = ["base", "proto", "source", "store", "pipeline", "query", "cli"]

root = Path(__file__).resolve().parent.parent
meta = json.loads(
    subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--locked"], cwd=root
    )
)
stage = {}
for p in meta["packages"]:
    rel = Path(p["manifest_path"]).relative_to(root).parts
    if rel[0] != "crates":
        continue
    if rel[1] not in STAGES:
        sys.exit(f"{'/'.join(rel[:-1])}: not in a stage folder ({', '.join(STAGES)})")
    stage[p["name"]] = STAGES.index(rel[1])
bad = [
    f"{p['name']} ({STAGES[stage[p['name']]]}) uses {d['name']} ({STAGES[stage[d['name']]]})"
    for p in meta["packages"]
    if p["name"] in stage
    for d in p["dependencies"]
    if d["name"] in stage and d.get("kind") is None and stage[d["name"]] > stage[p["name"]]
]
if bad:
    sys.exit("dependencies against the data flow:\n  " + "\n  ".join(bad))
print(f"layers: {len(stage)} crates, every dependency along the data flow")
