"""`[sync]`: how this machine runs a sync: the processes that parse and chunk files, and what one file may
cost them, or the Ray cluster that parses, chunks and embeds (per-KB triggers are `[kb.sync]`)."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator

from ..errors import ConfigError
from ..text import is_number
from .values import Strict
from .variables import ENV_RAY_ADDRESS, environment, from_environment

FILE_SECONDS = 120.0  # parsing and chunking one file, by default
# A worker costs about 0.3 s of CPU to start, what parsing a few ordinary files costs: a small sync starts
# one worker for this many files to parse.
FILES_PER_WORKER = 8
FILE_MEMORY_MB = 2048  # address space one file may make a worker map beyond idle (OCR of a scan maps ~1 GB)
# Files a Ray sync commits at once: enough to keep a cluster's workers busy between two commits, few enough that a
# lost coordinator costs little work.
WAVE_FILES = 1024
RAY_OPTION = "--address"  # `mcp-kb sync`'s option that names the cluster
RAY_CLIENT = "ray://"  # the scheme of a Ray Client server's address; an address without one is a head node's (GCS)
# A host name's label (compose services have "_"), an IPv4 address's number too; DNS's limits, which Python's
# resolver enforces with a UnicodeError.
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,63}")
_NAME_CHARACTERS = 253
_IPV6_CHARACTERS = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")
_RAY_FORMS = 'write HOST:PORT (a head node, port 6379 unless changed), ray://HOST:PORT (Ray Client, 10001) or "auto"'


@dataclass(frozen=True)
class RayAddress:
    """A Ray cluster's address as Ray takes it: a head node's (its GCS) or a Ray Client server's."""

    host: str  # an IPv6 address in its brackets
    port: int
    client: bool

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{RAY_CLIENT if self.client else ''}{self.target}"


def parse_ray_address(text: str) -> RayAddress:
    """The cluster `text` names; ValueError saying what is wrong otherwise. Ray takes nearly any text and then
    waits for it without end (`host:-1`, `http://...`), so the form is checked here."""
    if "@" in text:  # user:password@host is no form Ray takes, and what is before the @ may be a secret
        raise ValueError("Ray takes no user name or password in the address (a cluster's token goes in RAY_AUTH_TOKEN)")
    scheme, has_scheme, rest = text.partition("://")
    if has_scheme and f"{scheme}://" != RAY_CLIENT:
        raise ValueError(f"Ray takes no {scheme}:// address")
    host, has_port, port = (rest if has_scheme else text).rpartition(":")
    if not has_port:
        raise ValueError("no port")
    _check_host(host)
    if not (is_number(port) and 1 <= int(port) <= 65535):
        raise ValueError("the port must be a number from 1 to 65535")
    return RayAddress(host, int(port), bool(has_scheme))


def _check_host(host: str) -> None:
    """A name (parts of 1-63 characters, 253 in all; one trailing dot allowed), an IPv4 address, or an IPv6 one in
    brackets; ValueError otherwise."""
    if "[" in host or "]" in host:
        if not (host.startswith("[") and host.endswith("]") and _ipv6(host[1:-1])):
            raise ValueError(f"{host!r} is not an IPv6 address in brackets")
        return
    labels = host.removesuffix(".").split(".")
    if len(host) > _NAME_CHARACTERS or not all(_LABEL.fullmatch(label) for label in labels):
        raise ValueError(
            f"{host!r} is not a host name or IP address (a name is parts of 1 to 63 letters, digits, "
            f"'-' or '_' joined by dots, {_NAME_CHARACTERS} characters at most; IPv6 goes in brackets)"
        )


