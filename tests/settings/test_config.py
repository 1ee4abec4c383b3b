import os
import re
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT

from mcp_kb.settings import FastembedSettings, build_config, config_for_folder, load_config
from mcp_kb.errors import ConfigError


def _write_toml(tmp_path: Path, text: str) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    path = tmp_path / "kb.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = load_config(_write_toml(tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n'))
    kb = config.kb[0]
    assert kb.search_tool_name == "search_docs"
    assert kb.paths == [(tmp_path / "docs").resolve()]
    assert kb.chunking.max_tokens == 256 and kb.search.mode == "hybrid"


def test_unknown_key_names_file_key_and_suggestion(tmp_path: Path) -> None:
    path = _write_toml(
        tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n[kb.chunking]\nmax_token = 100\n'
    )
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert str(path) in message
    assert "kb[docs].chunking.max_token" in message
    assert "did you mean 'max_tokens'" in message


def test_wrong_type_is_reported_with_key(tmp_path: Path) -> None:
    path = _write_toml(
        tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n[kb.search]\ntop_k = "five"\n'
    )
    with pytest.raises(ConfigError, match=r"kb\[docs\]\.search\.top_k"):
        load_config(path)


def test_web_sources_are_urls_or_tables_and_a_kb_needs_some_source(tmp_path: Path) -> None:
    config = load_config(
        _write_toml(
            tmp_path,
            '[[kb]]\nname = "site"\ndescription = "d"\n'
            'urls = ["https://docs.example.com/guide/", '
            '{url = "https://wiki.example/", max_pages = 50}]\n',
        )
    )
    first, second = config.kb[0].urls
    assert first.url == "https://docs.example.com/guide/" and first.max_pages == 1000 and first.sitemap == "auto"
    assert second.max_pages == 50 and config.kb[0].paths == []
    for body, key in (
        ("", "a knowledge base needs `paths`"),
        ('urls = ["ftp://files.example/"]', r"kb\[site\]\.urls\[0\]\.url: must be an http"),
        ('urls = [{url = "https://x.example/", max_page = 3}]', "did you mean 'max_pages'"),
    ):
        with pytest.raises(ConfigError, match=key):
            load_config(_write_toml(tmp_path, f'[[kb]]\nname = "site"\ndescription = "d"\n{body}\n'))


