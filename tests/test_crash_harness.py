"""Crash and fault harness: SIGKILLs at random moments, searches during syncs, hostile file trees.

Slow (a few minutes): the default run leaves it out, `pytest -m slow -n 0` runs it (CI does). Each test prints its
figures. MCP_KB_HARNESS_KILLS sets the kills per scenario (default 11, so 33 in all) and
MCP_KB_HARNESS_SEED the random seed (printed, so a failure can be replayed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers import png_declaring, process_running, write

from mcp_kb.app import App
from mcp_kb.errors import SearchError
from mcp_kb.index.store import LanceStore
from mcp_kb.api import SearchRequest, SyncRequest
from helpers import MakeApp

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("MCP_KB_HARNESS_KILLS", "11"))
SEED = int(os.environ.get("MCP_KB_HARNESS_SEED", str(random.SystemRandom().randrange(10**6))))
FILES = 96  # three commits of 32 files, two chunks each
QUERY = "notes on subject"  # every file of both corpus versions matches it


def _query(n: int) -> str:
    """A new query each time, so the result cache never answers in place of the index."""
    return f"{QUERY} number {n}"


def _corpus(folder: Path, version: str) -> None:
    """Version "a", or "b": 24 files edited, 12 deleted, 12 added."""
    if folder.exists():
        shutil.rmtree(folder)
    numbers = range(FILES) if version == "a" else [*range(12, FILES), *range(FILES, FILES + 12)]
    for i in numbers:
        edited = version == "b" and i < 36
        detail = "revised procedure and its owners" if edited else "procedure and its owners"
        body = (
            f"Topic {i}: notes on subject number {i}, the {detail}, and the checks run before and after "
            f"the change window of team {i % 7}. "
        ) * 4
        write(folder / f"page{i:03d}.md", f"# Page {i}\n\n## Overview\n\n{body}\n\n## Details\n\n{body}\n")


def _config(base: Path, folder: Path, storage: Path) -> Path:
    path = base / f"{storage.name}.toml"
    path.write_text(
        f'storage = "{storage}"\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{folder}"]\n', encoding="utf-8"
    )
    return path


def _app(make_app: MakeApp, folder: Path, storage: Path) -> App:
    return make_app({"name": "docs", "description": "d", "paths": [str(folder)]}, storage=str(storage))


def _ids(app: App) -> list[str]:
    """What the index holds: its chunks' ids, then each document's reading form (path and version)."""
    store = app.store
    assert isinstance(store, LanceStore)
    table = store.chunk_table("docs")
    if table is None:
        return []
    generation = store.active_generation("docs")
    listing = []
    if generation:
        reading = store.reading_listing("docs", generation)
        assert reading is not None  # a generation's reading forms are there
        listing = reading.to_pylist()
    return sorted(table.to_arrow().column("id").to_pylist()) + sorted(
        f"{row['path']} {row['file_hash']}" for row in listing
    )


def _only_pinned_tables(app: App) -> bool:
    """No half-built generation is left: the KB's tables are the chunks, manifest and reading forms of the
    current generation and of those its kept versions point at (a rebuild keeps the one before it)."""
    pinned = {app.store.active_generation("docs"), *(v.generation for v in app.versions("docs"))}
    assert isinstance(app.store, LanceStore)
    tables = [n for n in app.store.db.list_tables().tables if n.startswith("docs__")]
    return sorted(tables) == sorted(f"docs__{kind}__{g}" for g in pinned for kind in ("chunks", "files", "reading"))


class _Child:
    """`mcp-kb sync` in its own process; `started()` waits until it holds the writer lock."""

    def __init__(self, config: Path, storage: Path, full: bool) -> None:
        self.holder = storage / ".sync.holder.json"  # written once the child holds the writer lock
        args = [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config), *(["--full"] if full else [])]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())

    def started(self, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if json.loads(self.holder.read_text())["pid"] == self.process.pid:
                    return time.monotonic()
            except (OSError, ValueError, KeyError):
                pass
            assert self.process.poll() is None, self.process.stderr and self.process.stderr.read().decode()
            time.sleep(0.005)
        raise AssertionError("the sync never took the writer lock")

    def finish(self) -> None:
        assert self.process.wait(timeout=300) == 0, self.process.stderr and self.process.stderr.read().decode()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Corpus folders and, per corpus version, a clean build to compare with and to start from."""
    return {"base": tmp_path_factory.mktemp("harness"), "figures": {}}


