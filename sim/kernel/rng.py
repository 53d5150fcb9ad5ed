"""The simulation's random streams: every actor draws from seeded streams of its own, children of
the run's ``SeedSequence`` by actor rank (``SeedStreams``), so one actor's draws never shift
another's; ``LazyGenerator`` builds each stream on its first draw.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from typing import cast

import numpy as np

from sim.compiled import mypyc_attr


# a Python class, compiled methods: it keeps methods found on first use in its instance dict
@mypyc_attr(native_class=False)
class LazyGenerator:
    """A numpy Generator built on first use, then the same object's methods.

    Building one costs microseconds, and most actors never draw (the default latency is
    constant): 10,000 members asked for 20,000 of them. The stream depends only on (seed, rank,
    stream), so when it is built does not change a draw.

    ``standard_normal()`` (one draw, what every lognormal latency takes) is served from a block
    drawn ahead: numpy's array draw gives the same numbers as that many scalar draws, at a
    fraction of the per-call cost. Any other use of the generator first puts it where scalar draws
    would have left it (the state before the block, plus the draws served), so mixing draws of
    other kinds with latencies (a drop probability) gives the same stream as before.
    """

    BLOCK_MAX = 32  # normals drawn ahead at most (10,000 members hold one block each)

    def __init__(self, make: Callable[[], np.random.Generator]):
        self._make = make
        self._generator: np.random.Generator | None = None
        self._normals: list[float] = []  # the block; _next is the first one not yet served
        self._next = 0
        self._block_state: dict | None = None  # the bit generator's state before the block

    def _get(self) -> np.random.Generator:
        g = self._generator
        if g is None:
            g = self._generator = self._make()
        return g

    def standard_normal(self, *args, **kwargs):
        if args or kwargs:
            self._settle()
            return self._get().standard_normal(*args, **kwargs)
        i = self._next
        normals = self._normals
        if i < len(normals):
            self._next = i + 1
            return normals[i]
        g = self._get()
        size = min(2 * len(normals), self.BLOCK_MAX) if normals else 4
        self._block_state = g.bit_generator.state
        self._normals = g.standard_normal(size).tolist()
        self._next = 1
        return self._normals[0]

    def _settle(self) -> None:
        """Leave the generator where scalar draws would have: after the normals served so far."""
        if self._next < len(self._normals):
            g = self._get()  # made already: normals were drawn from it
            g.bit_generator.state = self._block_state  # type: ignore[assignment]  # (set with the normals)
            if self._next:
                g.standard_normal(self._next)
        self._normals = []
        self._next = 0
        self._block_state = None

    def random(self, *args, **kwargs):
        if self._normals:
            self._settle()
        return self._get().random(*args, **kwargs)

    def uniform(self, *args, **kwargs):
        if self._normals:
            self._settle()
        return self._get().uniform(*args, **kwargs)

    def __getattr__(self, name: str):
        # only reached for names not defined above nor yet in the instance dict: the first use
        # of each other method
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._get(), name)
        if not callable(value):  # bit_generator and the like: read from a settled generator
            self._settle()
            return value
        call = _settling(weakref.ref(self), value)
        self.__dict__[name] = call  # later lookups find it directly
        return call


def _settling(ref: weakref.ref[LazyGenerator], method: Callable) -> Callable:
    """``method`` of a LazyGenerator's generator, called once the generator is settled. (The
    instance dict keeps the result: a weak reference, so no reference cycle back to it.)"""

    def call(*args, **kwargs):
        lazy = ref()
        if lazy is not None and lazy._normals:
            lazy._settle()
        return method(*args, **kwargs)

    return call


# numpy's SeedSequence constants (numpy/random/bit_generator.pyx, after Melissa O'Neill's
# seed_seq); ``seed_states`` computes what SeedSequence does, for many spawn keys at once.
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875


_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED


_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715


_POOL = 4  # SeedSequence's default pool size (32-bit words)


_MASK32 = 0xFFFFFFFF


RNG_BLOCK = 1024  # ranks whose seed states are computed together


def _uint32_words(n: int) -> list[int]:
    """A non-negative int as SeedSequence takes it: 32-bit words, least significant first."""
    if n < 0:
        raise ValueError("seed entropy must be non-negative")
    words = [n & _MASK32]
    n >>= 32
    while n:
        words.append(n & _MASK32)
        n >>= 32
    return words


def seed_states(entropy: int, keys: np.ndarray) -> np.ndarray:
    """``SeedSequence(entropy, spawn_key=tuple(row)).generate_state(4, np.uint64)`` for every row
    of ``keys`` (non-negative integers below 2**32), as one (rows, 4) uint64 array. numpy builds
    one SeedSequence in about 20 us of Python-level hashing; here the same hashing runs once per
    word position over all rows (the hash constants do not depend on the data), which is what
    10,000 members' streams cost to seed."""
    keys = np.asarray(keys, dtype=np.uint64)
    if keys.ndim != 2 or (keys.size and int(keys.max()) > _MASK32):
        raise ValueError("seed_states: keys must be rows of integers below 2**32")
    run = _uint32_words(entropy)
    if keys.shape[1] and len(run) < _POOL:
        run += [0] * (
            _POOL - len(run)
        )  # SeedSequence pads the run entropy when a spawn key follows
    rows = keys.shape[0]
    words = np.empty((rows, len(run) + keys.shape[1]), dtype=np.uint32)
    words[:, : len(run)] = np.array(run, dtype=np.uint32)
    words[:, len(run) :] = keys.astype(np.uint32)
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = value * np.uint32(hash_const)
        return value ^ (value >> np.uint32(16))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
        return result ^ (result >> np.uint32(16))

    zero = np.zeros(rows, dtype=np.uint32)
    pool = [hashmix(words[:, i] if i < words.shape[1] else zero) for i in range(_POOL)]
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                pool[i_dst] = mix(pool[i_dst], hashmix(pool[i_src]))
    for i_src in range(_POOL, words.shape[1]):
        for i_dst in range(_POOL):
            pool[i_dst] = mix(pool[i_dst], hashmix(words[:, i_src]))
    state = np.empty((rows, 8), dtype=np.uint32)  # generate_state(4, uint64): 8 words
    hash_const = _INIT_B
    for i in range(8):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = value * np.uint32(hash_const)
        state[:, i] = value ^ (value >> np.uint32(16))
    if sys.byteorder == "big":  # as SeedSequence: words in little-endian order within each uint64
        state = state.byteswap()
    return state.view(np.uint64)


