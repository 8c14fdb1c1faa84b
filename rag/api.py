"""Sieve from Python: one way to get a configured agent, ask it, evaluate it and compile it.

The CLI, ``rag serve``, the Ray workers and the notebooks go through these functions, so a program assembled here
is the one ``rag ask`` runs::

    import rag

    agent = rag.open_agent()
    answer = agent("What does the nonlocal statement do?")
    print(answer.text, [s.id for s in answer.sources])

Heavy libraries (DSPy, FAISS, the models) load on first use, not on ``import rag``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.config import Settings, load_settings

if TYPE_CHECKING:  # imported lazily below: each pulls in DSPy or the index libraries
    import dspy

    from rag.agent.program import Program
    from rag.retrieval.retriever import Retriever


@dataclass(frozen=True)
class Source:
    """A passage an answer cites (or, for a refusal, one of the closest passages judged not relevant)."""

    id: str
    title: str
    source: str = ""
    page: int | None = None
    page_end: int | None = None
    sql: str | None = None  # a SQL result ([sql:1]): the statement that ran
    rows: list[list[Any]] | None = None  # ... and its rows

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Source":
        return cls(id=data["chunk_id"], title=data.get("title", ""), source=data.get("source", ""),
                   page=data.get("page"), page_end=data.get("page_end"), sql=data.get("sql"), rows=data.get("rows"))


@dataclass
class Answer:
    """What the agent said about one question.

    ``text`` is the answer with ``[id]`` citations, or the refusal. ``sources`` are the cited passages; for a
    refusal they are empty and ``closest`` holds the passages that were retrieved but judged not relevant.
    ``uncited`` are the passages the answerer read but did not cite.
    ``trace`` records every decision (retrieve, grade, rewrite, answer) with its latency and tokens."""

    text: str
    refused: bool
    sources: list[Source]
    closest: list[Source]
    trace: Any
    prediction: "dspy.Prediction" = field(repr=False)
    uncited: list[Source] = field(default_factory=list)
    low_confidence: bool = False  # the grounding critic or a check beside it flagged the answer; why: critic_reason
    critic_reason: str | None = None
    flagged_by: str | None = None  # what flagged it, in words ("the critic's period check")

    def to_dict(self) -> dict[str, Any]:
        """The same JSON ``rag ask --json`` prints."""
        from rag.agent.module import prediction_to_dict

        return prediction_to_dict(self.prediction)


class Agent:
    """A configured Sieve program: call it with a question to get an :class:`Answer`.

    ``program`` is the assembled :class:`rag.agent.program.Program` (the ``dspy.Module`` as ``program.agent``,
    its LMs per role, the compiled artifact if one fits, and why others were skipped in ``program.messages``)."""

    def __init__(self, program: "Program", settings: Settings) -> None:
        self.program = program
        self.settings = settings

    @property
    def retriever(self) -> "Retriever":
        """The hybrid retriever over the index: ``agent.retriever.search(query, k=4)`` needs no LM."""
        return self.program.agent.retriever

    @property
    def description(self) -> str:
        """Which prompts run: uncompiled signatures, or the compiled artifact's name."""
        return self.program.description

    def __call__(self, question: str, history: "Sequence[Any] | None" = None) -> Answer:
        """The answer to ``question``; ``history``, the conversation's earlier turns (``{"question", "answer"}``
        dicts or ``(question, answer)`` pairs, oldest first), makes it a follow-up: it is made standalone first
        (the trace's ``condense`` step), and only the last ``history_turns`` turns are read."""
        from rag.agent.critique import flagged_by

        pred = self.program.agent(question=question, history=history)
        return Answer(text=pred.answer, refused=bool(pred.refused), trace=pred.trace, prediction=pred,
                      sources=[Source.from_dict(s) for s in pred.sources],
                      closest=[Source.from_dict(s) for s in pred.closest],
                      uncited=[Source.from_dict(s) for s in getattr(pred, "uncited", None) or []],
                      low_confidence=bool(getattr(pred, "low_confidence", False)),
                      critic_reason=getattr(pred, "critic_reason", None),
                      flagged_by=flagged_by(pred.trace) if getattr(pred, "low_confidence", False) else None)


