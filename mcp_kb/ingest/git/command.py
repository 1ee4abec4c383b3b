"""Running git for a repository source, safely: the git command line, never a shell.

Why the command line (not dulwich or pygit2): it is the one implementation that speaks every transport a team
uses (https with the user's credential helper, ssh with their agent, smart HTTP, file), with git's own shallow
fetch and rename detection, and it is on every machine that has a repository to index. What makes it safe here:
- a fixed environment: no prompt can hang a sync, only plain transports (`GIT_ALLOW_PROTOCOL`: no `ext::` helper
  runs a command), no hooks, the caller's `GIT_DIR`-style variables dropped;
- secrets (a token from `token_env`, a password written in the URL) go to git as an HTTP header through
  `GIT_CONFIG_*` variables, never on a command line another user's `ps` shows, never in the copy's config, and
  every text git prints is scrubbed of them before anyone sees it;
- a fetch has a deadline, a floor on speed (a server that drips) and a ceiling on what it adds to disk (a bomb).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from ...errors import GitError, KBError
from ...settings import RepoConfig, child_environment, in_megabytes, is_loopback
from ...settings.values import redact_url

_PROTOCOLS = "https:http:ssh:git:file"
_KEPT_GIT_VARIABLES = {
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_CONFIG_GLOBAL",
    "GIT_EXEC_PATH",
}  # how to reach a server; every other GIT_* could redirect, alter git or prompt
_NO_GIT = "git is not installed (a repository needs git 2.24 or later on this machine)"
_PROMPTS = {"GIT_TERMINAL_PROMPT": "0", "SSH_ASKPASS_REQUIRE": "never", "GCM_INTERACTIVE": "never"}
_SPEED_FLOOR = ("1000", "30")  # bytes per second, seconds: below it for that long, a fetch is cut off
_CHECK_EVERY = 0.2  # seconds between a running fetch's checks of time and size
_CHECK_URL = "check its `url` under [[kb.repos]] in the config"
# What git says when nothing at the URL is a repository it can read (and, over ssh, when access is refused).
_NO_REPOSITORY = (
    "does not appear to be a git repository",
    "Could not read from remote repository",
    "not found",
    "Not a git repository",
)
_UNREACHABLE = ("unable to access", "Could not resolve host", "Connection refused", "Connection timed out")
_NO_REF = re.compile(r"couldn't find remote ref (\S+)")
_REFS_SHOWN = 5
_LIST_SECONDS = 10  # listing refs (for an error message, a freshness check): not worth a long wait
_LISTED_BYTES = 100_000  # what a listing of refs is read of
_COMMIT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# What git says when a server refused the credentials, or asked for some it could not prompt for.
_REFUSED_CREDENTIALS = (
    "terminal prompts disabled",
    "Authentication failed",
    "Permission denied (publickey",
    "could not read Username",
    "could not read Password",
)


@dataclass(frozen=True)
class Remote:
    """A repository as git is given it: its URL without credentials, and the secrets to send and to scrub."""

    url: str
    header: str = ""  # an Authorization header value, or ""
    secrets: tuple[str, ...] = ()
    label: str = "repo"  # how errors name it
    written: str = ""  # its `url` as the config writes it (no password): errors quote it

    @staticmethod
    def address(repo: RepoConfig) -> str:
        """The repository's URL as git is given it: a local path as a file:// URL (git's transport, never a
        hard-linking copy), a password left out."""
        return _without_password(repo.local_path.resolve().as_uri() if repo.local_path else repo.url)[0]

    @classmethod
    def of(cls, repo: RepoConfig) -> Remote:
        url, user, password = _without_password(repo.local_path.resolve().as_uri() if repo.local_path else repo.url)
        written = _without_password(repo.url)[0]
        user = user or repo.username
        try:
            token = repo.token()
        except ValueError as exc:
            raise KBError(str(exc)) from exc
        secret = token or password
        if not secret:
            return cls(url, label=repo.label, written=written)
        parts = urlsplit(url)
        if parts.scheme == "http" and not is_loopback(parts.hostname or ""):  # plain http: this machine's only
            raise KBError(
                f"repository {repo.label}: credentials are sent over https only, not in clear to {parts.hostname}"
            )
        basic = base64.b64encode(f"{user}:{secret}".encode()).decode()
        return cls(url, f"Authorization: Basic {basic}", (secret, quote(secret, safe=""), basic), repo.label, written)

    def scrub(self, text: str) -> str:
        """Text git printed, safe to show: no secret, no password in a URL."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return redact_url(text)


