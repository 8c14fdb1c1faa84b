"""Compiled programs in ``artifacts/``: one folder each, self-describing, no pickle.

    artifacts/<name>/program.json    DSPy JSON state of the agent's predictors (instructions + demos)
    artifacts/<name>/judge.json      DSPy JSON state of the judge (when it was compiled)
    artifacts/<name>/manifest.json   versions, models per role, optimizer, golden hash, scores, spend, date

``select`` picks the artifact that matches the current configuration (same signatures, same models per
role, same DSPy minor version; the same corpus preferred) and whose gain on the dev split clears noise: a
paired test over the dev examples (rag.stats.intervals) finds at least one role better than the uncompiled prompts and
none worse. The test split is reported, never used to select. A user-named artifact is validated and used
whatever it scored. The agent's roles and the judge are selected apart (``roles``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag.errors import ArtifactError
from rag.stats.intervals import ALPHA, Comparison, compare_paired

PROGRAM_FILE, JUDGE_FILE, MANIFEST_FILE = "program.json", "judge.json", "manifest.json"
AGENT_ROLES = ("grader", "rewriter", "answerer", "agent", "hyde", "router", "sql")  # compiled into program.json
JUDGE_ROLES = ("judge",)  # compiled into judge.json
DATA_ROLES = ("router", "sql")  # their demos name one index's tables and columns: chosen only for that index

if TYPE_CHECKING:  # DSPy is imported to save or apply a program only: listing artifacts (`rag artifacts`) never needs it
    import dspy


def signature_fingerprint() -> str:
    """Hash of the uncompiled signatures (instructions, field names and types) and of the prompt layout
    (``rag.lm.adapter.PROMPT_LAYOUT``: where demos go): a changed signature or layout invalidates compiled programs,
    which would otherwise load silently with stale fields, or with scores measured on other prompts."""
    from rag.lm.adapter import PROMPT_LAYOUT
    from signatures import Answerer, Grader, Judge, Rewriter

    parts = [] if PROMPT_LAYOUT == 1 else [f"layout {PROMPT_LAYOUT}"]
    for sig in (Grader, Rewriter, Answerer, Judge):
        fields = [(n, str(f.annotation)) for n, f in {**sig.input_fields, **sig.output_fields}.items()]
        parts.append(f"{sig.__name__}|{sig.instructions}|{fields}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def dspy_version() -> str:
    """The installed DSPy's version, read without importing DSPy (~1.2 s)."""
    return importlib.metadata.version("dspy")


def dspy_minor(version: str | None = None) -> str:
    return ".".join((version or dspy_version()).split(".")[:2])


