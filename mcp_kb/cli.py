"""The `mcp-kb` command line: each command parses options, calls the library, prints."""

from __future__ import annotations

import logging
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.decorators import FC

from .api import (
    __version__,
    BROWSE_LIMIT_MAX,
    FILTER_SYNTAX,
    LOOPBACK,
    BrowseRequest,
    is_number,
    KBError,
    option_help,
    pace,
    printable,
    ReadRequest,
    rebuild_option,
    remember_invocation,
    RollbackRequest,
    SearchRequest,
    SelfCheckRequest,
    EvaluateRequest,
    TagRequest,
    sync_remedy,
    SyncRequest,
    work_kept,
)
from .present import callers_text, json_text, stats_text, status_text
from .signals import sigterm_interrupts
from .settings import (
    ENV_CONFIG,
    ENV_MODEL,
    ENV_MODEL_PATH,
    ENV_STORAGE,
    HEALTHY_HIT_RATE,
    MODES,
    PAGE_PORT,
    RANKED_MODES,
    TRANSPORTS,
    Config,
    ServerConfig,
    build_config,
    config_for_folder,
    config_target,
    environment,
    load_config,
)

if TYPE_CHECKING:
    from .api import App

_SHOWN_CHARACTERS = 600  # of each passage in `search`'s text output (--json shows all)
CONFIG_HELP = f"kb.toml to use, or a folder to serve with defaults (default: ./kb.toml, or ${ENV_CONFIG})"


def _load(config_path: str | None) -> Config:
    """A config file, or a zero-config KB for a folder."""
    path, named = config_target(config_path)
    # what the command's remedies must repeat to work pasted elsewhere: the index, and the model offline machines need
    variables = {name: environment(name) or "" for name in (ENV_STORAGE, ENV_MODEL, ENV_MODEL_PATH)}
    if path.is_dir() and (path / "kb.toml").is_file():  # a project's folder: its own config, not its files
        path = path / "kb.toml"
        click.echo(f"using {printable(str(path))}", err=True)
    if path.is_dir():
        config = config_for_folder(path)
        [kb] = config.kb
        if kb.name != path.resolve().name:  # say what a client will see it as
            click.echo(
                f"folder '{printable(path.resolve().name)}': knowledge base {kb.name}, tool {kb.search_tool_name}",
                err=True,
            )
        remember_invocation(folder=path, variables=variables)
        return config
    if not path.exists() and not named:
        raise KBError(
            "no kb.toml here: `mcp-kb init` writes a starter, or pass --config FILE, or a folder (mcp-kb serve ./docs)"
        )
    config = load_config(path)
    remember_invocation(config=path, variables=variables)
    return config


def _load_or_defaults(config_path: str | None) -> Config:
    """The config in use, or the default settings when there is none (for commands that need no KB)."""
    path, named = config_target(config_path)
    return _load(config_path) if named or path.exists() else build_config({}, Path.cwd(), None)


