"""``plan --describe``: the text kafka-consumer-groups.sh --describe prints, read into a group.

The samples in ``describe_samples/`` say where each comes from in a comment at their top: Kafka's
documentation and a training lab's recorded output of a Kafka 4.x broker (real printed text), and
two laid out from Kafka's own format strings where no printed sample of the layout was found."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebalance_sim.cli.main import main
from rebalance_sim.lab.plan.describe import group_of, parse_assignment, read_describe
from rebalance_sim.lab.plan.group import PlanError, group_from_dict

SAMPLES = Path(__file__).parent / "describe_samples"


def _group(name: str, **given):
    data, assumed, facts = group_of(read_describe([SAMPLES / name]), given=given or None)
    return group_from_dict(data, name, assumed=assumed, facts=facts)


def test_kafka_docs_views_before_the_group_column():
    """Kafka's documentation: the offsets, members --verbose and --state views of a 4-member
    classic group, without the GROUP column and with ASSIGNMENT as topic(partitions)."""
    d = read_describe([SAMPLES / "kafka_docs_3x.txt"])
    assert len(d.members) == 4 and len(d.offsets) == 6 and len(d.states) == 1
    two = next(m for m in d.members if m.client_id == "consumer2")
    assert two.assignment == (("topic2", 1), ("topic3", 0), ("topic3", 1))
    assert next(m for m in d.members if m.client_id == "consumer3").assignment == ()
    g = _group("kafka_docs_3x.txt")
    assert g.members == 4
    assert {(t.name, t.partitions) for t in g.topics} == {
        ("topic1", 1),
        ("topic2", 2),
        ("topic3", 3),
    }
    assert g.consumer["partition_assignment_strategy"] == ["range"]  # from the --state view
    lag = 154289 + 282610 + 157799 + 1665 + 342753 + 155157
    assert any(f"lag when described: {lag:,} records" in f for f in g.facts)
    assert g.name == "my-group"  # from the command line above the views


def test_kafka4_classic_group_has_dashes_for_epochs():
    """A Kafka 4.x tool describing a classic group: GROUP column, KIP-1099's epoch columns as
    '-', assignment as topic:partitions; the continuation line of the pasted command is skipped."""
    d = read_describe([SAMPLES / "kafka4_classic_group.txt"])
    assert d.kafka4_layout and d.member_view_verbose
    (m,) = d.members
    assert m.current_epoch is None and m.partitions == 6
    assert m.assignment == tuple(("l07.cdr.voice", p) for p in range(6))
    g = _group("kafka4_classic_group.txt")
    assert g.name == "l07.billing" and g.members == 1
    assert g.consumer_config().group_protocol == "classic"
    assert g.consumer["partition_assignment_strategy"] == ["range"]
    assert [(t.name, t.partitions) for t in g.topics] == [("l07.cdr.voice", 6)]


def test_kafka4_consumer_group_is_planned_on_the_consumer_protocol():
    g = _group("kafka4_consumer_group.txt", rate=20.0, capacity=500.0)
    cfg = g.consumer_config()
    assert cfg.group_protocol == "consumer" and cfg.group_remote_assignor == "uniform"
    assert g.members == 2 and g.topics[0].rate == 20.0 and cfg.capacity == 500.0
    # what the command line gave is not listed as assumed; what it did not give is
    assert not any(a.startswith("production") or a.startswith("capacity") for a in g.assumed)
    assert any(a.startswith("onPartitionsAssigned") for a in g.assumed)


def test_static_members_and_partitions_without_topic_names():
    """Kafka 3.8-3.9's layout: a GROUP-INSTANCE-ID column (empty for the dynamic member, read by
    column position) and ASSIGNMENT without topic names; the offsets view names the topic."""
    d = read_describe([SAMPLES / "kafka39_static_no_topic_names.txt"])
    dynamic = next(m for m in d.members if m.client_id == "payments-app-2")
    assert dynamic.instance_id is None and dynamic.host == "/10.1.0.13"
    assert dynamic.assignment == ((None, 4), (None, 5), (None, 6))
    assert [m.instance_id for m in d.members if m.instance_id] == ["pay-0", "pay-1", "pay-3"]
    g = _group("kafka39_static_no_topic_names.txt")
    assert g.consumer["static"] is True
    assert [(t.name, t.partitions) for t in g.topics] == [("payments-in", 12)]
    assert any("3 of 4 members are static" in f for f in g.facts)


def test_members_view_without_topic_names_alone_is_refused(tmp_path):
    text = (SAMPLES / "kafka39_static_no_topic_names.txt").read_text()
    members_only = text.split("\n\nGROUP           TOPIC")[0] + "\n"
    path = tmp_path / "members.txt"
    path.write_text(members_only)
    with pytest.raises(PlanError, match="names no topics"):
        group_of(read_describe([path]))


def test_migration_in_progress():
    g = _group("kafka4_migration_verbose.txt")
    assert g.consumer_config().group_protocol == "consumer"
    assert any("1 of 3 members still ran the classic protocol" in f for f in g.facts)


def test_views_may_come_in_several_files(tmp_path):
    text = (SAMPLES / "kafka_docs_3x.txt").read_text()
    offsets, rest = text.split("\n\n", 1)
    (tmp_path / "a.txt").write_text(offsets + "\n")
    (tmp_path / "b.txt").write_text(rest)
    d = read_describe([tmp_path / "a.txt", tmp_path / "b.txt"])
    assert len(d.members) == 4 and len(d.offsets) == 6


@pytest.mark.parametrize(
    "text, expected",
    [
        ("topic1(0), topic2(0)", (("topic1", 0), ("topic2", 0))),
        ("(0,1,10,2)", ((None, 0), (None, 1), (None, 10), (None, 2))),
        ("orders:3,4;payments:0", (("orders", 3), ("orders", 4), ("payments", 0))),
        ("-", ()),
    ],
)
def test_assignment_layouts(text, expected):
    assert parse_assignment(text) == expected


@pytest.mark.parametrize("text", ["topic1[0]", "orders 3,4", "orders:x"])
def test_assignment_not_in_any_layout(text):
    with pytest.raises(ValueError):
        parse_assignment(text)


def test_unknown_format_names_the_line(tmp_path, capsys):
    """Another tool's output (a layout no kafka-consumer-groups.sh prints) is refused in one line
    that names the file and the line, exit 2."""
    path = tmp_path / "rpk.txt"
    path.write_text(
        "GROUP        orders\n"
        "COORDINATOR  1\n"
        "STATE        Stable\n"
        "BALANCER     range\n"
        "MEMBERS      2\n"
    )
    assert main(["plan", "--describe", str(path)]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line
    assert f"--describe {path}: line 1: not a line of kafka-consumer-groups.sh" in line


def test_a_row_that_does_not_fit_its_header_is_named(tmp_path):
    path = tmp_path / "broken.txt"
    path.write_text(
        "GROUP   CONSUMER-ID   HOST   CLIENT-ID   #PARTITIONS\n"
        "g       m-1           /h     c           three\n"
    )
    with pytest.raises(PlanError, match=r"line 2: not a row of the members view"):
        read_describe([path])


def test_the_tools_error_is_passed_on(tmp_path):
    path = tmp_path / "err.txt"
    path.write_text("\nError: Consumer group 'nope' does not exist.\n")
    with pytest.raises(PlanError, match="line 2: the tool reported an error"):
        read_describe([path])


def test_several_groups_need_a_choice(tmp_path):
    a = (SAMPLES / "kafka4_classic_group.txt").read_text()
    b = (SAMPLES / "kafka4_consumer_group.txt").read_text()
    path = tmp_path / "two.txt"
    path.write_text(a + "\n" + b)
    d = read_describe([path])
    with pytest.raises(PlanError, match=r"describes 2 groups .* choose one with --group"):
        group_of(d)
    data, _, _ = group_of(d, "l07.billing-v2")
    assert data["members"] == 2
    with pytest.raises(PlanError, match="--group other: not in the describe output"):
        group_of(d, "other")


def test_no_members_no_plan(tmp_path, capsys):
    path = tmp_path / "empty.txt"
    path.write_text(
        "\nConsumer group 'idle' has no active members.\n\n"
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n"
        "idle            t               0          5               9               4               -               -               -\n"
    )
    assert main(["plan", "--describe", str(path)]) == 2
    assert "the group has no active members" in capsys.readouterr().err
