"""The ``rag`` command line. Commands are thin: they parse flags, call the library, print.

Answers go to stdout; progress and diagnostics to stderr. Domain errors (rag.errors.SieveError)
become one clean line on stderr and exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from rag.config import load_settings
from rag.errors import SieveError

app = typer.Typer(
    name="rag",
    help="Sieve: a self-reflective RAG agent that grades its retrieval, rewrites failed queries and refuses rather than guesses.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def err(message: str) -> None:
    """Diagnostics and progress go to stderr."""
    typer.echo(message, err=True)


# ---------------------------------------------------------------- retrieval: rag index, rag search


def _clean_warnings() -> None:
    """Show library warnings (skipped files, cut queries) as one plain stderr line each."""
    import warnings

    warnings.formatwarning = lambda message, category, *args, **kwargs: f"Warning: {message}\n"


@app.command("index")
def index_cmd(
    path: Optional[Path] = typer.Argument(None, help="Folder of .md/.markdown/.txt/.rst/.html files (recursive). "
                                          "Omit to index the built-in demo corpus (Python language reference topics)."),
    chunks: Optional[Path] = typer.Option(None, "--chunks", help="Pre-chunked JSONL (one {id, text, ...} per line); ids kept verbatim."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Where to write the index (default: $SIEVE_HOME/index, SIEVE_HOME defaulting to ~/.cache/sieve)."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", help="sentence-transformers name or path; 'default' = bundled all-MiniLM-L6-v2."),
    chunk_size: Optional[int] = typer.Option(None, "--chunk-size", help="Target characters per chunk (default: 1200)."),
    chunk_overlap: Optional[int] = typer.Option(None, "--chunk-overlap", help="Characters carried over between chunks of one section (default: 150)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress output."),
) -> None:
    """Build the search index (bm25s + FAISS) from the built-in corpus, a folder, or a chunks JSONL.

    Examples:
      rag index                           # built-in Python reference topics
      rag index ./docs --index-dir idx    # your Markdown/rST/HTML/text files
      rag index --chunks chunks.jsonl     # pre-chunked elsewhere; ids kept
    """
    _clean_warnings()
    from rag.errors import InputError

    settings = load_settings({"index_dir": index_dir, "embedding_model": embedding_model,
                              "chunk_size": chunk_size, "chunk_overlap": chunk_overlap})
    if path is not None and chunks is not None:
        raise InputError("give either a folder PATH or --chunks FILE.jsonl, not both")
    from rag.chunking import chunk_documents, load_chunks_jsonl
    from rag.corpus import load_builtin_topics, load_folder
    from rag.index import build_index

    if chunks is not None:
        items, source = load_chunks_jsonl(chunks), f"jsonl:{chunks.expanduser().resolve()}"
    else:
        docs = load_folder(path, show_progress=not quiet) if path is not None else load_builtin_topics()
        source = f"folder:{path.expanduser().resolve()}" if path is not None else "builtin"
        items = chunk_documents(docs, settings.chunk_size, settings.chunk_overlap)
        if not quiet:
            err(f"{len(docs)} documents -> {len(items)} chunks")
    index = build_index(items, settings.index_dir, settings, show_progress=not quiet, source=source)
    counts = index.manifest["counts"]
    typer.echo(f"Indexed {counts['chunks']} chunks ({counts['embeddings_reused']} embeddings reused) into {index.dir} "
               f"in {index.manifest['build_seconds']:.1f}s")


@app.command("search")
def search_cmd(
    query: str = typer.Argument(..., help="The question or keywords."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="How many chunks (default: 4)."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Index folder (default: $SIEVE_HOME/index)."),
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON (with per-stage ranks and scores)."),
) -> None:
    """Show the chunks retrieval returns for a question (no language model involved).

    Examples:
      rag search "how does the with statement work?"
      rag search "walrus operator" --mode bm25 --k 8
      rag search "exception groups" --json | jq '.[0].stages'
    """
    _clean_warnings()
    import json

    from rag.retrieve import Retriever

    settings = load_settings({"index_dir": index_dir, "mode": mode, "top_k": k})
    retriever = Retriever.from_settings(settings)
    hits = retriever.search(query)
    if as_json:
        typer.echo(json.dumps([h.to_dict() for h in hits], indent=2, ensure_ascii=False))
        return
    if not hits:
        typer.echo("No matching chunks.")
    for h in hits:
        stages = ", ".join(f"{name} #{st['rank']}" for name, st in h.stages.items() if st["rank"] is not None)
        typer.echo(f"[{h.rank}] {h.chunk_id}  score={h.score:.4f}  ({stages})")
        if h.title:
            typer.echo(f"    {h.title}")
        body = " ".join(h.text.split())
        typer.echo(f"    {body[:400]}{'...' if len(body) > 400 else ''}\n")



@app.command("eval")
def eval_cmd(
    golden: Path = typer.Option(..., "--golden", help="Golden set JSONL (id, type, question, reference_answer, should_refuse, relevant_chunk_ids/evidence)."),
    retrieval_only: bool = typer.Option(False, "--retrieval-only", help="Score retrieval only (Recall/MRR/hit/needle recall@k); no language model."),
    index_dir: Optional[Path] = typer.Option(None, "--index-dir", help="Index folder (default: $SIEVE_HOME/index)."),
    k: Optional[int] = typer.Option(None, "--k", "-k", help="Cut-off k (default: top_k = 4)."),
    mode: Optional[str] = typer.Option(None, "--mode", "-m", help="bm25 | dense | hybrid (default: hybrid)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Evaluate on a golden set: --retrieval-only scores retrieval (Recall, MRR, hit and needle recall at k).

    Examples:
      rag eval --retrieval-only --golden golden/dev.jsonl --k 4
      rag eval --retrieval-only --golden gold.jsonl --index-dir ./idx --mode bm25 --json
    """
    _clean_warnings()
    import json

    settings = load_settings({"index_dir": index_dir, "mode": mode, "top_k": k})
    if retrieval_only:
        from rag.golden import load_golden
        from rag.metrics import retrieval_report
        from rag.retrieve import Retriever

        items = load_golden(golden)
        retriever = Retriever.from_settings(settings)
        report = retrieval_report(items, retriever, k=settings.top_k, mode=settings.mode)
        if as_json:
            typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
            return
        kk = settings.top_k
        typer.echo(f"retrieval  mode={report['mode']}  k={kk}  items={report['items']}  scored={report['scored']}  "
                   f"skipped (no gold)={report['skipped_no_gold']}")
        for metric in (f"recall@{kk}", f"mrr@{kk}", f"hit@{kk}", f"needle_recall@{kk}", f"all_needles@{kk}"):
            value = report[metric]
            typer.echo(f"  {metric:<18} {'n/a' if value is None else f'{value:.3f}'}")
        return
    # Agent evaluation (answers, refusals, grader decisions) replaces this placeholder.
    raise SieveError("agent evaluation: not yet available")


# ---------------------------------------------------------------- models: rag models, rag usage
# (model commands go here)


# ---------------------------------------------------------------- agent: rag ask
# (agent commands go here)


# ---------------------------------------------------------------- evaluation: rag eval, rag report, rag calibrate
# (evaluation commands go here)


# ---------------------------------------------------------------- optimization: rag compile, rag artifacts
# (compile commands go here)


def main() -> None:
    try:
        app()
    except SieveError as exc:
        typer.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        typer.echo("Interrupted; finished work was kept.", err=True)
        sys.exit(130)
