"""A structural model of ``java.util.HashMap`` (JDK 8 and later), for iteration orders that the
closed forms in ``assignors._java`` cannot give: bins that Java turns into red-black trees.

Java iterates a ``HashMap`` (and a ``HashSet``, which is one) bucket by bucket, and a bucket
through its nodes' ``next`` links. A plain bucket is a chain in insertion order. But once a
``put`` makes a chain 9 long (``TREEIFY_THRESHOLD`` 8; 8 long for ``computeIfAbsent``):

* while the table has fewer than 64 buckets (``MIN_TREEIFY_CAPACITY``) the table doubles instead,
  which reorders every bucket, not just that one;
* otherwise the chain becomes a red-black tree ordered by hash, then ``compareTo``. The nodes keep
  their ``next`` links, and those links decide iteration: after the conversion the tree's root is
  unlinked and put first, the others keep their order; a key added later to the tree is linked
  right after its parent in the tree (not at the end), and the root after rebalancing is moved to
  the front again; removing a key unlinks it and moves the new root to the front, or turns the bin
  back into a chain (in link order) when the tree looks small; a resize splits a tree bin's links
  in order into its two new buckets and rebuilds the tree of each half that keeps more than 6
  keys (``UNTREEIFY_THRESHOLD``) while the other half is not empty (a half of 6 or fewer becomes a
  chain, in link order; a bin that moves whole keeps its tree).

So a treeified bucket's order depends on the keys' hashes, their ``compareTo`` order and the
order of insertions, rotations and removals. This model replays them: ``put``, ``compute_if_absent``
and ``remove`` change the structure as Java's do, ``keys()`` iterates it. Keys must be hashable
and distinct by ``==``; ``hash_code`` gives Java's ``hashCode()`` and ``order_key`` a value that
sorts like Java's ``compareTo`` (the keys must be ``Comparable`` in Java: ``String``, ``Integer``;
Java breaks ties between non-comparable keys by identity hash, which no model can reproduce).

It is a plain Python object per key: use it where the closed forms are not exact
(``assignors._java.treeify_free`` says when).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

TREEIFY_THRESHOLD = 8  # HashMap.TREEIFY_THRESHOLD
UNTREEIFY_THRESHOLD = 6  # HashMap.UNTREEIFY_THRESHOLD
MIN_TREEIFY_CAPACITY = 64  # HashMap.MIN_TREEIFY_CAPACITY


def spread(hash_code: int) -> int:
    """``HashMap.hash``: the hash code's high half folded into its low half, as a signed int32."""
    h = hash_code & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


class _Node:
    __slots__ = ("key", "hash", "order", "next", "prev", "parent", "left", "right", "red", "tree")

    def __init__(self, key: Hashable, h: int, order: Any):
        self.key = key
        self.hash = h
        self.order = order
        self.next: _Node | None = None
        # tree bins only
        self.prev: _Node | None = None
        self.parent: _Node | None = None
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.red = False
        self.tree = False


