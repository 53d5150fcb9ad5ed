"""Regenerates tests/assignors/hashmap_cases.json: sequences of HashMap operations on keys that
share buckets, with the iteration orders a real JVM gives for them (HashMapOrders.java, which only
uses java.util.HashMap).

    .venv/bin/python tests/assignors/java/make_hashmap_cases.py   # needs javac and java (17+)

The sequences are fixed by a seed; the file records the JVM's version with the orders.
"""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

import numpy as np  # noqa: E402

from assignors._hashmap_model import spread  # noqa: E402
from assignors._java import java_string_hash  # noqa: E402
from assignors.server.uniform import java_hashset_capacity  # noqa: E402

OUT = HERE.parent / "hashmap_cases.json"


def colliding(blocks: int) -> list[str]:
    """2**blocks strings with one String.hashCode ("Aa" and "BB" collide, and so do their
    concatenations of equal length), in String.compareTo order."""
    return sorted("".join(p) for p in itertools.product(["Aa", "BB"], repeat=blocks))


def bucket_mates(
    prefix: str, mask: int, count: int, avoid: int = 0, need_bit: int | None = None, ones: int = 0
) -> list[str]:
    """``count`` strings ``prefix<i>`` in one bucket of a table of ``mask + 1`` (distinct hash
    codes); with ``need_bit``, ``ones`` of them have that bit of the spread hash set."""
    groups: dict[int, list[str]] = {}
    for i in itertools.count():
        s = f"{prefix}{i}"
        b = spread(java_string_hash(s)) & mask
        if b == avoid:
            continue
        g = groups.setdefault(b, [])
        g.append(s)
        if need_bit is None:
            if len(g) == count:
                return g
            continue
        hi = [k for k in g if spread(java_string_hash(k)) & need_bit]
        lo = [k for k in g if not spread(java_string_hash(k)) & need_bit]
        if len(hi) >= ones and len(lo) >= count - ones:
            return sorted(hi[:ones] + lo[: count - ones])


def fillers(prefix: str, count: int, away_from: list[str], mask: int) -> list[str]:
    """Strings that share no bucket (of ``mask + 1``) with ``away_from``."""
    taken = {spread(java_string_hash(k)) & mask for k in away_from}
    out = []
    for i in itertools.count():
        s = f"{prefix}{i}"
        if spread(java_string_hash(s)) & mask not in taken:
            out.append(s)
            if len(out) == count:
                return out


def puts(keys, snap_every: int = 0) -> list[str]:
    ops = []
    for i, k in enumerate(keys, 1):
        ops.append(f"+{k}")
        if snap_every and i % snap_every == 0:
            ops.append("|")
    return ops