def test_missing_path_loads_so_an_existing_index_can_still_be_served(tmp_path: Path) -> None:
    path = _write_toml(tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["nowhere"]\n')
    assert load_config(path).kb[0].paths == [tmp_path / "nowhere"]


def test_duplicate_kb_names_are_refused_naming_the_file_and_key_only(tmp_path: Path) -> None:
    kb = '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n'
    with pytest.raises(ConfigError) as error:
        load_config(_write_toml(tmp_path, '[embedding]\nmodel_path = "/private/models/x"\n' + kb + kb))
    assert str(error.value) == f"{tmp_path / 'kb.toml'}: duplicate KB name 'docs': every knowledge base needs its own"


def test_a_single_kb_table_says_to_write_two_brackets(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kb: written as one table \[kb\].*write \[\[kb\]\] \(two brackets\)"):
        load_config(_write_toml(tmp_path, '[kb]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n'))


def test_a_config_without_a_knowledge_base_says_what_to_add(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"kb.toml: no knowledge base: add a \[\[kb\]\] table.*mcp-kb init"):
        load_config(_write_toml(tmp_path, 'storage = "index"\n'))


def test_duplicate_tool_names_are_refused(tmp_path: Path) -> None:
    text = (
        '[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\ntool_name = "search_b"\n'
        '[[kb]]\nname = "b"\ndescription = "d"\npaths = ["docs"]\n'
    )
    with pytest.raises(ConfigError, match="duplicate tool name 'search_b'"):
        load_config(_write_toml(tmp_path, text))


@pytest.mark.parametrize("taken", ["read_document", "list_documents", "search_knowledge_bases", "sync_knowledge_base"])
def test_a_kb_tool_named_like_a_server_tool_is_refused(tmp_path: Path, taken: str) -> None:
    text = f'[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\ntool_name = "{taken}"\n'
    with pytest.raises(ConfigError, match=f"duplicate tool name '{taken}'"):
        load_config(_write_toml(tmp_path, text))


def test_search_tools_takes_one_of_its_four_choices(tmp_path: Path) -> None:
    text = '[server]\nsearch_tools = "all"\n[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\n'
    with pytest.raises(ConfigError, match="search_tools.*'auto', 'each', 'across' or 'both'"):
        load_config(_write_toml(tmp_path, text))


def test_tool_name_breaking_mcp_rules_is_refused(tmp_path: Path) -> None:
    text = '[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\ntool_name = "search docs!"\n'
    with pytest.raises(ConfigError, match="tool-name rule"):
        load_config(_write_toml(tmp_path, text))


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(_write_toml(tmp_path, "[[kb]\nname="))


def test_missing_config_file_says_how_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"absent.toml: config file not found \(`mcp-kb init` writes a starter\)"):
        load_config(tmp_path / "absent.toml")


def test_metadata_field_may_not_shadow_a_column(tmp_path: Path) -> None:
    text = '[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\n[kb.metadata]\npath = "x"\n'
    with pytest.raises(ConfigError, match="reserved"):
        load_config(_write_toml(tmp_path, text))


def test_filter_fields_combine_builtins_static_and_declared(tmp_path: Path) -> None:
    text = (
        '[[kb]]\nname = "a"\ndescription = "d"\npaths = ["docs"]\n[kb.metadata]\ndoc_type = "policy"\n'
        '[kb.filterable.year]\ntype = "integer"\ndescription = "Year"\n'
    )
    types = load_config(_write_toml(tmp_path, text)).kb[0].filter_field_types()
    assert types["doc_type"] == "string" and types["year"] == "integer" and types["path"] == "string"


def test_environment_overrides_model_and_storage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_KB_EMBEDDING_MODEL", "BAAI/bge-small-en-v1.5")
    monkeypatch.setenv("MCP_KB_EMBEDDING_MODEL_PATH", str(tmp_path))
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "elsewhere"))
    config = build_config({}, tmp_path, None)
    assert config.embedding.model == "BAAI/bge-small-en-v1.5"
    assert isinstance(config.embedding, FastembedSettings) and config.embedding.model_path == str(tmp_path)
    assert config.storage.uri == str(tmp_path / "elsewhere")


def test_lancedb_uri_storage_is_kept_as_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_KB_STORAGE", raising=False)
    assert build_config({"storage": "s3://bucket/kb"}, tmp_path, None).storage.uri == "s3://bucket/kb"


def test_storage_is_a_folder_or_a_uri_with_options_read_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_KB_STORAGE", raising=False)
    folder = build_config({"storage": "idx"}, tmp_path, None).storage
    assert folder.uri == str(tmp_path / "idx") and not folder.is_remote and folder.consistency_seconds == 0
    raw = {
        "storage": {
            "uri": "s3://team/kb",
            "options": {"aws_endpoint": "http://127.0.0.1:9000", "aws_secret_access_key": "${TEAM_S3_SECRET}"},
        }
    }
    shared = build_config(raw, tmp_path, None).storage
    assert shared.is_remote and shared.consistency_seconds == 5.0 and shared.lease_seconds == 60
    monkeypatch.setenv("TEAM_S3_SECRET", "from-the-environment")
    assert shared.lancedb_options()["aws_secret_access_key"] == "from-the-environment"
    assert "from-the-environment" not in shared.model_dump_json()  # the config keeps the reference only
    monkeypatch.delenv("TEAM_S3_SECRET")
    with pytest.raises(
        ConfigError,
        match="storage.options.aws_secret_access_key names the environment variable TEAM_S3_SECRET, which is not set",
    ):
        shared.lancedb_options()
    monkeypatch.setenv("MCP_KB_STORAGE", "s3://other/kb")  # the variable overrides the table's uri only
    assert build_config(raw, tmp_path, None).storage.options["aws_endpoint"] == "http://127.0.0.1:9000"
    assert build_config(raw, tmp_path, None).storage.uri == "s3://other/kb"
    with pytest.raises(ConfigError, match=r"storage\.read_consistency"):
        build_config({"storage": {"uri": "s3://a/b", "read_consistency": -1}}, tmp_path, None)


