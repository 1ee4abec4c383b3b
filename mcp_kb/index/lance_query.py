"""Running a search's LanceDB queries in one hand-off each: where mcp-kb reaches past LanceDB's public API (lancedb
0.40) to run queries, as index/compat.py does to import it.

A query through LanceDB's synchronous API hands off to LanceDB's event loop thread five times (the table's schema
read twice, the query started, each batch read, the end of the stream); under a server's load each hand-off waits
for the GIL, and a hybrid search made fourteen (six now). These build the same query objects without reading the
schema, and `query_arrow` runs one, batches and all, in one hand-off. tests/index/test_lance_query.py holds the
results equal to LanceDB's own and fails, naming this module, when LanceDB changes what they rely on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    from lancedb.query import LanceFtsQueryBuilder, LanceQueryBuilder, LanceVectorQueryBuilder
    from lancedb.table import LanceTable


def vector_query(table: LanceTable, vector: np.ndarray, column: str) -> LanceVectorQueryBuilder:
    """`table.search(vector, vector_column_name=column)` without reading the table's schema to check the column."""
    import numpy as np
    from lancedb.query import LanceVectorQueryBuilder

    return LanceVectorQueryBuilder(table, np.asarray(vector, dtype=np.float32), column)


def text_query(table: LanceTable, terms: str, column: str) -> LanceFtsQueryBuilder:
    """`table.search(terms, query_type="fts", fts_columns=column)` without reading the table's schema."""
    from lancedb.query import LanceFtsQueryBuilder

    return LanceFtsQueryBuilder(table, terms, fts_columns=column)


def query_arrow(table: LanceTable, builder: LanceQueryBuilder) -> pa.Table:
    """`builder.to_arrow()` in one hand-off to LanceDB's event loop. Left out of LanceDB's own path: finishing blob
    columns (chunk tables have none; it reads the schema to find out) and the check for a full-text index of
    LanceDB's legacy kind (mcp-kb never built one)."""
    import pyarrow as pa
    from lancedb.background_loop import LOOP

    query = builder.to_query_object()

    async def collected() -> Any:
        reader = await table._table._execute_query(query)  # what LanceTable._execute_query awaits, batch by batch
        return pa.Table.from_batches([batch async for batch in reader], schema=reader.schema)

    found: pa.Table = LOOP.run(collected())  # type: ignore[no-untyped-call]  # lancedb leaves it untyped
    return found
