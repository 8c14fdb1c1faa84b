"""Tables beside the documents: the index's read-only DuckDB database, the SQL guard, and the offline ops demo.

``rag index`` loads table files into ``tables.duckdb`` (:func:`build_database`); the agent's data route asks the
model for SQL that :func:`check_sql` must accept before :class:`Warehouse` runs it read-only, with a time limit and
a row cap. ``rag demo ops`` writes a synthetic freight dataset with a golden set (:func:`write_ops_demo`).
"""

from rag.data.demo.ops_demo import write_ops_demo
from rag.data.sqlguard import ALLOWED_FUNCTIONS, check_sql
from rag.data.tableset import TABLE_SUFFIXES, build_database, discover_tables, schema_summary
from rag.data.warehouse import QueryResult, Warehouse

__all__ = ["ALLOWED_FUNCTIONS", "QueryResult", "TABLE_SUFFIXES", "Warehouse", "build_database", "check_sql",
           "discover_tables", "schema_summary", "write_ops_demo"]
