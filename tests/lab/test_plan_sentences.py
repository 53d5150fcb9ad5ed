"""The plan's sentences say what its table says: a difference only outside the seeds' bands, the
numbers quoted from the cells, the limits crossed with the setting that fixes them. On tables
built here, so that each rule is seen to hold (and to fail where it should)."""

from __future__ import annotations

import pandas as pd

from rebalance_sim.lab.report import plan as page
from rebalance_sim.lab.report.headline import quote

STALL, LAG = page.STALL, page.LAG


def _row(fault, variant, label, stall, band=0.05, factor=1.0, members=800, **extra):
    row = {
        "fault": fault,
        "variant": variant,
        "set-up": label,
        "factor": factor,
        "members": members,
        "partitions": members * 3,
        "seeds": 5,
        "measured": True,
        "records delayed": 0.0,
        "max_poll_interval_s": 300.0,
        "assign_s": 0.6,
        "revoke_s": 0.0,
        "max_assigned": 3,
        "max_revoked": 0,
        "cold assign_s": 0.6,
        "cold revoke_s": 0.0,
        "cold max_assigned": 3,
        "cold max_revoked": 0,
    }
    for label_, value in (
        (STALL, stall),
        (LAG, stall * 10),
        (page.REPROCESSED, 0.0),
        (page.SETTLE, 40.0),
    ):
        row[label_] = value
        row[f"{label_} p10"] = value * (1 - band)
        row[f"{label_} p90"] = value * (1 + band)
    for prefix in ("", "cold "):
        for col in (
            "poll_timeouts",
            "poll_timeouts_max",
            "sessions_expired",
            "sessions_expired_max",
            "rebalance_timeouts",
            "rebalance_timeouts_max",
            "runs_crossing",
        ):
            row[prefix + col] = 0.0
    row.update(extra)
    return row


def _page(rows, ranking=None):
    return page.PlanPage(
        title="t",
        summary="s",
        today="classic protocol, range (eager), dynamic members",
        table=pd.DataFrame(rows),
        ranking=ranking if ranking is not None else pd.DataFrame(),
        changes={},
        fault_text={"deploy": "a deploy"},
        session={"today": ("session.timeout.ms", 45.0)},
        deploy_down_s=30.0,
    )


def test_the_best_alternative_is_stated_with_the_tables_numbers():
    rows = [
        _row("deploy", "today", "today", 49300.0),
        _row("deploy", "cooperative-sticky", "cooperative-sticky", 5400.0),
        _row("deploy", "consumer-uniform", "consumer protocol (uniform)", 5600.0),
        _row("deploy", "static", "static membership", 90000.0),
    ]
    text = page.fault_sentence(pd.DataFrame(rows), "deploy", {})
    today, coop = rows[0], rows[1]
    assert text.startswith("Deploy: cooperative-sticky cuts the stall about 9.1x (")
    assert f"{quote(coop, STALL)} vs {quote(today, STALL)} unassigned partition-seconds" in text
    # the consumer protocol's band overlaps cooperative-sticky's: not called a difference
    assert "consumer protocol (uniform) is about the same as cooperative-sticky here" in text
    assert "static membership stalls 1.8x more than today" in text


def test_no_difference_inside_the_bands():
    rows = [
        _row("crash", "today", "today", 4672.0, band=0.3),
        _row("crash", "cooperative-sticky", "cooperative-sticky", 4000.0, band=0.3),
    ]
    text = page.fault_sentence(pd.DataFrame(rows), "crash", {})
    assert "no alternative stalls less than today outside the seeds' spread" in text
    assert "cooperative-sticky is about the same as today" in text
    # the same medians with narrow bands are a difference
    narrow = [_row("crash", "today", "today", 4672.0), _row("crash", "x", "x", 4000.0)]
    assert "x cuts the stall about 1.2x" in page.fault_sentence(pd.DataFrame(narrow), "crash", {})


def test_an_unmeasured_fault_is_left_out_and_said():
    rows = [
        _row("crash", "today", "today", 4672.0),
        _row("crash", "consumer-uniform", "consumer protocol (uniform)", 100.0, measured=False),
    ]
    text = page.fault_sentence(pd.DataFrame(rows), "crash", {})
    assert "consumer protocol" not in text
    (said,) = page.unmeasured_sentences(pd.DataFrame(rows))
    assert said.startswith(
        "The crash under consumer protocol (uniform) at 800 members was not measured"
    )


def test_growth_and_a_callback_past_max_poll_interval():
    """At 2x, 48 of 1,600 members (3%) spend longer in onPartitionsAssigned than
    max.poll.interval.ms allows: said with the callback's partitions and seconds, and the fix."""
    rows = [
        _row("deploy", "today", "today", 49300.0),
        _row("deploy", "cooperative-sticky", "cooperative-sticky", 5400.0),
        _row("deploy", "today", "today", 98600.0, factor=2.0, members=1600),
        _row(
            "deploy",
            "cooperative-sticky",
            "cooperative-sticky",
            10900.0,
            factor=2.0,
            members=1600,
            poll_timeouts=48.0,
            poll_timeouts_max=60.0,
            runs_crossing=5.0,
            max_assigned=2000,
            assign_s=400.0,
        ),
    ]
    p = _page(rows)
    said = page.sentences(p)
    growth = next(s for s in said if s.startswith("At 2x the group (1,600 members)"))
    assert "the deploy stalls 2.0x as much as now" in growth
    assert "cooperative-sticky cuts the stall about 9.0x in the deploy" in growth
    limit = next(s for s in said if "outlasts max.poll.interval.ms" in s)
    assert limit.startswith("At 2x the group (1,600 members), under cooperative-sticky")
    assert (
        "onPartitionsAssigned (2,000 partitions, 400 s) outlasts max.poll.interval.ms (300 s) for 3% of members"
        in limit
    )
    assert "fix: max.poll.interval.ms above 480 s" in limit
    assert not any("session" in s for s in said)  # nothing else was crossed


def test_sessions_expired_during_a_static_deploy():
    rows = [
        _row("deploy", "today", "today", 49300.0),
        _row(
            "deploy",
            "static",
            "static membership",
            90000.0,
            sessions_expired=80.0,
            sessions_expired_max=80.0,
        ),
    ]
    said = page.limit_sentences(
        page.PlanPage(
            title="t",
            summary="s",
            today="x",
            table=pd.DataFrame(rows),
            ranking=pd.DataFrame(),
            changes={},
            fault_text={},
            session={"static": ("session.timeout.ms", 10.0)},
            deploy_down_s=30.0,
        )
    )
    (text,) = said
    assert "80 member(s) had their session expire (deploy): session.timeout.ms is 10 s" in text
    assert "fix: session.timeout.ms above 40 s" in text
