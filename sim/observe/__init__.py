"""What a run leaves behind and what is read from it: the recorder's events and intervals
(``recorder``), the metrics (``metrics``) and the run-level invariants (``invariants``)."""