class _Number(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on (>=8.1 is allowed)
    """A whole number as versions, pages, lines, chunks and ports are written everywhere (text.is_number: ASCII
    digits): click's own takes "１", "٣" and "1_0". A sign is kept for the request's bounds to speak of."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if not is_number(text.removeprefix("-")):
            self.fail(f"{printable(str(value))[:40]!r} is not a number (digits 0-9)", param, ctx)
        return int(text)


NUMBER = _Number()


def _app(config_path: str | None) -> App:
    from .api import App

    return App(_load(config_path))


def _one_of(folder: str | None, config_path: str | None) -> None:
    """A command served from a folder takes its settings from nowhere else."""
    if folder and config_path:
        raise KBError(f"{folder} is a folder and --config names {config_path}: give one of them, not both")


def _kb_or_folder(kb: str | None, config_path: str | None) -> tuple[str | None, str | None]:
    """Every command names what to work on the same way: a KB argument that is an existing folder, and
    not a KB of the config in use, is that folder with defaults (as `serve FOLDER`), so
    `mcp-kb sync ./docs` works. Returns (kb, config)."""
    if kb is None or config_path or not Path(kb).expanduser().is_dir():
        return kb, config_path
    target, _named = config_target(None)
    if target.is_file() and kb in {k.name for k in load_config(target).kb}:
        return kb, None
    return None, kb


def _interrupted(kb: str | None, option: str = "") -> str:
    """What Ctrl-C during a sync leaves; `option`: that of the rebuild it was, which the command to go on repeats."""
    return (
        f"interrupted. The index is consistent: {work_kept(option)}; to go on now, "
        f"{sync_remedy(kb, f'--{option}' if option else '')}"
    )


class _Interrupted(click.ClickException):
    exit_code = 130  # as a shell reports Ctrl-C


class _Commands(click.Group):
    """The `mcp-kb` group: a known error of any command becomes one `Error:` line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KBError as exc:
            raise click.ClickException(str(exc)) from exc
        except BrokenPipeError as exc:
            # click ends any broken pipe with a silent exit 1, taking it for a closed stdout (`… | head`);
            # one inside the work (a service's connection, a child's pipe) must say what broke.
            if _stdout_gone():
                raise
            raise click.ClickException(f"a pipe or connection closed under mcp-kb: {exc}") from exc


def _stdout_gone() -> bool:
    """Whether stdout's reader went away; True when that cannot be told (click's behaviour stands)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or a stdout without a descriptor
        return True


def _sync_flag(field: str, flags: str = "") -> Callable[[FC], FC]:
    """A `sync` flag as the sync request declares its field: help text and default."""
    return click.option(
        flags or f"--{field.replace('_', '-')}",
        field,
        is_flag=True,
        default=SyncRequest.model_fields[field].default,
        help=option_help(SyncRequest, field),
    )


config_option = click.option("--config", "-c", "config_path", metavar="PATH", help=CONFIG_HELP)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
as_of_option = click.option("--as-of", "as_of", metavar="VERSION|TAG|TIME", help=option_help(SearchRequest, "as_of"))


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="mcp-kb")
@click.option("--verbose", "-v", is_flag=True, help="Log progress details to stderr.")
def main(verbose: bool) -> None:
    """Serve folders of your documents as searchable knowledge bases over MCP.

    Example:

    \b
        mcp-kb serve ./docs            # one folder, no config

        mcp-kb sync -c kb.toml         # index every configured KB
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from .api import prepare_model_runtimes

    prepare_model_runtimes()


@main.command()
@config_option
@json_option
def check(config_path: str | None, as_json: bool) -> None:
    """Validate the config and show per KB what would be indexed.

    Example:

    \b
        mcp-kb check -c kb.toml
    """
    app = _app(config_path)
    summary = app.check()
    config = app.config
    if as_json:
        click.echo(json_text(summary))
        return
    click.echo(f"config OK: {len(config.kb)} knowledge base(s); index at {config.storage.uri}")
    for item in summary:
        if item.error:
            click.echo(f"\n{item.kb} (tool {item.tool}): {item.error}")
            continue
        types = ", ".join(f"{n} {suffix}" for suffix, n in sorted(item.by_type.items()))
        click.echo(f"\n{item.kb} (tool {item.tool}): {item.files} files ({types or 'none'}), {item.chunks} chunks")
        if item.crawl_requests:
            click.echo(f"  web: {item.crawl_requests} requests to crawl the sites")
        if item.no_documents:
            click.echo(f"  {item.no_documents}")
        _echo_first([f"  {count:5d}  {path}" for path, count in item.chunks_by_file.items()], "files")
        _echo_first([f"  skipped {skip.path}: {skip.reason}" for skip in item.skipped], "skipped")
    failed = [item.kb for item in summary if item.error]
    if failed:
        raise KBError(f"cannot read the sources of {', '.join(failed)} (see above)")


_LISTED = 50  # lines of one list `check` prints; --json has them all


def _echo_first(lines: list[str], what: str) -> None:
    for line in lines[:_LISTED]:
        click.echo(line)
    if len(lines) > _LISTED:
        click.echo(f"  ... and {len(lines) - _LISTED} more {what} (--json lists them all)")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@config_option
@json_option
def chunks(file: Path, config_path: str | None, as_json: bool) -> None:
    """Print the chunks FILE yields, with heading paths and token counts.

    Uses the chunking settings of the first KB in the config (or the defaults).

    Example:

    \b
        mcp-kb chunks docs/guide.md
    """
    from .api import App

    result, notes = App(_load_or_defaults(config_path)).chunks(file)
    if as_json:
        click.echo(json_text([{**c.__dict__, "heading": c.heading} for c in result]))
        return
    for note in notes:
        click.echo(f"note: {note}")
    for chunk in result:
        # A PDF's chunk has a page, a text file's lines; an Office file's has neither (it is cited by heading).
        where = (
            f"page {chunk.page}"
            if chunk.page
            else f"lines {chunk.line_start}-{chunk.line_end}"
            if chunk.line_start is not None
            else ""
        )
        parts = (f"--- chunk {chunk.chunk_index}", f"{chunk.n_tokens} tokens", where, chunk.heading or "(no heading)")
        click.echo(" · ".join(part for part in parts if part))
        click.echo(chunk.text)


@main.command()
@click.argument("folder", default="docs")
@click.option(
    "--config", "-c", "config_path", default="kb.toml", show_default=True, metavar="PATH", help="The file to write."
)
def init(folder: str, config_path: str) -> None:
    """Write a commented starter kb.toml with one knowledge base over FOLDER (default: ./docs).

    Example:

    \b
        mcp-kb init ./handbook && mcp-kb sync
    """
    from .settings import write_starter

    target = Path(config_path)
    kb = write_starter(folder, target)
    shown = printable(str(target))
    click.echo(
        f"wrote {shown}: knowledge base {kb.name!r} over {printable(str(kb.paths[0]))}"
        f"{'' if kb.paths[0].is_dir() else ' (not there yet: create it and add documents)'}."
    )
    click.echo(
        f"Next: say what the documents are about in its description, then `mcp-kb sync` and "
        f"`mcp-kb serve`{'' if target.resolve() == Path('kb.toml').resolve() else f' with -c {shown}'}."
    )


@main.command()
@click.argument("kb", required=False)
@_sync_flag("full")
@_sync_flag("reembed")
@_sync_flag("wait", "--wait/--no-wait")
@_sync_flag("allow_mass_delete")
@click.option("--tag", metavar="NAME", help=option_help(SyncRequest, "tag"))
@click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default=None,
    help="Parse, chunk and embed here (local) or on a Ray cluster (ray); default: [sync] engine.",
)
@click.option(
    "--address",
    default=None,
    metavar="ADDRESS",
    help="The Ray cluster to sync on (HOST:6379 or ray://HOST:10001; implies --engine ray); "
    "default: [sync] ray_address.",
)
@config_option
@json_option
def sync(
    kb: str | None,
    full: bool,
    reembed: bool,
    wait: bool,
    allow_mass_delete: bool,
    tag: str | None,
    engine: str | None,
    address: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Index new and changed files of KB (or all KBs); remove deleted ones.

    Example:

    \b
        mcp-kb sync policy_docs
        mcp-kb sync policy_docs --tag before-migration
        mcp-kb sync --engine ray --address head-node:6379
    """
    from .api import App

    name, config = _kb_or_folder(kb, config_path)
    settings = _load(config)
    app = App(settings.model_copy(update={"sync": settings.sync.overridden(engine, address)}))
    app.releases_model = True
    progress = _progress(as_json)
    try:
        with sigterm_interrupts():
            reports = app.sync(
                SyncRequest(
                    kb=name, full=full, reembed=reembed, wait=wait, allow_mass_delete=allow_mass_delete, tag=tag
                ),
                progress=progress,
            )
    except KeyboardInterrupt:
        raise _Interrupted(_interrupted(name, rebuild_option(full, reembed))) from None
    finally:
        progress.close()
    if as_json:
        click.echo(json_text(reports))
    else:
        for report in reports:
            click.echo(report.summary())
    if any(report.files_failed for report in reports):  # a script tells "all indexed" from "some skipped"
        sys.exit(SYNC_FAILED_FILES)


@main.command()
@click.argument("kb", required=False)
@config_option
@json_option
def status(kb: str | None, config_path: str | None, as_json: bool) -> None:
    """Show files, chunks, last sync, model and failures per KB.

    Example:

    \b
        mcp-kb status
    """
    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    statuses = app.status(name)
    source = app.model_source()
    if as_json:
        click.echo(
            json_text(
                [{**item.as_dict(), "model_source": source, "storage": app.config.storage.uri} for item in statuses]
            )
        )
        return
    click.echo(f"index at {app.config.storage.uri}")
    click.echo(f"embedding model {app.config.embedding.model}: {source}")
    for item in statuses:
        click.echo(status_text(item, app.config.located))


@main.command()
@click.argument("kb", required=False)
@config_option
@json_option
@click.option("--callers", is_flag=True, help="Sum up the audit trail ([server] audit_log) per caller instead.")
def stats(kb: str | None, config_path: str | None, as_json: bool, callers: bool) -> None:
    """Show how KB (or every KB) is doing: searches, latency per stage, cache hits, degraded and
    empty answers, tokens embedded, the latest label-free hit rate.

    Search figures are those of the last server that answered for the KB.

    Example:

    \b
        mcp-kb stats policy_docs

        mcp-kb stats --callers
    """
    if callers:
        _caller_stats(_load(config_path), as_json)
        return
    name, config = _kb_or_folder(kb, config_path)
    figures = _app(config).stats(name)
    if as_json:
        click.echo(json_text(figures))
        return
    for item in figures:
        click.echo(stats_text(item))


def _caller_stats(config: Config, as_json: bool) -> None:
    from .api import callers

    if not config.server.audit_log:
        raise KBError("no audit trail: set [server] audit_log in the config the server runs with")
    figures = callers(Path(config.server.audit_log))
    if as_json:
        click.echo(json_text(figures))
        return
    click.echo(callers_text(figures) if figures else f"no requests recorded in {config.server.audit_log} yet")


@main.command()
@click.argument("kb")
@click.argument("query")
@click.option("--mode", type=click.Choice(MODES), help=option_help(SearchRequest, "mode", "the KB's"))
@click.option("--top-k", type=NUMBER, help=option_help(SearchRequest, "top_k", "the KB's"))
@click.option("--min-score", type=float, help=option_help(SearchRequest, "min_score"))
@click.option(
    "--filter",
    "filters",
    multiple=True,
    metavar="FIELD=VALUE",
    help=f"{SearchRequest.model_fields['filters'].description}: {FILTER_SYNTAX}. Repeatable.",
)
@click.option(
    "--context",
    type=NUMBER,
    default=SearchRequest.model_fields["context"].default,
    help=option_help(SearchRequest, "context"),
)
@click.option("--max-per-document", type=NUMBER, help=option_help(SearchRequest, "max_per_document", "the KB's"))
@click.option("--max-tokens", type=NUMBER, help=option_help(SearchRequest, "max_tokens", "the KB's"))
@as_of_option
@config_option
@json_option
def search(
    kb: str,
    query: str,
    mode: str | None,
    top_k: int | None,
    min_score: float | None,
    filters: tuple[str, ...],
    context: int,
    max_per_document: int | None,
    max_tokens: int | None,
    as_of: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Search KB for QUERY and print cited results.

    Example:

    \b
        mcp-kb search policy_docs "how do I apply for annual leave" --filter doc_type=policy
        mcp-kb search policy_docs "annual leave" --as-of before-migration
    """
    from .api import parse_filters, parse_search

    request = parse_search(
        {
            "query": query,
            "mode": mode,
            "top_k": top_k,
            "min_score": min_score,
            "filters": parse_filters(filters),
            "context": context,
            "max_per_document": max_per_document,
            "max_tokens": max_tokens,
            "as_of": as_of,
        }
    )
    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    result = app.search(name or app.config.kb[0].name, request)
    if as_json:
        click.echo(json_text(result))
        return
    from .present import cited_text

    click.echo(cited_text(result, max_chars=_SHOWN_CHARACTERS))


@main.command()
@click.argument("kb")
@click.argument("path")
@click.option("--section", help=option_help(ReadRequest, "section"))
@click.option("--pages", help=option_help(ReadRequest, "pages"))
@click.option("--lines", help=option_help(ReadRequest, "lines"))
@click.option("--chunk", type=NUMBER, help=option_help(ReadRequest, "chunk"))
@click.option("--max-tokens", type=NUMBER, help=option_help(ReadRequest, "max_tokens", "all of it"))
@as_of_option
@config_option
@json_option
def read(
    kb: str,
    path: str,
    section: str | None,
    pages: str | None,
    lines: str | None,
    chunk: int | None,
    max_tokens: int | None,
    as_of: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Print a document of KB from its index: all of it, or a --section, --pages, --lines, or on from a --chunk.

    PATH is the document as search results cite it.

    Example:

    \b
        mcp-kb read policy_docs annual-leave.md --section "How to apply (English)"
    """
    from .api import parse_request, ReadRequest
    from .present import read_text

    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    name = name or app.config.kb[0].name
    request = parse_request(
        ReadRequest,
        {
            "kb": name,
            "path": path,
            "section": section,
            "pages": pages,
            "lines": lines,
            "chunk": chunk,
            "max_tokens": max_tokens,
            "as_of": as_of,
        },
    )
    answer = app.read(name, request) if max_tokens else app.read_through(name, request)
    if as_json:
        click.echo(json_text(answer))
        return
    rest = f"--lines {answer.line_end + 1}-{answer.lines} reads on"
    click.echo(read_text(answer, go_on=rest))


@main.command(name="ls")
@click.argument("kb")
@click.argument("path", default="")
@click.option("--outline", is_flag=True, help=option_help(BrowseRequest, "outline"))
@click.option(
    "--sort",
    type=click.Choice(["path", "changed"]),
    default="path",
    show_default=True,
    help=option_help(BrowseRequest, "sort"),
)
@click.option("--limit", type=NUMBER, help="Most entries to print (default: all).")
@as_of_option
@config_option
@json_option
def list_documents(
    kb: str,
    path: str,
    outline: bool,
    sort: str,
    limit: int | None,
    as_of: str | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """List the documents of KB from its index (under PATH, a prefix or a glob), or with --outline the headings of
    the document PATH.

    Example:

    \b
        mcp-kb ls policy_docs "*.md" --sort changed
    """
    from .api import BrowseRequest, parse_request
    from .present import browse_text

    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    name = name or app.config.kb[0].name
    request = parse_request(
        BrowseRequest,
        {
            "kb": name,
            "path": path,
            "outline": outline,
            "sort": sort,
            "limit": min(limit or BROWSE_LIMIT_MAX, BROWSE_LIMIT_MAX),
            "as_of": as_of,
        },
    )
    answer = app.browse_through(name, request, limit)
    if as_json:
        click.echo(json_text(answer))
        return
    click.echo(browse_text(answer))
    shown = len(answer.documents) + len(answer.outline)
    if shown < answer.total:
        click.echo(f"(the first {shown} of {answer.total}: a larger --limit shows more)")


@main.command()
@click.argument("kb")
@config_option
@json_option
def versions(kb: str, config_path: str | None, as_json: bool) -> None:
    """List the kept versions of KB: when each was made, what it changed, its tags, who synced.

    Example:

    \b
        mcp-kb versions policy_docs
    """
    from .present import versions_text

    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    kept = app.versions(name or app.config.kb[0].name)
    if as_json:
        click.echo(json_text(kept))
        return
    click.echo(versions_text(kept))


@main.command()
@click.argument("kb")
@click.argument("name")
@click.option("--version", "number", type=NUMBER, help=option_help(TagRequest, "version"))
@click.option("--remove", is_flag=True, help=option_help(TagRequest, "remove"))
@config_option
def tag(kb: str, name: str, number: int | None, remove: bool, config_path: str | None) -> None:
    """Tag a version of KB (the current one by default): a name to search as of and to roll back to, kept until
    the tag is removed.

    Example:

    \b
        mcp-kb tag policy_docs before-migration
        mcp-kb tag policy_docs before-migration --remove
    """
    kb_name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    tagged = app.tag(TagRequest(kb=kb_name or app.config.kb[0].name, name=name, version=number, remove=remove))
    click.echo(
        f"{'removed the tag' if remove else 'tagged'} {name!r} {'from' if remove else 'on'} version "
        f"{tagged.number} ({tagged.finished})"
    )


@main.command()
@click.argument("kb")
@click.option(
    "--to",
    "target",
    required=True,
    metavar="VERSION|TAG|TIME",
    help=option_help(RollbackRequest, "to"),
)
@config_option
def rollback(kb: str, target: str, config_path: str | None) -> None:
    """Make an earlier version of KB current again, as a new version (the history stays).

    The next sync compares the sources with the rolled-back index and embeds only what differs: fix the sources
    first, or they come back.

    Example:

    \b
        mcp-kb rollback policy_docs --to before-migration
    """
    name, config = _kb_or_folder(kb, config_path)
    app = _app(config)
    made = app.rollback(RollbackRequest(kb=name or app.config.kb[0].name, to=target))
    click.echo(
        f"version {made.rolled_back_to} is current again, as version {made.number} (+{made.added} "
        f"~{made.changed} -{made.removed} documents)"
    )


@main.command(name="eval")
@click.argument("kb")
@click.option(
    "--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="JSONL with _id and text per line."
)
@click.option(
    "--qrels",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="TSV with header: query-id, corpus-id, score.",
)
@click.option(
    "--log",
    "reviewed_log",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='A query log whose entries you marked with "relevant": [files]: its queries become the labelled set.',
)
@click.option(
    "--self",
    "self_made",
    is_flag=True,
    help="No labels: ask queries made from the KB's own chunks; report how often their document comes back.",
)
@click.option("--sample", default=100, show_default=True, help="With --self: chunks to make queries from.")
@click.option(
    "--threshold",
    default=HEALTHY_HIT_RATE,
    show_default=True,
    help="With --self: warn when a mode's hit rate is below this.",
)
@click.option("--mode", default="all", type=click.Choice(["all", *RANKED_MODES]))
@click.option("--k", default=10, show_default=True, help="Cut-off for recall@k (with --self: hit@k).")
@config_option
@json_option
def evaluate(
    kb: str,
    queries: Path | None,
    qrels: Path | None,
    reviewed_log: Path | None,
    self_made: bool,
    sample: int,
    threshold: float,
    mode: str,
    k: int,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Measure retrieval quality of KB: recall@k, MRR@10, nDCG@10, latency; or, with --self,
    a label-free hit rate.

    Hits count for document X when their source file is named X.<ext>.

    Example:

    \b
        mcp-kb eval docs --queries q.jsonl --qrels qrels.tsv --mode all

        mcp-kb eval docs --self --sample 200

        mcp-kb eval docs --log reviewed.queries.jsonl
    """
    from .api import load_qrels, load_queries, load_reviewed_log
    from .present import scores_text, self_checks_text

    app = _app(config_path)
    modes = list(RANKED_MODES) if mode == "all" else [mode]
    if self_made:
        checks = app.self_check(SelfCheckRequest(kb=kb, modes=modes, sample=sample, k=k))
        if as_json:
            click.echo(json_text([c.__dict__ for c in checks]))
        else:
            click.echo(self_checks_text(checks, threshold))
        return
    if reviewed_log:
        query_by_id, judgements = load_reviewed_log(reviewed_log)
    elif queries and qrels:
        query_by_id, judgements = load_queries(queries), load_qrels(qrels)
    else:
        raise KBError(
            "give --queries and --qrels (labelled queries), --log (a reviewed query log), or --self "
            "(queries made from the KB itself)"
        )
    results, warning = app.evaluate(
        EvaluateRequest(kb=kb, queries=query_by_id, judgements=judgements, modes=modes, k=k)
    )
    if warning:
        click.echo(f"warning: {warning}", err=True)
    if as_json:
        click.echo(json_text([r.__dict__ for r in results]))
    else:
        click.echo(scores_text(results, k))


@main.command()
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
@config_option
@click.option("--transport", type=click.Choice(TRANSPORTS), help="Default: the config's (stdio).")
@click.option("--host", help=f"Address for sse/http (default {ServerConfig.model_fields['host'].default}).")
@click.option("--port", type=NUMBER, help=f"Port for sse/http (default {ServerConfig.model_fields['port'].default}).")
@click.option("--read-only", is_flag=True, default=None, help="Hide the sync tool.")
@click.option(
    "--stateless",
    is_flag=True,
    default=None,
    help="Streamable HTTP without sessions: replicas behind a load balancer need no sticky sessions.",
)
@click.option(
    "--workers",
    type=NUMBER,
    help="Processes serving stateless HTTP on the port, each answering any request (default: the config's, 1).",
)
def serve(
    folder: str | None,
    config_path: str | None,
    transport: str | None,
    host: str | None,
    port: int | None,
    read_only: bool | None,
    stateless: bool | None,
    workers: int | None,
) -> None:
    """Run the MCP server (stdio by default) for FOLDER or the configured KBs.

    Example:

    \b
        mcp-kb serve ./docs

        mcp-kb serve -c kb.toml --transport http --port 8765

        mcp-kb serve -c kb.toml --transport http --stateless --workers 4
    """
    from .api import App
    from .serve import run_server

    _one_of(folder, config_path)
    config = _load(folder or config_path)
    run_server(
        App(
            config.serving(
                transport=transport, host=host, port=port, read_only=read_only, stateless=stateless, workers=workers
            ),
            serving=True,
        )
    )


@main.command()
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
@config_option
@click.option(
    "--port", type=NUMBER, default=PAGE_PORT, show_default=True, help=f"Port on {LOOPBACK} (0: any free one)."
)
def ui(folder: str | None, config_path: str | None, port: int) -> None:
    """Open the admin page for FOLDER or the configured KBs on this machine: status, live sync progress,
    failed files, a search playground and health charts. (An HTTP server serves the same page at `/`.)

    Example:

    \b
        mcp-kb ui -c kb.toml
    """
    from .api import App
    from .serve import run_page

    _one_of(folder, config_path)
    run_page(App(_load(folder or config_path), serving=True), port)


@main.command()
@click.argument("kb", required=False)
@config_option
def watch(kb: str | None, config_path: str | None) -> None:
    """Keep KB (or all KBs) in sync with their files, without serving.

    Syncs once, then again whenever files change (and on each KB's schedule). For a team
    that shares one index: run this next to the documents, serve the index elsewhere.

    Example:

    \b
        mcp-kb watch -c kb.toml
    """
    from .api import App
    from .api import keep_in_sync

    name, config = _kb_or_folder(kb, config_path)
    app = App(_load(config))
    app.releases_model = True
    logging.getLogger("mcp_kb").setLevel(logging.INFO)
    click.echo(f"watching {', '.join(k.name for k in app.config.select(name))}; Ctrl-C to stop", err=True)
    try:
        with sigterm_interrupts():
            keep_in_sync(app, name)
    except KeyboardInterrupt:
        pass


@main.group()
def model() -> None:
    """Get the models ready before the first sync or search.

    Example:

    \b
        mcp-kb model fetch
    """


@model.command()
@click.option(
    "--to",
    "target",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also copy the embedding model's files into this folder, for machines without network.",
)
@config_option
def fetch(target: Path | None, config_path: str | None) -> None:
    """Download the configured embedding (and reranking) model now.

    Example:

    \b
        mcp-kb model fetch --to ./models/embedding
    """
    from .api import fetch_models, model_source

    config = _load_or_defaults(config_path)
    folders = fetch_models(config.embedding, config.rerank, copy_to=target)
    for role, folder in folders.items():
        click.echo(f"{role} model ready in {folder}")
    if "embedding" not in folders:
        click.echo(f"embedding model {config.embedding.model}: {model_source(config.embedding)}, nothing to fetch")
    if target:
        click.echo(
            f"copied to {target}; on a machine without network set both [embedding] model = "
            f'"{config.embedding.model}" and model_path = "{target.resolve()}" (or '
            f"{ENV_MODEL} and {ENV_MODEL_PATH})"
        )


PROGRESS_LINE_SECONDS = 10.0  # between two progress lines where stderr is no terminal
SYNC_FAILED_FILES = 3  # `sync`'s exit status when it ended but some files could not be indexed


def _progress(as_json: bool) -> _ProgressBar | _ProgressLines:
    """A bar on a terminal; elsewhere (CI, a service's journal, `| tee`) a plain line now and then."""
    return _ProgressBar() if sys.stderr.isatty() and not as_json else _ProgressLines()


class _ProgressLines:
    """Progress as plain lines on stderr, one each PROGRESS_LINE_SECONDS, with the pace: a sync that ends sooner
    prints its summary alone (and a failing one its one `Error:` line)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._next = self._started + PROGRESS_LINE_SECONDS

    def __call__(self, done: int, total: int, message: str) -> None:
        now = self._clock()
        if now < self._next:
            return
        self._next = now + PROGRESS_LINE_SECONDS
        sys.stderr.write(f"mcp-kb: {message}{pace(done, total, now - self._started)}\n")
        sys.stderr.flush()

    def close(self) -> None:
        """Nothing is left open: each line ended."""


class _ProgressBar:
    """A one-line progress bar on stderr for long syncs."""

    def __init__(self) -> None:
        self._shown = False

    def __call__(self, done: int, total: int, message: str) -> None:
        width = 30
        filled = int(width * done / total) if total else width
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {message[:60]:60}")
        sys.stderr.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            sys.stderr.write("\n")
