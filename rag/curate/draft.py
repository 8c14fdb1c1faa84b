"""A golden set drafted for any index: seed passages, questions by one model, pooled gold labels by another.

``rag golden draft`` (rag.cli.cmd_golden) runs :func:`draft_set`, so a user with their own documents can evaluate
without writing a JSONL file by hand:

1. the plan (rag.curate.plan, no model call): seed passages that state something, round-robin over documents and
   their sections, drawn from ``--seed``; one item per seed, of the type the mix deals it, in a split.
2. drafting, on the answerer role's model: an answerable question with a reference answer from the seed
   (signatures.QuestionDrafter), one in a user's loose words (VagueQuestionDrafter), or a plausible question on the
   subject that the seed's document does not answer (UnanswerableDrafter, shown the document's section titles).
   A draft in a script its passage does not use or pointing at "the passage", or an unanswerable one whose every
   term the corpus holds (rag.curate.seedcheck, rag.curate.absent), is drafted again from the next passage of the
   seed's document, at most DRAFT_TRIES times, then dropped unlabelled. Contents pages are never seeds
   (rag.curate.plan.draftable).
3. gold labels, on the judge role's model: a TREC-style pool (top ``pool`` dense and top ``pool`` BM25 hits, plus the
   seed) labelled one passage at a time (signatures.PoolLabeler). ``relevant_chunk_ids`` are the passages labelled
   relevant, and always the seed of an answerable or vague item (flagged ``seed_gold`` when the labeller said no,
   :data:`SEED_GOLD`); an unanswerable draft that any pooled passage answers is dropped, with why, into ``FILE.dropped.jsonl``.

Each item is appended as one JSON line as soon as it is labelled, so an interrupted run resumes: a rerun with the
same options skips the seeds already kept or dropped. A reply the model's output cannot be parsed from skips that
seed with a warning (counted; a rerun asks again, for a new reply with the LM cache off);
:data:`MAX_FAILURES_IN_A_ROW` failures in a row stop the run instead.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag.curate.plan import Planned, draftable, parse_types, plan_draft
from rag.errors import InputError, ModelError
from rag.ingest.chunking import Chunk
from rag.ingest.jsonl import append_json_line, split_lines

NOT_COVERED = "Not covered by the indexed documents."
MAX_PASSAGE_CHARS = 3000  # of one passage shown to the drafting or labelling model
MAX_SECTIONS = 60  # section titles shown to the unanswerable drafter
MAX_FAILURES_IN_A_ROW = 10  # drafts that fail one after another before the run stops
DRAFT_TRIES = 3  # passages of the seed's document a slot drafts from before it is dropped unlabelled
CHECKS = "seedcheck/4"  # the version of the checks (rag.curate.seedcheck, rag.curate.absent); a draft resumes only with its own
# A small labelling model may call every pooled passage irrelevant, even the seed the question was drafted from (the
# embedded Qwen2.5-Coder-1.5B did for 8 of 8 first drafts on the built-in corpus, with one constant reason): the seed
# of an answerable or vague item is then gold anyway, flagged, and rag golden check counts such items.
SEED_GOLD = "the labelling model did not label the seed relevant; it is gold because the question was drafted from it"
SAME_MODEL = "labels come from the same model that drafted; set judge_model to another model for independent labels"


def prompt_version() -> str:
    """``golden-draft/1-<hash>``: a hash of the drafting and labelling signatures (instructions and fields), so an
    item says which prompts made it."""
    from signatures import PoolLabeler, QuestionDrafter, UnanswerableDrafter, VagueQuestionDrafter

    text = "\n".join(f"{s.__name__}\n{s.instructions}\n{sorted(s.fields)}"
                     for s in (QuestionDrafter, VagueQuestionDrafter, UnanswerableDrafter, PoolLabeler))
    return "golden-draft/1-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def passage(chunk: Chunk) -> str:
    return f"[{chunk.source} | {chunk.title}]\n{chunk.text[:MAX_PASSAGE_CHARS]}"


def dropped_path(out: str | Path) -> Path:
    out = Path(out)
    return out.with_name(out.name + ".dropped.jsonl")


def read_lines(path: Path, *, repair: bool = False) -> list[dict[str, Any]]:
    """The records of a JSONL file the drafter appends to ([] when absent). A last line cut short by an interrupted
    write is dropped (``repair``: cut off the file too, so the next append starts on a line of its own)."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines, out, torn = split_lines(text), [], False
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if n < len(lines) or text.endswith("\n"):
                raise InputError(f"{path}:{n}: invalid JSON ({exc.msg}); give --out a new file") from None
            torn = True  # the last line, cut short: its item is drafted again
    if repair and text and not text.endswith("\n"):
        with path.open("rb+") as fh:
            if torn:
                fh.truncate(len(text.encode("utf-8")) - len(lines[-1].encode("utf-8")))
            else:
                fh.seek(0, os.SEEK_END)
                fh.write(b"\n")
    return out


