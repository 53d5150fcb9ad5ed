"""Kafka's own expectations for its server-side assignors, ported case by case.

From Kafka's group-coordinator tests: OptimizedUniformAssignmentBuilderTest (uniform,
homogeneous), UniformHeterogeneousAssignmentBuilderTest and RangeAssignorTest. Member ids A, B, C
iterate in the same order in a Java HashMap and a TreeMap, so member order carries over as is.

Topic order is the one thing that does not carry over by itself: Kafka's topics are random Uuids,
ours are names (see assignors/server/uniform.py). Where a case's answer depends on topic order we
name the topics so that name order is the order Kafka iterates in that case:
- heterogeneous ties break on ``Uuid.compareTo``; the tests' ids T1-..., T2-..., T3-..., T4-...
  compare in that order, so the names topic1..topic4 keep it;
- the homogeneous builder lists never-assigned partitions by iterating a ``HashSet<Uuid>``: for
  those ids the table of 16 puts topic2 in bucket 1, topic3 in 9 and topic1 in 10 (topic4 in 5),
  so those cases use the names ``a-topic2 < b-topic3 < c-topic1``;
- cases whose members hold a ``LinkedHashMap`` (Kafka's ``mkOrderedAssignment``) walk topics in
  insertion order topic1, topic2: those use the names topic1, topic2.
"""

from __future__ import annotations

import pytest

from assignors.server import (
    GroupSpec,
    MemberSubscriptionAndAssignment,
    SubscriptionType,
    get_server_assignor,
)

HOMOGENEOUS = SubscriptionType.HOMOGENEOUS
HETEROGENEOUS = SubscriptionType.HETEROGENEOUS


def member(topics, assigned=None, instance_id=None):
    return MemberSubscriptionAndAssignment(topics, assigned or {}, instance_id=instance_id)


def run(name, members, topics, subscription_type=None):
    target = get_server_assignor(name).assign(GroupSpec(members, subscription_type), topics)
    return {m: {t: set(ps) for t, ps in target[m].items()} for m in target}


def assert_balanced(members, result):
    sizes = [sum(len(ps) for ps in result[m].values()) for m in result]
    assert max(sizes) - min(sizes) <= 1
    for m, topics in result.items():
        assert set(topics) <= members[m].subscribed_topic_names
    owned = [(t, p) for topics in result.values() for t, ps in topics.items() for p in ps]
    assert len(owned) == len(set(owned))


# ---- uniform, homogeneous (OptimizedUniformAssignmentBuilderTest) ----

T1, T2, T3 = (
    "c-topic1",
    "a-topic2",
    "b-topic3",
)  # Kafka's HashSet<Uuid> order: topic2, topic3, topic1


def test_uniform_one_member_no_topic_subscription():
    """testOneMemberNoTopicSubscription: no topics, no assignment at all."""
    assert run("uniform", {"A": member(())}, {T1: 3}) == {}


def test_uniform_one_member_subscribed_to_nonexistent_topic():
    """testOneMemberSubscribedToNonexistentTopic. Kafka's assignor throws when handed a topic id
    its describer lacks; its coordinator never hands one (TopicIds skips unknown names), and our
    spec is by name, so the name is ignored: the member gets nothing."""
    result = run("uniform", {"A": member({T2})}, {T1: 3})
    assert all(not topics for topics in result.values())


def test_uniform_first_assignment_two_members_two_topics():
    """testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks."""
    members = {"A": member({T1, T3}), "B": member({T1, T3})}
    result = run("uniform", members, {T1: 3, T3: 2})
    assert result == {"A": {T1: {0}, T3: {0, 1}}, "B": {T1: {1, 2}}}
    assert_balanced(members, result)


