"""The codebase's shape, checked: packages by concept, no module name twice, imports only downwards through the
layers, every package installed, and the public API at ``import rag`` (docs/layout.md describes the map)."""

from __future__ import annotations

import ast
import collections
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAG = ROOT / "rag"
# lowest first: a module may import from its own layer or a lower one, never a higher one
LAYERS = [
    {"errors", "paths", "version", "config"},
    {"ingest", "usage", "stats"},
    {"index", "lm", "data"},
    {"retrieval"},
    {"agent"},
    {"eval", "curate"},
    {"report", "distributed"},
    {"api"},
    {"serve"},
    {"cli"},
    {"rag", "__main__"},
]
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for path in RAG.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _unit(module: str) -> str:
    """The layer unit of a module: its subpackage (rag.eval.runs -> eval), or the top-level module's name."""
    parts = module.split(".")
    return "rag" if len(parts) == 1 else parts[1]


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rag":
            found |= {t for t in (node.module, *(f"{node.module}.{a.name}" for a in node.names)) if t in modules}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules}
    return found


def test_rag_is_packages_by_concept_with_a_few_faces_at_the_top():
    top = sorted(p.name for p in RAG.glob("*.py"))
    assert len(top) <= 8, top
    for package in (p for p in RAG.iterdir() if (p / "__init__.py").is_file()):
        modules = [p for p in package.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 13, (package.name, len(modules))
        assert "__all__" in (package / "__init__.py").read_text(encoding="utf-8"), f"{package} has no __all__"


def test_no_module_name_appears_twice_in_the_project():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    stems = collections.defaultdict(list)
    for f in files.split():
        name = Path(f).name
        if name not in ("__init__.py", "__main__.py", "conftest.py") and not name.startswith("test_"):
            stems[Path(f).stem].append(f)
    assert {s: fs for s, fs in stems.items() if len(fs) > 1} == {}


def test_imports_only_go_down_the_layers_so_there_is_no_circle():
    modules = _modules()
    assert set(map(_unit, modules)) <= set(LEVEL), set(map(_unit, modules)) - set(LEVEL)
    upward = []
    for name, path in modules.items():
        for target in _imports(path, modules):
            if LEVEL[_unit(target)] > LEVEL[_unit(name)]:
                upward.append(f"{name} -> {target}")
    assert upward == []


def test_every_package_is_installed_by_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for top in ("rag", "signatures", "optimize")
               for p in (ROOT / top).rglob("__init__.py")}
    assert on_disk == listed


def test_import_rag_is_cheap_and_help_lists_the_api():
    code = ("import sys, rag; heavy = sorted(m for m in ('dspy', 'faiss', 'torch', 'bm25s') if m in sys.modules);"
            "print(heavy); help(rag)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PATH": "", "PAGER": "cat", "PYTHONPATH": str(ROOT)}).stdout
    assert out.splitlines()[0] == "[]"  # nothing heavy until it is used
    for name in ("open_agent", "build_index", "run_eval", "compile_program", "load_settings", "SieveError", "Sieve",
                 "Retriever"):
        assert name in out, name


def test_the_lazy_names_are_the_real_classes():
    import rag
    from rag.agent.module import Sieve
    from rag.retrieval.retriever import Retriever

    assert rag.Sieve is Sieve and rag.Retriever is Retriever
    assert set(rag.__all__) <= set(dir(rag))


def test_project_files_resolve_the_same_from_any_working_directory(tmp_path, monkeypatch):
    from rag.paths import PROJECT_ROOT, golden_path, labels_path, user_labels_path

    monkeypatch.chdir(tmp_path)
    assert golden_path() == PROJECT_ROOT / "golden" / "python_ref.jsonl" and golden_path().is_file()
    assert labels_path().is_file() and golden_path("mine.jsonl") == __import__("pathlib").Path("mine.jsonl")
    home = user_labels_path()  # where rag calibrate writes: SIEVE_HOME (the conftest's), never the source tree
    assert PROJECT_ROOT not in home.parents