class _SeedState(np.random.bit_generator.ISeedSequence):
    """A SeedSequence whose state is already computed (``seed_states``): PCG64 seeds from it
    exactly as from ``SeedSequence(entropy, spawn_key=key)``, which it stands for."""

    __slots__ = ("_state", "entropy", "spawn_key")

    def __init__(self, state: np.ndarray, entropy: int, spawn_key: tuple[int, ...]):
        self._state = state
        self.entropy = entropy
        self.spawn_key = spawn_key

    def generate_state(self, n_words, dtype=np.uint32):
        if n_words == 4 and np.dtype(dtype) == np.uint64:
            return self._state
        return np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key).generate_state(
            n_words, dtype
        )

    def spawn(self, n_children):
        return np.random.SeedSequence(self.entropy, spawn_key=self.spawn_key).spawn(n_children)


class SeedStreams:
    """A run's random streams: one per actor rank (and more per rank, by stream number), each a
    child of the run's ``SeedSequence``."""

    def __init__(self, seed: int):
        self._seed = np.random.SeedSequence(seed)
        self._entropy = cast(int, self._seed.entropy)  # an int seed's entropy is that int
        self._seed_states: dict[tuple[int | None, int], np.ndarray] = {}  # see generator

    def generator(self, rank: int, stream: int | None = None) -> np.random.Generator:
        """The rank-th child of the run's SeedSequence (what ``SeedSequence.spawn`` would give);
        with ``stream``, that child's own ``stream``-th child (a second stream of the same actor).
        The seed states are computed ``RNG_BLOCK`` ranks at a time (``seed_states``)."""
        block = rank // RNG_BLOCK
        states = self._seed_states.get((stream, block))
        if states is None:
            ranks = np.arange(block * RNG_BLOCK, (block + 1) * RNG_BLOCK, dtype=np.uint64)[:, None]
            prefix = np.array(self._seed.spawn_key, dtype=np.uint64)
            keys = np.hstack(
                [np.broadcast_to(prefix, (RNG_BLOCK, prefix.size)), ranks]
                + ([] if stream is None else [np.full((RNG_BLOCK, 1), stream, dtype=np.uint64)])
            )
            states = self._seed_states[(stream, block)] = seed_states(self._entropy, keys)
        key = self._seed.spawn_key + (rank,) + (() if stream is None else (stream,))
        seed_seq = _SeedState(states[rank - block * RNG_BLOCK], self._entropy, key)
        return np.random.Generator(np.random.PCG64(seed_seq))  # type: ignore[arg-type]  # (an ISeedSequence: PCG64 takes one)

    def lazy(self, rank: int, stream: int | None = None) -> LazyGenerator:
        """``generator(rank, stream)``, built on its first draw."""
        return LazyGenerator(functools.partial(self.generator, rank, stream))
