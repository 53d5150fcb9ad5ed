"""The simulator's own exceptions that signal bugs in it (a user's mistakes are
``sim.config.ConfigError``). Kept out of the compiled modules: mypyc compiles classes that derive
from ``Exception`` only, and these are a ``RuntimeError`` and an ``AssertionError``."""

from __future__ import annotations


class IllegalTransition(RuntimeError):
    """A transition that GroupMetadata would refuse; always a simulator bug."""