@dataclass
class Artifact:
    name: str
    path: Path
    manifest: dict[str, Any]

    @property
    def program_path(self) -> Path:
        return self.path / PROGRAM_FILE

    @property
    def judge_path(self) -> Path | None:
        p = self.path / JUDGE_FILE
        return p if p.is_file() else None

    def test_gain(self) -> float | None:
        """Sum over roles of test_after - test_before (None when the manifest has no such scores). Reported only."""
        pairs = [(sc.get("test_before"), sc.get("test_after")) for sc in (self.manifest.get("scores") or {}).values()]
        pairs = [(b, a) for b, a in pairs if b is not None and a is not None]
        return round(sum(a - b for b, a in pairs), 4) if pairs else None

    def roles(self, among: tuple[str, ...] = AGENT_ROLES + JUDGE_ROLES) -> list[str]:
        return [r for r in (self.manifest.get("scores") or {}) if r in among]

    def comparison(self, role: str, split: str = "dev") -> Comparison | None:
        """Compiled vs uncompiled on ``split``, paired over its examples; None when the manifest lacks them."""
        per = (((self.manifest.get("scores") or {}).get(role) or {}).get("per_example") or {}).get(split) or {}
        before, after = per.get("before"), per.get("after")
        if not before or not after or len(before) != len(after):
            return None
        return compare_paired(before, after, "uncompiled", "compiled")

    def dev_verdict(self, roles: tuple[str, ...] = AGENT_ROLES) -> tuple[bool, str]:
        """(selectable, why): at least one of ``roles`` detectably better on dev, none detectably worse."""
        mine = self.roles(roles)
        comps = {r: self.comparison(r) for r in mine}
        if not mine:
            return False, f"its manifest records no scores of {', '.join(roles)}, so its gain cannot be told from noise"
        missing = [r for r, c in comps.items() if c is None]
        if missing:
            return False, (f"its manifest has no per-example dev scores for {', '.join(missing)} (compiled by an older "
                           "Sieve), so its gain cannot be told from noise; recompile with: rag compile")
        said = "; ".join(f"{r} {c.diff:+.3f} (p={c.p:.2g}, n={c.n})" for r, c in comps.items())
        if any(c.p < ALPHA and c.diff < 0 for c in comps.values()):
            return False, f"it scored worse on dev than the uncompiled prompts ({said})"
        if not any(c.p < ALPHA and c.diff > 0 for c in comps.values()):
            return False, f"its dev gain is within noise ({said})"
        return True, f"its dev gain clears noise ({said})"

    def describe(self, role: str) -> str:
        """One line per role: dev and test, before -> after, and whether the change is more than noise."""
        sc = (self.manifest.get("scores") or {}).get(role) or {}
        parts = []
        for split in ("dev", "test"):
            c = self.comparison(role, split)
            noise = ("no per-example scores" if c is None else
                     c.verdict.replace("compiled higher than uncompiled", "better")
                     .replace("compiled lower than uncompiled", "worse"))
            parts.append(f"{split} {_score(sc.get(split + '_before'))} -> {_score(sc.get(split + '_after'))} ({noise})")
        return f"{role:<9} " + "   ".join(parts)

    def problems(self, models: dict[str, str], signatures: str | None = None) -> list[str]:
        """Why this artifact does not fit the current configuration ([] = it fits)."""
        m, out = self.manifest, []
        if m.get("signatures") != (signatures or signature_fingerprint()):
            out.append("it was compiled for other signatures or another prompt layout (the signature or adapter code "
                       "changed since)")
        if dspy_minor(m.get("dspy_version", "0.0")) != dspy_minor():
            out.append(f"it was compiled with DSPy {m.get('dspy_version')}, this is DSPy {dspy_version()}")
        compiled = m.get("models", {})
        diff = [f"{r}: {compiled.get(r)} vs {models[r]}" for r in models if compiled.get(r) != models[r]]
        if diff:
            out.append("it was compiled for other models (" + "; ".join(diff) + ")")
        return out


def load(path: Path) -> Artifact:
    path = Path(path)
    manifest_path, program_path = path / MANIFEST_FILE, path / PROGRAM_FILE
    if not manifest_path.is_file() or not program_path.is_file():
        raise ArtifactError(f"{path} is not a compiled program: it needs {MANIFEST_FILE} and {PROGRAM_FILE}. "
                            "Recompile with: rag compile")
    for file in (manifest_path, program_path):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ArtifactError(f"{file}: not valid JSON ({exc}). Delete the folder and recompile with: rag compile") from None
        if not isinstance(data, dict):
            raise ArtifactError(f"{file}: expected a JSON object. Delete the folder and recompile with: rag compile")
        if file == manifest_path:
            manifest = data
    if manifest.get("format") != "sieve-artifact/1":
        raise ArtifactError(f"{manifest_path}: not a Sieve artifact manifest (format={manifest.get('format')!r})")
    return Artifact(name=path.name, path=path, manifest=manifest)


def list_artifacts(root: Path) -> list[Artifact]:
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for sub in sorted(root.iterdir()):
        if (sub / MANIFEST_FILE).is_file():
            try:
                found.append(load(sub))
            except ArtifactError:
                continue
    return found