def test_zero_config_serves_one_folder(tmp_path: Path) -> None:
    (tmp_path / "My Docs").mkdir()
    config = config_for_folder(tmp_path / "My Docs")
    assert [kb.name for kb in config.kb] == ["My_Docs"]
    assert config.kb[0].paths == [(tmp_path / "My Docs").resolve()]
    assert config.kb[0].sync.on_start and config.kb[0].sync.watch  # serving a folder needs no sync step


def test_a_folder_named_in_another_script_gets_a_readable_unique_valid_name(tmp_path: Path) -> None:
    names = {}
    for folder in ("团队文档", "团队文件", "会议记录", "Café", "Cafe\u0301", "Пример", "📚", "Notes"):
        (tmp_path / folder).mkdir()
        [kb] = config_for_folder(tmp_path / folder).kb
        names[folder] = kb.name
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", kb.name) and re.fullmatch(
            r"[A-Za-z0-9_.-]{1,128}", kb.search_tool_name
        )
    assert names["团队文档"].startswith("TuanDuiWenDang-") and names["会议记录"].startswith("HuiYiJiLu-")
    assert names["Пример"].startswith("Primer-") and names["Notes"] == "Notes"  # Latin names as they were
    assert len(set(names.values())) == len(names)  # Café written two ways reads alike: the hash keeps them apart


def test_a_folder_named_in_bytes_that_are_not_utf8_is_served_by_a_valid_name(tmp_path: Path) -> None:
    """Its path holds the name's own bytes; the description shows them as text."""
    os.mkdir(os.fsencode(tmp_path) + b"/caf\xe9")
    folder = tmp_path / os.fsdecode(b"caf\xe9")
    [kb] = config_for_folder(folder).kb
    assert re.fullmatch(r"caf-[0-9a-f]{4}", kb.name) and kb.paths == [folder.resolve()]
    assert kb.description == "Documents from the folder 'caf\\xe9'" and kb.sync.on_start


def test_example_config_is_valid_and_points_at_the_bundled_examples() -> None:
    example = ROOT / "kb.toml.example"
    config = load_config(example)
    assert [kb.name for kb in config.kb] == ["product_docs", "policy_docs"]
    assert all(path.is_dir() for kb in config.kb for path in kb.paths)


