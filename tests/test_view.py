"""The caller's view: what one grant may see, decided once (the faces' tests check it end to end)."""

import pytest

from mcp_kb.access import Grant, Identity
from mcp_kb.errors import KBError
from mcp_kb.view import CallerView

NAMES = ("policy_docs", "api_docs", "runbooks")


@pytest.fixture
def config(make_config):
    return make_config(*({"name": name, "description": name, "paths": ["docs"]} for name in NAMES))


def test_a_sync_reaches_only_the_kbs_the_caller_may_sync(config):
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"runbooks", "api_docs"}), frozenset({"runbooks"})))
    assert ops.syncable(None) == ["runbooks"] and CallerView.owner(config).syncable(None) == [None]
    with pytest.raises(KBError, match="may search api_docs but not sync it"):
        ops.syncable("api_docs")
    with pytest.raises(KBError, match="unknown knowledge base 'policy_docs'; configured: api_docs, runbooks"):
        ops.syncable("policy_docs")


def test_a_hidden_kb_and_its_tool_are_absent_and_an_unknown_tool_is_left_to_the_server(config):
    hr = CallerView(config, Grant(Identity("token", "hr"), frozenset({"policy_docs"})))
    assert hr.names == ("policy_docs",) and [kb.name for kb in hr.kbs] == ["policy_docs"]
    assert hr.sees_tool("search_policy_docs") and not hr.sees_tool("search_api_docs")
    assert not hr.sees_tool("sync_knowledge_base")  # no sync right: no sync tool
    assert hr.sees_tool("search_nosuch")  # the server answers it as a tool it does not have
    with pytest.raises(KBError) as hidden:
        hr.kb("api_docs")
    with pytest.raises(KBError) as absent:
        hr.kb("nosuch")
    assert str(hidden.value).replace("api_docs", "X") == str(absent.value).replace("nosuch", "X")


def test_where_the_index_lives_is_said_to_the_owner_only(config):
    from mcp_kb.errors import NotSyncedError

    error = NotSyncedError("api_docs", "/srv/mcp-kb/index")
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"api_docs"})))
    assert "in the index at /srv/mcp-kb/index" in CallerView.owner(config).explain(error)
    assert "/srv/mcp-kb" not in ops.explain(error) and "has not been synced yet" in ops.explain(error)
