"""Loading a config: a kb.toml, a folder alone (zero-config), the starter `mcp-kb init` writes, the
environment's overrides, and the paths resolved against the file's folder."""

from __future__ import annotations

import logging
import tomllib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import tomli_w
from anyascii import anyascii
from pydantic import BaseModel, ValidationError

from ..digest import short_key
from ..errors import ConfigError
from ..text import is_text, name_text, printable
from ..registry import load_plugins
from .config import Config
from .variables import ENV_CONFIG, cache_root, data_root, environment
from .explain import chosen_settings, explain
from .kb import KBConfig, RepoConfig
from .providers import DEFAULT_PROVIDER, EMBEDDING_PROVIDERS
from .server import ServerConfig
from .sync import SyncEngineConfig
from .storage import StorageConfig
from .values import KB_NAME_LENGTH, in_name_chars


log = logging.getLogger(__name__)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a kb.toml; relative paths are relative to the file's folder."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found (`mcp-kb init` writes a starter)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    config = build_config(raw, base_dir=path.parent.resolve(), source=path)
    if not config.kb:
        raise ConfigError(
            f"{path}: no knowledge base: add a [[kb]] table with name, description and paths "
            f"(`mcp-kb init` writes a commented starter)"
        )
    return config


def config_for_folder(folder: str | os.PathLike[str]) -> Config:
    """Zero-config: one KB for a single folder, synced at start and on every change.

    Each folder gets its own index (unless MCP_KB_STORAGE names one), so two folders named
    `docs` never meet.
    """
    folder = Path(folder).resolve()
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    name = kb_name_for(folder)
    key = short_key(os.fsencode(folder), 8)
    raw = {
        "storage": str(data_root() / "folders" / f"{name}-{key}"),
        "kb": [
            {
                "name": name,
                "description": _description_for(folder),
                "paths": [str(folder)],
                "sync": {"on_start": True, "watch": True},
            }
        ],
    }
    return build_config(raw, base_dir=folder, source=None)


def kb_name_for(folder: Path) -> str:
    """A valid KB name made from a folder's name: letters of other scripts spelled in Latin ones (团队文档:
    TuanDuiWenDang), then with a short hash of the folder's own name, so names that read alike (homophones,
    dropped accents) never meet as tool names in one client."""
    own = folder.name
    latin = anyascii(own)
    name = in_name_chars(latin)
    if latin != own:
        # os.fsencode: the name's own bytes, also when they are not UTF-8 (`caf\xe9`, which Python holds as a
        # surrogate that .encode() refuses); the same bytes as .encode() for every name that is text
        name = f"{(name.strip('_') or 'docs')[: KB_NAME_LENGTH - 5]}-{short_key(os.fsencode(own), 4)}"
    return name[:KB_NAME_LENGTH] or "docs"


def _description_for(folder: Path) -> str:
    """The description a KB over `folder` starts with."""
    return f"Documents from the folder '{name_text(folder.name)}'"


def starter_config(folder: str, base_dir: Path) -> tuple[str, KBConfig]:
    """The commented starter kb.toml `mcp-kb init` writes, with one KB over `folder`, and that KB as
    loaded from it (validated before anything is written)."""
    from importlib.resources import files

    if not is_text(folder):  # TOML holds only text: a path in other bytes cannot be written, nor read back
        raise ConfigError(
            f"{printable(folder)}: the folder's path is not UTF-8 text, which kb.toml cannot hold: "
            f"rename the folder, or serve it without a kb.toml (mcp-kb serve FOLDER)"
        )
    where = (base_dir / folder).resolve()
    values = {"name": kb_name_for(where), "description": _description_for(where), "folder": folder}
    template = files("mcp_kb").joinpath("starter.toml").read_text(encoding="utf-8")
    text = template.format(**{key: _toml_string(value) for key, value in values.items()})
    [kb] = build_config(tomllib.loads(text), base_dir, None).kb
    return text, kb


def _toml_string(value: str) -> str:
    """`value` as a TOML string, escaped as TOML escapes (JSON's differ: it leaves DEL bare, which TOML refuses)."""
    return tomli_w.dumps({"v": value}).removeprefix("v = ").rstrip("\n")


def write_starter(folder: str, target: Path) -> KBConfig:
    """Write the starter kb.toml over `folder` to `target` (never over an existing file); its KB."""
    text, kb = starter_config(folder, target.parent.resolve())
    try:
        # O_EXCL refuses any existing path, a link too, even one to nowhere (which a plain write would follow)
        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise ConfigError(_left_as_it_is(target)) from None
    except OSError as exc:
        raise ConfigError(f"cannot write {printable(str(target))}: {printable(str(exc))}") from exc
    try:
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
    except OSError as exc:
        target.unlink(missing_ok=True)  # a half-written starter would be refused as existing by the next `init`
        raise ConfigError(f"cannot write {printable(str(target))}: {printable(str(exc))}") from exc
    return kb


def _left_as_it_is(target: Path) -> str:
    """Why `init` leaves `target` alone."""
    if target.is_symlink() and not target.exists():
        return (
            f"{printable(str(target))} is a link to {printable(os.readlink(target))}, which does not exist, and is left as it is (init "
            f"never writes through a link): remove it, or pass --config OTHER.toml"
        )
    return f"{printable(str(target))} exists and is left as it is: edit it, or pass --config OTHER.toml"


