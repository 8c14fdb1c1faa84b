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
                                          "(recursive). Omit to index the built-in demo corpus (Python language "
                                          "reference topics)."),
    chunks: Optional[Path] = typer.Option(None, "--chunks", readable=False, help="Pre-chunked JSONL (one {id, text, ...} per line); ids kept verbatim."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", readable=False, help="Where to write the index (default: $SIEVE_HOME/index, SIEVE_HOME defaulting to ~/.cache/sieve)."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="sentence-transformers name or path; 'default' = bundled all-MiniLM-L6-v2."),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", help="Target characters per chunk (default: 1200)."),
    chunk_overlap: Optional[int] = typer.Option(None, "--chunk-overlap", help="Characters carried over between chunks of one section (default: 150)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
    ray: Optional[str] = typer.Option(None, "--ray", help="Embed on a Ray cluster: --ray alone starts a local one, --ray auto joins `ray start`'s, or HOST:PORT (needs pip install -e \".[ray]\")."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Ray embedding workers (default: one per cluster CPU)."),
) -> None:
    """Build the search index (bm25s + FAISS) from the built-in corpus, a folder, or a chunks JSONL.

    Examples:
      rag index                           # built-in Python reference topics
      rag index ./docs --index-dir idx    # your Markdown/rST/HTML/text/PDF/Word files
      rag index --chunks chunks.jsonl     # pre-chunked elsewhere; ids kept
      rag index ./docs --ray auto         # embedding batches on the Ray cluster of `ray start`

    PDF and Word files keep their headings as section paths, their tables whole and their page numbers
    (cited as "p. 12"); an encrypted, corrupt, empty or scanned (no text layer) one is skipped with a
    warning and counted in the last line.
    """
    clean_warnings()
    from rag.errors import InputError

    at_least(1, chunk_size=chunk_size, workers=workers)
    check_readable(path, "PATH")
    check_readable(chunks, "--chunks")
    at_least(0, chunk_overlap=chunk_overlap)
    if workers is not None and ray is None:
        raise InputError("--workers needs --ray (workers are Ray actors)")
    settings = load_settings({"index_dir": index_dir, "embedding_model": embedding_model,
                              "chunk_size": chunk_size, "chunk_overlap": chunk_overlap})
    if path is not None and chunks is not None:
        raise InputError("give either a folder PATH or --chunks FILE.jsonl, not both")
    from rag.api import build_index
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
    index, skipped = build_index(path, chunks=chunks, settings=settings, show_progress=not quiet, embedder=embedder,
                                 log=None if quiet else err)
    counts = index.manifest["counts"]
    typer.echo(f"Indexed {counts['chunks']} chunks ({counts['embeddings_reused']} embeddings reused) into {index.dir} "
               f"in {index.manifest['build_seconds']:.1f}s" + (f"; {skipped} (see the warnings above)" if skipped else ""))


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
