"""java.util.HashMap iteration orders when keys crowd one bucket: a bucket that reaches 9 keys
makes Java double a table of fewer than 64 buckets, or turn the bucket into a red-black tree
(HashMap.treeifyBin), and both reorder the map.

The expected orders in hashmap_cases.json come from a real JVM (java/HashMapOrders.java, run by
java/make_hashmap_cases.py); the keys are built to collide: "Aa" and "BB" have the same
String.hashCode, and so do all their concatenations of one length.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors._hashmap_model import JavaHashMap
from assignors._java import (
    TreeifyWatch,
    computed_hashmap_order,
    hashmap_capacity,
    hashmap_insertion_order,
    hashmap_order,
    java_sort_key,
    java_string_hash,
    modelled_hashmap_order,
    treeify_free,
)
from assignors.server import (
    GroupMembers,
    GroupSpec,
    MemberSubscriptionAndAssignment,
    get_server_assignor,
)

M = MemberSubscriptionAndAssignment
CASES = json.loads((Path(__file__).parent / "hashmap_cases.json").read_text())["cases"]
BY_NAME = {c["name"]: c for c in CASES}


def colliding(blocks: int) -> list[str]:
    return sorted("".join(p) for p in itertools.product(["Aa", "BB"], repeat=blocks))


def final_order(name: str) -> list[str]:
    return BY_NAME[name]["orders"][-1]


def closed_form(keys) -> list[str]:
    """The order hashmap_order gave before trees were modelled: bucket of the load-factor table,
    then String.compareTo."""
    mask = hashmap_capacity(len(keys)) - 1

    def bucket(k):
        h = java_string_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & mask

    return sorted(keys, key=lambda k: (bucket(k), java_sort_key(k)))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_model_replays_the_jvms_orders(case):
    """Puts, computeIfAbsent and removals on crowded buckets (tree bins built, grown, split by a
    resize, shrunk back to chains) iterate as on a JVM, at every recorded step."""
    ints = case["kind"] == "I"
    m = JavaHashMap(
        int if ints else java_string_hash, int if ints else java_sort_key, case["capacity"]
    )
    act = {"+": m.put, "*": m.compute_if_absent, "-": m.remove}
    shots = []
    for op in case["ops"]:
        if op == "|":
            shots.append([str(k) for k in m.keys()])  # noqa: SIM118 (JavaHashMap: keys(), no __iter__)
        else:
            act[op[0]](int(op[1:]) if ints else op[1:])
    assert shots == case["orders"]


@pytest.mark.parametrize("name", [c["name"] for c in CASES if "keys" in c])
def test_hashmap_order_is_the_jvms_for_keys_put_in_string_order(name):
    """hashmap_order models a map filled in String.compareTo order; with 9 or more keys in one
    bucket that is a treeified bucket or an early-doubled table, and the JVM agrees."""
    case = BY_NAME[name]
    keys = list(case["keys"])
    random.Random(7).shuffle(keys)
    assert hashmap_order(keys) == final_order(name)
    assert GroupSpec({k: M({"t"}) for k in keys}).member_ids == tuple(final_order(name))


@pytest.mark.parametrize(
    "name",
    [
        "identical hashes, 11 keys in order",
        "identical hashes, 32 keys in order",
        "9 keys share a bucket of 16",
        "9 of 12 keys share a bucket of 16",
        "tree bin of 64 split 9/3, puts in key order",
    ],
)
def test_crowded_buckets_change_the_order(name):
    """These key sets are ones where bucket-then-String order (no trees, no early doubling) is
    not Java's: the cases test something."""
    keys = BY_NAME[name]["keys"]
    assert closed_form(keys) != final_order(name)
    assert sorted(closed_form(keys)) == sorted(final_order(name))


def test_a_bucket_of_8_stays_a_chain():
    """Eight keys of one hash code are a chain in insertion order, in a table of 16 (9 make it
    double)."""
    assert treeify_free([java_string_hash(k) for k in colliding(5)[:8]])
    assert not treeify_free([java_string_hash(k) for k in colliding(5)[:9]])
    assert final_order("identical hashes, 8 keys in order") == colliding(5)[:8]
    assert hashmap_order(colliding(5)[:8]) == colliding(5)[:8]


def test_computed_orders_follow_the_jvm_when_a_bucket_reaches_8():
    """computeIfAbsent treeifies at 8 keys (it counts the chain before linking the new key at
    its head): the sticky user data's topic order follows the model there."""
    for case in CASES:
        if case["name"].startswith("computeIfAbsent") and all(
            op == "|" or op[0] == "*" for op in case["ops"]
        ):
            first_use = list(dict.fromkeys(op[1:] for op in case["ops"] if op != "|"))
            assert computed_hashmap_order(first_use) == case["orders"][-1], case["name"]