def config_target(given: str | None) -> tuple[Path, bool]:
    """The kb.toml or folder a command uses: the one given, else $MCP_KB_CONFIG, else ./kb.toml.
    Returns the path and whether it was named (by the option or the variable)."""
    named = given or environment(ENV_CONFIG)
    return Path(named or "kb.toml").expanduser(), bool(named)


def build_config(raw: Mapping[str, object], base_dir: Path, source: Path | None) -> Config:
    """Validate a parsed TOML mapping; environment variables override model and storage."""
    load_plugins()  # a plugin's provider or source kind is known before its settings are checked
    raw = _apply_environment(raw)
    where = str(source) if source else "config"
    try:
        config = Config.model_validate({**raw, "source": source})
    except ValidationError as exc:
        raise ConfigError(explain(exc, raw, where)) from None
    # A path that does not exist is not an error here: an unmounted share must not stop the server
    # from serving the index it has. Syncs report it (and keep the index); `mcp-kb check` shows it.
    return _resolve_paths(config, base_dir)


def _apply_environment(given: Mapping[str, object]) -> dict[str, object]:
    """Environment variables override the file: each setting declared with `_env(NAME)` takes NAME's value."""
    raw = dict(given)
    if isinstance(raw.get("storage"), str):
        raw["storage"] = {"uri": raw["storage"]}
    for section, model in (
        ("storage", StorageConfig),
        ("server", ServerConfig),
        ("sync", SyncEngineConfig),
        ("embedding", chosen_settings(EMBEDDING_PROVIDERS, DEFAULT_PROVIDER, raw.get("embedding"))),
    ):
        table = raw.get(section, {})
        if model is None or not isinstance(table, dict):
            continue  # a malformed section or an unknown provider is reported by validation
        for key, declared in model.model_fields.items():
            extra = declared.json_schema_extra
            value = environment(str(extra.get("env") or "")) if isinstance(extra, dict) else ""
            if value:
                raw[section] = table = {**table, key: value}
    return raw


def _resolve_paths(config: Config, base_dir: Path) -> Config:
    def absolute(value: str | Path, key: str) -> Path:
        try:
            return (base_dir / Path(value).expanduser()).resolve()
        except RuntimeError as exc:  # "~name" of a user this machine does not have
            raise ConfigError(
                f"{key} = {str(value)!r}: cannot expand '~' ({exc}); write the folder out in full"
            ) from exc

    def absolute_paths(paths: list[Path], key: str) -> list[Path]:
        return [absolute(path, key) for path in paths]

    def absolute_repos(repos: list[RepoConfig], key: str) -> list[RepoConfig]:
        return [
            repo.model_copy(update={"url": str(absolute(repo.local_path, key))}) if repo.local_path else repo
            for repo in repos
        ]

    kbs = [
        kb.model_copy(
            update={
                "paths": absolute_paths(kb.paths, f"[[kb]] {kb.name}: paths"),
                "repos": absolute_repos(kb.repos, f"[[kb]] {kb.name}: repos"),
                "versions": [
                    version.model_copy(
                        update={
                            "paths": absolute_paths(version.paths, f"[[kb]] {kb.name}: version {version.name}: paths"),
                            "repos": absolute_repos(version.repos, f"[[kb]] {kb.name}: version {version.name}: repos"),
                        }
                    )
                    for version in kb.versions
                ],
            }
        )
        for kb in config.kb
    ]
    storage = config.storage
    if not storage.is_remote:
        storage = storage.model_copy(update={"uri": str(absolute(storage.uri, "storage"))})
    if storage.read_cache_dir:
        storage = storage.model_copy(
            update={"read_cache_dir": str(absolute(storage.read_cache_dir, "[storage] read_cache_dir"))}
        )
    _keep_out_written_folders(kbs, storage)
    providers = {
        section: _with_absolute_paths(getattr(config, section), section, absolute)
        for section in ("embedding", "rerank")
    }
    server = config.server
    if server.audit_log:
        server = server.model_copy(update={"audit_log": str(absolute(server.audit_log, "[server] audit_log"))})
    return config.model_copy(update={"kb": kbs, "storage": storage, "server": server, **providers})


def _with_absolute_paths(settings: BaseModel, section: str, absolute: Callable[[str, str], Path]) -> BaseModel:
    """A provider's settings with its local files (the settings named *_path) resolved."""
    paths = {
        key: str(absolute(value, f"{section}.{key}"))
        for key in type(settings).model_fields
        if key.endswith("_path") and (value := getattr(settings, key))
    }
    return settings.model_copy(update=paths)


def _keep_out_written_folders(kbs: list[KBConfig], storage: StorageConfig) -> None:
    """Tell each KB where mcp-kb writes, so its index, caches and query logs never come back as
    documents (they hold users' past queries), and warn about an index kept among the documents."""
    written = (
        [cache_root(), data_root()]
        + ([] if storage.is_remote else [Path(storage.uri)])
        + ([Path(storage.read_cache_dir)] if storage.read_cache_dir else [])
    )
    folders = tuple(Path(os.path.realpath(folder)) for folder in written)
    for kb in kbs:
        kb._written_folders = folders
        for root in [*kb.paths, *(path for version in kb.versions for path in version.paths)]:
            if not storage.is_remote and Path(storage.uri).is_relative_to(root):
                log.warning(
                    "the index folder %s is inside knowledge base %r's path %s: it is never indexed, but "
                    "keeping it outside the documents is safer (a copy of the folder takes it along)",
                    storage.uri,
                    kb.name,
                    root,
                )