def cases() -> list[dict]:
    rnd = random.Random(848)
    out: list[dict] = []

    def add(name, ops, kind="S", capacity=16, keys=None):
        if not ops or ops[-1] != "|":
            ops = [*ops, "|"]
        case = {"name": name, "kind": kind, "capacity": capacity, "ops": ops}
        if keys is not None:
            case["keys"] = keys  # a key set put in String.compareTo order (hashmap_order's input)
        out.append(case)

    c5 = colliding(5)
    # one bucket, one hash code: the table doubles at the 9th and 10th key (fewer than 64
    # buckets), the 11th treeifies it; every later key is linked after its tree parent
    for n in (8, 9, 10, 11, 12, 13, 16, 20, 32):
        add(f"identical hashes, {n} keys in order", puts(c5[:n], snap_every=1), keys=c5[:n])
    for n in (12, 20, 32):
        for r in range(3):
            keys = rnd.sample(c5, n)
            add(f"identical hashes, {n} keys shuffled #{r}", puts(keys, snap_every=1))
    # nine keys of one bucket of 16 that a table of 32 separates: Java ends with 32 buckets
    mates16 = bucket_mates("m", 15, 9, need_bit=16, ones=4)
    add("9 keys share a bucket of 16", puts(mates16, 1), keys=mates16)
    mates32 = bucket_mates("q", 31, 10, need_bit=32, ones=5)
    add("10 keys share a bucket of 32", puts(mates32, 1), keys=mates32)
    # the same with other keys around: the early doubling reorders every bucket (unless the load
    # factor doubles the table anyway, as with 20 more keys)
    for extra in (3, 20):
        keys = sorted(mates16 + fillers("o", extra, mates16, 15))
        add(f"9 of {9 + extra} keys share a bucket of 16", puts(keys, 1), keys=keys)
    # a tree bin of distinct hash codes (one bucket of 64), split when the table doubles to 128:
    # both halves big enough to be trees again, one half small, and the whole bin moving
    for lo_hi in ((7, 7), (9, 3), (14, 0), (0, 12), (8, 8)):
        n = sum(lo_hi)
        mates = bucket_mates(f"t{lo_hi[0]}x", 63, n, need_bit=64, ones=lo_hi[1])
        fill = fillers(f"f{lo_hi[0]}x", 60 - n, mates, 63)
        ops = puts(fill[:30]) + puts(mates, 2) + puts(fill[30:], 3)
        add(f"tree bin of 64 split {lo_hi[0]}/{lo_hi[1]} at 128", ops)
        keys = sorted(mates + fill)
        add(
            f"tree bin of 64 split {lo_hi[0]}/{lo_hi[1]}, puts in key order",
            puts(keys, 4),
            keys=keys,
        )
    # removals from tree bins (each removal may untreeify, or move another root to the front)
    c4 = colliding(4)
    mates = bucket_mates("r", 63, 10, need_bit=64, ones=5)
    fill = fillers("g", 30, c4 + mates, 63)
    base = puts(fill) + puts(c4) + puts(mates)
    for r in range(4):
        gone = rnd.sample(c4 + mates, 26)
        add(
            f"removals from a tree bin #{r}",
            base
            + ["|"]
            + [
                x
                for i, k in enumerate(gone, 1)
                for x in ((f"-{k}", "|") if i % 2 == 0 else (f"-{k}",))
            ],
        )
    # random puts and removals over a crowded pool, through 64 and 128 buckets
    pool = c4 + bucket_mates("p", 63, 12) + bucket_mates("s", 127, 10) + fillers("h", 40, c4, 63)
    for r in range(6):
        ops = []
        present: set[str] = set()
        for step in range(400):
            k = rnd.choice(pool)
            if k in present and rnd.random() < 0.45:
                ops.append(f"-{k}")
                present.discard(k)
            else:
                ops.append(f"+{k}")
                present.add(k)
            if step % 16 == 15:
                ops.append("|")
        add(f"random puts and removals #{r}", ops)
    # computeIfAbsent: head insertion, resize before the insertion, treeify at 8
    for n in (7, 8, 9, 12, 20):
        add(f"computeIfAbsent, identical hashes, {n} keys", [f"*{k}" for k in c5[:n]] + ["|"])
    mixed = bucket_mates("c", 63, 14) + fillers("d", 40, c5, 63)
    for r in range(3):
        order = rnd.sample(mixed + c5[:10], len(mixed) + 10)
        add(
            f"computeIfAbsent, crowded #{r}",
            [
                x
                for i, k in enumerate(order, 1)
                for x in ((f"*{k}", "|") if i % 4 == 0 else (f"*{k}",))
            ],
        )
    # HashSet<Integer> built from a list (Kafka's target assignment record), ascending
    for parts in (
        [*range(0, 129, 16), 1],
        list(range(0, 641, 64)),
        [*range(0, 641, 64), 5, 7],
        sorted(rnd.sample(range(0, 4096, 128), 14) + rnd.sample(range(4096), 40)),
        sorted(set(rnd.sample(range(0, 8192, 64), 30) + rnd.sample(range(8192), 60))),
    ):
        cap = int(java_hashset_capacity(np.array([len(parts)]))[0])
        add(
            f"HashSet<Integer> of {len(parts)} partitions",
            [f"+{p}" for p in parts] + ["|"],
            kind="I",
            capacity=cap,
        )
    return out


def main() -> None:
    all_cases = cases()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["javac", "-d", tmp, str(HERE / "HashMapOrders.java")], check=True)
        lines = "".join(f"{c['kind']} {c['capacity']} {' '.join(c['ops'])}\n" for c in all_cases)
        run = subprocess.run(
            ["java", "-cp", tmp, "HashMapOrders"],
            input=lines,
            capture_output=True,
            text=True,
            check=True,
        )
        version = subprocess.run(
            ["java", "-version"], capture_output=True, text=True
        ).stderr.splitlines()[0]
    results = run.stdout.splitlines()
    assert len(results) == len(all_cases)
    for case, line in zip(all_cases, results, strict=True):
        shots = line.split(" | ")
        case["orders"] = [s.split(" ") if s else [] for s in shots]
        assert len(case["orders"]) == case["ops"].count("|")
    # one case per line
    body = ",\n".join(json.dumps(c, separators=(",", ":")) for c in all_cases)
    OUT.write_text(
        f'{{"generated_by":"tests/assignors/java/make_hashmap_cases.py","jvm":{json.dumps(version)},'
        f'"cases":[\n{body}\n]}}\n'
    )
    print(f"{OUT}: {len(all_cases)} cases ({version})")


if __name__ == "__main__":
    main()