# ---- properties: any value for any key is either accepted or one ConfigError naming the key ----------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
# Each key with the types a value must have to be accepted (strict: a bool is no number, "5" no integer).
_NUMBER = (int, float)
_ACCEPTS = {
    ("storage",): (str, dict),
    ("embedding", "batch_size"): (int,),
    ("embedding", "threads"): (int, type(None)),
    ("server", "port"): (int,),
    ("server", "transport"): (str,),
    ("server", "allowed_hosts"): (list,),
    ("kb", "name"): (str,),
    ("kb", "description"): (str,),
    ("kb", "paths"): (list,),
    ("kb", "include"): (list,),
    ("kb", "max_file_size_mb"): _NUMBER,
    ("kb", "tool_name"): (str, type(None)),
    ("kb", "metadata"): (dict,),
    ("kb", "filterable"): (dict,),
    ("kb", "chunking", "max_tokens"): (int,),
    ("kb", "chunking", "overlap"): (int,),
    ("kb", "search", "top_k"): (int,),
    ("kb", "search", "mode"): (str,),
    ("kb", "search", "min_score"): _NUMBER,
    ("kb", "sync", "interval"): _NUMBER + (type(None),),
    ("kb", "sync", "max_delete_share"): _NUMBER,
    ("kb", "sync", "debounce"): _NUMBER,
    ("kb", "unknown_key"): (),
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(_ACCEPTS)), value=_values)
def test_any_value_is_refused_with_the_key_named_unless_it_has_the_keys_type(
    tmp_path: Path, key: tuple[str, ...], value: object
) -> None:
    raw: dict[str, Any] = {"kb": [{"name": "docs", "description": "d", "paths": ["docs"]}]}
    node: dict[str, Any] = raw["kb"][0] if key[0] == "kb" else raw
    for part in key[1 if key[0] == "kb" else 0 : -1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value
    try:
        build_config(raw, base_dir=tmp_path, source=None)
    except ConfigError as error:
        assert key[-1] in str(error), str(error)
    else:
        assert type(value) in _ACCEPTS[key], f"{key} accepted {value!r}"


def test_environment_variables_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write_toml(
        tmp_path,
        'storage = "from-file"\n[server]\ntoken = "file-token"\n'
        '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n',
    )
    monkeypatch.setenv("MCP_KB_TOKEN", "env-token")
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "env-index"))
    config = load_config(path)
    assert config.server.token == "env-token" and config.storage.uri == str(tmp_path / "env-index")


def test_mcp_kb_config_names_the_config_commands_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_kb.settings import config_target

    monkeypatch.delenv("MCP_KB_CONFIG", raising=False)
    assert config_target(None) == (Path("kb.toml"), False)
    monkeypatch.setenv("MCP_KB_CONFIG", str(tmp_path / "team.toml"))
    assert config_target(None) == (tmp_path / "team.toml", True)
    assert config_target("other.toml") == (Path("other.toml"), True)


@pytest.mark.parametrize(
    "setting, key",
    [
        ('[kb.search]\ntop_k = "5"\n', r"kb\[docs\]\.search\.top_k: Input should be a valid integer \(got '5'\)"),
        ('[kb.sync]\nwatch = "yes"\n', r"kb\[docs\]\.sync\.watch: Input should be a valid boolean \(got 'yes'\)"),
        ("[kb.sync]\nwatch = 1\n", r"kb\[docs\]\.sync\.watch: Input should be a valid boolean \(got 1\)"),
    ],
)
def test_values_of_the_wrong_type_are_refused_not_guessed(tmp_path: Path, setting: str, key: str) -> None:
    path = _write_toml(tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n' + setting)
    with pytest.raises(ConfigError, match=key):
        load_config(path)


def test_one_value_where_a_list_is_wanted_shows_the_line_to_write(tmp_path: Path) -> None:
    """`paths = "./docs"` was refused with `Input should be a valid list`: the error shows the fix, and never
    echoes a value that may be a secret."""
    path = _write_toml(
        tmp_path,
        '[[kb]]\nname = "docs"\ndescription = "d"\npaths = "./文档"\ninclude = "*.md"\n[server]\ntokens = "s3cret"\n',
    )
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    said = str(refused.value)
    assert 'kb[docs].paths: a list is wanted, even of one: write paths = ["./文档"]' in said
    assert 'kb[docs].include: a list is wanted, even of one: write include = ["*.md"]' in said
    assert "server.tokens: Input should be a valid list" in said and "s3cret" not in said


def test_nested_keys_get_a_suggestion_too(tmp_path: Path) -> None:
    path = _write_toml(
        tmp_path, '[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["docs"]\n[kb.filterable.year]\ntyp = "integer"\n'
    )
    with pytest.raises(ConfigError, match=r"unknown key 'kb\[docs\]\.filterable\.year\.typ'; did you mean 'type'\?"):
        load_config(path)


def test_an_embedding_service_needs_its_address_and_model_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_KB_EMBEDDING_MODEL", raising=False)
    with pytest.raises(ConfigError, match='provider "openai" needs base_url'):
        build_config({"embedding": {"provider": "openai", "model": "text-embedding-3-small"}}, tmp_path, None)
    with pytest.raises(ConfigError, match='provider "openai" needs model'):
        build_config({"embedding": {"provider": "openai", "base_url": "http://localhost:11434/v1"}}, tmp_path, None)
    with pytest.raises(ConfigError, match="provider"):
        build_config({"embedding": {"provider": "cohere"}}, tmp_path, None)


def test_the_local_model_folder_variable_leaves_an_embedding_service_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_KB_EMBEDDING_MODEL_PATH", str(tmp_path))
    service = build_config(
        {"embedding": {"provider": "openai", "base_url": "http://localhost:11434/v1", "model": "nomic-embed-text"}},
        tmp_path,
        None,
    ).embedding
    assert getattr(service, "model_path", None) is None  # a service has no local model folder
    local = build_config({}, tmp_path, None).embedding
    assert isinstance(local, FastembedSettings) and local.model_path == str(tmp_path.resolve())


def test_a_home_folder_of_an_unknown_user_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"storage = '~no-such-user-x9/index': cannot expand '~'"):
        build_config({"storage": "~no-such-user-x9/index"}, tmp_path, None)
    with pytest.raises(ConfigError, match=r"\[\[kb\]\] docs: paths"):
        build_config({"kb": [{"name": "docs", "description": "d", "paths": ["~no-such-user-x9/docs"]}]}, tmp_path, None)


