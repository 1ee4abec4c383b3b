"""MkDocs hook: the configuration reference is written from the settings models at each build, so it cannot
drift from the code (and a setting without a description stops the build)."""

from mcp_kb.settings.reference import reference_markdown

GENERATED = "<!-- the settings reference is written here at build time -->"


def on_page_markdown(markdown, page, config, files):
    if GENERATED in markdown:
        return markdown.replace(GENERATED, reference_markdown())
    return markdown