def _template(harness: dict[str, Any], make_app: MakeApp, version: str) -> tuple[Path, list[str]]:
    """A complete index of one corpus version (built once per module), and its chunk ids."""
    key = f"template-{version}"
    if key not in harness:
        base = harness["base"]
        folder = base / f"corpus-{version}"
        _corpus(folder, version)
        storage = base / f"index-{version}"
        app = _app(make_app, folder, storage)
        app.sync()
        harness[key] = (storage, _ids(app))
    template: tuple[Path, list[str]] = harness[key]
    return template


_TIMED_RUNS = 2


def _run_scenario(harness: dict[str, Any], make_app: MakeApp, scenario: str) -> dict[str, float]:
    """KILLS syncs killed at random moments of their work, each checked and repaired (a kill that comes after
    the sync ended does not count: the next one aims earlier)."""
    rng = random.Random(f"{SEED}-{scenario}")
    base = harness["base"]
    start_from, corpus, full = {
        "first sync": (None, "a", False),
        "incremental": ("a", "b", False),
        "full rebuild": ("a", "a", True),
    }[scenario]
    reference_ids = _template(harness, make_app, corpus)[1]
    folder = base / f"scenario-{scenario.replace(' ', '-')}"
    _corpus(folder, corpus)
    figures: dict[str, float] = {
        "kills": 0,
        "missed (sync had ended)": 0,
        "broken indexes": 0,
        "empty answers after a kill": 0,
        "repairs unequal to a clean build": 0,
        "workers left behind": 0,
    }
    timed: list[float] = []
    window = 0.0
    attempt = 0
    while figures["kills"] < KILLS and figures["missed (sync had ended)"] < KILLS:
        attempt += 1
        storage = base / f"{scenario.replace(' ', '-')}-{attempt}"
        if start_from:
            shutil.copytree(_template(harness, make_app, start_from)[0], storage)
        else:
            storage.mkdir()
        child = _Child(_config(base, folder, storage), storage, full)
        began = child.started()
        if len(timed) < _TIMED_RUNS:  # not killed: they measure how long the work takes
            child.finish()
            timed.append(time.monotonic() - began)
            shutil.rmtree(storage)
            continue
        # the first run of a fresh install pays cold caches; kills aim at a warm one
        window = window or 0.9 * min(timed)
        delay = rng.uniform(0, window)
        time.sleep(delay)
        if child.process.poll() is not None:  # a busy machine can slow the timed runs: aim earlier, try again
            child.finish()
            figures["missed (sync had ended)"] += 1
            window = delay
            shutil.rmtree(storage)
            continue
        workers = _children(child.process.pid)
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
        figures["kills"] += 1
        left = time.monotonic() + 30  # an idle worker ends at once (its pipe closes); a busy one after its file
        while any(map(process_running, workers)) and time.monotonic() < left:
            time.sleep(0.05)
        figures["workers left behind"] += sum(map(process_running, workers))
        app = _app(make_app, folder, storage)
        try:
            app.status("docs")
            hits = app.search("docs", SearchRequest(query=QUERY, mode="keyword")).hits
            figures["empty answers after a kill"] += bool(start_from) and not hits
        except SearchError as exc:  # only a first sync killed before its tables existed may say this
            figures["broken indexes"] += bool(start_from) or "has not been synced yet" not in str(exc)
        except Exception:
            figures["broken indexes"] += 1
        app.sync()
        ids = _ids(app)
        figures["repairs unequal to a clean build"] += (
            ids != reference_ids or len(set(ids)) != len(ids) or not _only_pinned_tables(app)
        )
        shutil.rmtree(storage)
    figures["work seconds (unkilled run)"] = round(min(timed), 2)
    return figures


