"""The simulator's own exceptions that signal bugs in it (a user's mistakes are
``sim.config.ConfigError``). Kept out of the compiled modules: mypyc compiles classes that derive
from ``Exception`` only, and these are a ``RuntimeError`` and an ``AssertionError``."""

from __future__ import annotations


class IllegalTransition(RuntimeError):
    """A state entered from one that is not among its valid previous states (a classic group's or
    a client's: ``valid_previous_states``); always a simulator bug."""


class InvariantViolation(AssertionError):
    """A run broke one of the simulator's invariants (``result.invariant_violations`` says which)."""

    def __init__(self, result):  # a sim.run.RunResult
        self.result = result
        first = result.invariant_violations[0]
        super().__init__(
            f"{len(result.invariant_violations)} invariant violation(s) in run "
            f"{result.run_id}; first: {first}"
        )
