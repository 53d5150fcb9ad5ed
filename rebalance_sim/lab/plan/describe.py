"""What ``kafka-consumer-groups.sh --describe`` printed, read into a group a plan can run.

Kafka's ``ConsumerGroupCommand`` prints three views, each a header line of column names and one
left-aligned row per member or partition, columns as wide as their widest value:

- ``--members [--verbose]``: ``GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID
  #PARTITIONS``, the instance id column only when some member is static. ``--verbose`` adds, up
  to Kafka 3.9, ``ASSIGNMENT`` as ``topic(0,1), other(2)`` (Kafka 3.8 and 3.9, rewritten in
  Java, print ``(0,1), (2)`` without the topic names); from Kafka 4.0 (KIP-1099) ``CURRENT-EPOCH
  CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT`` with assignments as ``topic:0,1;other:2``,
  epochs and target only for consumer-protocol members (``-`` for a classic group), and
  ``UPGRADED`` while a group holds members of both protocols;
- ``--offsets`` (the default view): ``GROUP TOPIC PARTITION [LEADER-EPOCH] CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``, ``-`` where a partition has no member;
- ``--state [--verbose]``: ``GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE [GROUP-EPOCH
  TARGET-ASSIGNMENT-EPOCH] #MEMBERS``.

Older releases and Kafka's own documentation print the same views without the ``GROUP`` column.
A file may hold any of the views, in any order, with the command lines that printed them and
the tool's messages (``Consumer group 'g' has no active members.``); any other line is refused,
naming it. ``read_describe`` returns what the views say; ``group_of`` turns it into a ``Group``,
naming what it had to assume (production rate, capacity and callback costs are nowhere in
them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .group import PlanError

MISSING = "-"  # ConsumerGroupCommand.MISSING_COLUMN_VALUE

MEMBER_COLUMNS = {
    "GROUP",
    "CONSUMER-ID",
    "GROUP-INSTANCE-ID",
    "HOST",
    "CLIENT-ID",
    "#PARTITIONS",
    "ASSIGNMENT",
    "CURRENT-EPOCH",
    "CURRENT-ASSIGNMENT",
    "TARGET-EPOCH",
    "TARGET-ASSIGNMENT",
    "UPGRADED",
}
OFFSET_COLUMNS = {
    "GROUP",
    "TOPIC",
    "PARTITION",
    "LEADER-EPOCH",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
}
STATE_COLUMNS = {
    "GROUP",
    "COORDINATOR-(ID)",
    "ASSIGNMENT-STRATEGY",
    "STATE",
    "GROUP-EPOCH",
    "TARGET-ASSIGNMENT-EPOCH",
    "#MEMBERS",
}
# Lines the tool prints besides its tables (ConsumerGroupCommand.shouldPrintMemberState, and
# the note of releases before 2.0), and the command line a pasted session starts with.
MESSAGES = (
    re.compile(r"^Consumer group '.*' has no active members\.$"),
    re.compile(r"^Warning: Consumer group '.*' is rebalancing\.$"),
    re.compile(r"^Note: This will (only )?show information about consumers"),
)
COMMAND = re.compile(r"^(\$|>|#)\s|kafka-consumer-groups(\.sh|\.bat)?\s")
GROUP_OPTION = re.compile(r"--group[ =](\S+)")
ERROR = re.compile(r"^Error: ")
STATES = {
    "Stable",
    "PreparingRebalance",
    "CompletingRebalance",
    "Empty",
    "Dead",
    "Assigning",
    "Reconciling",
    "Unknown",
    "NotReady",
}


@attrs.frozen
class MemberRow:
    group: str | None
    consumer_id: str
    instance_id: str | None
    host: str
    client_id: str
    partitions: int
    assignment: tuple[tuple[str | None, int], ...] | None  # None: not shown (no --verbose)
    current_epoch: int | None = None
    target_epoch: int | None = None
    upgraded: bool | None = None


@attrs.frozen
class OffsetRow:
    group: str | None
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None


@attrs.frozen
class StateRow:
    group: str | None
    assignment_strategy: str | None
    state: str
    members: int
    group_epoch: int | None = None


@attrs.frozen
class Described:
    """Every row of the views read, where they came from, and the tool's messages."""

    members: tuple[MemberRow, ...] = ()
    offsets: tuple[OffsetRow, ...] = ()
    states: tuple[StateRow, ...] = ()
    messages: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    member_view_verbose: bool = False
    kafka4_layout: bool = False  # the member view had KIP-1099's epoch columns
    command_groups: tuple[str, ...] = ()  # the --group of the command lines pasted with them


