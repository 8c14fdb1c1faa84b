"""``rag index`` and ``rag search``: build the index, and retrieval without a language model."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import (
    app,
    at_least,
    check_readable,
    clean_warnings,
    dump_json,
    err,
    on_interrupt,
    quiet_loading,
    settings_from,
    shown,
)
from rag.config import load_settings


@app.command("index")
def index_cmd(
    path: Optional[Path] = typer.Argument(None, readable=False, help="Folder of .md/.markdown/.txt/.rst/.html/.pdf/.docx files "
                                          "(recursive); the .csv/.tsv/.parquet/.jsonl/.ndjson/.sqlite/.db/.duckdb "
                                          "tables in it are taken too. Omit to index the built-in demo corpus (Python "
                                          "language reference topics)."),
    chunks: Optional[Path] = typer.Option(None, "--chunks", readable=False, help="Pre-chunked JSONL (one {id, text, ...} per line); ids kept verbatim."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Where to write the index (default: $SIEVE_HOME/index, SIEVE_HOME defaulting to ~/.cache/sieve)."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="sentence-transformers name or path; 'default' = bundled all-MiniLM-L6-v2."),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", help="Target characters per chunk (default: 1200)."),
    chunk_overlap: Optional[int] = typer.Option(None, "--chunk-overlap", help="Characters carried over between chunks of one section (default: 150)."),
    tables: Optional[list[Path]] = typer.Option(None, "--tables", readable=False, help="A folder of table files, or one "
                                                "table file, to add to the index's database (repeatable; also with "
                                                "--chunks or the built-in corpus)."),
    no_tables: bool = typer.Option(False, "--no-tables", help="Leave the table files in PATH out (documents only)."),
    adapt_encoder: bool = typer.Option(False, "--adapt-encoder", help="First fine-tune a copy of the embedding model "
                                       "on these passages (inverse cloze: no questions, minutes on a CPU, reused on "
                                       "rebuilds of the same corpus), then index with it; queries follow by themselves."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Embed on a Ray cluster: --ray alone starts a local one, --ray auto joins `ray start`'s, or HOST:PORT (needs pip install -e \".[ray]\")."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray embedding workers (default: one per cluster CPU)."),
    info: bool = typer.Option(False, "--info", help="Build nothing: say what the index holds (chunks, the metadata fields --where may name, tables and columns)."),
    as_json: bool = typer.Option(False, "--json", help="With --info: print it as JSON."),
) -> None:
    """Build the search index (bm25s + FAISS) from the built-in corpus, a folder, or a chunks JSONL.

    Examples:
      rag index --info --index-dir idx    # what an index holds; builds nothing
      rag index                           # built-in Python reference topics
      rag index ./docs --index-dir idx    # your Markdown/rST/HTML/text/PDF/Word files
      rag index --chunks chunks.jsonl     # pre-chunked elsewhere; ids kept
      rag index ./docs --ray auto         # embedding batches on the Ray cluster of `ray start`
      rag index ./docs --tables ./exports # the tables in ./docs, and those in ./exports
      rag index ./docs --no-tables        # documents only, though ./docs holds tables
      rag index ./docs --adapt-encoder    # an encoder fine-tuned on ./docs first (docs/guides/retrieval.md)

    PDF and Word files keep their headings as section paths, their tables whole and their page numbers
    (cited as "p. 12"); an encrypted, corrupt, empty or scanned (no text layer) one is skipped with a
    warning and counted in the last line.

    Tables (CSV, TSV, Parquet, JSON lines, every table of a SQLite or DuckDB file) go into one
    DuckDB database in the index, named after their files (claims.csv -> claims), built and swapped
    in with the rest; a file that cannot be read stops the build and the old index is kept. Describe
    a table for the SQL writer in a sidecar beside it, claims.csv.meta.toml: description = "...",
    aliases = ["case"] (other words for its rows, which the router links to it) and, under
    \\[columns], amount = "claim amount in EUR" or hazardous = {description = "...", aliases =
    ["hazmat"]}; for a database file, one \\[tables.NAME]
    section per table. An index needs documents: a folder of tables alone is refused; index your
    documents and add the tables with --tables.
    """
    clean_warnings()
    from rag.errors import InputError

    if info:
        given = [flag for flag, value in (("PATH", path), ("--chunks", chunks), ("--tables", tables), ("--ray", ray))
                 if value]
        if given:
            raise InputError(f"--info builds nothing; leave out {', '.join(given)}")
        return _info(index_dir, as_json)
    if as_json:
        raise InputError("--json goes with --info (a build prints one line)")
    at_least(1, chunk_size=chunk_size, workers=workers)
    check_readable(path, "PATH")
    check_readable(chunks, "--chunks")
    for extra in tables or []:
        check_readable(extra, "--tables")
    at_least(0, chunk_overlap=chunk_overlap)
    if workers is not None and ray is None:
        raise InputError("--workers needs --ray (workers are Ray actors)")
    settings = load_settings({"index_dir": index_dir, "embedding_model": embedding_model,
                              "chunk_size": chunk_size, "chunk_overlap": chunk_overlap,
                              "adapt_encoder": True if adapt_encoder else None})
    if path is not None and chunks is not None:
        raise InputError("give either a folder PATH or --chunks FILE.jsonl, not both")
    if no_tables and path is None:
        raise InputError("--no-tables leaves out the tables of a folder PATH; without PATH there are none to leave out")
    from rag.api import build_index
    from rag.index.build import tables_line
    from rag.index.layout import check_target

    target = Path(settings.index_dir).expanduser()
    check_target(target)  # before loading anything
    if quiet:
        quiet_loading()
    on_interrupt(f"the index at {target} was not changed (a build replaces it only when complete); run the same "
                 "command again to build it (embeddings of unchanged chunks in an existing index are reused)")
    embedder = None
    if ray is not None:
        from rag.distributed.embed import ray_embedder

        embedder = ray_embedder(ray, settings.embedding_model, workers=workers, show_progress=not quiet)
    table_files = _table_files(None if no_tables else path, tables or [])
    index, skipped = build_index(path, chunks=chunks, settings=settings, show_progress=not quiet, embedder=embedder,
                                 log=None if quiet else err, tables=table_files)
    counts = index.manifest["counts"]
    typer.echo(f"Indexed {counts['chunks']} chunks ({counts['embeddings_reused']} embeddings reused) into {index.dir} "
               f"in {index.manifest['build_seconds']:.1f}s"
               + (f"; tables: {tables_line(index.tables_record)}" if index.tables_record else "")
               + (f"; {skipped} (see the warnings above)" if skipped else ""))


def _info(index_dir: Optional[Path], as_json: bool) -> None:
    from rag.index.info import describe, render
    from rag.index.store import Index

    check_readable(index_dir, "--index-dir")
    settings = load_settings({"index_dir": index_dir})
    index = Index.load(settings.index_dir, settings)
    data = describe(index)
    typer.echo(dump_json(data, indent=2, ensure_ascii=False) if as_json else render(data))


def _table_files(path: Optional[Path], extra: list[Path]) -> list[Path]:
    """The table files of the build, absolute, each once: those found in the folder ``path`` (none for a single
    document or no PATH), then those of each ``--tables`` folder or file."""
    from rag.data.tableset import TABLE_SUFFIXES, discover_tables
    from rag.errors import InputError

    found = discover_tables(path) if path is not None and Path(path).expanduser().is_dir() else []
    for given in extra:
        given = given.expanduser()
        if not given.exists():
            raise InputError(f"--tables {given}: no such file or folder; give a folder of table files or one "
                             f"({', '.join(TABLE_SUFFIXES)})")
        files = discover_tables(given)
        if not files:
            what = ("not a table file" if given.is_file() else "no table files in this folder (recursively)")
            raise InputError(f"--tables {given}: {what}; tables are {', '.join(TABLE_SUFFIXES)} files")
        found += files
    unique: dict[Path, Path] = {}
    for file in found:
        unique.setdefault(file.resolve(), file.resolve())
    return list(unique)


@app.command("search")
def search_cmd(
    query: str = typer.Argument(..., help="The question or keywords."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="How many chunks (default: 4)."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Index folder (default: $SIEVE_HOME/index)."),
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON (with per-stage ranks and scores)."),
    where: Optional[list[str]] = typer.Option(None, "--where", help="Search only passages whose metadata matches, e.g. --where category=travel (repeat, or comma-separate values)."),
    explain: bool = typer.Option(False, "--explain", help="Also say what each stage did: rephrasings searched, which list found each hit, filters and versions dropped."),
    sets: Optional[list[str]] = typer.Option(None, "--set", help="Any setting as key=value, e.g. --set expand_queries=3 --set hyde=true."),
) -> None:
    """Show the chunks retrieval returns for a question (no language model, unless a query stage is on).

    Examples:
      rag search "how does the with statement work?"
      rag search "walrus operator" --mode bm25 --k 8
      rag search "exception groups" --json | jq '.[0].stages'
      rag search "hotel limit in Boston" --where category=travel --set latest_only=true
      rag search "reassign a variable of the enclosing function" --set expand_queries=3 --explain
    """
    clean_warnings()
    from rag.ingest.chunking import page_label
    from rag.retrieval.filters import parse_where
    from rag.retrieval.retriever import Retriever

    at_least(1, k=k)
    check_readable(index_dir, "--index-dir")  # before the index loads
    settings = settings_from(sets, index_dir=index_dir, mode=mode, top_k=k)
    retriever = Retriever.from_settings(settings, **({"where": parse_where(where)} if where else {}))
    if settings.lm_stages:  # else no DSPy import
        from rag.agent.program import with_query_stages

        with_query_stages(retriever, settings)  # expansion, HyDE, the LM reranker: on the rewriter's model
    found = retriever.retrieve(query)
    hits = found.hits
    if as_json:
        payload = [h.to_dict() for h in hits]
        if explain:
            exp = found.expansion
            payload = {"hits": payload, "notes": found.notes, "expansions": exp.queries if exp else [],
                       "hyde": exp.passage if exp else None,
                       "categories": found.routing.chosen if found.routing else None,
                       "reranked": found.reranking.order if found.reranking else None}
        typer.echo(dump_json(payload, indent=2, ensure_ascii=False))
        return
    if explain:
        for i, q in enumerate(found.expansion.queries if found.expansion else [], 1):
            typer.echo(f"also searched (q{i}): {shown(q)}")
        if found.expansion and found.expansion.passage:
            typer.echo(f"hypothetical passage searched (hyde): {shown(found.expansion.passage)}")
        for note in found.notes:
            typer.echo(f"note: {shown(note)}")
    if not hits:
        typer.echo("No matching chunks.")
    for h in hits:
        stages = ", ".join(f"{name} #{st['rank']}" for name, st in h.stages.items() if st["rank"] is not None)
        if explain and h.stages["expand"].get("found_by"):
            stages += "; found by " + " ".join(h.stages["expand"]["found_by"])
        if explain and found.reranking is not None:  # where the LM reranker put it, or that it left it out
            lm_rank = h.stages["rerank"].get("lm_rank")
            stages += f"; the LM ranked it #{lm_rank}" if lm_rank else "; the LM did not list it"
        typer.echo(f"[{h.rank}] {shown(h.chunk_id)}  score={h.score:.4f}  ({stages})")  # an id or title may hold \n
        where = ", ".join(shown(x) for x in (h.title, page_label(h.meta)) if x)
        if where:
            typer.echo(f"    {where}")
        if h.duplicates:
            typer.echo(f"    same words as {', '.join(map(shown, h.duplicates))} (shown once)")
        body = shown(" ".join(h.text.split()))
        typer.echo(f"    {body[:400]}{'...' if len(body) > 400 else ''}\n")
