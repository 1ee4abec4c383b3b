import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from dataclasses import replace
import textwrap
from pathlib import Path

import pytest

from mcp_kb.api import SyncProgress
from click.testing import CliRunner, Result
from helpers import ROOT, until, write, text_of

from mcp_kb.cli import main
from mcp_kb.settings import load_config

COMMANDS_PAGE = ROOT / "docs" / "commands.md"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write(
        tmp_path / "docs" / "guide.md",
        "# Guide\n\n## Install\n\nRun pip install mcp-kb to install the package.\n\n"
        "## Errors\n\nE5021 means the access token expired; log in again to renew it, then retry the request.\n",
    )
    write(tmp_path / "docs" / "notes.txt", "Release notes for version two.")
    (tmp_path / "docs" / "fake.md").write_bytes(b"\x00\x01binary" * 20)
    (tmp_path / "kb.toml").write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Guides"\npaths = ["docs"]\n',
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_check_reports_files_chunks_and_skipped_reasons(project: Path) -> None:
    result = _run("check")
    assert result.exit_code == 0, result.output
    assert "docs (tool search_docs): 2 files (1 .md, 1 .txt)" in result.output
    assert "skipped fake.md: binary content" in result.output


def test_chunks_shows_heading_paths_and_token_counts(project: Path) -> None:
    result = _run("chunks", "docs/guide.md")
    assert result.exit_code == 0
    assert re.search(r"--- chunk 0 · \d+ tokens · lines \d+-\d+ · Guide", result.output)
    assert "E5021" in result.output


def test_chunks_of_a_converted_file_name_the_lines_of_its_reading_form(project: Path) -> None:
    from docx import Document

    document = Document()
    document.add_heading("Travel", level=1)
    document.add_paragraph("Book flights through the travel desk; economy class for short trips.")
    document.save(str(project / "docs" / "travel.docx"))
    result = _run("chunks", "docs/travel.docx")
    assert result.exit_code == 0 and "None" not in result.output
    # the reading form is `# Travel`, a blank line, the paragraph: a read by lines 3-3 finds it
    assert re.fullmatch(r"--- chunk 0 · \d+ tokens · lines 3-3 · Travel", result.output.splitlines()[0])


def test_sync_status_and_search_round_trip(project: Path) -> None:
    sync = _run("sync", "--json")
    assert sync.exit_code == 0, sync.output
    assert json.loads(sync.stdout)[0]["files_added"] == 2
    status = _run("status")
    assert "docs: 2 files" in status.output and "(ok)" in status.output
    assert "failed" not in status.output
    search = _run("search", "docs", "E5021", "--mode", "keyword", "--json")
    assert json.loads(search.output)["results"][0]["heading"] == "Guide › Errors"
    text = _run("search", "docs", "how to install", "--top-k", "1")
    assert text.output.startswith("[1] guide.md › Guide")


def test_read_and_ls_print_documents_from_the_index(project: Path) -> None:
    assert _run("sync").exit_code == 0
    (project / "docs" / "guide.md").unlink()  # the index holds it: reading needs no source
    section = _run("read", "docs", "guide.md", "--section", "Guide › Errors")
    assert section.exit_code == 0, section.output
    assert re.fullmatch(
        r"guide\.md › Guide › Errors \(lines 7-9 of 9; indexed \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n"
        r"Stale: deleted since it was indexed; this text may be out of date\n\n## Errors\n\nE5021 means "
        r"the access token expired; log in again to renew it, then retry the request\.\n",
        section.output,
    )
    first = _run("read", "docs", "guide.md", "--max-tokens", "200", "--lines", "1-5")
    assert first.output.startswith("guide.md (lines 1-5 of 9; indexed ") and "\n\n# Guide\n" in first.output
    as_json = json.loads(_run("read", "docs", "guide.md", "--json").output)
    assert as_json["text"].startswith("# Guide") and as_json["cursor"] is None and as_json["lines"] == 9
    listed = _run("ls", "docs")
    assert re.fullmatch(
        r"2 documents\n- guide\.md — Guide \(markdown, ~\d+ tokens, changed \d{4}-\d\d-\d\d\)\n"
        r"- notes\.txt — notes \(text, ~\d+ tokens, changed .*\)\n",
        listed.output,
    )
    assert [d["path"] for d in json.loads(_run("ls", "docs", "*.txt", "--json").output)["documents"]] == ["notes.txt"]
    outline = _run("ls", "docs", "guide.md", "--outline")
    assert [re.sub(r"~\d+", "~N", line) for line in outline.output.splitlines()] == [
        "guide.md: 3 headings",
        "Guide — lines 1-9, ~N tokens",
        "  Install — lines 3-5, ~N tokens",
        "  Errors — lines 7-9, ~N tokens",
    ]
    missing = _run("read", "docs", "nope.md")
    assert missing.exit_code == 1 and missing.output.count("\n") == 1 and "has no document 'nope.md'" in missing.output


