"""Scenarios: a configuration plus a timeline of actions (``scenario``), the actions themselves
(``actions``) and the built-in scenarios (``builtins``)."""