def _report(capsys: pytest.CaptureFixture[str], title: str, figures: Mapping[str, object]) -> None:
    with capsys.disabled():
        print(f"\n[harness seed {SEED}] {title}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


@pytest.mark.parametrize("scenario", ["first sync", "incremental", "full rebuild"])
def test_sigkill_at_random_moments_never_breaks_the_index(
    harness: dict[str, Any], make_app: MakeApp, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    figures = _run_scenario(harness, make_app, scenario)
    _report(capsys, f"SIGKILL during {scenario}", figures)
    assert figures["kills"] == KILLS, "too many kills came after the sync had ended"
    assert figures["broken indexes"] == figures["empty answers after a kill"] == figures["workers left behind"] == 0
    assert figures["repairs unequal to a clean build"] == 0


@pytest.mark.parametrize("scenario", ["incremental", "full rebuild"])
def test_searches_during_a_sync_in_another_process_always_answer(
    harness: dict[str, Any], make_app: MakeApp, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    base = harness["base"]
    corpus = "b" if scenario == "incremental" else "a"
    folder = base / f"loop-{scenario.replace(' ', '-')}"
    _corpus(folder, corpus)
    storage = base / f"loop-index-{scenario.replace(' ', '-')}"
    shutil.copytree(_template(harness, make_app, "a")[0], storage)
    reader = _app(make_app, folder, storage)
    child = _Child(_config(base, folder, storage), storage, full=scenario == "full rebuild")
    child.started()
    figures = {"searches": 0, "errors": 0, "empty answers": 0}
    while child.process.poll() is None or figures["searches"] < 20:
        for mode in ("keyword", "hybrid"):
            try:
                figures["empty answers"] += not reader.search(
                    "docs", SearchRequest(query=_query(figures["searches"]), mode=mode, top_k=5)
                ).hits
            except Exception:
                figures["errors"] += 1
            figures["searches"] += 1
    child.finish()
    _report(capsys, f"searches during the {scenario} (other process)", figures)
    assert figures["errors"] == figures["empty answers"] == 0 and figures["searches"] >= 20
    assert _ids(reader) == _template(harness, make_app, corpus)[1]


def _hostile_tree(root: Path, outside: Path) -> None:
    """Links, loops, odd names, encodings, sizes and special files a real share can hold."""
    write(outside / "secret.md", "# Secret\n\nThe vault combination is 1234-5678.\n")
    (outside / "dir").mkdir()
    write(outside / "dir" / "leak.md", "# Leak\n\nThe vault combination is 1234-5678.\n")
    write(root / "good.md", "# Good\n\nThe onboarding guide explains the first week.\n")
    links = {
        "out-file.md": outside / "secret.md",
        "out-dir": outside / "dir",
        "dangling.md": root / "missing.md",
        "self.md": root / "self.md",
        "ping.md": root / "pong.md",
        "pong.md": root / "ping.md",
        "parent-loop": root,
        "in-file.md": root / "good.md",
        "etc-passwd.txt": Path("/etc/passwd"),
    }
    for name, target in links.items():
        os.symlink(target, root / name)
    odd = [
        b"caf\xe9.md",
        b"\xff\xfe.md",
        b"new\nline.md",
        b"tab\tname.md",
        b"quote'\".md",
        b"back\\slash.md",
        b"-dash.md",
        b"100%.md",
        b"glob*?[x].md",
        b"emoji \xf0\x9f\x93\x84.md",
        "e\u0301cole.md".encode(),
        b"x" * 250 + b".md",
        b"\xe4\xb8\xad\xe6\x96\x87\xe6\x96\x87\xe4\xbb\xb6.md",
    ]
    for odd_name in odd:
        with open(os.fsencode(root) + b"/" + odd_name, "wb") as handle:
            handle.write(b"# Odd name\n\nA file whose name is unusual, about badges.\n")
    encodings = {
        "gb18030.txt": ("年假申请流程：提前两周提交。", "gb18030"),
        "big5.txt": ("年假申請流程", "big5"),
        "utf16le.txt": ("\ufeffUTF-16 text about badges", "utf-16-le"),
        "utf16be.txt": ("\ufeffUTF-16 text about badges", "utf-16-be"),
        "latin1.txt": ("Caf\xe9 cr\xe8me", "latin-1"),
        "sjis.txt": ("日本語のテキスト", "shift_jis"),
    }
    for name, (text, encoding) in encodings.items():
        (root / name).write_bytes(text.encode(encoding))
    (root / "bad-utf16.txt").write_bytes(b"\xff\xfe" + b"\x00\xd8" * 10)  # BOM, then lone surrogates
    (root / "empty.md").write_bytes(b"")
    write(root / "headings.md", "# Only\n\n## Headings\n")
    write(root / "one-line.txt", "word " * 600_000)  # 3 MB, no line break
    write(root / "huge.txt", "x" * 60_000_000)  # over the default 50 MB limit
    (root / "binary.md").write_bytes(bytes(range(256)) * 10)
    (root / "truncated.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog")
    (root / "empty.pdf").write_bytes(b"")
    deep = root.joinpath(*[f"d{i}" for i in range(40)])
    write(deep / "deep.md", "# Deep\n\nA file forty folders down, about badges.\n")
    (root / "folder.md").mkdir()
    write(root / "folder.md" / "inner.md", "# Inner\n\nInside a folder named like a file.\n")
    write(root / "sub" / ".gitignore", "!\n")  # invalid pattern: the folder is skipped, not exposed
    write(root / "sub" / "hidden-by-rules.md", "# Hidden\n")
    os.mkfifo(root / "pipe.md")
    write(root / "locked.md", "# Locked\n\nPermissions 000.\n")
    os.chmod(root / "locked.md", 0)
    (root / "locked-dir").mkdir()
    write(root / "locked-dir" / "x.md", "# X\n\nIn a locked folder.\n")
    os.chmod(root / "locked-dir", 0)


def test_a_hostile_tree_never_aborts_a_sync(
    make_app: MakeApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, outside = tmp_path / "share", tmp_path / "outside"
    _hostile_tree(root, outside)
    app = _app(make_app, root, tmp_path / "index")
    try:
        report = app.sync()[0]
        again = app.sync()[0]
        checked = app.check("docs")[0]
    finally:  # let pytest clean up
        os.chmod(root / "locked-dir", 0o755)
    indexed = app.store.read_files("docs")
    figures = {
        "files indexed": sum(r.status == "indexed" for r in indexed.values()),
        "failed with a reason": report.files_failed,
        "skipped with a reason": len(report.skipped),
        "changes on a resync": again.files_added + again.files_changed + again.files_deleted,
    }
    _report(capsys, "hostile tree", figures)
    assert all(f.reason for f in report.failures) and all(s.reason for s in report.skipped)
    assert figures["changes on a resync"] == 0 and checked.files == figures["files indexed"]
    assert app.search("docs", SearchRequest(query="vault combination", mode="keyword")).hits == []
    assert not any(
        "root:x:0:0" in h.text for h in app.search("docs", SearchRequest(query="root bin bash", mode="keyword")).hits
    )
    assert {h.source for h in app.search("docs", SearchRequest(query="badges", mode="keyword", top_k=30)).hits} >= {
        "caf\\xe9.md",
        "new\nline.md",
        "d0/d1/d2/d3/d4/d5/d6/d7/d8/d9/d10/d11/d12/d13/d14/d15/d16/d17/d18/d19/d20/d21/"
        "d22/d23/d24/d25/d26/d27/d28/d29/d30/d31/d32/d33/d34/d35/d36/d37/d38/d39/deep.md",
    }
    skipped = {s.path: s.reason for s in report.skipped}
    assert "outside the knowledge base" in skipped["out-file.md"] and "outside" in skipped["out-dir"]
    assert "broken symbolic link" in skipped["self.md"] and "too large" in skipped["huge.txt"]
    assert skipped["sub/"].startswith("unreadable folder")


def test_a_search_loop_in_the_same_process_during_a_full_rebuild(
    harness: dict[str, Any], make_app: MakeApp, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server's case: the sync runs in a thread beside the searches, sharing one store."""
    base = harness["base"]
    storage = base / "same-process"
    shutil.copytree(_template(harness, make_app, "a")[0], storage)
    app = _app(make_app, base / "corpus-a", storage)
    errors: list[BaseException] = []
    rebuild = threading.Thread(target=lambda: _capture(errors, lambda: app.sync(SyncRequest(full=True))))
    rebuild.start()
    figures = {"searches": 0, "errors": 0, "empty answers": 0}
    while rebuild.is_alive() or figures["searches"] < 20:
        try:
            figures["empty answers"] += not app.search(
                "docs", SearchRequest(query=_query(figures["searches"]), mode="hybrid", top_k=5)
            ).hits
        except Exception:
            figures["errors"] += 1
        figures["searches"] += 1
    rebuild.join()
    _report(capsys, "searches during a full rebuild (same process)", figures)
    assert not errors and figures["errors"] == figures["empty answers"] == 0


def _capture(errors: list[BaseException], work: Callable[[], object]) -> None:
    try:
        work()
    except BaseException as exc:  # surfaced by the test's assertion
        errors.append(exc)


# ---- hostile input past the folder path: sites, archives, sheets, images --------------------------

MEMORY_BOUND_MB = 1200  # docs/sync.md's bound for the sync process
WORKER_BOUND_MB = 1200  # and for each parsing process (OCR of a 49 MP scan after an Office bomb: 550-860 MB)


# Runs `mcp-kb sync` and, at its exit, writes its peak memory. VmHWM is the high-water mark of the
# process's own memory: getrusage's maxrss also counts the memory of the (large) test process the
# child was forked from, which Linux carries across exec.
_SYNC_WITH_PEAK = """
import atexit, re, runpy, sys
peak_file, config = sys.argv[1:3]
def peak():
    status = open("/proc/self/status").read()
    open(peak_file, "w").write(re.search(r"VmHWM:\\s+(\\d+) kB", status)[1])
atexit.register(peak)
sys.argv = ["mcp-kb", "sync", "--json", "-c", config]
runpy.run_module("mcp_kb", run_name="__main__")
"""


def _measured_sync(config: Path) -> tuple[dict[str, Any], float, float]:
    """`mcp-kb sync --json` in a child process: its report, wall seconds and peak RSS (MB)."""
    if not Path("/proc/self/status").is_file():
        pytest.skip("the peak memory of a process is read from /proc (Linux)")
    peak_file = config.with_suffix(".peak")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", _SYNC_WITH_PEAK, str(peak_file), str(config)], capture_output=True, timeout=600
    )
    report = json.loads(result.stdout)[0]
    assert result.returncode == (3 if report["files_failed"] else 0), result.stderr.decode()  # 3: files failed
    return report, round(time.monotonic() - started, 1), round(int(peak_file.read_text()) / 1024)


def test_a_hostile_site_never_aborts_a_crawl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fake_site import Page, Site, gzip_bomb, serve_site

    site = Site()
    good = [f"/docs/page{i}/" for i in range(20)]
    for i, path in enumerate(good):
        site.html(path, f"Page {i}", f"<h1>Page {i}</h1><p>Topic {i}: how the deployment of service {i} works.</p>")
    hostile = {
        "/docs/r-js/": Page(b"", status=302, location="javascript:alert(1)"),
        "/docs/r-mail/": Page(b"", status=301, location="mailto:someone@example.com"),
        "/docs/r-v6/": Page(b"", status=302, location="http://[::1"),
        "/docs/r-space/": Page(b"", status=302, location="http://exa mple.com/docs/"),
        "/docs/r-port/": Page(b"", status=307, location="http://127.0.0.1:99999/docs/"),
        "/docs/r-none/": Page(b"", status=302),
        "/docs/loop/": Page(b"", status=302, location="/docs/loop/"),
        "/docs/bad-length/": Page(b"<p>x</p>", headers={"Content-Length": "lots"}),
        "/docs/bomb/": Page(gzip_bomb(64), headers={"Content-Encoding": "gzip"}),
        "/docs/bad-gzip/": Page(b"\x1f\x8b\x08\x00not gzip at all", headers={"Content-Encoding": "gzip"}),
        "/docs/drip-head/": Page(b"<p>late</p>", drip="headers", headers={"X-Pad": "p" * 2000}),
        "/docs/drip-body/": Page(b"<p>" + b"d" * 2000 + b"</p>", drip="body"),
    }
    charsets = {
        "/docs/cp1251/": ("windows-1251", "Развертывание сервиса описано здесь."),
        "/docs/koi8/": ("koi8-r", "Настройка журнала событий сервера."),
        "/docs/sjis/": ("shift_jis", "サービスの配置について説明します。"),
    }
    site.pages.update(hostile)
    for path, (encoding, text) in charsets.items():
        site.pages[path] = Page(
            f'<html><head><meta charset="{encoding}"></head><body><h1>{text[:4]}</h1>'
            f"<p>{text}</p></body></html>".encode(encoding),
            content_type=f"text/html; charset={encoding}",
        )
    links = "".join(f'<a href="{p}">x</a> ' for p in [*good, *hostile, *charsets]) + '<a href="http://[oops/">v6</a>'
    site.html("/docs/", "Docs", f"<h1>Docs</h1><p>Everything: {links}</p>")
    with serve_site(site):
        config = tmp_path / "kb.toml"
        config.write_text(
            f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\n'
            f'[[kb.urls]]\nurl = "{site.url}/docs/"\ntimeout = 2\nmax_page_mb = 2\ndelay = 0\n',
            encoding="utf-8",
        )
        report, seconds, peak = _measured_sync(config)
    reasons = {r["path"].removeprefix(site.url): r["reason"] for r in report["failures"] + report["skipped"]}
    indexed = report["files_added"]
    figures = {
        "pages indexed": indexed,
        "hostile pages failed with a reason": sum(p in reasons for p in hostile),
        "of": len(hostile),
        "drips cut after (bytes)": max(hostile[p].dripped for p in ("/docs/drip-head/", "/docs/drip-body/")),
        "sync seconds": seconds,
        "peak RSS MB": peak,
        "parsing process peak MB": report["worker_peak_mb"],
    }
    _report(capsys, "hostile site", figures)
    assert indexed == 1 + len(good) + len(charsets), reasons
    assert set(hostile) <= set(reasons) and all(reasons[p] for p in hostile)
    assert figures["drips cut after (bytes)"] < 1000 and peak < MEMORY_BOUND_MB
    assert 0 < report["worker_peak_mb"] < WORKER_BOUND_MB


def test_files_past_the_limits_fail_alone_within_the_memory_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image
    from office_files import make_docx, make_pptx, make_xlsx

    docs = tmp_path / "docs"
    for i in range(20):
        write(docs / f"note{i}.md", f"# Note {i}\n\nThe rollout of feature {i} needs two approvals.\n")
    bombs = {"bomb.docx": (make_docx, 1024), "bomb.pptx": (make_pptx, 600), "bomb.xlsx": (make_xlsx, 600)}
    for name, (maker, megabytes) in bombs.items():
        plain = maker(tmp_path / f"plain-{name}")
        with zipfile.ZipFile(plain) as original, zipfile.ZipFile(docs / name, "w", zipfile.ZIP_DEFLATED) as copy:
            for item in original.infolist():
                copy.writestr(item, original.read(item))
            with copy.open("media/padding.bin", "w") as part:
                for _ in range(megabytes):
                    part.write(b"\0" * 1024 * 1024)
    lying = make_xlsx(tmp_path / "plain-lying.xlsx")  # declares A1:XFD1048576 around a few cells
    with zipfile.ZipFile(lying) as original, zipfile.ZipFile(docs / "lying.xlsx", "w") as copy:
        for item in original.infolist():
            data = original.read(item)
            if item.filename.startswith("xl/worksheets/"):
                data = data.replace(b'<dimension ref="A1:D3"/>', b'<dimension ref="A1:XFD1048576"/>')
            copy.writestr(item, data)
    Image.new("RGB", (7000, 7000), "white").save(docs / "large-scan.jpg", quality=60)  # 49 MP: read, scaled
    (docs / "huge.png").write_bytes(png_declaring(13_000, 13_000))
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    report, seconds, peak = _measured_sync(config)
    reasons = {f["path"]: f["reason"] for f in report["failures"]}
    figures = {
        "files indexed": report["files_added"] - report["files_failed"],
        "failed with a reason": report["files_failed"],
        "sync seconds": seconds,
        "peak RSS MB": peak,
        "parsing process peak MB": report["worker_peak_mb"],
    }
    _report(capsys, "files past the limits", figures)
    assert all("over the 200 MB limit" in reasons[name] for name in bombs), reasons
    assert "over the 60 MP limit" in reasons["huge.png"] and "lying.xlsx" not in reasons
    assert peak < MEMORY_BOUND_MB and 0 < report["worker_peak_mb"] < WORKER_BOUND_MB


def test_files_that_outlast_or_outgrow_a_worker_fail_alone_and_the_rest_is_indexed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The files of "Trust III" item 10 that took the sync with them: a 45 MB Markdown file on one line and a
    .docx of empty paragraphs, beside good files, with a time limit of 10 s and 512 MB a file. The issue's .docx
    had 600,000; they parse in 7 s on a quiet machine now, so this one has 2,000,000 (over 20 s quiet)."""
    from office_files import make_docx

    docs = tmp_path / "docs"
    for i in range(10):
        write(docs / f"note{i}.md", f"# Note {i}\n\nThe rollout of feature {i} needs two approvals.\n")
    with open(docs / "one-line.md", "w", encoding="utf-8") as huge:
        for _ in range(45):
            huge.write("word " * 200_000 + " ")  # a MB at a time, no line break
    plain = make_docx(tmp_path / "plain.docx")
    with zipfile.ZipFile(plain) as original, zipfile.ZipFile(docs / "empty.docx", "w", zipfile.ZIP_DEFLATED) as copy:
        for item in original.infolist():
            data = original.read(item)
            if item.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body>" + b"<w:p/>" * 2_000_000, 1)
            copy.writestr(item, data)
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[sync]\nfile_seconds = 10\nfile_memory_mb = 512\n'
        f'[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{docs}"]\n',
        encoding="utf-8",
    )
    report, seconds, peak = _measured_sync(config)
    reasons = {f["path"]: f["reason"] for f in report["failures"]}
    figures = {
        "files indexed": report["files_added"],
        "failed with a reason": report["files_failed"],
        "sync seconds": seconds,
        "peak RSS MB": peak,
        "parsing process peak MB": report["worker_peak_mb"],
    }
    _report(capsys, "files that outlast or outgrow a worker", figures)
    assert report["files_added"] == 10 and set(reasons) == {"one-line.md", "empty.docx"}, reasons
    assert all(
        reason.startswith(("parsing took longer than 10 s", "parsing needed more than 512 MB"))
        for reason in reasons.values()
    ), reasons
    assert peak < MEMORY_BOUND_MB and report["worker_peak_mb"] < 512 + 200  # its cap over what it holds idle


# ---- the parsing processes: workers killed under a running sync, and what a killed sync leaves ----------


def _children(pid: int) -> list[int]:
    """The processes `pid` started (its parsing workers), from /proc."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def test_workers_killed_at_random_moments_blame_no_file_and_the_next_sync_completes(
    harness: dict[str, Any], make_app: MakeApp, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """While a first sync of 96 files runs with two workers, a parsing process is SIGKILLed at random moments
    (as the out-of-memory killer would): the sync finishes, the files being parsed are not recorded as failed
    but parsed again by the next sync, whose index equals a clean build."""
    rng = random.Random(f"{SEED}-workers")
    reference_ids = _template(harness, make_app, "a")[1]
    folder, storage = tmp_path / "corpus", tmp_path / "index"
    _corpus(folder, "a")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{storage}"\n[sync]\nworkers = 2\n[[kb]]\nname = "docs"\ndescription = "d"\npaths = ["{folder}"]\n',
        encoding="utf-8",
    )
    sync = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync", "--json", "-c", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    kills = 0
    while sync.poll() is None:
        time.sleep(rng.uniform(0.02, 0.3))
        workers = _children(sync.pid)
        if workers:
            os.kill(rng.choice(workers), signal.SIGKILL)
            kills += 1
    out, err = sync.communicate()
    report = json.loads(out)[0]
    reasons = {f["path"]: f["reason"] for f in report["failures"]}
    assert sync.returncode == (3 if reasons else 0), (out + err).decode()  # 3: files to parse again
    assert all("killed (SIGKILL) while on this file; it is parsed again" in r for r in reasons.values()), reasons
    app = _app(make_app, folder, storage)
    assert not app.status("docs")[0].failed
    again = app.sync()[0]
    ids = _ids(app)
    figures = {
        "workers killed": kills,
        "files whose parse was cut": len(reasons),
        "failed after the next sync": again.files_failed,
        "repaired index equals a clean build": ids == reference_ids,
    }
    _report(capsys, "parsing processes SIGKILLed during a sync", figures)
    assert kills > 0 and again.files_failed == 0 and again.files_added == len(reasons)
    assert ids == reference_ids and len(set(ids)) == len(ids)
