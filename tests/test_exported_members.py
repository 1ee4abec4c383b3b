import mcp_kb


def test_all_lists_exactly_the_public_names():
    assert sorted(mcp_kb.__all__) == sorted([
        "App", "Config", "KBConfig", "load_config", "config_for_folder", "KBError", "ConfigError", "ParseError",
        "ModelError", "StoreError", "SyncBusyError", "MassDeleteError", "SearchError", "SyncReport", "SearchResult", "Hit",
        "build_server", "__version__",
    ])


def test_every_public_name_resolves():
    for name in mcp_kb.__all__:
        assert getattr(mcp_kb, name) is not None


def test_errors_share_one_base():
    for name in ("ConfigError", "ParseError", "ModelError", "StoreError", "SyncBusyError", "MassDeleteError",
                 "SearchError"):
        assert issubclass(getattr(mcp_kb, name), mcp_kb.KBError)