def test_known_errors_are_one_line_and_exit_1(project: Path) -> None:
    result = CliRunner().invoke(main, ["search", "nope", "x"])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: unknown knowledge base 'nope'; configured: docs"


def test_missing_config_explains_how_to_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_KB_CONFIG", raising=False)
    result = CliRunner().invoke(main, ["status"])
    assert result.exit_code == 1 and "no kb.toml here: `mcp-kb init` writes a starter" in result.output


def test_init_writes_a_starter_that_syncs_and_never_overwrites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    write(tmp_path / "team handbook" / "leave.md", "# Leave\n\nAnnual leave is requested in the HR portal.\n")
    written = _run("init", "team handbook")
    assert written.exit_code == 0 and "knowledge base 'team_handbook'" in written.output
    starter = (tmp_path / "kb.toml").read_text(encoding="utf-8")
    assert "description = \"Documents from the folder 'team handbook'\"" in starter and "# model_path" in starter
    assert "team_handbook: 1 added" in _run("sync").output
    found = json.loads(_run("search", "team_handbook", "annual leave", "--json").output)
    assert found["results"][0]["source"] == "leave.md"
    again = CliRunner().invoke(main, ["init", "elsewhere"])
    assert again.exit_code == 1 and "kb.toml exists and is left as it is" in again.output
    assert (tmp_path / "kb.toml").read_text(encoding="utf-8") == starter


