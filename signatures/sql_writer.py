"""SQLWriter: one read-only DuckDB query over the listed tables that answers the question."""

import dspy


class SQLWriter(dspy.Signature):
    """Write one DuckDB SQL SELECT query that answers the question from the tables.

    Use only the tables and columns listed, spelled as listed. The query only reads: no INSERT, UPDATE, DELETE,
    CREATE, COPY or file functions. When the documents state a number the question refers to (a limit, a
    threshold, a deadline), use that number. Return the few columns the answer needs, aggregated where the
    question asks for a count, total or average. If a previous query was refused or failed, fix it using the
    error. If the tables cannot answer the question, return an empty query."""

    question: str = dspy.InputField()
    tables: str = dspy.InputField(desc="the data tables: names, columns with types, example values")
    documents: str = dspy.InputField(desc="passages from the documents that may state numbers the query needs; may be empty")
    previous: str = dspy.InputField(desc="the previous query and why it was refused or failed; empty on the first try")
    sql: str = dspy.OutputField(desc="one SELECT statement, or an empty string if the tables cannot answer")