def _same_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The options a resumed draft must share (the index by its corpus fingerprint, wherever it lies now)."""
    return {k: v for k, v in params.items() if k != "index"}


@dataclass
class DraftResult:
    """What one :func:`draft_set` run did: items kept and dropped now, seeds skipped (id, why), seeds done before."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    resumed: int = 0
    calls: int = 0


def draft_set(retriever: Any, out: str | Path, *, n: int = 60, mix: Mapping[str, float] | None = None, seed: int = 0,
              pool: int = 5, lms: Mapping[str, Any] | Callable[[], Mapping[str, Any]],
              specs: Mapping[str, str] | None = None, log: Callable[[str], None] = lambda _m: None) -> DraftResult:
    """Draft, label and append items to ``out`` (module docstring), resuming what ``out`` holds. ``lms``: role ->
    dspy LM with ``answerer`` (drafts) and ``judge`` (labels), or a function returning it, called once the input is
    checked; ``specs`` names the model of each role in the items (default: the LM's model)."""
    from rag.eval.runner import is_fatal

    out, mix = Path(out).expanduser(), dict(mix or parse_types(None))
    chunks = list(retriever.index.chunks)
    plan = plan_draft(chunks, n, mix, seed)
    params = {"n": n, "types": mix, "seed": seed, "pool": pool, "index": str(Path(retriever.index.dir).resolve()),
              "corpus": retriever.index.manifest.get("corpus", {}).get("fingerprint"), "checks": CHECKS}
    if out.is_dir():
        raise InputError(f"--out {out} is a folder; give --out a file path, e.g. --out {out / 'golden.jsonl'}")
    done = {}
    for path in (out, dropped_path(out)):
        for rec in read_lines(path, repair=True):
            if not isinstance(rec, dict) or "draft" not in rec:
                raise InputError(f"{path} holds lines that rag golden draft did not write; give --out a new file")
            if _same_options(rec["draft"]) != _same_options(params):
                raise InputError(f"{path} was drafted with other options or another index ({rec['draft']}); rerun "
                                 "with the same --n/--types/--seed/--pool and --index-dir to resume, or give another --out")
            done[rec["id"]] = rec
    lms = lms() if callable(lms) else lms
    specs = {role: (specs or {}).get(role) or str(getattr(lms[role], "model", lms[role])) for role in ("answerer", "judge")}
    if specs["answerer"] == specs["judge"]:
        log(SAME_MODEL)
    drafter = _Drafter(lms["answerer"], lms["judge"], {c.id: c for c in chunks},
                       {q.seed.id for q in plan} | {str(r.get("seed_chunk_id")) for r in done.values()})
    by_doc: dict[str, list[str]] = {}
    for c in chunks:
        titles = by_doc.setdefault(c.source, [])
        if c.title not in titles:
            titles.append(c.title)
    result, version, failures = DraftResult(resumed=sum(p.id in done for p in plan)), prompt_version(), 0
    out.parent.mkdir(parents=True, exist_ok=True)
    for i, p in enumerate(plan, 1):
        if p.id in done:
            continue
        try:
            rec = drafter.item(p, retriever, pool, "\n".join(by_doc[p.seed.source][:MAX_SECTIONS]))
        except Exception as exc:  # noqa: BLE001 - an unparsable reply skips this seed; a fatal error stops the run
            if is_fatal(exc):
                raise
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            result.skipped.append((p.id, why))
            failures += 1
            log(f"warning: skipped {p.id} (seed {p.seed.id}): {why}")
            if failures >= MAX_FAILURES_IN_A_ROW:
                raise ModelError(f"the last {failures} drafts all failed (last: {why}); check the answerer and judge "
                                 f"models (rag models). The {len(result.kept)} item(s) kept are in {out}") from exc
            continue
        failures = 0
        rec = {**rec, "drafted_by": specs["answerer"], "labelled_by": specs["judge"], "prompt_version": version,
               "draft": params}
        if "dropped" in rec:
            append_json_line(dropped_path(out), rec)
            result.dropped.append(rec)
            log(f"[{i}/{len(plan)}] {p.id}: dropped ({rec['dropped']})")
        else:
            append_json_line(out, rec)
            result.kept.append(rec)
            log(f"[{i}/{len(plan)}] {p.id} {p.type}: kept, {len(rec['relevant_chunk_ids'])} of {len(rec['pool'])} "
                "pooled passages relevant")
    result.calls = drafter.calls
    return result