class JavaHashMap:
    """The keys of a ``java.util.HashMap`` as Java lays them out.

    ``capacity`` is the table size the map starts with: 16 for ``new HashMap<>()``, or what
    ``new HashMap<>(n)`` / ``new HashSet<>(collection)`` compute (a power of two).
    """

    __slots__ = ("_hash_code", "_order_key", "_table", "_threshold", "_nodes")

    def __init__(
        self, hash_code: Callable[[Any], int], order_key: Callable[[Any], Any], capacity: int = 16
    ):
        if capacity < 1 or capacity & (capacity - 1):
            raise ValueError(f"capacity {capacity} is not a power of two")
        self._hash_code = hash_code
        self._order_key = order_key
        self._table: list[_Node | None] = [None] * capacity
        self._threshold = int(capacity * 0.75)
        self._nodes: dict[Hashable, _Node] = {}

    # ---- the public operations

    @property
    def capacity(self) -> int:
        return len(self._table)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, key: object) -> bool:
        return key in self._nodes

    def __iter__(self) -> Iterator[Any]:
        return self.keys()

    def keys(self) -> Iterator[Any]:
        """Iteration order: buckets in index order, each through its ``next`` links."""
        for node in self._table:
            while node is not None:
                yield node.key
                node = node.next

    def put(self, key) -> bool:
        """``HashMap.put`` of a new key (an existing key changes nothing). True if added."""
        if key in self._nodes:
            return False
        node = self._new(key)
        table = self._table
        i = node.hash & (len(table) - 1)
        head = table[i]
        if head is None:
            table[i] = node
        elif head.tree:
            self._tree_insert(head, node)
        else:
            length, last = 1, head
            while last.next is not None:
                last = last.next
                length += 1
            last.next = node
            if length >= TREEIFY_THRESHOLD:
                self._treeify_bin(i)
        if len(self._nodes) > self._threshold:
            self._resize()
        return True

    def compute_if_absent(self, key) -> bool:
        """``HashMap.computeIfAbsent`` with a function that returns a value: resizes *before*
        adding when already past the threshold, links a new key at the head of a chain, and
        treeifies a chain that reaches 8. True if added."""
        if key in self._nodes:
            return False
        if len(self._nodes) > self._threshold:
            self._resize()
        node = self._new(key)
        table = self._table
        i = node.hash & (len(table) - 1)
        head = table[i]
        if head is not None and head.tree:
            self._tree_insert(head, node)
            return True
        length = 0
        p = head
        while p is not None:
            length += 1
            p = p.next
        node.next = head
        table[i] = node
        if length >= TREEIFY_THRESHOLD - 1:
            self._treeify_bin(i)
        return True

    def remove(self, key) -> bool:
        """``HashMap.remove``. True if the key was there."""
        node = self._nodes.pop(key, None)
        if node is None:
            return False
        table = self._table
        i = node.hash & (len(table) - 1)
        if node.tree:
            self._tree_remove(node, i)
            return True
        p = table[i]
        if p is node:
            table[i] = node.next
        else:
            while p.next is not node:
                p = p.next
            p.next = node.next
        return True

    # ---- chains and the table

    def _new(self, key) -> _Node:
        node = _Node(key, spread(self._hash_code(key)), self._order_key(key))
        self._nodes[key] = node
        return node

    def _resize(self) -> None:
        old = self._table
        bit = len(old)
        self._threshold = self._threshold * 2 if bit >= 16 else int(bit * 2 * 0.75)
        table: list[_Node | None] = [None] * (bit * 2)
        self._table = table
        for j, head in enumerate(old):
            if head is None:
                continue
            if head.next is None:
                table[head.hash & (2 * bit - 1)] = head
            elif head.tree:
                self._split(head, j, bit)
            else:
                low, high = _partition(head, bit)
                table[j] = _relink(low, tree=False)
                table[j + bit] = _relink(high, tree=False)

    def _treeify_bin(self, i: int) -> None:
        if len(self._table) < MIN_TREEIFY_CAPACITY:
            self._resize()
            return
        nodes = []
        node = self._table[i]
        while node is not None:
            nodes.append(node)
            node = node.next
        self._table[i] = _relink(nodes, tree=True)
        self._treeify(nodes)

    def _split(self, head: _Node, j: int, bit: int) -> None:
        low, high = _partition(head, bit)
        table = self._table
        for nodes, at, other in ((low, j, high), (high, j + bit, low)):
            if not nodes:
                continue
            if len(nodes) <= UNTREEIFY_THRESHOLD:
                table[at] = _relink(nodes, tree=False)
            else:
                table[at] = _relink(nodes, tree=True)
                if other:  # a half that holds the whole bin keeps its tree as it is
                    self._treeify(nodes)

    # ---- tree bins

    def _treeify(self, nodes: list[_Node]) -> None:
        """Builds the bin's tree by inserting ``nodes`` in link order, then puts its root first."""
        root = None
        for x in nodes:
            x.left = x.right = None
            if root is None:
                x.parent = None
                x.red = False
                root = x
                continue
            p = root
            while True:
                left = _goes_left(x, p)
                child = p.left if left else p.right
                if child is None:
                    x.parent = p
                    if left:
                        p.left = x
                    else:
                        p.right = x
                    root = _balance_insertion(root, x)
                    break
                p = child
        self._root_first(root)

    def _tree_insert(self, root: _Node, x: _Node) -> None:
        """A new key in a tree bin: a leaf of the tree, linked right after its tree parent."""
        x.tree = True
        p = root
        while True:
            left = _goes_left(x, p)
            child = p.left if left else p.right
            if child is None:
                after = p.next
                if left:
                    p.left = x
                else:
                    p.right = x
                p.next = x
                x.next = after
                x.parent = x.prev = p
                if after is not None:
                    after.prev = x
                self._root_first(_balance_insertion(root, x))
                return
            p = child

    def _root_first(self, root: _Node) -> None:
        """Unlinks the tree's root and links it at the head of its bucket."""
        table = self._table
        i = root.hash & (len(table) - 1)
        first = table[i]
        if root is first:
            return
        table[i] = root
        before, after = root.prev, root.next
        if after is not None:
            after.prev = before
        if before is not None:
            before.next = after
        if first is not None:
            first.prev = root
        root.next = first
        root.prev = None

    def _tree_remove(self, p: _Node, i: int) -> None:
        table = self._table
        first = root = table[i]
        after, before = p.next, p.prev
        if before is None:
            table[i] = first = after
        else:
            before.next = after
        if after is not None:
            after.prev = before
        if first is None:
            return
        while root.parent is not None:
            root = root.parent
        # Java's "too small" test, made on the tree that still holds p
        if root.right is None or root.left is None or root.left.left is None:
            nodes = []
            node = first
            while node is not None:
                nodes.append(node)
                node = node.next
            table[i] = _relink(nodes, tree=False)
            return
        # Java swaps p with its in-order successor by relinking the two nodes (their keys stay
        # put), so which node is where, and hence which one ends up the root, follows from that.
        pl, pr = p.left, p.right
        if pl is not None and pr is not None:
            s = pr
            while s.left is not None:
                s = s.left
            s.red, p.red = p.red, s.red
            sr, pp = s.right, p.parent
            if s is pr:
                p.parent = s
                s.right = p
            else:
                sp = s.parent
                p.parent = sp
                if sp is not None:
                    if s is sp.left:
                        sp.left = p
                    else:
                        sp.right = p
                s.right = pr
                pr.parent = s
            p.left = None
            p.right = sr
            if sr is not None:
                sr.parent = p
            s.left = pl
            pl.parent = s
            s.parent = pp
            if pp is None:
                root = s
            elif p is pp.left:
                pp.left = s
            else:
                pp.right = s
            replacement = sr if sr is not None else p
        elif pl is not None:
            replacement = pl
        elif pr is not None:
            replacement = pr
        else:
            replacement = p
        if replacement is not p:
            pp = replacement.parent = p.parent
            if pp is None:
                root = replacement
                replacement.red = False
            elif p is pp.left:
                pp.left = replacement
            else:
                pp.right = replacement
            p.left = p.right = p.parent = None
        new_root = root if p.red else _balance_deletion(root, replacement)
        if replacement is p:
            pp = p.parent
            p.parent = None
            if pp is not None:
                if p is pp.left:
                    pp.left = None
                elif p is pp.right:
                    pp.right = None
        self._root_first(new_root)