def test_uniform_first_assignment_more_members_than_partitions():
    """testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {m: member({T3}) for m in "ABC"}
    result = run("uniform", members, {T3: 2})
    assert result == {"A": {T3: {0}}, "B": {T3: {1}}, "C": {}}


def test_uniform_validity_and_balance_for_large_sample_set():
    """testValidityAndBalanceForLargeSampleSet: 99 topics x 3 partitions, 49 members."""
    topics = {f"topic-{i}": 3 for i in range(1, 100)}
    members = {f"member{i}": member(set(topics)) for i in range(1, 50)}
    assert_balanced(members, run("uniform", members, topics))


def test_uniform_reassignment_given_unbalanced_previous_assignment():
    """testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment (ordered maps)."""
    t1, t2 = "topic1", "topic2"
    members = {
        "A": member({t1, t2}, {t1: {0, 1}, t2: {0, 1}}),
        "B": member({t1, t2}, {t1: {2}, t2: {2}}),
    }
    result = run("uniform", members, {t1: 3, t2: 3})
    assert result == {"A": {t1: {0, 1}, t2: {0}}, "B": {t1: {2}, t2: {1, 2}}}


def test_uniform_reassignment_when_partitions_are_added():
    """testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics."""
    members = {
        "A": member({T1, T2}, {T1: {0, 2}, T2: {0}}),
        "B": member({T1, T2}, {T1: {1}, T2: {1, 2}}),
    }
    result = run("uniform", members, {T1: 6, T2: 5})
    assert result == {"A": {T1: {0, 2, 3}, T2: {0, 3, 4}}, "B": {T1: {1, 4, 5}, T2: {1, 2}}}


def test_uniform_reassignment_when_one_member_added():
    """testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics (ordered)."""
    t1, t2 = "topic1", "topic2"
    members = {
        "A": member({t1, t2}, {t1: {0, 2}, t2: {0}}),
        "B": member({t1, t2}, {t1: {1}, t2: {1, 2}}),
        "C": member({t1, t2}),
    }
    result = run("uniform", members, {t1: 3, t2: 3})
    assert result == {"A": {t1: {0, 2}}, "B": {t1: {1}, t2: {1}}, "C": {t2: {0, 2}}}


def test_uniform_reassignment_when_one_member_removed():
    """testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {
        "A": member({T1, T2}, {T1: {0}, T2: {0}}),
        "B": member({T1, T2}, {T1: {1}, T2: {1}}),
    }
    result = run("uniform", members, {T1: 3, T2: 3})
    assert result == {"A": {T1: {0}, T2: {0, 2}}, "B": {T1: {1, 2}, T2: {1}}}


def test_uniform_reassignment_when_one_subscription_removed():
    """testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member({T2}, {T1: {0}, T2: {0}}),
        "B": member({T2}, {T1: {1}, T2: {1}}),
    }
    assert run("uniform", members, {T1: 2, T2: 2}) == {"A": {T2: {0}}, "B": {T2: {1}}}


def test_uniform_homogeneous_revocation_walks_a_java_hashset():
    """Over its quota of 2 (18 partitions, 9 members), A keeps the first partitions of its
    HashSet<Integer> (a table of 16): 17 (bucket 1) and 2, and gives up 3."""
    members = {"A": member({"t"}, {"t": (2, 3, 17)}), **{m: member({"t"}) for m in "BCDEFGHI"}}
    result = run("uniform", members, {"t": 18})
    assert result["A"] == {"t": {2, 17}}


# ---- uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest) ----


def test_uniform_het_two_members_no_topic_subscription():
    """testTwoMembersNoTopicSubscription."""
    assert run("uniform", {"A": member(()), "B": member(())}, {"topic1": 3}, HETEROGENEOUS) == {}


def test_uniform_het_two_members_subscribed_to_nonexistent_topics():
    """testTwoMembersSubscribedToNonexistentTopics: Kafka throws on ids its describer lacks; we
    ignore unknown names (see the homogeneous case), so nobody gets anything."""
    result = run("uniform", {"A": member({"topic3"}), "B": member({"topic2"})}, {"topic1": 3})
    assert all(not topics for topics in result.values())


def test_uniform_het_first_assignment_two_members_two_topics():
    """testFirstAssignmentTwoMembersTwoTopics."""
    members = {"A": member({"topic1", "topic3"}), "B": member({"topic3"})}
    result = run("uniform", members, {"topic1": 3, "topic3": 6})
    assert result == {"A": {"topic1": {0, 1, 2}, "topic3": {4}}, "B": {"topic3": {0, 1, 2, 3, 5}}}


def test_uniform_het_first_assignment_more_members_than_partitions():
    """testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {"A": member({"topic3"}), "B": member({"topic3"}), "C": member({"topic1"})}
    result = run("uniform", members, {"topic3": 1, "topic1": 2})
    assert result == {"A": {"topic3": {0}}, "B": {}, "C": {"topic1": {0, 1}}}


def test_uniform_het_reassignment_given_unbalanced_previous_assignment():
    """testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment."""
    members = {
        "A": member({"topic1"}, {"topic1": {0, 1, 2}}),
        "B": member({"topic1", "topic2"}, {"topic1": {3}, "topic2": {0}}),
        "C": member(
            {"topic1", "topic2", "topic3"},
            {"topic1": {4, 5}, "topic2": {1, 2, 3}, "topic3": {0, 1, 2, 3}},
        ),
    }
    result = run("uniform", members, {"topic1": 6, "topic2": 4, "topic3": 4})
    assert result == {
        "A": {"topic1": {0, 1, 2, 5}},
        "B": {"topic1": {3}, "topic2": {0, 1, 2, 3}},
        "C": {"topic1": {4}, "topic3": {0, 1, 2, 3}},
    }