# ---------------------------------------------------------------------------------------------
# Parsing


def _header(line: str) -> tuple[str, list[str], list[int]] | None:
    """(view, columns, start offsets) if ``line`` is a header of one of the views."""
    text = line.replace("COORDINATOR (ID)", "COORDINATOR-(ID)")
    cols = text.split()
    if not cols:
        return None
    starts = []
    pos = 0
    for c in cols:
        pos = text.index(c, pos)
        starts.append(pos)
        pos += len(c)
    names = set(cols)
    if {"CONSUMER-ID", "#PARTITIONS"} <= names and names <= MEMBER_COLUMNS:
        return "members", cols, starts
    if {"TOPIC", "PARTITION", "LAG"} <= names and names <= OFFSET_COLUMNS:
        return "offsets", cols, starts
    if {"STATE", "#MEMBERS"} <= names and names <= STATE_COLUMNS:
        return "state", cols, starts
    return None


def _cells(line: str, cols: list[str], starts: list[int], last_free: bool) -> list[list[str]]:
    """Ways to read the row's values, most likely first: split on whitespace (the last column
    may hold spaces when ``last_free``: ``topic1(0), topic2(0)``), then cut at the header's
    column starts (a column left empty for some rows, such as GROUP-INSTANCE-ID for a dynamic
    member among static ones)."""
    out: list[list[str]] = []
    tokens = line.split()
    n = len(cols)
    if len(tokens) == n:
        out.append(tokens)
    elif last_free and len(tokens) > n:
        out.append(tokens[: n - 1] + [" ".join(tokens[n - 1 :])])
    values = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < n else len(line)
        values.append(line[start:end].strip())
    if values[0] and not any(" " in v for v in values[:-1]) and (not out or values != out[0]):
        out.append(values)
    return out


def _int(value: str) -> int | None:
    if value == MISSING:
        return None
    return int(value)


_OLD_ASSIGNMENT = re.compile(r"([^\s(),]*)\(([0-9,]+)\)")


def parse_assignment(text: str) -> tuple[tuple[str | None, int], ...]:
    """``topic(0,1), other(2)`` (Kafka <= 3.9; ``(0,1)`` without topic names in 3.8-3.9) or
    ``topic:0,1;other:2`` (Kafka 4.x) as (topic or None, partition) pairs; ``-`` is none.
    Raises ValueError when ``text`` is neither."""
    text = text.strip()
    if text in ("", MISSING):
        return ()
    out: list[tuple[str | None, int]] = []
    if "(" in text:
        rest = _OLD_ASSIGNMENT.sub("", text).replace(",", "").strip()
        if rest:
            raise ValueError(text)
        for topic, parts in _OLD_ASSIGNMENT.findall(text):
            out += [(topic or None, int(p)) for p in parts.split(",") if p]
        return tuple(out)
    for chunk in text.split(";"):
        topic, sep, parts = chunk.rpartition(":")
        if not sep or not topic:
            raise ValueError(text)
        out += [(topic, int(p)) for p in parts.split(",")]
    return tuple(out)


