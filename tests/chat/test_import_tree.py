"""`imports.records.tree_records`: a source's message tree as the rows the app's tree needs (pure, no
database): every branch kept, each message after its parent, the active path to the leaf, each hidden
branch one chain tagged with its first message."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatapp.chat.imports.records import ConversationError, MessageRecord, TreeNode, tree_records


@st.composite
def trees(draw):
    """Random trees: node k's parent is an earlier node (or none); some nodes are not stored."""
    n = draw(st.integers(min_value=1, max_value=30))
    nodes = {}
    for k in range(n):
        parent = draw(st.one_of(st.none(), st.integers(0, k - 1))) if k else None
        stored = draw(st.booleans())
        role = "user" if k % 2 == 0 else "assistant"
        nodes[f"n{k}"] = TreeNode(
            parent=None if parent is None else f"n{parent}",
            record=MessageRecord(role=role, content=f"text {k}") if stored or k == n - 1 else None,
            stamp=float(draw(st.integers(0, 5))),
        )
    leaf = draw(st.one_of(st.none(), st.sampled_from(sorted(nodes))))
    return nodes, leaf


def _stored_ancestor(nodes, key):
    key = nodes[key].parent
    while key is not None and nodes[key].record is None:
        key = nodes[key].parent
    return key


@given(trees())
def test_rows_follow_their_parents_and_hidden_branches_are_chains(tree):
    nodes, leaf = tree
    out = tree_records(nodes, leaf)
    refs = [r.ref for r in out]
    assert sorted(refs) == sorted(k for k, n in nodes.items() if n.record is not None)  # every stored one, once
    place = {ref: i for i, ref in enumerate(refs)}
    for r in out:
        parent = r.links.get("parent")
        assert parent == _stored_ancestor(nodes, r.ref)
        if parent is not None:
            assert place[parent] < place[r.ref]  # a path read in id order is the path
    active = [r for r in out if not r.superseded]
    assert active  # something is always shown
    # the active path is one chain from a root down
    assert active[0].links.get("parent") is None
    for a, b in itertools.pairwise(active):
        assert b.links["parent"] == a.ref
    assert all("off_path_by" not in r.links for r in active)
    # each hidden branch: a chain under its first message, which hangs from the path or another branch
    by_tag: dict[str, list[MessageRecord]] = {}
    for r in out:
        if r.superseded:
            by_tag.setdefault(r.links["off_path_by"], []).append(r)
    for tag, rows in by_tag.items():
        assert rows[0].ref == tag
        for a, b in itertools.pairwise(rows):
            assert b.links["parent"] == a.ref


def test_the_leaf_names_the_active_path_and_siblings_become_branches():
    def node(parent, role, stamp, stored=True):
        return TreeNode(parent=parent, record=MessageRecord(role=role, content=role) if stored else None, stamp=stamp)

    nodes = {
        "root": node(None, "system", 0, stored=False),
        "u1": node("root", "user", 1), "a1": node("u1", "assistant", 2),
        "u2a": node("a1", "user", 3), "a2a": node("u2a", "assistant", 4),
        "u2b": node("a1", "user", 5), "tool": node("u2b", "assistant", 6, stored=False),
        "a2b": node("tool", "assistant", 7), "a2b2": node("tool", "assistant", 8),
    }
    out = {r.ref: r for r in tree_records(nodes, "a2b")}
    assert list(out) == ["u1", "a1", "u2a", "a2a", "u2b", "a2b", "a2b2"]
    assert [k for k, r in out.items() if not r.superseded] == ["u1", "a1", "u2b", "a2b"]
    assert out["a2b"].links == {"parent": "u2b", "reply_to": "u2b"}  # the tool call hands its place up
    assert out["u2a"].links["off_path_by"] == out["a2a"].links["off_path_by"] == "u2a"
    assert out["a2b2"].links == {"parent": "u2b", "reply_to": "u2b", "off_path_by": "a2b2"}


@pytest.mark.parametrize("leaf", [None, 7, ["b2"], {"id": "b2"}, "nowhere"])
def test_a_leaf_that_is_not_a_known_id_shows_the_newest_message(leaf):
    # The leaf is the source's value as the file has it: a number, a list or an object names nothing.
    nodes = {"a": TreeNode(parent=None, record=MessageRecord(role="user", content="a"), stamp=1.0),
             "b1": TreeNode(parent="a", record=MessageRecord(role="assistant", content="b1"), stamp=3.0),
             "b2": TreeNode(parent="a", record=MessageRecord(role="assistant", content="b2"), stamp=2.0)}
    out = {r.ref: r for r in tree_records(nodes, leaf)}
    assert [k for k, r in out.items() if not r.superseded] == ["a", "b1"]
    assert out["b2"].links["off_path_by"] == "b2"


def test_a_thousands_deep_tree_is_walked_without_recursion():
    nodes = {f"m{k}": TreeNode(parent=f"m{k - 1}" if k else None,
                               record=MessageRecord(role="user" if k % 2 == 0 else "assistant", content="x"),
                               stamp=float(k)) for k in range(20_000)}
    out = tree_records(nodes, None)  # no leaf named: the newest message
    assert len(out) == 20_000 and not any(r.superseded for r in out)


def test_a_loop_in_the_tree_is_an_error_not_a_hang():
    def node(parent, stored=True):
        return TreeNode(parent=parent, record=MessageRecord(role="user", content="x") if stored else None, stamp=0.0)

    for nodes in ({"a": node("b"), "b": node("a")},  # two stored messages naming each other
                  {"a": node("b"), "b": node("c", stored=False), "c": node("a")},
                  {"r": node(None), "a": node("a")}):  # its own parent
        for leaf in (None, "a"):
            with pytest.raises(ConversationError, match="loops back"):
                tree_records(nodes, leaf)