class _Drafter:
    """The drafting predictors on the answerer's model and the labelling one on the judge's."""

    def __init__(self, draft_lm: Any, label_lm: Any, chunks: Mapping[str, Chunk], seeds: Iterable[str] = ()) -> None:
        import dspy

        from rag.curate.absent import CorpusTerms
        from signatures import PoolLabeler, QuestionDrafter, UnanswerableDrafter, VagueQuestionDrafter

        self.draft_lm, self.label_lm, self.chunks, self.calls = draft_lm, label_lm, chunks, 0
        self.seeds = set(seeds)  # passages items draft from (planned, or taken by a slot drafting again): passed over
        self.corpus = CorpusTerms(c.text for c in chunks.values())
        self.by_source: dict[str, list[Chunk]] = {}  # each document's non-empty passages, in index order
        for c in filter(draftable, chunks.values()):
            self.by_source.setdefault(c.source, []).append(c)
        self.predict = {"answerable": dspy.Predict(QuestionDrafter), "vague": dspy.Predict(VagueQuestionDrafter),
                        "unanswerable": dspy.Predict(UnanswerableDrafter)}
        self.label = dspy.Predict(PoolLabeler)

    def _call(self, predictor: Any, lm: Any, **inputs: Any) -> Any:
        from rag.usage.metering import metered_call

        self.calls += 1
        return metered_call(predictor, lm, **inputs)[0]

    def item(self, p: Planned, retriever: Any, k: int, sections: str) -> dict[str, Any]:
        """The drafted, labelled record of ``p`` (with ``dropped`` set when its draft is not kept)."""
        unanswerable = p.type == "unanswerable"
        draft, question, seed, absent, failed, tried = self._draft(p, sections)
        if failed:  # no draft passed its checks: dropped unlabelled, no pool to label
            return {"id": p.id, "type": p.type, "question": question,
                    "reference_answer": NOT_COVERED if unanswerable else _reference(draft),
                    "should_refuse": unanswerable, "relevant_chunk_ids": [], "split": p.split, "seed_chunk_id": seed.id,
                    "source": seed.source, "section": seed.title, "pool": [], "dropped": failed}
        p = Planned(p.id, p.type, seed, p.split)
        reference = _reference(draft)
        if not question or not (reference or unanswerable):
            raise ValueError(f"the model wrote no {'question' if not question else 'reference answer'}")
        found: dict[str, list[str]] = {}
        for mode in ("dense", "bm25"):
            for hit in retriever.search(question, k=k, mode=mode):
                found.setdefault(hit.chunk_id, []).append(mode)
        found.setdefault(p.seed.id, []).append("seed")
        labels = []
        for cid, by in found.items():
            label = self._call(self.label, self.label_lm, question=question, passage=passage(self.chunks[cid]))
            if not isinstance(label.relevant, bool):
                raise ValueError(f"the label of {cid} is not true or false: {label.relevant!r}")
            labels.append({"chunk_id": cid, "found_by": by, "relevant": label.relevant, "reason": str(label.reason or "")})
        relevant = [lab["chunk_id"] for lab in labels if lab["relevant"]]
        seed_only = not unanswerable and p.seed.id not in relevant
        if seed_only:  # the question was drafted from the seed: it stays gold, flagged for review (SEED_GOLD)
            relevant.insert(0, p.seed.id)
        rec = {"id": p.id, "type": p.type, "question": question,
               "reference_answer": NOT_COVERED if unanswerable else reference,
               "should_refuse": unanswerable, "relevant_chunk_ids": [] if unanswerable else relevant, "split": p.split,
               "seed_chunk_id": p.seed.id, "source": p.seed.source, "section": p.seed.title, "pool": labels}
        if seed_only:
            rec["seed_gold"] = SEED_GOLD
        if tried:  # drafts that failed a check before this one: what the checks caught, kept for the reviewer
            rec["redrafted"] = [{"question": q, "why": why} for q, why in tried]
        if unanswerable:
            rec["missing"] = str(draft.missing or "")
            rec["absent_terms"] = absent
            if relevant:
                why = "; ".join(f"{lab['chunk_id']}: {lab['reason']}" for lab in labels if lab["relevant"])
                rec["dropped"] = f"pooled passage(s) labelled as answering it: {why}"
        return rec

    def _draft(self, p: Planned, sections: str) -> tuple[Any, str, Chunk, list[str], str | None, list[tuple[str, str]]]:
        """(draft, question, the passage it was drafted from, its absent terms, why no draft passed or None, the
        (question, why) of each draft that failed its checks before): drafts from the seed and then from the next
        passages of its document that seed no other item, at most DRAFT_TRIES, until a draft is written in its
        passage's scripts, does not point at its passage (rag.curate.seedcheck) and, if unanswerable, names
        something the corpus never mentions (rag.curate.absent)."""
        from rag.curate.absent import absent_terms
        from rag.curate.seedcheck import foreign_scripts, names_its_passage

        unanswerable = p.type == "unanswerable"
        same = self.by_source.get(p.seed.source) or [p.seed]
        at = next((i for i, c in enumerate(same) if c.id == p.seed.id), 0)
        others = [c for c in same[at + 1:] + same[:at] if c.id not in self.seeds]  # not another slot's seed: the
        # same passage would give that slot's question again
        tried: list[tuple[str, str]] = []  # (question, why it failed)
        draft, question, seed = None, "", p.seed
        for seed in [p.seed, *others][:DRAFT_TRIES]:
            shown = passage(seed)
            draft = self._call(self.predict[p.type], self.draft_lm, passage=shown,
                               **({"sections": sections} if unanswerable else {}))
            question = " ".join(str(draft.question or "").split())
            if not question:
                raise ValueError("the model wrote no question")
            foreign = foreign_scripts(f"{question} {_reference(draft)}", shown)
            absent = absent_terms(question, self.corpus) if unanswerable else []
            if foreign:
                tried.append((question, f"letters of the {', '.join(foreign)} script, which its passage has none of"))
            elif names_its_passage(question):
                tried.append((question, "it points at its passage, which whoever is asked it never sees"))
            elif unanswerable and not absent:
                tried.append((question, "every term it asks about is in the documents"))
            else:
                self.seeds.add(seed.id)  # a slot drafting again later does not take it too
                return draft, question, seed, absent, None, tried
        if all(why.startswith("every term") for _, why in tried):
            return draft, question, seed, [], (f"every term it asks about is in the documents, in {len(tried)} "
                                               "draft(s): " + " | ".join(q for q, _ in tried)), tried
        return draft, question, seed, [], (f"no draft passed the checks, in {len(tried)} draft(s): "
                                           + " | ".join(f"{q} ({why})" for q, why in tried)), tried


def _reference(draft: Any) -> str:
    return " ".join(str(getattr(draft, "reference_answer", "") or "").split())