def _member(values: dict[str, str]) -> MemberRow:
    assignment = None
    if "ASSIGNMENT" in values:
        assignment = parse_assignment(values["ASSIGNMENT"])
    elif "CURRENT-ASSIGNMENT" in values:
        assignment = parse_assignment(values["CURRENT-ASSIGNMENT"])
        parse_assignment(values.get("TARGET-ASSIGNMENT", MISSING))  # a check of the layout
    upgraded = values.get("UPGRADED")
    if upgraded not in (None, MISSING, "true", "false"):
        raise ValueError(upgraded)
    instance = values.get("GROUP-INSTANCE-ID") or None
    return MemberRow(
        group=values.get("GROUP"),
        consumer_id=values["CONSUMER-ID"],
        instance_id=None if instance == MISSING else instance,
        host=values["HOST"],
        client_id=values["CLIENT-ID"],
        partitions=int(values["#PARTITIONS"]),
        assignment=assignment,
        current_epoch=_int(values.get("CURRENT-EPOCH", MISSING)),
        target_epoch=_int(values.get("TARGET-EPOCH", MISSING)),
        upgraded=None if upgraded in (None, MISSING) else upgraded == "true",
    )


def _offset(values: dict[str, str]) -> OffsetRow:
    consumer = values["CONSUMER-ID"]
    if values["TOPIC"] == MISSING:  # a member without partitions (Kafka < 2.0 listed them here)
        raise LookupError
    _int(values.get("LEADER-EPOCH", MISSING))
    return OffsetRow(
        group=values.get("GROUP"),
        topic=values["TOPIC"],
        partition=int(values["PARTITION"]),
        current_offset=_int(values["CURRENT-OFFSET"]),
        log_end_offset=_int(values["LOG-END-OFFSET"]),
        lag=_int(values["LAG"]),
        consumer_id=None if consumer == MISSING else consumer,
    )


_STATE_ROW = re.compile(
    r"^(?:(?P<group>\S+)\s+)?(?P<coordinator>\S+\s*\(\S+\))\s+(?P<strategy>\S+)\s+"
    r"(?P<state>[A-Za-z]+)\s+(?:(?P<epoch>\S+)\s+(?P<target>\S+)\s+)?(?P<members>\d+)\s*$"
)


def _state(line: str, cols: list[str]) -> StateRow:
    m = _STATE_ROW.match(line.strip())
    if m is None or m["state"] not in STATES:
        raise ValueError(line)
    if ("GROUP" in cols) != (m["group"] is not None):
        raise ValueError(line)
    if ("GROUP-EPOCH" in cols) != (m["epoch"] is not None):
        raise ValueError(line)
    strategy = m["strategy"]
    return StateRow(
        group=m["group"],
        assignment_strategy=None if strategy in (MISSING, "") else strategy,
        state=m["state"],
        members=int(m["members"]),
        group_epoch=_int(m["epoch"]) if m["epoch"] else None,
    )


def read_describe(paths: Sequence[str | Path]) -> Described:
    """Every view in the files ``paths``; raises ``PlanError`` naming the file and the line
    that is not part of the tool's output, or that reports an error."""
    members: list[MemberRow] = []
    offsets: list[OffsetRow] = []
    states: list[StateRow] = []
    messages: list[str] = []
    named: list[str] = []
    verbose = kafka4 = False
    for path in paths:
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PlanError(f"--describe {where}: no such file") from None
        except IsADirectoryError:
            raise PlanError(f"--describe {where}: is a directory, expected a text file") from None
        except UnicodeDecodeError as e:
            raise PlanError(
                f"--describe {where}: not a text file (byte {e.start}: not UTF-8)"
            ) from None
        except OSError as e:
            raise PlanError(f"--describe {where}: cannot read: {e.strerror or e}") from None
        table: tuple[str, list[str], list[int]] | None = None
        continued = False  # the previous line was a command ending in a backslash
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.rstrip().expandtabs()

            def bad(why: str, n=n, raw=raw, where=where) -> PlanError:
                shown = raw.strip()
                shown = shown if len(shown) <= 70 else shown[:67] + "..."
                return PlanError(f"--describe {where}: line {n}: {why}: {shown!r}")

            if continued:
                continued = line.endswith("\\")
                continue
            if not line.strip():
                table = None
                continue
            head = _header(line)
            if head is not None:
                table = head
                if head[0] == "members":
                    verbose = verbose or any(
                        c in head[1] for c in ("ASSIGNMENT", "CURRENT-ASSIGNMENT")
                    )
                    kafka4 = kafka4 or "CURRENT-EPOCH" in head[1]
                continue
            stripped = line.strip()
            if ERROR.match(stripped):
                raise bad("the tool reported an error")
            if any(p.search(stripped) for p in MESSAGES):
                messages.append(stripped)
                table = None
                continue
            if COMMAND.search(stripped):
                table = None
                continued = stripped.endswith("\\")
                m = GROUP_OPTION.search(stripped)
                if m and not stripped.startswith("#") and m[1] not in named:
                    named.append(m[1])
                continue
            if table is None:
                raise bad("not a line of kafka-consumer-groups.sh --describe output")
            view, cols, starts = table
            try:
                if view == "state":
                    states.append(_state(line, cols))
                    continue
                last_free = view == "members" and cols[-1] == "ASSIGNMENT"
                for values in _cells(line, cols, starts, last_free):
                    row = dict(zip(cols, values, strict=True))
                    try:
                        if view == "members":
                            members.append(_member(row))
                        else:
                            offsets.append(_offset(row))
                        break
                    except ValueError:
                        continue
                else:
                    raise ValueError(line)
            except LookupError:
                continue
            except ValueError:
                raise bad(f"not a row of the {view} view ({' '.join(cols)})") from None
    if not (members or offsets or states):
        raise PlanError(
            f"--describe {', '.join(map(str, paths))}: no view of kafka-consumer-groups.sh "
            "--describe found (expected a header such as GROUP CONSUMER-ID HOST CLIENT-ID "
            "#PARTITIONS)"
        )
    return Described(
        tuple(members),
        tuple(offsets),
        tuple(states),
        tuple(messages),
        tuple(map(str, paths)),
        verbose,
        kafka4,
        tuple(named),
    )