def test_uniform_het_reassignment_when_partitions_are_added():
    """testReassignmentWhenPartitionsAreAddedForTwoMembers."""
    members = {
        "A": member({"topic1", "topic3"}, {"topic1": {0, 1, 2, 3}, "topic3": {0, 1}}),
        "B": member(
            {"topic1", "topic2", "topic3", "topic4"}, {"topic2": {0, 1, 2}, "topic4": {0, 1, 2}}
        ),
    }
    result = run("uniform", members, {"topic1": 6, "topic2": 5, "topic3": 3, "topic4": 3})
    assert result == {
        "A": {"topic1": {0, 1, 2, 3, 4, 5}, "topic3": {0, 1, 2}},
        "B": {"topic2": {0, 1, 2, 3, 4}, "topic4": {0, 1, 2}},
    }


def test_uniform_het_reassignment_when_one_member_and_partitions_added():
    """testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics."""
    members = {
        "A": member({"topic1"}, {"topic1": {0, 2}, "topic2": {0}}),
        "B": member({"topic1", "topic2"}, {"topic1": {1}, "topic2": {1, 2}}),
        "C": member({"topic1", "topic2"}),
    }
    result = run("uniform", members, {"topic1": 6, "topic2": 7})
    assert result == {
        "A": {"topic1": {0, 2, 3, 4, 5}},
        "B": {"topic1": {1}, "topic2": {1, 2, 6}},
        "C": {"topic2": {0, 3, 4, 5}},
    }


def test_uniform_het_reassignment_when_one_member_removed():
    """testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics."""
    members = {
        "A": member({"topic1", "topic3"}, {"topic1": {0, 1, 2}, "topic3": {0, 1}}),
        "B": member({"topic2"}, {"topic2": {3, 4, 5, 6}}),
    }
    result = run("uniform", members, {"topic1": 3, "topic2": 8, "topic3": 3})
    assert result == {
        "A": {"topic1": {0, 1, 2}, "topic3": {0, 1, 2}},
        "B": {"topic2": {0, 1, 2, 3, 4, 5, 6, 7}},
    }


