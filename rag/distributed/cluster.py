"""Connecting to a Ray cluster, and sizing the worker pool from its cores.

``--ray`` alone starts a local cluster in this process (``ray.init()``); ``--ray auto`` joins the cluster that
``ray start --head`` started on this machine; ``--ray HOST:PORT`` or ``--ray ray://HOST:10001`` joins a remote one.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rag.errors import ConfigError, InputError

NAMESPACE = "sieve"  # named actors (the cluster rate limiter) live here
LOCAL = "local"  # what ``--ray`` with no address means
# A loaded machine starts Ray's Python agents and workers slowly; the defaults (30 s, 60 s) then make the raylet
# give up on them and exit. Generous bounds for a local cluster: they only matter when something is slow.
SLOW_START = {"RAY_agent_register_timeout_ms": "300000", "RAY_worker_register_timeout_seconds": "300"}
INSTALL_HINT = 'Ray is not installed; install it with: pip install -e ".[ray]"  (or pip install "ray>=2.9")'
# environment variables every worker needs to behave like the driver (keys are passed, never printed)
FORWARDED_ENV = ("GROQ_API_KEY", "GROQ_BASE_URL", "SIEVE_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                 "TOKENIZERS_PARALLELISM", "PYTHONPATH")


def require_ray() -> Any:
    """The ``ray`` module, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return ray


def connect(address: str | None = LOCAL, *, num_cpus: int | None = None, quiet: bool = True) -> Any:
    """Join (or start, for ``local``) a cluster unless this process already is connected; returns ``ray``.

    ``num_cpus`` caps a local cluster's CPUs (default: every core this process may use)."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    address = (address or LOCAL).strip()
    env = {k: os.environ[k] for k in FORWARDED_ENV if os.environ.get(k)}
    kwargs: dict[str, Any] = {"namespace": NAMESPACE, "runtime_env": {"env_vars": env} if env else None,
                              "log_to_driver": not quiet, "include_dashboard": False}
    if address == LOCAL:
        kwargs["num_cpus"] = num_cpus or len(os.sched_getaffinity(0))
        for name, value in SLOW_START.items():  # read by the raylet this process starts; a user's value wins
            os.environ.setdefault(name, value)
    else:
        kwargs["address"] = address
        kwargs.pop("include_dashboard")
    if quiet:
        kwargs["logging_level"] = "warning"
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise InputError(f"--ray {address}: no Ray cluster answers there ({exc}); start one with `ray start --head` "
                         "on the head node, or give --ray without an address for a local one") from None
    except ValueError as exc:
        raise InputError(f"--ray {address}: {exc}") from None
    return ray


def cluster_cpus() -> int:
    """CPUs of the whole cluster (every node's, as Ray counts them)."""
    import ray

    return int(ray.cluster_resources().get("CPU", 1))


def largest_node_cpus() -> int:
    """CPUs of the biggest live node: one in-process model per node uses them all."""
    import ray

    return max((int(n["Resources"].get("CPU", 1)) for n in ray.nodes() if n.get("Alive")), default=1)


def plan_workers(workers: int | None, *, cpus_per_worker: float) -> int:
    """``workers`` as asked, else as many as the cluster's CPUs hold at ``cpus_per_worker`` each (at least 1)."""
    if workers is not None:
        if workers < 1:
            raise InputError(f"--workers must be >= 1, got {workers}")
        return workers
    return max(1, int(cluster_cpus() // max(cpus_per_worker, 1e-9)))


def say(message: str) -> None:
    print(message, file=sys.stderr)


def optional_value(argv: list[str], flag: str, default: str) -> list[str]:
    """``--ray`` given without a value (last, or followed by another option) gets ``default``: the CLI's
    ``--ray [ADDRESS]``."""
    out = []
    for i, arg in enumerate(argv):
        out.append(arg)
        if arg == flag and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out.append(default)
    return out