def _score(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def select(root: Path, models: dict[str, str], name: str | None = None, fingerprint: str | None = None,
           roles: tuple[str, ...] = AGENT_ROLES) -> tuple[Artifact | None, list[str]]:
    """(artifact or None, messages). A named artifact must exist and fit; otherwise the best fitting one that holds
    some of ``roles`` and whose dev gain on them clears noise (``Artifact.dev_verdict``)."""
    if name:
        if not Path(name).is_dir() and not (Path(root) / name).exists():
            have = ", ".join(a.name for a in list_artifacts(Path(root))) or "none"
            raise ArtifactError(f"no artifact {name!r} in {root}; available: {have} (rag artifacts lists them; "
                                "rag compile --out NAME makes one)")
        art = load(Path(root) / name) if not Path(name).is_dir() else load(Path(name))
        problems = art.problems(models)
        if problems:
            raise ArtifactError(f"artifact {art.name} does not fit this configuration: {'; '.join(problems)}. "
                                "Recompile with: rag compile, or drop --artifact to run uncompiled")
        return art, []
    messages, fitting = [], []
    what = "judge" if roles == JUDGE_ROLES else "agent"
    for art in list_artifacts(root):
        problems = art.problems(models)
        if problems:
            messages.append(f"skipped artifact {art.name}: {'; '.join(problems)}")
            continue
        if (not art.roles(roles) and art.roles()) or (roles == JUDGE_ROLES and art.judge_path is None):
            continue  # holds nothing for this purpose (e.g. only a compiled judge)
        if (art.roles() and set(art.roles()) <= set(DATA_ROLES) and fingerprint
                and art.manifest.get("index_fingerprint") != fingerprint):
            continue  # only data-route demos, written against another index's tables: nothing here for this index
        ok, why = art.dev_verdict(roles)
        if not ok:
            messages.append(f"skipped artifact {art.name} ({what}): {why}; use --artifact {art.name} to run it anyway")
        else:
            fitting.append(art)
    if not fitting:
        return None, messages
    fitting.sort(key=lambda a: (a.manifest.get("index_fingerprint") == fingerprint, a.manifest.get("created", "")))
    best = fitting[-1]
    if fingerprint and best.manifest.get("index_fingerprint") != fingerprint:
        messages.append(f"artifact {best.name} was compiled on another corpus; its demos come from that corpus")
    return best, messages


def save(program: dspy.Module, out: Path, manifest: dict[str, Any], judge: dspy.Module | None = None) -> Artifact:
    """Write program (+judge) state and manifest into ``out`` atomically (temp dir, then rename)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        program.save(str(tmp / PROGRAM_FILE), save_program=False)
        if judge is not None:
            judge.save(str(tmp / JUDGE_FILE), save_program=False)
        full = {"format": "sieve-artifact/1", "signatures": signature_fingerprint(),
                "dspy_version": dspy_version(), **manifest}
        (tmp / MANIFEST_FILE).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return load(out)


def apply(program: dspy.Module | None, artifact: Artifact, judge: dspy.Module | None = None) -> None:
    """Load the compiled state into a freshly built program (and judge, when the artifact has one)."""
    try:
        if program is not None:
            with _stages_the_artifact_lacks_detached(program, artifact):
                program.load(str(artifact.program_path))
        if judge is not None and artifact.judge_path:
            judge.load(str(artifact.judge_path))
    except (KeyError, ValueError, TypeError) as exc:
        raise ArtifactError(f"{artifact.path}: the program state does not match Sieve's predictors ({exc}). "
                            "Recompile with: rag compile") from None


OPTIONAL_STAGES = ("expander", "reranker", "router", "data", "critic", "condenser")  # submodules an artifact compiled before they existed leaves as they are


@contextlib.contextmanager
def _stages_the_artifact_lacks_detached(program: dspy.Module, artifact: Artifact) -> Iterator[None]:
    """Hide the optional stages (query expansion) whose state the artifact does not hold while it loads, so an
    artifact compiled without them still applies to the roles it has; they keep their uncompiled prompts."""
    try:
        keys = set(json.loads(Path(artifact.program_path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        keys = set()  # program.load reports the file's problem
    detached = {name: getattr(program, name) for name in OPTIONAL_STAGES if getattr(program, name, None) is not None
                and not any(k.startswith(name + ".") for k in keys)}
    for name in detached:
        setattr(program, name, None)
    try:
        yield
    finally:
        for name, stage in detached.items():
            setattr(program, name, stage)