def _ipv6(text: str) -> bool:
    """An IPv6 address (with its zone, as in fe80::1%eth0)."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return bool(_IPV6_CHARACTERS.fullmatch(text))  # a zone is an interface's name, nothing else


def check_ray_address(address: str, setting: str) -> None:
    """ConfigError naming `setting` unless `address` is one Ray takes: HOST:PORT, ray://HOST:PORT, "auto", or
    empty (a Ray of the sync's own). Checked when a sync is to run on Ray, not when the config loads: RAY_ADDRESS
    is often set for other Ray tools (`ray job submit` takes http://HEAD:8265)."""
    if address in ("", "auto"):
        return
    try:
        parse_ray_address(address)
    except ValueError as exc:
        raise ConfigError(
            f"{setting}: not a Ray cluster address: {exc}; {_RAY_FORMS} (got {_shown(address)!r})"
        ) from None


def _shown(address: str) -> str:
    """An address as an error may show it: what comes before an "@" (credentials) left out."""
    return f"***@{address.rpartition('@')[2]}" if "@" in address else address


class SyncEngineConfig(Strict):
    """How syncs run here: files are parsed and chunked in worker processes, each file within hard limits."""

    workers: int = Field(0, ge=0, le=256)
    """Processes that parse and chunk files side by side; 0: one per core this process may use. A sync starts at
    most one per 8 files to parse (starting one costs about 0.3 s of CPU)."""
    file_seconds: float = Field(FILE_SECONDS, gt=0, le=86_400)
    """Seconds parsing and chunking one file may take: past them its process is killed and that file fails alone,
    with the reason."""
    file_memory_mb: int = Field(FILE_MEMORY_MB, ge=64, le=1_048_576)
    """MB of address space a worker may map beyond what it holds idle (Linux): a file needing more fails alone,
    with the reason. OCR of a scan maps about 1 GB and holds about 600 MB."""
    engine: Literal["local", "ray"] = "local"
    """Where new and changed files are parsed, chunked and embedded: "local" (this machine's worker processes) or
    "ray" (the tasks and actors of a Ray cluster, which write the chunks straight to the index storage; needs
    `pip install 'mcp-kb-server[ray]'` here and on every node). `mcp-kb sync --engine` overrides it."""
    ray_address: str = Field("", json_schema_extra=from_environment(ENV_RAY_ADDRESS))
    """The Ray cluster of engine = "ray": `HOST:6379` (its head), `ray://HOST:10001`, or "auto" (the cluster `ray
    start` began on this machine); empty: a Ray of the sync's own on this machine. The `RAY_ADDRESS` variable and
    `mcp-kb sync --address` override it; "local" is the same as empty. Checked when a sync is to run on Ray, not when
    the config loads (RAY_ADDRESS may be set for other Ray tools)."""
    wave_files: int = Field(WAVE_FILES, ge=1, le=1_000_000)
    """Files a Ray sync makes searchable in one commit: the cluster parses and embeds a wave's files side by side,
    then one commit adds their chunks (a coordinator lost mid-wave loses that wave's work, nothing else)."""

    _by_option: bool = PrivateAttr(False)  # the address is `mcp-kb sync --address`'s

    @field_validator("ray_address")
    @classmethod
    def _local_is_empty(cls, value: str) -> str:
        return "" if value == "local" else value  # Ray's word for a Ray of the caller's own

    def overridden(self, engine: str | None, ray_address: str | None) -> SyncEngineConfig:
        """These settings with a command's choice of engine and cluster in place (a cluster named means Ray); the
        option's address is checked at once when the command is to sync on Ray."""
        if ray_address is None:
            return self if engine is None else self.model_copy(update={"engine": engine})
        if not ray_address:  # else an empty option would mean the local engine, though it implies Ray
            raise ConfigError(
                f'{RAY_OPTION}: empty; give a Ray cluster\'s address, or "local" for a Ray of the '
                "sync's own on this machine"
            )
        chosen = self.model_validate({**self.model_dump(), "engine": engine or "ray", "ray_address": ray_address})
        chosen._by_option = True
        if chosen.engine == "ray":
            check_ray_address(chosen.ray_address, RAY_OPTION)
        return chosen

    def address_setting(self, source: Path | None) -> str:
        """Where the Ray address comes from, for a line that asks to fix it: the option, the variable (which
        overrides the file), or the file."""
        if self._by_option:
            return RAY_OPTION
        if self.ray_address and environment(ENV_RAY_ADDRESS) == self.ray_address:
            return "[sync] ray_address (set by the RAY_ADDRESS variable)"
        return f"[sync] ray_address{f' in {source}' if source else ''}"

    def worker_count(self, files: int) -> int:
        """How many workers parse `files` files: `workers`, but one per FILES_PER_WORKER files at most."""
        wanted = self.workers or usable_cores()
        return max(1, min(wanted, -(-files // FILES_PER_WORKER)))


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