def open_agent(settings: Settings | None = None, *, use_artifact: bool = True,
               retriever: "Retriever | Callable[[], Retriever] | None" = None, configure: bool = True,
               **overrides: Any) -> Agent:
    """A ready agent over an existing index, configured as ``rag ask`` would be.

    Args:
        settings: the configuration; by default :func:`rag.load_settings` (env vars, ``sieve.toml``, defaults).
        use_artifact: use the compiled artifact in ``artifacts/`` that fits (``False``: uncompiled signatures).
        retriever: a loaded retriever to reuse, or a function returning one (called once DSPy is configured, so
            an index loading in a background thread overlaps DSPy's import).
        configure: configure DSPy (its cache and Sieve's adapter) from ``settings``; ``False`` where the entry
            point already did (``rag serve``, a Ray worker).
        **overrides: any setting by name, e.g. ``top_k=8`` or ``grader_model="groq/openai/gpt-oss-20b"``.

    Raises:
        rag.errors.IndexNotFound: no index yet; the message says which ``rag index`` command builds one.
        rag.SieveError: any other bad setting or model, with the fix.
    """
    from rag.agent.program import build_program
    from rag.lm.configure import configure_dspy

    settings = settings or load_settings()
    if overrides:
        settings = settings.replace(**overrides)
    if configure:
        configure_dspy(settings)
    if callable(retriever):
        retriever = retriever()
    return Agent(build_program(settings, use_artifact=use_artifact, retriever=retriever), settings)


def build_index(source: str | Path | None = None, *, chunks: str | Path | None = None, settings: Settings | None = None,
                index_dir: str | Path | None = None, show_progress: bool = False, embedder: Any = None,
                log: Callable[[str], None] | None = None, tables: list[Path] | None = None):
    """Read, chunk and index documents, replacing the index at ``index_dir`` only once the new one is complete.

    Args:
        source: a folder of documents (Markdown, rST, text, HTML, PDF, Word); ``None`` for the built-in corpus
            (CPython's language reference).
        chunks: a pre-chunked JSONL file instead of ``source`` (ids kept verbatim).
        settings: chunking and embedding settings; by default :func:`rag.load_settings`.
        index_dir: where to write; by default ``settings.index_dir``.
        show_progress: progress bars on stderr.
        embedder: embeds the chunks elsewhere (``rag.distributed.embed.ray_embedder``); by default in-process.
        log: where diagnostics go (documents read, files skipped); default nowhere.
        tables: table files (CSV, Parquet, JSON lines, SQLite, DuckDB) loaded into the index's database for the
            data route (``rag.data.tableset.discover_tables`` finds them in a folder); none by default.

    Returns:
        ``(index, skipped)``: the built :class:`rag.index.store.Index`, and a summary of the files skipped
        (empty when none were).
    """
    from rag.errors import InputError
    from rag.index.build import build_index as _build
    from rag.index.layout import check_target
    from rag.ingest.chunking import chunk_documents, load_chunks_jsonl
    from rag.ingest.corpus import load_builtin_topics

    settings = settings or load_settings()
    if index_dir is not None:
        settings = settings.replace(index_dir=Path(index_dir))
    if source is not None and chunks is not None:
        raise InputError("give either a folder PATH or --chunks FILE.jsonl, not both")
    check_target(Path(settings.index_dir).expanduser())  # before reading or embedding anything
    skipped = ""
    if chunks is not None:
        items, origin = load_chunks_jsonl(chunks), f"jsonl:{Path(chunks).expanduser().resolve()}"
    else:
        docs = _read_documents(source, settings, list(tables or []), show_progress) if source is not None else load_builtin_topics()
        origin = f"folder:{Path(source).expanduser().resolve()}" if source is not None else "builtin"
        items = chunk_documents(docs, settings.chunk_size, settings.chunk_overlap)
        skipped = docs.skipped_summary()
        if log:
            log(f"{len(docs)} documents -> {len(items)} chunks" + (f" ({skipped})" if skipped else ""))
    index = _build(items, settings.index_dir, settings, show_progress=show_progress, source=origin, embedder=embedder,
                   tables=tables)
    return index, skipped