# ---------------------------------------------------------------------------------------------
# To a group


def groups_in(d: Described) -> set[str]:
    rows: tuple[MemberRow | OffsetRow | StateRow, ...] = (*d.members, *d.offsets, *d.states)
    return {r.group for r in rows if r.group}


def only_group(d: Described, name: str | None) -> Described:
    """``d`` restricted to group ``name``; without a name, the one group it describes (an
    error naming them when it describes several)."""
    found = groups_in(d)
    if name is None:
        if len(found) > 1:
            raise PlanError(
                f"--describe: the output describes {len(found)} groups ({', '.join(sorted(found))}); "
                "choose one with --group NAME"
            )
        return d
    if name not in found:
        raise PlanError(
            f"--group {name}: not in the describe output"
            + (f" (groups: {', '.join(sorted(found))})" if found else " (it names no group)")
        )
    return attrs.evolve(
        d,
        members=tuple(r for r in d.members if r.group == name),
        offsets=tuple(r for r in d.offsets if r.group == name),
        states=tuple(r for r in d.states if r.group == name),
    )


def group_of(
    d: Described,
    name: str | None = None,
    given: dict[str, Any] | None = None,
) -> tuple[dict, tuple[str, ...], tuple[str, ...]]:
    """The group file table of the described group, what was assumed, and what the views said
    that the simulation does not use. ``given``: what the command line says (``rate``,
    ``capacity``, ``assign_cost_ms``, ``revoke_cost_ms``, ``broker_version``)."""
    given = dict(given or {})
    d = only_group(d, name)
    if not d.members:
        why = (
            "the group has no active members"
            if any("no active members" in m for m in d.messages)
            else "no --members view in it"
        )
        raise PlanError(
            f"--describe: {why}; a plan needs the members view "
            "(kafka-consumer-groups.sh --describe --group G --members --verbose)"
        )
    named = [g for g in d.command_groups if not g.startswith("$")]
    label = (
        name
        or next(iter(groups_in(d)), None)
        or (named[0] if len(named) == 1 else None)
        or "described-group"
    )
    assumed: list[str] = []
    facts: list[str] = []
    # Topics and partitions: every (topic, partition) either view names. A partition nobody owns
    # and nobody committed for appears in neither: counted from the highest seen.
    seen: dict[str, int] = {}
    for r in d.offsets:
        seen[r.topic] = max(seen.get(r.topic, 0), r.partition + 1)
    unnamed = 0
    for m in d.members:
        for topic, p in m.assignment or ():
            if topic is None:
                unnamed += 1
            else:
                seen[topic] = max(seen.get(topic, 0), p + 1)
    if not seen:
        if unnamed:
            raise PlanError(
                "--describe: the members view's ASSIGNMENT names no topics (Kafka 3.8 and 3.9 "
                "print partitions only): add the offsets view (kafka-consumer-groups.sh "
                "--describe --group G), which names them"
            )
        raise PlanError(
            "--describe: no topic or partition in it: add --verbose to the members view, or the "
            "offsets view (kafka-consumer-groups.sh --describe --group G)"
        )
    facts.append(
        "partitions per topic: the highest partition the views show, plus one ("
        + ", ".join(f"{t}: {n:,}" for t, n in sorted(seen.items()))
        + ")"
    )
    consumer: dict[str, Any] = {}
    # Protocol: consumer-protocol members have a member epoch (KIP-1099's CURRENT-EPOCH).
    epochs = [m.current_epoch for m in d.members if m.current_epoch is not None]
    consumer_protocol = bool(epochs) or any(s.group_epoch is not None for s in d.states)
    mixed = any(m.upgraded is not None for m in d.members)
    if mixed:
        classic_left = sum(1 for m in d.members if m.upgraded is False)
        facts.append(
            f"{classic_left} of {len(d.members)} members still ran the classic protocol "
            "(a migration under way); planned as a consumer-protocol group"
        )
    strategy = next((s.assignment_strategy for s in d.states if s.assignment_strategy), None)
    if consumer_protocol:
        consumer["group_protocol"] = "consumer"
        if strategy:
            consumer["group_remote_assignor"] = strategy
        else:
            assumed.append("server-side assignor: uniform (the broker's default; no --state view)")
    elif strategy:
        consumer["partition_assignment_strategy"] = [strategy]
    else:
        assumed.append(
            "assignor: range, the first of Kafka's default partition.assignment.strategy "
            "(no --state view to say which the group uses)"
        )
    if not d.kafka4_layout and not d.states:
        assumed.append("protocol: classic (the members view has no epoch columns)")
    static = [m for m in d.members if m.instance_id]
    if static:
        consumer["static"] = True
        if len(static) < len(d.members):
            facts.append(
                f"{len(static)} of {len(d.members)} members are static (group.instance.id); "
                "planned as all static"
            )
    for key in ("capacity", "assign_cost_ms", "revoke_cost_ms"):
        if given.get(key) is not None:
            consumer[key] = given[key]
    hosts = {m.host for m in d.members}
    facts.append(
        f"{len(d.members):,} member{'s' if len(d.members) != 1 else ''} on {len(hosts):,} "
        f"host{'s' if len(hosts) != 1 else ''}"
    )
    if d.states:
        facts.append(f"group state when described: {d.states[0].state}")
    lags = [r.lag for r in d.offsets if r.lag is not None]
    if lags:
        facts.append(
            f"lag when described: {sum(lags):,} records over {len(lags):,} partitions "
            "(the simulation starts caught up)"
        )
    orphans = sum(1 for r in d.offsets if r.consumer_id is None)
    if orphans:
        facts.append(f"{orphans:,} partition(s) had no member when described")
    counts = [m.partitions for m in d.members]
    facts.append(f"partitions per member when described: {min(counts)} to {max(counts)}")
    if any(m.startswith("Warning") for m in d.messages):
        facts.append("the group was rebalancing when described")
    rate = given.get("rate")
    topics = [
        {"name": t, "partitions": n, **({"rate": rate} if rate is not None else {})}
        for t, n in sorted(seen.items())
    ]
    data: dict[str, Any] = {"name": label, "members": len(d.members), "topics": topics}
    if consumer:
        data["consumer"] = consumer
    if given.get("broker_version"):
        data["broker_version"] = given["broker_version"]
    assumed.append(
        "client and broker settings: Kafka's defaults (the describe output shows none); "
        "deploy: 10% of the members at a time, 30 s down, 20 s apart"
    )
    return data, tuple(assumed), tuple(facts)
