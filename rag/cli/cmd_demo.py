"""``rag demo``: write offline demo datasets (``rag demo ops``: freight policies, tables and a golden set)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer

from rag.cli.common import app, err

demo_app = typer.Typer(help="Write an offline demo dataset to index, ask and evaluate (synthetic, no downloads).",
                       no_args_is_help=True)
app.add_typer(demo_app, name="demo")

DEMO_QUESTION = "How many open claims exceed the amount that requires manager approval?"


@demo_app.command("ops")
def ops_cmd(
    dest: Optional[Path] = typer.Argument(None, help="Folder to write (default: $SIEVE_HOME/demo/ops). Must be new, empty or a previous demo folder."),
    seed: int = typer.Option(7, "--seed", help="Seed of the generator: the same seed writes the same bytes."),
    force: bool = typer.Option(False, "--force", help="Replace a previous demo folder written with another seed or version (its index must then be rebuilt)."),
) -> None:
    """Write a synthetic freight-operations demo: policy documents, tables (CSV) and a golden set.

    DEST/corpus/policies holds 12 policies of a fictional carrier, DEST/corpus/data four related tables (carriers, customers, shipments, claims) with .meta.toml descriptions, and DEST/golden.jsonl questions routed to the documents, the tables or both (with gold SQL and results), plus unanswerable ones.

    Only a folder marked by .sieve-demo.json is overwritten, and then only the demo's own files: an index or runs kept inside it stay.

    Examples:
      rag demo ops                          # into $SIEVE_HOME/demo/ops
      rag demo ops ./ops-demo --seed 11
      rag demo ops ./ops-demo --seed 12 --force   # replace the seed-11 demo
    """
    from rag.data.demo.ops_demo import default_dest, write_ops_demo

    target = dest if dest is not None else default_dest()
    err(f"writing the ops demo (seed {seed}) into {target}")
    summary = write_ops_demo(target, seed=seed, force=force)
    root = Path(summary["dest"])
    previous = summary["replaced"]
    q = lambda p: shlex.quote(str(p))
    if previous and summary["kept"]:
        stale = (previous.get("seed"), previous.get("version")) != (seed, summary["version"])
        err(f"kept {', '.join(summary['kept'])} from the previous demo (seed {previous.get('seed')})"
            + (f"; an index there was built from other data: rebuild it with rag index {q(root / 'corpus')} "
               f"--index-dir {q(root / 'index')}" if stale else ""))
    tables = ", ".join(f"{name} {rows}" for name, rows in summary["tables"].items())
    groups = ", ".join(f"{name} {n}" for name, n in summary["golden_counts"]["group"].items())
    n = sum(summary["golden_counts"]["group"].values())
    typer.echo(f"Wrote the ops demo (seed {seed}) into {root}")
    typer.echo(f"  policies  {root / 'corpus' / 'policies'} ({summary['policies']} documents)")
    typer.echo(f"  tables    {root / 'corpus' / 'data'} (rows: {tables})")
    typer.echo(f"  golden    {summary['golden']} ({n} items: {groups})")
    typer.echo("Next:")
    typer.echo(f"  rag index {q(root / 'corpus')} --index-dir {q(root / 'index')}")
    typer.echo(f"  rag ask --index-dir {q(root / 'index')} {q(DEMO_QUESTION)}")
    typer.echo(f"  rag eval --golden {q(summary['golden'])} --index-dir {q(root / 'index')}")