def test_zero_config_folder(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_KB_STORAGE", str(project / "zero-index"))
    result = _run("sync", "-c", str(project / "docs"))
    assert result.exit_code == 0 and "docs: 2 added" in result.output


def test_init_never_writes_through_a_kb_toml_that_links_to_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb.toml").symlink_to(tmp_path / "planted.toml")
    result = CliRunner().invoke(main, ["init", "docs"])
    assert result.exit_code == 1 and not (tmp_path / "planted.toml").exists()
    assert result.output.startswith(f"Error: kb.toml is a link to {tmp_path / 'planted.toml'}, which does not exist")
    assert result.output.count("\n") == 1


def test_init_words_a_hostile_config_path_on_one_line_and_the_next_step_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A path's line break split the `Error:` line in two (an ESC in it reached the terminal as a command)."""
    monkeypatch.chdir(tmp_path)
    refused = CliRunner().invoke(main, ["init", "docs", "-c", str(tmp_path / "no such" / "a\nb\x1b[2J.toml")])
    assert refused.exit_code == 1 and refused.output.count("\n") == 1, refused.output
    assert "a\\nb\\x1b[2J.toml" in refused.output
    (tmp_path / "sub").mkdir()
    written = CliRunner().invoke(main, ["init", "docs", "-c", "sub/kb.toml"])  # not ./kb.toml: the next step says so
    assert written.exit_code == 0 and "`mcp-kb serve` with -c sub/kb.toml." in written.output, written.output


# Folder names a file system allows that a TOML file or a KB name must survive: quotes, backslashes, line breaks,
# DEL (which JSON leaves bare and TOML refuses) and other controls, what reads as a table or a comment, another
# script, spaces at the ends; and a name that is not UTF-8 (last).
HOSTILE_FOLDER_NAMES = [
    'say "hi"',
    "it's",
    "back\\slash",
    "new\nline",
    "del\x7fete",
    "bell\x07esc\x1b[0mtab\t",
    "]]",
    "[kb]",
    "团队文档",
    " spaced ",
    "# no comment",
    os.fsdecode(b"caf\xe9"),
]


def test_init_sync_and_serve_take_a_folder_of_any_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each works on every name, but init refuses one that is not UTF-8 (TOML holds only text) in one line; the
    starter init writes reads back, by tomllib and by the config loader, as exactly that folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    for number, name in enumerate(HOSTILE_FOLDER_NAMES):
        folder = write(tmp_path / name / "leave.md", "# Leave\n\nAnnual leave is 25 days.\n").parent
        starter = tmp_path / f"kb{number}.toml"
        init = CliRunner().invoke(main, ["init", name, "-c", str(starter)])
        if name == os.fsdecode(b"caf\xe9"):
            assert init.exit_code == 1 and not starter.exists(), init.output
            assert init.output == (
                "Error: caf\\xe9: the folder's path is not UTF-8 text, which kb.toml cannot hold: "
                "rename the folder, or serve it without a kb.toml (mcp-kb serve FOLDER)\n"
            )
        else:
            assert init.exit_code == 0, (name, init.output)
            assert tomllib.loads(starter.read_text(encoding="utf-8"))["kb"][0]["paths"] == [name]
            assert load_config(starter).kb[0].paths == [folder.resolve()], name
        synced = CliRunner().invoke(main, ["sync", str(folder)])
        assert synced.exit_code == 0 and ": 1 added" in synced.output, (name, synced.output)
        served = CliRunner().invoke(main, ["serve", str(folder)])  # stdio, and its stdin ends at once: it stops
        assert served.exit_code == 0 and "serving 1 knowledge base(s)" in served.output, (name, served.output)


COMMANDS = [
    "init",
    "check",
    "chunks",
    "sync",
    "status",
    "stats",
    "search",
    "read",
    "ls",
    "versions",
    "tag",
    "rollback",
    "eval",
    "serve",
    "ui",
    "watch",
    "model",
    "model fetch",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_and_is_on_the_commands_page(command: str) -> None:
    result = _run(*command.split(), "--help")
    assert result.exit_code == 0 and "Example:" in result.output
    assert f"mcp-kb {command}" in COMMANDS_PAGE.read_text(encoding="utf-8")


def test_every_command_is_listed_here() -> None:
    assert sorted(main.commands) == sorted({command.split()[0] for command in COMMANDS})


def test_quick_start_on_the_bundled_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's first command: sync kb.toml.example and search both example KBs."""
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    example = str(ROOT / "kb.toml.example")
    assert _run("sync", "-c", example).exit_code == 0
    policy = json.loads(_run("search", "-c", example, "policy_docs", "年假怎么申请？", "--json").output)
    assert policy["results"][0]["source"] == "annual-leave.md"
    product = json.loads(_run("search", "-c", example, "product_docs", "E5021", "--mode", "keyword", "--json").output)
    assert product["results"][0]["heading"] == "Error codes › Authentication › E5021"


def _help_examples(kb: str) -> list[list[str]]:
    """Each command's `Example:` lines naming `kb`, as their help prints them (in the order of the commands)."""
    lines = []
    for name, command in main.commands.items():
        for line in (command.help or "").split("Example:")[-1].splitlines():
            if line.strip().startswith(f"mcp-kb {name} {kb}"):
                lines.append(shlex.split(line.split("  #")[0])[1:])
    return lines


def test_the_help_examples_run_on_the_bundled_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`mcp-kb read --help` showed a file the example has not (leave.md): each help example naming the example's
    KB runs as shown, in a copy of the example with its config as kb.toml, and finds what it asks for. Tagging and
    rolling back change the KB (their own tests run them)."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    shutil.copy(ROOT / "kb.toml.example", tmp_path / "kb.toml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    examples = [args for args in _help_examples("policy_docs") if args[0] not in ("tag", "rollback")]
    assert {args[0] for args in examples} >= {"sync", "search", "read", "ls", "versions", "stats"}
    for args in sorted(examples, key=lambda args: args[0] != "sync"):  # synced (and tagged) first
        result = _run(*args)
        assert result.exit_code == 0, (args, result.output)
        assert not result.output.startswith(("0 documents", "No passages found")), (args, result.output)
    section = _run("read", "policy_docs", "annual-leave.md", "--section", "How to apply (English)").output
    assert "Submit the request in the HR Portal" in section


def test_the_worked_example_answers_as_its_page_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/clients.md's worked example, each line searched as the model would call the tool."""
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    example, page = str(ROOT / "kb.toml.example"), (ROOT / "docs" / "clients.md").read_text(encoding="utf-8")
    assert _run("sync", "-c", example).exit_code == 0
    leave = _run("search", "-c", example, "policy_docs", "年假怎么请？").output.splitlines()[0]
    assert leave.startswith("[1] annual-leave.md › 年假制度 Annual leave › 2024年年假申请流程 (score")
    assert f"`{leave.split(' (score')[0]}`" in page
    error = _run("search", "-c", example, "product_docs", "What does E5021 mean?", "--mode", "keyword").output
    assert f"`{error.splitlines()[0].split(' (score')[0]}`" in page  # `[1] errors.md › Error codes › … › E5021`
    recent = json.loads(
        _run(
            "search", "-c", example, "policy_docs", "policies", "--mode", "filter", "--filter", "year>=2024", "--json"
        ).output
    )
    assert {hit["source"] for hit in recent["results"]} == {"annual-leave.md"}  # 2024; expenses.md is 2023


def test_eval_reports_quality_per_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    example = str(ROOT / "kb.toml.example")
    _run("sync", "-c", example, "product_docs")
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        '{"_id": "q1", "text": "E5021 token expired"}\n{"_id": "q2", "text": "install with homebrew"}\n'
        '{"_id": "q3", "text": "getUserInfo profile fields"}\n',
        encoding="utf-8",
    )
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\terrors\t1\nq2\tinstall\t1\nq3\tsdk\t1\n", encoding="utf-8")
    result = _run("eval", "-c", example, "product_docs", "--queries", str(queries), "--qrels", str(qrels), "--json")
    scores = {row["mode"]: row for row in json.loads(result.output)}
    assert set(scores) == {"keyword", "vector", "hybrid"}
    assert scores["hybrid"]["queries"] == 3 and scores["hybrid"]["mrr_at_10"] == 1.0
    assert scores["keyword"]["recall_at_k"] == 1.0


def test_eval_self_reports_a_hit_rate_without_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    example = str(ROOT / "kb.toml.example")
    _run("sync", "-c", example, "product_docs")
    text = _run("eval", "-c", example, "product_docs", "--self", "--k", "1").output
    assert re.search(r"^hybrid +\d+ +[01]\.\d{3}$", text, re.M)
    assert re.search(r"least served \(hybrid\): \S+\.md \d+/\d+", text)
    checks = json.loads(_run("eval", "-c", example, "product_docs", "--self", "--json").output)
    assert {c["mode"] for c in checks} == {"keyword", "vector", "hybrid"} and all(c["hit_rate"] > 0.5 for c in checks)
    warned = _run("eval", "-c", example, "product_docs", "--self", "--threshold", "1.01").output
    assert "warning: hybrid hit rate" in warned
    assert "--self" in _run("eval", "-c", example, "product_docs").output  # without labels: how to ask
    status, stats = (
        _run("status", "-c", example, "product_docs").output,
        _run("stats", "-c", example, "product_docs").output,
    )
    assert re.search(
        r"^  hit@10 without labels \(\d+ queries, \S+\): keyword [01]\.\d\d, vector [01]\.\d\d, hybrid", status, re.M
    )
    assert re.search(r"^  hit@10 without labels", stats, re.M) and "no searches recorded yet" in stats


def test_status_search_and_check_work_while_a_kb_folder_is_missing(project: Path) -> None:
    assert _run("sync").exit_code == 0
    (project / "docs").rename(project / "unmounted")
    status = _run("status")
    assert status.exit_code == 0 and "docs: 2 files" in status.output
    search = _run("search", "docs", "E5021", "--mode", "keyword")
    assert search.exit_code == 0 and search.output.startswith("[1] guide.md")
    check = CliRunner().invoke(main, ["check"])
    assert check.exit_code == 1 and "cannot read" in check.output and "unmounted" not in check.output
    sync = CliRunner().invoke(main, ["sync"])
    assert sync.exit_code == 1 and "keeps its last good version" in sync.output
    assert "docs: 2 files" in _run("status").output


def test_sync_releases_the_model_once_its_kbs_are_embedded(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_kb.models.fastembed import FastEmbedder

    released = []
    monkeypatch.setattr(FastEmbedder, "release", lambda self: released.append(self.config.model))
    assert _run("sync").exit_code == 0
    assert len(released) == 1


def test_sync_refuses_to_empty_a_kb_without_allow_mass_delete(project: Path) -> None:
    assert _run("sync").exit_code == 0
    for path in (project / "docs").iterdir():
        path.unlink()
    refused = CliRunner().invoke(main, ["sync"])
    assert refused.exit_code == 1 and "--allow-mass-delete" in refused.output
    assert "docs: 2 files" in _run("status").output
    allowed = _run("sync", "--allow-mass-delete", "--json")
    assert json.loads(allowed.stdout)[0]["files_deleted"] == 2


def test_every_command_takes_a_folder_the_way_serve_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    write(tmp_path / "notes" / "deploy.md", "# Deploy\n\nRoll back with the release tool when a canary fails.\n")
    folder = str(tmp_path / "notes")
    assert _run("sync", folder).exit_code == 0
    assert "notes: 1 files" in _run("status", folder).output
    assert _run("search", folder, "canary rollback", "--mode", "keyword").output.startswith("[1] deploy.md › Deploy")
    both = CliRunner().invoke(main, ["serve", folder, "-c", str(tmp_path / "kb.toml")])
    assert both.exit_code == 1 and "give one of them, not both" in both.output


def test_eval_warns_about_judged_documents_the_kb_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_KB_STORAGE", str(tmp_path / "index"))
    example = str(ROOT / "kb.toml.example")
    _run("sync", "-c", example, "product_docs")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "E5021 token expired"}\n', encoding="utf-8")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("q1\terrors\t1\nq1\terrors.md\t1\n", encoding="utf-8")  # no header; one id with its extension
    result = CliRunner().invoke(
        main,
        ["eval", "-c", example, "product_docs", "--queries", str(queries), "--qrels", str(qrels), "--mode", "keyword"],
    )
    assert result.exit_code == 0
    assert "warning: 1 of 2 judged documents are not in the knowledge base (e.g. 'errors.md')" in result.stderr


def test_an_index_written_by_a_newer_mcp_kb_is_refused_not_rebuilt_over(project: Path) -> None:
    from mcp_kb.index.state_table import LAYOUT_VERSION
    from mcp_kb.index.store import LanceStore

    assert _run("sync").exit_code == 0
    store = LanceStore(str(project / "index"))
    state = store.read_state("docs")
    store.write_state("docs", replace(state, fingerprints={**state.fingerprints, "layout": LAYOUT_VERSION + 97}))
    tables = sorted(store.db.list_tables().tables)
    for command in (["sync"], ["sync", "--full"], ["status"], ["search", "docs", "install"]):
        result = _run(*command)
        assert result.exit_code == 1, (command, result.output)
        assert f"written by a newer mcp-kb (layout {LAYOUT_VERSION + 97}" in result.output, (command, result.output)
    assert sorted(LanceStore(str(project / "index")).db.list_tables().tables) == tables  # nothing dropped or rebuilt
    assert f"newer mcp-kb (layout {LAYOUT_VERSION + 97}" in _served_search(project / "kb.toml")


def _served_search(config: Path) -> str:
    """What a served search tool answers (the server in memory, as a client sees it)."""
    import anyio
    from mcp import Client

    from mcp_kb.app import App
    from mcp_kb.settings import load_config
    from mcp_kb.mcp.server import build_server

    async def ask() -> str:
        async with Client(build_server(App(load_config(config)))) as client:
            result = await client.call_tool("search_docs", {"query": "install"})
            assert result.is_error
            return text_of(result.content[0])

    return anyio.run(ask)


def test_status_shows_the_running_sync_of_its_kb_only_and_a_second_sync_names_it(project: Path) -> None:
    from mcp_kb.settings import load_config
    from mcp_kb.index.state import sync_lock, write_progress
    from mcp_kb.index.store import LanceStore

    write(project / "wiki" / "home.md", "# Home\n\nThe team wiki.\n")
    with open(project / "kb.toml", "a", encoding="utf-8") as config:
        config.write('[[kb]]\nname = "wiki"\ndescription = "Wiki"\npaths = ["wiki"]\n')
    store = LanceStore.of(load_config(project / "kb.toml").storage)
    with sync_lock(store, ["docs"]):
        write_progress(store, "docs", SyncProgress(3, 10))
        shown = _run("status").output
        busy = CliRunner().invoke(main, ["sync", "wiki", "--no-wait"])
    docs, wiki = (shown.split(f"\n{name}: ")[1] for name in ("docs", "wiki"))
    assert "syncing now: 3 of 10 files indexed" in docs and "syncing now" not in wiki
    assert busy.exit_code == 1 and "a sync of docs is already running" in busy.output


def test_ctrl_c_during_a_sync_says_the_index_is_consistent_and_the_next_sync_continues(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_kb.app import App

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(App, "sync", interrupted)
    result = CliRunner().invoke(main, ["sync"])
    assert result.exit_code == 130 and "Aborted!" not in result.output
    assert result.output.startswith("Error: interrupted. The index is consistent")
    # the command to go on works pasted anywhere: it names the config by its path
    assert re.search(
        rf"to go on now, run `[^`]*mcp-kb sync -c {re.escape(str(project / 'kb.toml'))}`",
        " ".join(result.output.split()),
    )
    rebuilding = CliRunner().invoke(main, ["sync", "--reembed"])  # only a sync with --reembed goes on with it
    assert re.search(
        r"the next sync with --reembed goes on from there .* run `[^`]*mcp-kb sync -c \S+ --reembed`",
        " ".join(rebuilding.output.split()),
    ), rebuilding.output


def test_serve_refuses_a_port_for_stdio(project: Path) -> None:
    result = CliRunner().invoke(main, ["serve", "--port", "9000"])
    assert result.exit_code == 1
    assert "--port is for the HTTP transports, and this server speaks stdio: add --transport http" in result.output


_BROKEN_SYNC = """
import sys
from mcp_kb import app
def broken(*args, **kwargs):
    raise BrokenPipeError(32, "Broken pipe")
app.App.sync = broken  # as a service's connection or a child's pipe would break under the work
from mcp_kb.cli import main
main(["sync"])
"""


def test_a_broken_pipe_inside_the_work_is_an_error_line_and_a_closed_stdout_stays_quiet(project: Path) -> None:
    import subprocess
    import sys

    inside = subprocess.run([sys.executable, "-c", _BROKEN_SYNC], capture_output=True, text=True, timeout=60)
    assert inside.returncode == 1
    assert inside.stderr.strip() == "Error: a pipe or connection closed under mcp-kb: [Errno 32] Broken pipe"
    reader, writer = os.pipe()
    os.close(reader)  # `mcp-kb status | head` after head has gone
    closed = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "status"], stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60
    )
    os.close(writer)
    assert closed.returncode == 1 and "Error" not in closed.stderr and "Traceback" not in closed.stderr


