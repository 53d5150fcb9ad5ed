"""`rebalance-sim assign` and `rebalance-sim bench assignors`: output and clean input errors."""

from __future__ import annotations

import json

import pytest

from rebalance_sim.cli.main import main
from rebalance_sim.lab.bench.assignors import Case, bench_case

GROUP = {
    "assignor": "cooperative-sticky",
    "topics": {"orders": 6},
    "members": {
        "c1": {
            "topics": ["orders"],
            "owned": ["orders-0", "orders-1", "orders-2"],
            "generation": 3,
        },
        "c2": {
            "topics": ["orders"],
            "owned": [["orders", 3], ["orders", 4], ["orders", 5]],
            "generation": 3,
        },
        "c3": {"topics": ["orders"]},
    },
}


def run_cli(tmp_path, doc, *extra, capsys):
    path = tmp_path / "group.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    code = main(["assign", str(path), *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_assign_json_reports_assignment_and_quality(tmp_path, capsys):
    """JSON output carries each member's partitions and the quality figures (withheld, moved)."""
    code, out, _ = run_cli(tmp_path, GROUP, "--json", capsys=capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["assignment"] == {
        "c1": ["orders-0", "orders-1"],
        "c2": ["orders-3", "orders-4"],
        "c3": [],
    }
    assert (
        doc["quality"]["withheld"] == 2
        and doc["quality"]["moved"] == 2
        and doc["quality"]["kept"] == 4
    )


def test_assign_table_for_eager_sticky_uses_user_data(tmp_path, capsys):
    """Eager sticky gets ownership through user data built from 'owned', so it stays sticky."""
    code, out, _ = run_cli(tmp_path, GROUP, "--assignor", "sticky", capsys=capsys)
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("c")}
    assert "orders[0-1]" in lines["c1"] and "orders[3-4]" in lines["c2"]
    assert "orders[2,5]" in lines["c3"]


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ("{not json", "invalid JSON at line 1"),
        ({**GROUP, "assignor": "fair"}, "unknown assignor 'fair'; known assignors: range"),
        ({**GROUP, "topics": {"orders": -1}}, "topics.orders: partition count -1 is negative"),
        (
            {**GROUP, "members": {"c1": {"topics": "orders", "x": 1}}},
            "members.c1: unknown field 'x'",
        ),
        (
            {**GROUP, "members": {"c1": {"topics": ["orders"], "owned": ["orders"]}}},
            "members.c1.owned[0]",
        ),
        (
            {**GROUP, "members": {"c1": {"topics": ["orders"], "generation": "3"}}},
            "members.c1.generation",
        ),
        ({**GROUP, "extra": 1}, "input: unknown field 'extra'"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(tmp_path, capsys, doc, needle):
    """Malformed input exits 2 with one line on stderr that names the field, never a traceback."""
    code, out, err = run_cli(tmp_path, doc, capsys=capsys)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


SERVER_GROUP = {
    "assignor": "uniform",
    "topics": {"orders": 6, "payments": 3},
    "members": {
        "c1": {
            "topics": ["orders", "payments"],
            "owned": ["orders-0", "orders-1", "orders-2", "payments-0"],
        },
        "c2": {
            "topics": ["orders", "payments"],
            "owned": ["orders-3", "orders-4", "orders-5"],
            "rack": "r1",
        },
        "c3": {"topics": ["orders", "payments"], "group_instance_id": "host-3"},
    },
}


def test_assign_server_runs_the_coordinators_assignor_and_kafkas_time(tmp_path, capsys):
    """--server: Kafka's server-side uniform on the members' current targets ('owned'), the
    quality figures, and the time Kafka's own assignor takes on that input (kafka_ms)."""
    from assignors.server import GroupSpec, MemberSubscriptionAndAssignment, get_server_assignor
    from assignors.server.kafka_time import server_kafka_ms

    code, out, _ = run_cli(tmp_path, SERVER_GROUP, "--server", "--json", capsys=capsys)
    assert code == 0
    doc = json.loads(out)
    # quotas 3, 3, 3: c1 keeps three and gives up payments-0, which c3 takes with the rest
    assert doc["assignment"] == {
        "c1": ["orders-0", "orders-1", "orders-2"],
        "c2": ["orders-3", "orders-4", "orders-5"],
        "c3": ["payments-0", "payments-1", "payments-2"],
    }
    assert doc["quality"]["kept"] == 6 and doc["quality"]["moved"] == 1
    spec = GroupSpec(
        {
            "c1": MemberSubscriptionAndAssignment(
                {"orders", "payments"}, {"orders": [0, 1, 2], "payments": [0]}
            ),
            "c2": MemberSubscriptionAndAssignment({"orders", "payments"}, {"orders": [3, 4, 5]}),
            "c3": MemberSubscriptionAndAssignment({"orders", "payments"}),
        }
    )
    work = get_server_assignor("uniform").assign(spec, SERVER_GROUP["topics"]).kafka_work
    assert doc["kafka_ms"] == round(server_kafka_ms(work), 6) and doc["kafka_ms"] > 0
    # the table says the same; --assignor picks the server's range instead
    code, out, _ = run_cli(tmp_path, SERVER_GROUP, "--server", capsys=capsys)
    assert code == 0 and f"would take {server_kafka_ms(work):.3f} ms" in out
    code, out, _ = run_cli(
        tmp_path, SERVER_GROUP, "--server", "--assignor", "range", "--json", capsys=capsys
    )
    doc = json.loads(out)
    # static members first (c3, by instance id), then the others by member id
    assert doc["assignor"] == "range" and doc["assignment"]["c3"] == [
        "orders-0",
        "orders-1",
        "payments-0",
    ]


@pytest.mark.parametrize(
    ("doc", "extra", "needle"),
    [
        (
            SERVER_GROUP,
            ("--assignor", "sticky"),
            "--assignor: 'sticky' is not a server-side assignor",
        ),
        ({**SERVER_GROUP, "assignor": "cooperative-sticky"}, (), "assignor: 'cooperative-sticky'"),
        ({k: v for k, v in SERVER_GROUP.items() if k != "assignor"}, (), "assignor: missing"),
        (
            {**SERVER_GROUP, "members": {"c1": {"topics": ["orders"], "generation": 3}}},
            (),
            "members.c1: unknown field 'generation' with --server",
        ),
        (
            {**SERVER_GROUP, "members": {"c1": {"topics": ["orders"], "rack": 7}}},
            (),
            "members.c1.rack: expected a string",
        ),
        (
            {
                **SERVER_GROUP,
                "members": {
                    "c1": {"topics": ["orders"], "owned": ["orders-0"]},
                    "c2": {"topics": ["orders"], "owned": ["orders-0"]},
                },
            },
            (),
            "partition orders-0 is in the target assignment of both",
        ),
        (
            {**SERVER_GROUP, "members": {"c1": {"topics": ["orders"], "owned": ["orders-9"]}}},
            (),
            "members.c1.owned[0]: orders-9 is out of range",
        ),
        ([1, 2], (), "input: expected a JSON object"),
    ],
)
def test_assign_server_bad_input_is_one_line_naming_the_field(tmp_path, capsys, doc, extra, needle):
    code, out, err = run_cli(tmp_path, doc, "--server", *extra, capsys=capsys)
    assert code == 2 and out == ""
    assert needle in err and len(err.strip().splitlines()) == 1


def test_missing_file(capsys):
    """A missing input file is a one-line error."""
    assert main(["assign", "/nonexistent/group.json"]) == 2
    assert "No such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["range", "roundrobin", "sticky", "cooperative-sticky", "stream-join-sticky"]
)
def test_bench_rows_measure_both_modes(name):
    """A bench case yields a fresh and a one-member-left row with timings and balanced results."""
    rows = bench_case(name, Case("tiny", 6, 3, 4), repeat=1, measure_memory=True)
    assert [r["mode"] for r in rows] == ["fresh", "one member left"]
    assert rows[1]["members"] == 5
    assert all(r["wall_s"] > 0 and r["peak_mib"] is not None for r in rows)
    if name in ("sticky", "cooperative-sticky", "stream-join-sticky"):
        # survivors keep what they had: only the leaver's partitions move
        from assignors import get_assignor
        from rebalance_sim.lab.bench.assignors import fresh_subscriptions, group_of

        metadata, topics_of = group_of(Case("tiny", 6, 3, 4))
        fresh = get_assignor(name).assign(metadata, fresh_subscriptions(topics_of))
        assert rows[1]["moved"] == len(fresh[next(iter(topics_of))].partitions)


def test_fast_calls_are_timed_until_half_a_second_slow_ones_only_repeat_times(monkeypatch):
    """A benchmark call of a millisecond is repeated past ``repeat`` until ``MIN_TIMED_S`` has been
    timed (at most ``MAX_CALLS`` calls); one that takes long enough runs ``repeat`` times."""
    import time

    from rebalance_sim.lab.bench import timing as benchtime

    monkeypatch.setattr(benchtime, "MIN_TIMED_S", 0.05)
    calls = []

    def fast():
        calls.append(1)
        time.sleep(0.001)
        return len(calls)

    median, last, n = benchtime.timed_median(fast, 3)
    assert n == len(calls) == last and 10 <= n <= 50
    assert 0.001 <= median < 0.05

    calls.clear()
    median, _, n = benchtime.timed_median(lambda: (calls.append(1), time.sleep(0.03)), 3)
    assert n == len(calls) == 3 and median >= 0.03

    monkeypatch.setattr(benchtime, "MAX_CALLS", 20)
    calls.clear()
    _, _, n = benchtime.timed_median(lambda: calls.append(1), 3)
    assert n == len(calls) == 20
