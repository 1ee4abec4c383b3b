"""The caller's view: what one grant may see, decided once (the faces' tests check it end to end)."""

from pathlib import Path

import pytest

from mcp_kb.access import Grant, Identity
from mcp_kb.errors import KBError
from mcp_kb.settings import Config
from mcp_kb.view import CallerView
from helpers import MakeConfig

NAMES = ("policy_docs", "api_docs", "runbooks")


@pytest.fixture
def config(make_config: MakeConfig) -> Config:
    return make_config(*({"name": name, "description": name, "paths": ["docs"]} for name in NAMES))


def test_a_sync_reaches_only_the_kbs_the_caller_may_sync(config: Config) -> None:
    ops = CallerView(
        config, Grant(Identity("token", "ops"), frozenset({"runbooks", "api_docs"}), frozenset({"runbooks"}))
    )
    assert ops.syncable(None) == ["runbooks"] and CallerView.owner(config).syncable(None) == [None]
    with pytest.raises(KBError, match="may search api_docs but not sync it"):
        ops.syncable("api_docs")
    with pytest.raises(KBError, match="unknown knowledge base 'policy_docs'; configured: api_docs, runbooks"):
        ops.syncable("policy_docs")


def test_a_hidden_kb_and_its_tool_are_absent_and_an_unknown_tool_is_left_to_the_server(config: Config) -> None:
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


def test_whose_project_a_kb_is_is_said_to_the_owner_only(config: Config) -> None:
    """The refusal of a sync into another project's KB names both kb.toml files to the owner, neither to a caller."""
    from mcp_kb.errors import OwnedElsewhereError

    error = OwnedElsewhereError("api_docs", "/home/ann/alpha/kb.toml", "/home/ann/beta/kb.toml")
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"api_docs"}), frozenset({"api_docs"})))
    assert "another project (/home/ann/alpha/kb.toml)" in CallerView.owner(config).explain(error)
    assert "/home/ann" not in ops.explain(error) and "give this project an index of its own" in ops.explain(error)


def test_where_the_index_lives_is_said_to_the_owner_only(config: Config) -> None:
    from mcp_kb.errors import NotSyncedError

    error = NotSyncedError("api_docs", "/srv/mcp-kb/index")
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"api_docs"})))
    assert "in the index at /srv/mcp-kb/index" in CallerView.owner(config).explain(error)
    assert "/srv/mcp-kb" not in ops.explain(error) and "has not been synced yet" in ops.explain(error)


@pytest.mark.parametrize(
    "storage, said_by_lance",
    [
        (
            "s3://team-bucket/kb-index",
            "Generic S3 error: team-bucket/kb-index/api_docs__chunks.lance/_versions/3.manifest",
        ),
        ("/srv/mcp-kb/index", "LocalFileSystem: srv/mcp-kb/index/api_docs__chunks.lance/data/x.lance: not found"),
    ],
)
def test_a_remote_caller_reads_where_the_index_and_the_cluster_are_as_what_they_are(
    make_config: MakeConfig, storage: str, said_by_lance: str
) -> None:
    """The index's storage (also as Lance prints it: no scheme, no leading slash), its endpoint and the Ray
    cluster's address are the owner's to read; a token's holder reads <storage> and <Ray cluster>."""
    from mcp_kb.errors import StoreError

    config = make_config(
        {"name": "api_docs", "description": "d", "paths": ["docs"]},
        storage={"uri": storage, "options": {"aws_endpoint": "http://10.1.2.3:9000", "allow_http": "true"}},
        sync={"ray_address": "ray://10.9.8.7:10001"},
    )
    errors = [
        StoreError(f"the index at {storage} could not be written (chunks): {said_by_lance}"),
        KBError("cannot join the Ray cluster at ray://10.9.8.7:10001: nothing answers there"),
        StoreError("cannot open the index: dispatch failure connecting to http://10.1.2.3:9000/ (true)"),
    ]
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"api_docs"})))
    owner = CallerView.owner(config)
    assert [owner.explain(error) for error in errors] == [str(error) for error in errors]
    said = [ops.explain(error) for error in errors]
    assert not any(place in text for text in said for place in ("team-bucket", "srv/mcp-kb", "10.9.8.7", "10.1.2"))
    assert said[0].startswith("the index at <storage> could not be written (chunks)")
    assert "<storage>/api_docs__chunks.lance" in said[0]
    assert said[1] == "cannot join the Ray cluster at <Ray cluster>: nothing answers there"
    assert said[2].endswith("connecting to <storage>/ (true)")  # a short option value ("true") is no place


def test_a_remedy_a_remote_caller_reads_names_neither_the_storage_nor_the_config_file(
    config: Config, tmp_path: Path
) -> None:
    """A server started as `MCP_KB_STORAGE=… mcp-kb serve -c FILE` words its remedies as that command: the owner
    reads it to paste; a token's holder reads the command with <storage> and <kb.toml> in those places."""
    from mcp_kb.errors import NotSyncedError
    from mcp_kb.vocabulary import remember_invocation

    config = config.model_copy(update={"source": tmp_path / "kb.toml"})
    remember_invocation(config=tmp_path / "kb.toml", variables={"MCP_KB_STORAGE": config.storage.uri})
    error = NotSyncedError("api_docs", config.storage.uri)
    ops = CallerView(config, Grant(Identity("token", "ops"), frozenset({"api_docs"})))
    assert f"MCP_KB_STORAGE={config.storage.uri} mcp-kb sync api_docs -c {tmp_path / 'kb.toml'}" in CallerView.owner(
        config
    ).explain(error)
    said = ops.explain(error)
    assert str(tmp_path) not in said and "run `MCP_KB_STORAGE=<storage> mcp-kb sync api_docs -c <kb.toml>`" in said