def test_commands_that_embed_nothing_never_import_the_model_runtime_or_the_mcp_sdk(project: Path) -> None:
    """They would cost most of a second each (and the web crawler's HTTP client some, for a KB of folders);
    what each command imported is read in a fresh interpreter."""
    import subprocess
    import sys
    import textwrap

    environment = {**os.environ, "XDG_CACHE_HOME": str(project / "cache")}  # no identity remembered before
    first = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "sync"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=project,
        env=environment,
    )
    assert first.returncode == 0, first.stderr
    code = textwrap.dedent("""
        import json, sys
        from mcp_kb.cli import main
        try:
            main(sys.argv[1:], standalone_mode=False)
        finally:
            heavy = ("fastembed", "onnxruntime", "mcp", "httpx", "lance_namespace_urllib3_client.api")
            print(json.dumps([name for name in heavy if name in sys.modules]), file=sys.stderr)
    """)
    printed = {}
    for command in ("status", "sync", "stats", "check", "versions docs"):
        answer = subprocess.run(
            [sys.executable, "-c", code, *command.split()],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=project,
            env=environment,
        )
        assert answer.returncode == 0, answer.stderr
        assert json.loads(answer.stderr.strip().splitlines()[-1]) == [], f"mcp-kb {command}: {answer.stderr}"
        printed[command] = answer.stdout
    assert "0 added, 0 changed, 0 deleted, 2 unchanged" in printed["sync"]


