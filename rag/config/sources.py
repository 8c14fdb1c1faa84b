"""Where a setting's value comes from, highest first (rag.config's docstring): command-line flags and ``--set``,
``SIEVE_*`` environment variables, the config file, the defaults; each value turned into its field's type, with an
error that names the file and key, the variable or the flag, and what to write instead."""

from __future__ import annotations

import os
import tomllib
import typing
from pathlib import Path
from typing import Any

import platformdirs

from rag.config.settings import _FIELDS, Settings
from rag.errors import ConfigError


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
        hint = f"; did you mean {close[0]}?" if close else "; see the fields in rag/config/settings.py"
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