def _partition(head: _Node, bit: int) -> tuple[list[_Node], list[_Node]]:
    low: list[_Node] = []
    high: list[_Node] = []
    node = head
    while node is not None:
        (high if node.hash & bit else low).append(node)
        node = node.next
    return low, high


def _relink(nodes: list[_Node], tree: bool) -> _Node | None:
    """Links ``nodes`` in this order as one bucket (with ``prev`` links for a tree bin)."""
    previous = None
    for node in nodes:
        node.tree = tree
        node.prev = previous
        if previous is not None:
            previous.next = node
        previous = node
    if previous is not None:
        previous.next = None
    return nodes[0] if nodes else None


def _goes_left(x: _Node, p: _Node) -> bool:
    """Where ``x`` goes below ``p``: by hash (signed), then by ``compareTo``."""
    if p.hash != x.hash:
        return p.hash > x.hash
    if x.order == p.order:
        raise ValueError(
            f"keys {x.key!r} and {p.key!r} compare as equal; Java would order them by identity hash"
        )
    return x.order < p.order


def _rotate_left(root: _Node, p: _Node) -> _Node:
    r = p.right
    if r is None:
        return root
    p.right = r.left
    if r.left is not None:
        r.left.parent = p
    r.parent = pp = p.parent
    if pp is None:
        root = r
        r.red = False
    elif pp.left is p:
        pp.left = r
    else:
        pp.right = r
    r.left = p
    p.parent = r
    return root