# keys from a crowded alphabet: identical hash codes, keys of one bucket of 64 and others
_POOL = colliding(4) + [f"k{i}" for i in range(200)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_POOL), min_size=0, max_size=120, unique=True), st.randoms())
def test_the_closed_forms_equal_the_model_exactly_when_treeify_free_says_so(keys, rnd):
    """hashmap_order, hashmap_insertion_order and computed_hashmap_order equal the model for any
    key set (small and numpy-sized); when treeify_free holds, so does the plain bucket order."""
    by_string = sorted(keys, key=java_sort_key)
    model = modelled_hashmap_order(by_string)
    assert hashmap_order(keys) == model
    if treeify_free([java_string_hash(k) for k in by_string]):
        assert closed_form(keys) == model
    shuffled = list(keys)
    rnd.shuffle(shuffled)
    assert hashmap_insertion_order(shuffled) == modelled_hashmap_order(shuffled)
    assert computed_hashmap_order(shuffled) == modelled_hashmap_order(
        shuffled, compute_if_absent=True
    )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 10**6), st.sampled_from(_POOL)), max_size=300)
)
def test_the_incremental_check_follows_insertions_and_deletions(steps):
    """TreeifyWatch (GroupMembers' check, one step per table size per change) says what
    treeify_free says of the whole list after every insertion and deletion, across table sizes
    both ways."""
    watch, hashes = TreeifyWatch(), []
    for delete, where, key in steps:
        if delete and hashes:
            at = where % len(hashes)
            watch.delete(at)
            del hashes[at]
        else:
            at = where % (len(hashes) + 1)
            watch.insert(at, java_string_hash(key))
            hashes.insert(at, java_string_hash(key))
        assert watch.free == treeify_free(hashes)
        assert len(watch) == len(hashes)


def test_uniform_member_order_follows_a_treeified_bucket():
    """Eleven member ids with one hash code: Java doubles the table twice and then treeifies the
    bucket, whose root comes first. With 12 partitions the first member in that order gets the
    extra one (UniformHomogeneousAssignmentBuilder's quota is positional)."""
    ids = colliding(5)[:11]
    java = final_order("identical hashes, 11 keys in order")
    assert java[0] != min(ids)  # the tree's root, not the smallest id
    spec = GroupSpec({m: M({"t"}) for m in reversed(ids)})
    assert spec.member_ids == tuple(java)
    target = get_server_assignor("uniform").assign(spec, {"t": 12})
    sizes = {m: len(target[m]["t"]) for m in ids}
    assert [m for m in ids if sizes[m] == 2] == [java[0]]


def test_uniform_revocation_walks_a_hashset_that_doubled_early():
    """A member over its quota keeps the first partitions of its HashSet<Integer>: 0, 16, ... 128
    and 1 fill one bucket of 16 nine deep, so Java's set has 32 buckets (0 32 64 96 128 1 16 48 80
    112), not 16 (0 16 32 ... 128 1)."""
    held = [*range(0, 129, 16), 1]
    java = [int(p) for p in final_order("HashSet<Integer> of 10 partitions")]
    assert java[:7] == [0, 32, 64, 96, 128, 1, 16]
    members = {"A": M({"t"}, {"t": held}), **{f"m{i:02d}": M({"t"}) for i in range(19)}}
    target = get_server_assignor("uniform").assign(GroupSpec(members), {"t": 129})
    kept = sorted(target["A"]["t"])
    assert len(kept) in (6, 7)  # 129 over 20 members
    assert kept == sorted(java[: len(kept)])


@pytest.mark.parametrize("seed", range(4))
def test_kept_members_with_colliding_ids_have_the_from_scratch_order(seed):
    """GroupMembers keeps the HashMap order between epochs; with many ids of one hash code (trees,
    early doubling, coming and going) it is hashmap_order's, epoch after epoch."""
    rnd = random.Random(seed)
    pool = colliding(5) + [f"member-{i}" for i in range(80)]
    members, model = GroupMembers(), set()
    for _ in range(60):
        for mid in rnd.sample(pool, rnd.randint(1, 12)):
            if mid in model and rnd.random() < 0.4:
                members.remove(mid)
                model.discard(mid)
            else:
                members.put(mid, frozenset({"t"}))
                model.add(mid)
        assert members.member_ids == tuple(hashmap_order(model))
        spec = GroupSpec.from_members(members)
        assert spec.member_ids == members.member_ids
