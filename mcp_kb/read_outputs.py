"""What reading a KB answers, as typed records the faces render: a part of a document (`ReadOutput`), a page of a
listing or of a document's outline (`BrowseOutput`). Apart from the reader, which needs Arrow's compute functions:
a server builds its tools' output schemas from these before its handshake, without loading Arrow."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from .vocabulary import HEADING_SEPARATOR

__all__ = [
    "BrowseOutput",
    "ReadOutput",
]  # what the core's API (mcp_kb.api) offers from this module


class ReadOutput(BaseModel):
    """A part of a document's text, where it is, and how to go on."""

    kb: str
    path: str = Field(description="The document, as search results cite it")
    title: str
    section: str = Field(description="Heading path of the part read ('' for the whole document, pages or lines)")
    text: str
    line_start: int = Field(description="First line of the text in the document (1-based)")
    line_end: int
    lines: int = Field(description="Lines in the whole document")
    page_start: int | None = None
    page_end: int | None = None
    pages: int | None = Field(None, description="Pages of the document (PDFs)")
    tokens_left: int = Field(description="About how many tokens of the part asked for come after this text")
    passage_start: int | None = Field(None, description="Read by chunk: where that passage begins in text (characters)")
    passage_end: int | None = Field(None, description="... and where it ends")
    cursor: str | None = Field(None, description="Pass it to read to go on; none when the part is read to its end")
    as_of: str | None = Field(None, description="The earlier version of the knowledge base read (as_of asked for one)")
    note: str = Field(
        "",
        description="What its lines are, when they are not the file's own: a converted format's "
        "extracted text, or an index built before files were read as written",
    )
    indexed_at: str = Field("", description="When the document was indexed (RFC 3339, UTC)")
    changed: str = Field(
        "",
        description="How the document's source changed since it was indexed, in one line ('' "
        "when it has not, or cannot be told): this text may be out of date until "
        "the knowledge base is synced",
    )

    @computed_field(description="The document's source changed since it was indexed (`changed` says how)")  # type: ignore[prop-decorator]
    @property
    def stale(self) -> bool:
        return bool(self.changed)

    @property
    def location(self) -> str:
        """Where the text is, as a person reads it: `lines 12-80 of 900, pages 3-4 of 12`."""
        where = f"lines {self.line_start}-{self.line_end} of {self.lines}"
        if self.page_start is not None and self.pages:
            pages = str(self.page_start) if self.page_end == self.page_start else f"{self.page_start}-{self.page_end}"
            where += f", page{'s' if self.page_end != self.page_start else ''} {pages} of {self.pages}"
        return where


class DocumentEntry(BaseModel):
    path: str
    title: str
    kind: str = Field(description="What the document was read as: markdown, pdf, html, docx, ...")
    size: int = Field(description="Bytes of the source")
    pages: int | None = None
    chunks: int
    tokens: int = Field(description="Tokens of its text")
    lines: int
    changed: str = Field(
        description='When the source last changed (UTC; "" for a git repository\'s file: its commit says)'
    )
    synced: str = Field(description="When this version was indexed (UTC)")


class OutlineEntry(BaseModel):
    heading: str = Field(description=f"Heading path, e.g. 'Install{HEADING_SEPARATOR}Linux': read it as a section")
    depth: int
    line_start: int
    line_end: int
    page_start: int | None = None
    page_end: int | None = None
    tokens: int = Field(description="About how many tokens the section holds, its subsections included")


class BrowseOutput(BaseModel):
    """A page of a KB's documents, or of one document's outline."""

    kb: str
    path: str = Field(description="The prefix or glob listed, or the document outlined")
    documents: list[DocumentEntry] = Field(default_factory=list)
    outline: list[OutlineEntry] = Field(default_factory=list)
    total: int = Field(description="Documents (or headings) in all, over every page")
    cursor: str | None = Field(None, description="Pass it to browse for the next page; none on the last")
    as_of: str | None = Field(
        None, description="The earlier version of the knowledge base listed (as_of asked for one)"
    )