def _rotate_right(root: _Node, p: _Node) -> _Node:
    lft = p.left
    if lft is None:
        return root
    p.left = lft.right
    if lft.right is not None:
        lft.right.parent = p
    lft.parent = pp = p.parent
    if pp is None:
        root = lft
        lft.red = False
    elif pp.right is p:
        pp.right = lft
    else:
        pp.left = lft
    lft.right = p
    p.parent = lft
    return root


def _balance_insertion(root: _Node, x: _Node) -> _Node:
    """Red-black fix-up after linking the red leaf ``x``; returns the root."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        if xp is xpp.left:
            uncle = xpp.right
            if uncle is not None and uncle.red:
                uncle.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.right:
                x = xp
                root = _rotate_left(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_right(root, xpp)
        else:
            uncle = xpp.left
            if uncle is not None and uncle.red:
                uncle.red = xp.red = False
                xpp.red = True
                x = xpp
                continue
            if x is xp.left:
                x = xp
                root = _rotate_right(root, x)
                xp = x.parent
                xpp = None if xp is None else xp.parent
            if xp is not None:
                xp.red = False
                if xpp is not None:
                    xpp.red = True
                    root = _rotate_left(root, xpp)


def _red(n: _Node | None) -> bool:
    return n is not None and n.red


def _balance_deletion(root: _Node, x: _Node | None) -> _Node:
    """Red-black fix-up after unlinking a black node whose place ``x`` took; returns the root."""
    while True:
        if x is None or x is root:
            return root
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        if x.red:
            x.red = False
            return root
        if xp.left is x:
            sib = xp.right
            if _red(sib):
                sib.red = False
                xp.red = True
                root = _rotate_left(root, xp)
                xp = x.parent
                sib = None if xp is None else xp.right
            if sib is None:
                x = xp
                continue
            if not _red(sib.left) and not _red(sib.right):
                sib.red = True
                x = xp
                continue
            if not _red(sib.right):
                if sib.left is not None:
                    sib.left.red = False
                sib.red = True
                root = _rotate_right(root, sib)
                xp = x.parent
                sib = None if xp is None else xp.right
            if sib is not None:
                sib.red = False if xp is None else xp.red
                if sib.right is not None:
                    sib.right.red = False
            if xp is not None:
                xp.red = False
                root = _rotate_left(root, xp)
            x = root
        else:
            sib = xp.left
            if _red(sib):
                sib.red = False
                xp.red = True
                root = _rotate_right(root, xp)
                xp = x.parent
                sib = None if xp is None else xp.left
            if sib is None:
                x = xp
                continue
            if not _red(sib.left) and not _red(sib.right):
                sib.red = True
                x = xp
                continue
            if not _red(sib.left):
                if sib.right is not None:
                    sib.right.red = False
                sib.red = True
                root = _rotate_left(root, sib)
                xp = x.parent
                sib = None if xp is None else xp.left
            if sib is not None:
                sib.red = False if xp is None else xp.red
                if sib.left is not None:
                    sib.left.red = False
            if xp is not None:
                xp.red = False
                root = _rotate_right(root, xp)
            x = root


def replay(
    ops: Iterable[tuple[str, Any]],
    hash_code: Callable[[Any], int],
    order_key: Callable[[Any], Any],
    capacity: int = 16,
) -> list:
    """The iteration order after ``ops``: ``("put", key)``, ``("compute", key)`` (computeIfAbsent)
    or ``("remove", key)``, applied in order to an empty map of ``capacity`` buckets."""
    m = JavaHashMap(hash_code, order_key, capacity)
    act = {"put": m.put, "compute": m.compute_if_absent, "remove": m.remove}
    for op, key in ops:
        act[op](key)
    return list(m.keys())