# ---- errors never echo secrets ----------------------------------------------------------------

SECRETS = {"token": "tok-PLANTED-1", "option": "aws-PLANTED-2", "header": "hdr-PLANTED-3", "key": "sk-PLANTED-4"}
_SECRET_BLOCKS = f"""
[storage]
uri = "index"
[storage.options]
aws_secret_access_key = "{SECRETS["option"]}"
[server]
token = "{SECRETS["token"]}"
"""
_KB = f"""
[[kb]]
name = "docs"
description = "d"
paths = ["."]
urls = [{{url = "https://docs.example.com/", headers = {{Authorization = "Bearer {SECRETS["header"]}"}}}}]
"""
BROKEN_CONFIGS = {
    "duplicate KB name": _SECRET_BLOCKS + _KB + _KB,
    "a table where a header value goes": _SECRET_BLOCKS
    + _KB.replace(f'"Bearer {SECRETS["header"]}"', f'{{value = "{SECRETS["header"]}"}}'),
    "a number among the storage options": _SECRET_BLOCKS.replace(
        "[server]", f'region = 1\naws_session_token = ["{SECRETS["option"]}"]\n[server]'
    )
    + _KB,
    "a bad header name": _SECRET_BLOCKS + _KB.replace("Authorization =", '"Bad Header" ='),
    "an unknown server key": _SECRET_BLOCKS.replace("[server]", "[server]\ntokn = 1") + _KB,
    "a KB without description": _SECRET_BLOCKS + _KB.replace('description = "d"\n', ""),
    "[kb] instead of [[kb]]": _SECRET_BLOCKS + _KB.replace("[[kb]]", "[kb]"),
    "an embedding service without base_url": _SECRET_BLOCKS
    + _KB
    + f"""
[embedding]
provider = "openai"
model = "m"
headers = {{X-Key = "{SECRETS["key"]}"}}
""",
}