def test_uniform_het_reassignment_when_one_subscription_removed():
    """testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member({"topic1"}, {"topic1": {0, 2}, "topic2": {1, 3}}),
        "B": member({"topic1", "topic2"}, {"topic1": {1}, "topic2": {0, 2, 4}}),
    }
    result = run("uniform", members, {"topic1": 3, "topic2": 5})
    assert result == {"A": {"topic1": {0, 1, 2}}, "B": {"topic2": {0, 1, 2, 3, 4}}}


def test_uniform_het_partitions_run_out_before_balance():
    """testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions (the coordinator's
    subscription type is HETEROGENEOUS although both subscribe to the same topics)."""
    all3 = {"topic1", "topic2", "topic3"}
    members = {
        "A": member(all3, {"topic1": {0, 1}, "topic2": {0, 1}, "topic3": {0, 1}}),
        "B": member(all3),
    }
    result = run("uniform", members, {"topic1": 2, "topic2": 2, "topic3": 2}, HETEROGENEOUS)
    assert result == {
        "A": {"topic2": {0}, "topic3": {0, 1}},
        "B": {"topic1": {0, 1}, "topic2": {1}},
    }


def test_uniform_het_one_member_without_subscriptions():
    """testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions."""
    result = run("uniform", {"A": member({"topic1"}), "B": member(())}, {"topic1": 3})
    assert result == {"A": {"topic1": {0, 1, 2}}, "B": {}}


# ---- range (RangeAssignorTest) ----


def test_range_one_member_no_topic():
    """testOneMemberNoTopic: the member is in the result, with nothing."""
    assert run("range", {"A": member(())}, {"topic1": 3}) == {"A": {}}


def test_range_first_assignment_same_subscriptions():
    """testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions."""
    members = {"A": member({"topic1", "topic3"}), "B": member({"topic1", "topic3"})}
    result = run("range", members, {"topic1": 3, "topic3": 2})
    assert result == {"A": {"topic1": {0, 1}, "topic3": {0}}, "B": {"topic1": {2}, "topic3": {1}}}


def test_range_first_assignment_different_subscriptions():
    """testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions."""
    members = {
        "A": member({"topic1", "topic2"}),
        "B": member({"topic3"}),
        "C": member({"topic2", "topic3"}),
    }
    result = run("range", members, {"topic1": 3, "topic2": 3, "topic3": 2})
    assert result == {
        "A": {"topic1": {0, 1, 2}, "topic2": {0, 1}},
        "B": {"topic3": {0}},
        "C": {"topic2": {2}, "topic3": {1}},
    }


def test_range_more_members_than_partitions():
    """testFirstAssignmentNumMembersGreaterThanNumPartitions."""
    members = {m: member({"topic1", "topic3"}) for m in "ABC"}
    result = run("range", members, {"topic1": 3, "topic3": 2})
    assert result == {
        "A": {"topic1": {0}, "topic3": {0}},
        "B": {"topic1": {1}, "topic3": {1}},
        "C": {"topic1": {2}},
    }


@pytest.mark.parametrize("mixed", [False, True])
def test_range_static_membership(mixed):
    """testStaticMembership / testMixedStaticMembership: a static member that rejoins with a new
    member id gets the same partitions; so do the others."""
    members = {"A": member({"topic1"}, instance_id="instanceA")}
    if mixed:
        members["C"] = member({"topic1"}, instance_id="instanceC")
        members["B"] = member({"topic1"})
    else:
        members["B"] = member({"topic1"}, instance_id="instanceB")
    before = run("range", members, {"topic1": 5 if mixed else 3})
    members["memberA1"] = members.pop("A")
    after = run("range", members, {"topic1": 5 if mixed else 3})
    assert after["memberA1"] == before["A"]
    assert all(after[m] == before[m] for m in members if m != "memberA1")


def test_range_reassignment_more_members_than_partitions_when_one_added():
    """testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded."""
    members = {
        "A": member({"topic1", "topic2"}, {"topic1": {0}, "topic2": {0}}),
        "B": member({"topic1", "topic2"}, {"topic1": {1}, "topic2": {1}}),
        "C": member({"topic1", "topic2"}),
    }
    result = run("range", members, {"topic1": 2, "topic2": 2})
    assert result == {
        "A": {"topic1": {0}, "topic2": {0}},
        "B": {"topic1": {1}, "topic2": {1}},
        "C": {},
    }


def test_range_reassignment_when_one_partition_added():
    """testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics."""
    members = {
        "A": member({"topic1", "topic2"}, {"topic1": {0, 1}, "topic2": {0, 1}}),
        "B": member({"topic1", "topic2"}, {"topic1": {2}, "topic2": {2}}),
    }
    result = run("range", members, {"topic1": 4, "topic2": 4})
    assert result == {
        "A": {"topic1": {0, 1}, "topic2": {0, 1}},
        "B": {"topic1": {2, 3}, "topic2": {2, 3}},
    }


def test_range_reassignment_when_one_member_added():
    """testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member({"topic1", "topic2"}, {"topic1": {0, 1}, "topic2": {0, 1}}),
        "B": member({"topic1", "topic2"}, {"topic1": {2}, "topic2": {2}}),
        "C": member({"topic1", "topic2"}),
    }
    result = run("range", members, {"topic1": 3, "topic2": 3})
    assert result == {
        "A": {"topic1": {0}, "topic2": {0}},
        "B": {"topic1": {1}, "topic2": {1}},
        "C": {"topic1": {2}, "topic2": {2}},
    }


def test_range_reassignment_when_one_member_and_one_partition_added():
    """testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {
        "A": member({"topic1", "topic2"}, {"topic1": {0, 1}, "topic2": {0, 1}}),
        "B": member({"topic1", "topic2"}, {"topic1": {2}, "topic2": {2}}),
        "C": member({"topic1"}),
    }
    result = run("range", members, {"topic1": 4, "topic2": 3})
    assert result == {
        "A": {"topic1": {0, 1}, "topic2": {0, 1}},
        "B": {"topic1": {2}, "topic2": {2}},
        "C": {"topic1": {3}},
    }


def test_range_reassignment_when_one_member_removed():
    """testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"B": member({"topic1", "topic2"}, {"topic1": {2}, "topic2": {2}})}
    assert run("range", members, {"topic1": 3, "topic2": 3}) == {
        "B": {"topic1": {0, 1, 2}, "topic2": {0, 1, 2}}
    }


def test_range_reassignment_when_subscriptions_change():
    """testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {
        "A": member({"topic1"}, {"topic1": {0, 1, 2}, "topic2": {0}}),
        "B": member({"topic1", "topic2", "topic3"}, {"topic2": {1}}),
        "C": member({"topic2"}, {"topic2": {2}, "topic3": {0, 1}}),
    }
    result = run("range", members, {"topic1": 3, "topic2": 3, "topic3": 2})
    assert result == {
        "A": {"topic1": {0, 1}},
        "B": {"topic1": {2}, "topic2": {0, 1}, "topic3": {0, 1}},
        "C": {"topic2": {2}},
    }