def _read_documents(source: str | Path, settings: Settings, tables: list[Path], show_progress: bool) -> Any:
    """The documents of the folder ``source``; a table given as the folder, or a folder of tables and no
    documents, is one line saying an index needs documents and how to add the tables."""
    from rag.data.tableset import TABLE_SUFFIXES
    from rag.errors import InputError
    from rag.ingest.corpus import load_folder

    folder = Path(source).expanduser().resolve()
    if folder.suffix.lower() in TABLE_SUFFIXES and folder.is_file():
        raise InputError(f"{source} is a table, not a document; an index needs documents: give a folder of "
                         f"documents as PATH (or none, for the built-in corpus) and this file with --tables {source}")
    try:
        return load_folder(source, show_progress=show_progress, max_bytes=settings.max_file_mb * 1_000_000)
    except InputError as exc:
        inside = [f for f in tables if folder in Path(f).resolve().parents]
        if not inside or "no supported files found" not in str(exc):
            raise
        raise InputError(f"{source}: holds {len(inside)} table file(s) ({', '.join(f.name for f in inside[:3])}"
                         f"{', ...' if len(inside) > 3 else ''}) but no documents; an index needs documents "
                         f"(.md, .txt, .pdf, ...): add some to the folder, or index your documents and add "
                         f"these with --tables {source}") from None


def run_eval(config: str = "full", *, split: str = "test", limit: int | None = None, golden: str | Path | None = None,
             out: str | Path | None = None, set_pairs: list[str] | None = None, judge: bool = True,
             use_artifact: bool = True, threads: int | None = None, show_progress: bool = False,
             index_dir: str | Path | None = None, ray: str | None = None, workers: int | None = None,
             log: Callable[[str], None] | None = None) -> tuple[dict[str, Any], Path]:
    """Run the agent over a golden set and score every decision; results are written as each item finishes,
    and a run started again with the same arguments resumes.

    Args:
        config: a named configuration of ``rag/configs/eval.toml`` (``baseline``, ``full``, ...).
        split: ``train``, ``dev``, ``test`` or ``all``.
        limit: evaluate only the first N items (stratified by type).
        golden: the golden set (JSONL); by default the built-in corpus's ``golden/python_ref.jsonl``.
        out: the run folder; by default one under ``$SIEVE_HOME/runs`` named after the config and golden set.
        set_pairs: settings as ``key=value`` strings, applied on top of the configuration.
        judge: score answers with the Judge (``False``: decisions and retrieval only).
        use_artifact: use the compiled artifact that fits.
        threads: items in parallel (default 1 for the embedded model).
        show_progress: a progress bar on stderr.
        index_dir: the index to answer from (default ``settings.index_dir``).
        ray: run the items on Ray workers: an address, ``auto``, or ``local`` (needs the ``ray`` extra).
        workers: how many Ray workers.
        log: where diagnostics go (default: nowhere).

    Returns:
        ``(summary, run_dir)``: the summary (metrics, intervals, counts) as written to ``summary.json``.
    """
    from rag.errors import ConfigError
    from rag.eval.presets import plan_eval

    plan = plan_eval(config, split=split, golden=Path(golden) if golden else None, out=Path(out) if out else None,
                     set_pairs=set_pairs, index_dir=index_dir, judge=judge, use_artifact=use_artifact,
                     log=log or (lambda _m: None))
    if isinstance(plan, str):
        raise ConfigError(f"configuration {config!r} cannot run here: {plan}")
    from rag.distributed.eval import plan_runner

    runner = plan_runner(plan, ray, workers=workers, show_progress=show_progress)
    return plan.run(limit=limit, threads=threads, show_progress=show_progress, runner=runner), plan.out_dir


def compile_program(settings: Settings | None = None, *, golden: str | Path | None = None, optimizer: str = "bootstrap",
                    **options: Any):
    """Optimize the prompts of each role against the golden set's train split, select on dev, report test,
    and save the result as an artifact in ``artifacts/``.

    Args:
        settings: the models and retrieval to compile for; by default :func:`rag.load_settings`.
        golden: the golden set with train/dev/test splits; by default ``golden/python_ref.jsonl``.
        optimizer: ``bootstrap``, ``random-search``, ``mipro`` or ``gepa``.
        **options: as :func:`optimize.compile.compile_program` (``roles``, ``budget``, ``out``, ...).

    Returns:
        The :class:`optimize.compile.CompileResult`.
    """
    from optimize.compile import compile_program as _compile
    from rag.lm.configure import configure_dspy
    from rag.paths import golden_path

    settings = settings or load_settings()
    if not options.get("dry_run"):  # a dry run only plans: no model is loaded
        configure_dspy(settings)
    return _compile(settings, golden=golden_path(golden), optimizer=optimizer, **options)