def _without_password(url: str) -> tuple[str, str, str]:
    """The URL without its password, with the user name and the password as they are meant (percent-decoded; ""
    when absent)."""
    if "://" not in url:
        return url, "", ""
    parts = urlsplit(url)
    if parts.password is None:
        return url, "", ""
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    netloc += f":{parts.port}" if parts.port else ""
    return (
        urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)),
        unquote(parts.username or ""),
        unquote(parts.password),
    )


class Git:
    """git commands on this machine's bare copy of one repository."""

    def __init__(self, folder: Path, remote: Remote, timeout: float, max_bytes: int):
        self.folder, self.remote, self.timeout, self.max_bytes = folder, remote, timeout, max_bytes
        self.env = self._environment()

    def _environment(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in child_environment().items()
            if not key.startswith("GIT_") or key in _KEPT_GIT_VARIABLES
        }
        settings = [
            ("core.hooksPath", os.devnull),
            ("http.lowSpeedLimit", _SPEED_FLOOR[0]),
            ("http.lowSpeedTime", _SPEED_FLOOR[1]),
            ("fetch.unpackLimit", "1"),  # packs only: one size check
            # a malformed tree (a ".." entry, say) is refused on arrival, whatever the user's config says
            ("transfer.fsckObjects", "true"),
            ("fetch.fsckObjects", "true"),
            ("core.askPass", ""),
        ]  # no program asks anyone for a password
        if self.remote.header:  # credentials go to this server only, never to one a redirect names
            settings += [("http.extraHeader", self.remote.header), ("http.followRedirects", "false")]
        env.update(
            {**_PROMPTS, "GIT_ALLOW_PROTOCOL": _PROTOCOLS, "LC_ALL": "C", "GIT_CONFIG_COUNT": str(len(settings))}
        )
        env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")  # an ssh password prompt would hang the sync
        for index, (key, value) in enumerate(settings):
            env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
        return env

    def run(self, *args: str | bytes, stdin: bytes = b"") -> bytes:
        """A local git command's output (`GitError` with git's scrubbed message when it fails)."""
        done = self._local(["--git-dir", str(self.folder), *args], stdin)
        if done.returncode:
            raise GitError(self._said(done.stderr, args[0]))
        return done.stdout

    def succeeds(self, *args: str) -> bool:
        return self._local(["--git-dir", str(self.folder), *args]).returncode == 0

    def init(self) -> None:
        if not (self.folder / "HEAD").is_file():
            self.folder.mkdir(parents=True, exist_ok=True)
            done = self._local(["init", "--bare", "--quiet", str(self.folder)])
            if done.returncode:
                raise GitError(self._said(done.stderr, "init"))

    def _local(self, args: list[str | bytes], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        """git on this machine: its input never this process's own (a stdio server's protocol), its failure to run
        at all one line."""
        try:
            return subprocess.run(
                ["git", *args], input=stdin, capture_output=True, env=self.env, timeout=self.timeout, check=False
            )
        except FileNotFoundError as exc:
            raise GitError(f"repository {self.remote.label}: {_NO_GIT}") from exc
        except subprocess.TimeoutExpired as exc:
            raise GitError(
                f"repository {self.remote.label}: git took longer than {self.timeout:g} s (the repository's `timeout`)"
            ) from exc

    def fetch(self, ref: str, into: str) -> None:
        """Fetch `ref` (shallow: its commit and tree) into the local ref `into`, within the deadline and the size
        ceiling."""
        command = [
            "git",
            "--git-dir",
            str(self.folder),
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            "--no-recurse-submodules",
            "--end-of-options",
            self.remote.url,
            f"+{ref}:{into}",
        ]
        started, before = time.monotonic(), _size(self.folder / "objects")
        with tempfile.TemporaryFile() as said:  # a file, not a pipe: a chatty server never blocks git on it
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=said,
                    env=self.env,
                    start_new_session=True,
                )
            except FileNotFoundError as exc:
                raise GitError(f"repository {self.remote.label}: {_NO_GIT}") from exc
            why = self._watch(process, started, before)
            process.wait()
            said.seek(0)
            stderr = said.read(1_000_000)
        if not why and _size(self.folder / "objects") - before > self.max_bytes:  # it ended between two checks
            why = self._too_large
        if why:
            shutil.rmtree(self.folder, ignore_errors=True)  # what it brought is not kept: the next sync starts anew
            raise GitError(
                f"repository {self.remote.label}: fetching {self.remote.scrub(self.remote.url)} stopped: {why}"
            )
        if process.returncode:
            raise GitError(self._said(stderr, "fetch"))

    def _watch(self, process: subprocess.Popen[bytes], started: float, before: int) -> str:
        """Wait for the fetch; stop it (with every process it started) past the deadline or the size ceiling."""
        while process.poll() is None:
            try:
                process.wait(timeout=_CHECK_EVERY)
                return ""
            except subprocess.TimeoutExpired:
                pass
            why = ""
            if time.monotonic() - started > self.timeout:
                why = f"it took longer than {self.timeout:g} s (the repository's `timeout`)"
            elif _size(self.folder / "objects") - before > self.max_bytes:
                why = self._too_large
            if why:
                os.killpg(process.pid, 9)
                process.wait()
                return why
        return ""

    @property
    def _too_large(self) -> str:
        return f"it would add more than {in_megabytes(self.max_bytes):g} MB (the repository's `max_fetch_mb`)"

    def _said(self, stderr: bytes, command: str | bytes) -> str:
        """git's failure as one line naming the setting to check: git's own words (scrubbed) where no rule knows
        them."""
        text = self.remote.scrub(stderr.decode("utf-8", "replace"))  # before any cut: a cut secret is still one
        words = " ".join(line.strip().removeprefix("fatal: ") for line in text.splitlines() if line.strip())
        url = self.remote.scrub(self.remote.url)
        if any(sign in text for sign in _REFUSED_CREDENTIALS):
            said = (
                f"the server at {url} did not accept the credentials sent (or wants some): set the "
                "repository's `token_env` to a variable holding a valid token, or set up git's credential helper "
                "or ssh agent"
            )
        else:  # a command on this machine's copy, or a failure no rule knows: git's own words
            said = (
                (command == "fetch" and self._fetch_failure(text, words, url))
                or words[-500:]
                or f"git {command!r} failed"
            )
        return f"repository {self.remote.label}: {said}"

    def _fetch_failure(self, text: str, words: str, url: str) -> str:
        """A fetch's failure in words naming the setting to check ("" when no rule knows git's message)."""
        if no_ref := _NO_REF.search(text):
            return (
                f"it has no branch or tag {no_ref.group(1)!r}{self._branches()}; check its `ref` under "
                "[[kb.repos]] in the config"
            )
        if any(sign in text for sign in _UNREACHABLE):
            return f"cannot reach {url} ({_last_words(words)}); {_CHECK_URL}, and the network"
        if any(sign in text for sign in _NO_REPOSITORY):
            where = self.remote.scrub(self.remote.written) or url
            return f"{where} is not a git repository this machine can read; {_CHECK_URL}"
        return ""

    def _branches(self) -> str:
        """The repository's branches, a few, for an error about a ref it has not ("" when they cannot be listed)."""
        listed = self.list_remote(heads=True)
        names = [line.split("refs/heads/", 1)[1] for line in (listed or "").splitlines() if "refs/heads/" in line]
        if not names:
            return ""
        more = f" and {len(names) - _REFS_SHOWN} more" if len(names) > _REFS_SHOWN else ""
        return f" (its branches: {', '.join(names[:_REFS_SHOWN])}{more})"

    def remote_commit(self, ref: str) -> str | None:
        """The commit `ref` names in the repository now, as `git ls-remote` tells (None: it cannot be told, or `ref`
        is a commit, which never moves): a branch, a tag (peeled) or HEAD."""
        listed = self.list_remote(ref) if not _COMMIT_ID.fullmatch(ref) else None
        named = {name: commit for commit, _, name in (line.partition("\t") for line in (listed or "").splitlines())}
        # git's own order for a short name (git rev-parse, git fetch): the name itself, then a tag, then a branch
        for name in (ref, f"refs/tags/{ref}^{{}}", f"refs/tags/{ref}", f"refs/heads/{ref}"):
            if _COMMIT_ID.fullmatch(named.get(name, "")):
                return named[name]
        return None

    def list_remote(self, *patterns: str, heads: bool = False) -> str | None:
        """`git ls-remote` of the repository's refs matching `patterns` (all: none given; branches only: `heads`),
        within _LIST_SECONDS (None: it failed or took longer)."""
        with tempfile.TemporaryFile() as listed:  # a file, not a pipe: a transport left behind holds no pipe open
            try:
                done = subprocess.run(
                    [
                        "git",
                        "--git-dir",
                        str(self.folder),
                        "ls-remote",
                        *(["--heads"] if heads else []),
                        "--end-of-options",
                        self.remote.url,
                        *patterns,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=listed,
                    stderr=subprocess.DEVNULL,
                    env=self.env,
                    timeout=min(self.timeout, _LIST_SECONDS),
                    start_new_session=True,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired):
                return None
            listed.seek(0)
            return None if done.returncode else listed.read(_LISTED_BYTES).decode("utf-8", "replace")


def _last_words(words: str) -> str:
    """What git said after its own preamble (`unable to access 'URL/': `), which repeats the URL."""
    return words.rsplit("': ", 1)[-1][-300:]


def _size(folder: Path) -> int:
    """Bytes in a folder, sub-folders included (a pack being received is a temporary file in objects/pack)."""
    total = 0
    stack = [folder]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total
