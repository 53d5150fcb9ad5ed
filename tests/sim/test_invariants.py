"""The run-level invariants catch two owners at once and stay quiet on hand-overs."""

from __future__ import annotations

from sim.observe.invariants import check_run
from sim.observe.recorder import Recorder


def _tables(owned):
    rec = Recorder()
    rec.intervals = [("owned", m, t, p, s, e) for m, t, p, s, e in owned]
    return rec.events_table("r"), rec.intervals_table("r")


def _violations(owned):
    events, intervals = _tables(owned)
    return check_run(events, intervals, settled=True, cooperative=True)


def test_two_owners_at_once_are_reported_even_when_not_adjacent_by_start():
    """b's row overlaps a's long row but starts after c's row, which overlaps neither."""
    found = _violations(
        [
            ("a", "t", 0, 0.0, 10.0),
            ("c", "t", 1, 2.0, 3.0),
            ("b", "t", 0, 4.0, 5.0),
            ("c", "t", 0, 1.0, 2.0),
        ]
    )
    assert sorted(found) == [
        "t=1.000000: t-0 owned by a and c at once (cooperative group)",
        "t=4.000000: t-0 owned by a and b at once (cooperative group)",
    ]


def test_hand_overs_and_other_partitions_are_not_reported():
    """Touching rows (one owner after the other) and the same span on two partitions are fine."""
    assert (
        _violations(
            [
                ("a", "t", 0, 0.0, 5.0),
                ("b", "t", 0, 5.0, 9.0),
                ("b", "t", 1, 0.0, 9.0),
                ("a", "u", 0, 0.0, 9.0),
            ]
        )
        == []
    )


def _zombie_check(events, owned):
    rec = Recorder()
    rec.events = [
        (t, 0, i, kind, member, gen, detail)
        for i, (t, kind, member, gen, detail) in enumerate(events)
    ]
    rec.intervals = [("owned", m, t, p, s, e) for m, t, p, s, e in owned]
    return check_run(
        rec.events_table("r"), rec.intervals_table("r"), settled=True, cooperative=True
    )


def test_a_member_id_that_rejoined_is_a_zombie_only_until_it_syncs_again():
    """Under the consumer protocol a client rejoins under its own member id: removed at 3 s, it
    is a zombie (its double ownership is allowed) until it is added back and hears its new
    assignment at 6 s; after that, owning what another member owns is a violation again."""
    events = [
        (0.0, "member_added", "a", 1, "member_id=A"),
        (0.1, "assignment_received", "a", 1, "member_id=A"),
        (3.0, "member_removed", "a", 2, "member_id=A reason=session_expired"),
        (5.0, "member_added", "a", 3, "member_id=A"),
        (6.0, "assignment_received", "a", 3, "member_id=A"),
    ]
    assert _zombie_check(events, [("a", "t", 0, 0.0, 10.0), ("b", "t", 0, 4.0, 5.0)]) == []
    assert _zombie_check(events, [("a", "t", 0, 0.0, 10.0), ("b", "t", 0, 7.0, 8.0)]) == [
        "t=7.000000: t-0 owned by a and b at once (cooperative group)"
    ]


def test_issue_34_a_report_sent_during_the_assigned_callback_is_kafkas_hazard():
    """Issue 34: a sends a full heartbeat at 2 s, during onPartitionsAssigned, reporting what it
    owned before the callback (without t-0, which it has processed since 1 s); the coordinator
    gives t-0 to b at 3 s, and a processes it until its next reconciliation at 5 s. That overlap
    is Kafka's behaviour (AbstractMembershipManager updates currentAssignment after the
    callbacks): counted as the hazard, not reported. The same overlap without the report, or
    with a report of another partition, is a violation."""
    from sim.observe.invariants import check_run_with_hazards

    def run(events, owned):
        rec = Recorder()
        rec.events = [
            (t, 0, i, kind, member, gen, detail)
            for i, (t, kind, member, gen, detail) in enumerate(events)
        ]
        rec.intervals = [("owned", m, t, p, s, e) for m, t, p, s, e in owned]
        rec.intervals += [("double_processing", "a,b", "t", 0, 3.0, 5.0)] if owned else []
        return check_run_with_hazards(
            rec.events_table("r"),
            rec.intervals_table("r"),
            settled=True,
            cooperative=True,
            rates={"t": 100.0},
        )

    owned = [("a", "t", 0, 1.0, 5.0), ("b", "t", 0, 3.0, 9.0)]
    report = (2.0, "owned_report_before_callback", "a", 4, "member_id=A partitions=t-1,t-0")
    violations, hazards = run([report], owned)
    assert violations == []
    assert hazards == {
        "kafka_hazard_double_ownership_partition_s": 2.0,
        "kafka_hazard_records_processed_twice": 200.0,
    }
    other = (2.0, "owned_report_before_callback", "a", 4, "member_id=A partitions=t-1")
    for events in ([], [other]):
        violations, hazards = run(events, owned)
        assert len(violations) == 2 and set(hazards.values()) == {0.0}
