"""java.util.HashMap iteration orders when keys crowd one bucket: a bucket that reaches 9 keys
makes Java double a table of fewer than 64 buckets, or turn the bucket into a red-black tree
(HashMap.treeifyBin), and both reorder the map.

The expected orders in hashmap_cases.json come from a real JVM (java/HashMapOrders.java, run by
java/make_hashmap_cases.py); the keys are built to collide: "Aa" and "BB" have the same
String.hashCode, and so do all their concatenations of one length.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assignors._hashmap_model import JavaHashMap
from assignors._java import java_sort_key, java_string_hash

CASES = json.loads((Path(__file__).parent / "hashmap_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_model_replays_the_jvms_orders(case):
    """Puts, computeIfAbsent and removals on crowded buckets (tree bins built, grown, split by a
    resize, shrunk back to chains) iterate as on a JVM, at every recorded step."""
    ints = case["kind"] == "I"
    m = JavaHashMap(int if ints else java_string_hash, int if ints else java_sort_key, case["capacity"])
    act = {"+": m.put, "*": m.compute_if_absent, "-": m.remove}
    shots = []
    for op in case["ops"]:
        if op == "|":
            shots.append([str(k) for k in m.keys()])
        else:
            act[op[0]](int(op[1:]) if ints else op[1:])
    assert shots == case["orders"]