@pytest.mark.parametrize("problem", list(BROKEN_CONFIGS))
@pytest.mark.parametrize("command", [["status"], ["sync"], ["serve"], ["check"]])
def test_config_errors_name_the_problem_and_never_echo_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem: str, command: list[str]
) -> None:
    from click.testing import CliRunner

    from mcp_kb import cli

    monkeypatch.setenv("MCP_KB_TOKEN", SECRETS["token"])
    path = tmp_path / "kb.toml"
    path.write_text(BROKEN_CONFIGS[problem], encoding="utf-8")
    result = CliRunner().invoke(cli.main, [*command, "-c", str(path)])
    assert result.exit_code == 1 and "Error:" in result.output and str(path) in result.output, result.output
    assert not [name for name, secret in SECRETS.items() if secret in result.output], result.output


def test_a_header_value_read_from_the_environment_loses_its_edge_whitespace(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_kb.settings import header_value

    monkeypatch.setenv("WIKI_TOKEN", "  s3cr3t\t ")
    assert header_value("Bearer ${WIKI_TOKEN}", "urls.headers.Authorization") == "Bearer   s3cr3t"


def test_every_environment_variable_the_code_reads_is_in_the_operations_pages_table() -> None:
    import re

    import mcp_kb.settings.variables as environment

    declared = {value for name, value in vars(environment).items() if name.startswith("ENV_")}
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")  # its one table: the variables
    listed = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", page))
    assert declared and declared <= listed, f"missing from docs/operations.md: {sorted(declared - listed)}"


def test_a_command_s_engine_and_cluster_override_the_sync_settings_and_a_cluster_named_means_ray() -> None:
    from mcp_kb.settings import SyncEngineConfig

    settings = SyncEngineConfig(wave_files=64)
    assert settings.overridden(None, None) == settings
    assert settings.overridden(None, "head:6379").model_dump(include={"engine", "ray_address", "wave_files"}) == {
        "engine": "ray",
        "ray_address": "head:6379",
        "wave_files": 64,
    }
    assert settings.overridden("local", "head:6379").engine == "local"
    assert SyncEngineConfig(engine="ray", ray_address="a:1").overridden(None, None).ray_address == "a:1"


def test_library_versions_have_their_own_paths_a_default_and_clear_errors(tmp_path: Path) -> None:
    head = '[[kb]]\nname = "lib"\ndescription = "d"\n'
    config = load_config(
        _write_toml(
            tmp_path,
            head + '[[kb.versions]]\nname = "0.110"\npaths = ["docs"]\n'
            '[[kb.versions]]\nname = "0.116"\npaths = ["docs"]\n',
        )
    )
    kb = config.kb[0]
    assert [v.name for v in kb.versions] == ["0.110", "0.116"] and kb.default_version == "0.116"  # the last listed
    assert kb.versions[0].paths == [(tmp_path / "docs").resolve()]  # relative to the file, as the KB's own
    current = load_config(
        _write_toml(
            tmp_path,
            head + '[[kb.versions]]\nname = "2.x"\npaths = ["docs"]\n'
            'current = true\n[[kb.versions]]\nname = "3.0-beta"\n'
            'paths = ["docs"]\n',
        )
    )
    assert current.kb[0].default_version == "2.x"  # never guessed from the names
    for body, said in (
        ('paths = ["docs"]\n[[kb.versions]]\nname = "1"\npaths = ["docs"]\n', "gives each version its own"),
        (
            '[[kb.versions]]\nname = "1"\npaths = ["docs"]\n[[kb.versions]]\nname = "1"\npaths = ["docs"]\n',
            "versions must have different names",
        ),
        (
            '[[kb.versions]]\nname = "a"\npaths = ["docs"]\ncurrent = true\n[[kb.versions]]\nname = "b"\n'
            'paths = ["docs"]\ncurrent = true\n',
            "at most one version `current = true`",
        ),
        ('[[kb.versions]]\nname = "1/2"\npaths = ["docs"]\n', "'1/2' must be 1-64 letters, digits"),
        ('[[kb.versions]]\nname = "1"\n', "version '1' needs `paths`"),
    ):
        with pytest.raises(ConfigError, match=said):
            load_config(_write_toml(tmp_path, head + body))