_BLAS_THREADS = textwrap.dedent("""
    import ctypes, json, sys
    from mcp_kb.cli import main
    main(sys.argv[1:], standalone_mode=False)
    import numpy  # a command that did not load it: its BLAS is what a later step would get
    names = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
             "openblas_get_num_threads")
    mapped = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line.rsplit("/", 1)[-1].lower()}
    libraries = [ctypes.CDLL(path) for path in mapped]
    threads = [getattr(library, name)() for library in libraries for name in names if hasattr(library, name)]
    print(json.dumps(threads), file=sys.stderr)
""")


@pytest.mark.parametrize("command", ["status", "sync"])
def test_commands_run_numpys_blas_on_one_thread(project: Path, command: str) -> None:
    """Each idle OpenBLAS worker spins for a while after numpy loads: 0.1 s of CPU per command on two cores, as much
    as a no-op sync's own work; mcp-kb's vector products are too small to share out."""
    if os.cpu_count() == 1:
        pytest.skip("one core: OpenBLAS runs on one thread anyway")
    environment = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    answer = subprocess.run(
        [sys.executable, "-c", _BLAS_THREADS, command],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=project,
        env=environment,
    )
    assert answer.returncode == 0, answer.stderr
    threads = json.loads(answer.stderr.strip().splitlines()[-1])
    if not threads:
        pytest.skip("this numpy's BLAS is not OpenBLAS")
    assert threads == [1]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_sync_stopped_by_ctrl_c_or_sigterm_says_so_and_status_records_it(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """A service manager's SIGTERM used to end a sync without a trace (status: "last sync never")."""
    from mcp_kb.app import App
    from mcp_kb.settings import load_config

    for number in range(600):  # long enough to stop after its first batch of 32
        write(tmp_path / "docs" / f"n{number:03d}.md", f"# Note {number}\n\n" + f"Meeting {number} moved. " * 40 + "\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Notes"\npaths = ["docs"]\n',
        encoding="utf-8",
    )
    # a child of a process that ignores SIGINT (as pytest-xdist's workers do) would ignore it too: a terminal's doesn't
    process = subprocess.Popen(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    app = App(load_config(config))
    # past 32 files done, the first batch is written (within a batch, progress counts at most up to its end)
    until(lambda: app.glance("docs").progress.done > 32 or process.poll() is not None, what="the first batch written")
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "interrupted. The index is consistent" in stderr, stderr
    [status] = app.status("docs")
    said = re.match(r"interrupted after writing (\d+) of 600 new and changed files", status.last_error or "")
    assert said, status.last_error
    written = int(said.group(1))
    # an interrupt landing between a batch's commit and its count says one batch (32 files) too few
    assert status.last_outcome == "interrupted" and 32 <= written <= status.files <= written + 32


def test_a_folder_named_in_another_script_is_served_under_a_name_the_command_states(tmp_path: Path) -> None:
    write(tmp_path / "团队文档" / "年假.md", "# 年假\n\n年假每年十五天，提前两周申请。\n")
    result = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "check", "-c", str(tmp_path / "团队文档")],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    stated = re.search(
        r"folder '团队文档': knowledge base (TuanDuiWenDang-[0-9a-f]{4}), tool (search_\S+)", result.stderr
    )
    assert stated and stated.group(2) == f"search_{stated.group(1)}" and stated.group(1) in result.stdout


def test_a_not_synced_answer_names_the_index_it_looked_at_and_a_command_that_works_anywhere(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A client's `env` block may give the server another storage than the shell's: the answer says where it looked,
    and its remedy, pasted into any shell in any directory, syncs exactly that index."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    env = {**os.environ, "MCP_KB_STORAGE": str(elsewhere / "client index")}
    asked = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "search", "docs", "token expired", "-c", str(project / "kb.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere,
        timeout=300,
    )
    message = " ".join(asked.stderr.split())
    assert asked.returncode == 1 and f"in the index at {elsewhere / 'client index'}" in message, asked.stderr
    found = re.search(r"run `([^`]+)`", message)
    assert found, message
    remedy = found.group(1)
    # the model too: on a machine without internet a remedy without its folder fails where it is pasted
    model = "".join(
        f"{name}={os.environ[name]} "
        for name in ("MCP_KB_EMBEDDING_MODEL", "MCP_KB_EMBEDDING_MODEL_PATH")
        if os.environ.get(name)
    )
    assert remedy == f"MCP_KB_STORAGE='{elsewhere / 'client index'}' {model}mcp-kb sync docs -c {project / 'kb.toml'}"
    shell = {name: value for name, value in os.environ.items() if not name.startswith("MCP_KB_")}
    pasted = subprocess.run(
        remedy.replace("mcp-kb", f"{sys.executable} -m mcp_kb", 1),
        shell=True,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=300,
        env=shell,
    )
    assert pasted.returncode == 0, pasted.stderr
    status = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "status", "-c", str(project / "kb.toml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert f"index at {elsewhere / 'client index'}" in status.stdout and "docs: 2 files" in status.stdout


def test_a_folders_remedy_names_the_folder_by_its_path(tmp_path: Path) -> None:
    write(tmp_path / "my docs" / "a.md", "# A\n\nAnnual leave is 25 days.\n")
    env = {key: value for key, value in os.environ.items() if key != "MCP_KB_STORAGE"}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")  # a folder's own index lives in the user's data folder
    asked = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "search", str(tmp_path / "my docs"), "leave"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=300,
    )
    assert asked.returncode == 1
    assert f"mcp-kb sync '{tmp_path / 'my docs'}'` (or call" in " ".join(asked.stderr.split()), asked.stderr


def test_sync_exits_3_when_files_failed_and_0_once_everything_is_indexed(tmp_path: Path) -> None:
    """A script tells "all indexed" from "a PDF skipped" by the exit status, --json too; under CI, systemd or
    `| tee` (no terminal) no bar's carriage returns."""
    write(tmp_path / "docs" / "guide.md", "# Guide\n\nRun pip install mcp-kb to install the package.\n")
    (tmp_path / "docs" / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is no PDF at all\n%%EOF\n")
    config = tmp_path / "kb.toml"
    config.write_text(
        f'storage = "{tmp_path / "index"}"\n[[kb]]\nname = "docs"\ndescription = "Guides"\npaths = ["docs"]\n',
        encoding="utf-8",
    )

    def sync(*options: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mcp_kb", "sync", "-c", str(config), *options],
            text=True,
            capture_output=True,
            env=os.environ.copy(),
            timeout=300,
        )

    failed = sync()
    assert failed.returncode == 3, failed.stderr
    assert "1 added" in failed.stdout and "1 failed" in failed.stdout and "failed broken.pdf" in failed.stdout
    assert "\r" not in failed.stderr  # no bar where no terminal shows one (a short sync prints no progress line)
    as_json = sync("--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)[0]["files_failed"] == 1
    (tmp_path / "docs" / "broken.pdf").unlink()
    current = sync("--json")
    assert current.returncode == 0 and json.loads(current.stdout)[0]["files_failed"] == 0, current.stderr


def test_progress_lines_come_every_ten_seconds_with_the_pace(capsys: pytest.CaptureFixture[str]) -> None:
    """A sync shorter than that prints its summary alone: a failing one its one `Error:` line."""
    from mcp_kb.cli import _ProgressLines

    now = [100.0]
    lines = _ProgressLines(clock=lambda: now[0])
    for second, done in [(0, 0), (4, 30), (9.9, 60), (10, 64), (15, 90), (20.5, 128), (21, 130)]:
        now[0] = 100.0 + second
        lines(done, 300, f"docs: {done} of 300 files indexed")
    printed = capsys.readouterr().err.splitlines()
    assert printed == [
        "mcp-kb: docs: 64 of 300 files indexed, 6.4 files/s, about 37 s left",
        "mcp-kb: docs: 128 of 300 files indexed, 6.2 files/s, about 28 s left",
    ]


def test_a_model_folder_that_does_not_exist_is_said_so(project: Path) -> None:
    """It said "no tokenizer.json", as if the folder were there but incomplete."""
    env = {
        **os.environ,
        "MCP_KB_EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2",
        "MCP_KB_EMBEDDING_MODEL_PATH": str(project / "no-such-model"),
    }
    synced = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "sync", "-c", str(project / "kb.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert synced.returncode == 1
    assert synced.stderr.startswith(f"Error: the model folder {project / 'no-such-model'} does not exist; "), (
        synced.stderr
    )
    status = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "status", "-c", str(project / "kb.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # recorded for every caller with the folder named by what it is; its owner reads where it is
    assert f"last error: the model folder {project / 'no-such-model'} does not exist" in status.stdout, status.stdout


@pytest.mark.parametrize(
    ("name", "offered"),
    [("my docs", "my_docs"), ("Team Handbook v2.1", "Team_Handbook_v2_1"), ("年假 政策", "NianJia_ZhengCe")],
)
def test_a_kb_name_that_is_refused_comes_with_a_valid_one_to_use(tmp_path: Path, name: str, offered: str) -> None:
    config = tmp_path / "kb.toml"
    config.write_text(f'[[kb]]\nname = "{name}"\ndescription = "d"\npaths = ["docs"]\n', encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "mcp_kb", "check", "-c", str(config)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert (
        checked.returncode == 1 and f"must be 1-64 letters, digits, '_' or '-' (e.g. '{offered}')" in checked.stderr
    ), checked.stderr


def test_two_projects_initialised_alike_keep_their_own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kb.toml without `storage` shares the per-user data folder, where KBs of one name are one KB: a second
    project's `docs` read the first one's, and its sync offered to delete them. `init` keeps the index beside."""
    monkeypatch.delenv("MCP_KB_STORAGE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    for project, files in (("first", 3), ("second", 1)):
        for number in range(files):
            write(tmp_path / project / "docs" / f"n{number}.md", f"# Note {number}\n\nProject {project} note.\n")
        monkeypatch.chdir(tmp_path / project)
        assert _run("init").exit_code == 0
        synced = CliRunner().invoke(main, ["sync"])
        assert synced.exit_code == 0 and f"docs: {files} added" in synced.output, synced.output
    for project, files in (("first", 3), ("second", 1)):
        monkeypatch.chdir(tmp_path / project)
        assert f"docs: {files} files" in _run("status").output
    assert (tmp_path / "first" / ".mcp-kb").is_dir() and not (tmp_path / "data").exists()


def test_a_folder_holding_a_kb_toml_is_read_by_it(project: Path) -> None:
    """`-c PROJECT` indexed the project's files (kb.toml among them) as a folder of documents."""
    assert _run("sync").exit_code == 0
    status = CliRunner().invoke(main, ["status", "-c", str(project)])
    assert (
        status.exit_code == 0 and "docs: 2 files" in status.output and f"using {project / 'kb.toml'}" in status.output
    ), status.output


def test_help_shows_each_example_on_a_line_of_its_own() -> None:
    """click re-wraps a paragraph: the examples ran together ("mcp-kb sync policy_docs     mcp-kb sync …")."""
    shown = _run("sync", "--help").output
    assert "\n      mcp-kb sync policy_docs\n      mcp-kb sync policy_docs --tag before-migration\n" in shown, shown
