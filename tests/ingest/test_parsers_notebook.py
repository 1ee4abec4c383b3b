"""Jupyter notebooks: markdown and code cells in order under the notebook's headings, outputs left out, code cut
by its syntax; a file that is not a notebook fails with the reason."""

import json
from collections.abc import Iterable
from typing import Any
import sys
from pathlib import Path

import pytest
from helpers import write

from mcp_kb.errors import ParseError
from mcp_kb.ingest.chunking import chunk_document
from mcp_kb.ingest.document import Document
from mcp_kb.ingest.parsers import code, notebook, parse_file
from mcp_kb.models.estimate import EstimatedTokens
from mcp_kb.settings import ChunkingConfig

TOKENS = EstimatedTokens(512)  # the model-free count: these tests need no model files


def _notebook(cells: list[dict[str, Any]], language: str = "python") -> str:
    kernel = {"kernelspec": {"name": "k", "display_name": "K", "language": language}} if language else {}
    return json.dumps({"cells": cells, "metadata": kernel, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def _markdown(source: str | list[str]) -> dict[str, Any]:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def _code(source: str, outputs: Iterable[object] = ()) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "metadata": {},
        "execution_count": 1,
        "outputs": list(outputs),
        "source": source.splitlines(keepends=True),
    }  # as Jupyter writes it: a list of lines


CHURN = _notebook(
    [
        _markdown("# Churn analysis\n\nWhich customers leave, and why."),
        _code(
            "import pandas as pd\nimport numpy as np\n",
            outputs=[
                {"output_type": "stream", "name": "stdout", "text": ["LEAKED OUTPUT\n"]},
                {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}},
            ],
        ),
        _markdown(["## Training\n", "\n", "Fit a model per region."]),
        _code(
            'def fit(frame):\n    """Fits the churn model."""\n    return frame.mean()\n\n\n'
            "def score(model, frame):\n    return model - frame\n\nmodel = fit(pd.DataFrame())\n%matplotlib inline\n"
        ),
        {"cell_type": "raw", "metadata": {}, "source": "Raw notes kept as text."},
        _markdown("# Appendix\n\nSources."),
    ]
)


def _parse(tmp_path: Path, text: str, name: str = "churn.ipynb") -> Document:
    return parse_file(write(tmp_path / name, text), name)


def test_cells_in_order_under_the_notebook_headings_outputs_left_out(tmp_path: Path) -> None:
    document = _parse(tmp_path, CHURN)
    assert document.kind == "notebook" and document.title == "churn.ipynb"
    assert document.metadata == {"language": "python"} and document.notes == ()
    assert [(block.heading_path, block.text) for block in document.blocks] == [
        (("Churn analysis",), "Which customers leave, and why."),
        (("Churn analysis", "imports"), "import pandas as pd\nimport numpy as np"),
        (("Churn analysis", "Training"), "Fit a model per region."),
        (
            ("Churn analysis", "Training", "fit"),
            'def fit(frame):\n    """Fits the churn model."""\n    return frame.mean()',
        ),
        (("Churn analysis", "Training", "score"), "def score(model, frame):\n    return model - frame"),
        (("Churn analysis", "Training"), "model = fit(pd.DataFrame())\n%matplotlib inline"),
        (("Churn analysis", "Training"), "Raw notes kept as text."),
        (("Appendix",), "Sources."),
    ]
    assert all(block.line_start is None for block in document.blocks)  # a cell has no line a reader could open


def test_each_function_of_a_code_cell_is_a_chunk_of_its_own(tmp_path: Path) -> None:
    chunks = chunk_document(_parse(tmp_path, CHURN), ChunkingConfig(), TOKENS)
    by_heading = {chunk.heading: chunk.text for chunk in chunks}
    assert "Fits the churn model" in by_heading["Churn analysis › Training › fit"]
    assert "def score" not in by_heading["Churn analysis › Training › fit"]
    assert "def score" in by_heading["Churn analysis › Training › score"]
    assert not any("LEAKED OUTPUT" in chunk.text or "iVBOR" in chunk.text for chunk in chunks)


def test_code_of_another_language_is_kept_as_text(tmp_path: Path) -> None:
    text = _notebook([_markdown("# Model"), _code("fit <- function(x) {\n  mean(x)\n}\n")], language="R")
    document = _parse(tmp_path, text)
    assert document.metadata == {"language": "r"}
    assert [(block.heading_path, block.text) for block in document.blocks] == [
        (("Model",), "fit <- function(x) {\n  mean(x)\n}")
    ]


def test_without_the_grammars_code_cells_are_text_and_the_note_comes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter_language_pack", None)
    code._parser.cache_clear()
    try:
        document = _parse(tmp_path, _notebook([_code("def a():\n    return 1\n"), _code("def b():\n    return 2\n")]))
    finally:
        code._parser.cache_clear()
    assert document.notes == (code.NO_GRAMMARS,)
    assert [block.text for block in document.blocks] == ["def a():\n    return 1", "def b():\n    return 2"]


@pytest.mark.parametrize(
    "text, reason",
    [
        ('{"cells": [', "invalid notebook JSON at line 1"),
        ("[1, 2, 3]", "not a Jupyter notebook: no list of cells"),
        ('{"worksheets": [], "nbformat": 3}', "not a Jupyter notebook: no list of cells"),
        ('{"cells": [{"source": "x"}]}', "cell 1 has no cell_type"),
        ('{"cells": [{"cell_type": "code", "source": {"a": 1}}]}', "the source of cell 1 is not text"),
        ("[" * 100_000 + "]" * 100_000, "nests too deeply"),
    ],
    ids=["truncated", "a list", "nbformat 3", "no cell type", "source not text", "deep nesting"],
)
def test_a_corrupt_notebook_fails_with_its_reason(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        _parse(tmp_path, text, "broken.ipynb")


def test_a_notebook_over_the_size_limit_fails_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notebook, "MAX_NOTEBOOK_BYTES", 1024 * 1024)
    plot = {"output_type": "display_data", "data": {"image/png": "i" * 2 * 1024 * 1024}, "metadata": {}}
    with pytest.raises(ParseError, match="notebook of 2 MB, over the 1 MB limit; clear its outputs"):
        _parse(tmp_path, _notebook([_code("x = 1\n", outputs=[plot])]))
