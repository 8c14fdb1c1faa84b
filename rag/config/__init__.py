"""All of Sieve's knobs in one place: ``Settings`` (rag.config.settings), where each value comes from
(rag.config.sources) and which values are valid (rag.config.checks).

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

from rag.config.settings import (
    ANSWER_CONTEXTS,
    BEFORE_THE_SETTING,
    CRITIC_CHECKS,
    CRITIC_MODES,
    DATA_ROUTES,
    DEMO_POSITIONS,
    DENSE_INDEXES,
    EMBEDDING_PRECISIONS,
    EMBEDDING_RUNTIMES,
    ENCODER_PRECISIONS,
    EXTRA_BUFTS,
    MODES,
    PROJECT_ROOT,
    ROLES,
    ROUTERS,
    SQL_LINKS,
    SQL_OUTPUTS,
    Settings,
    default_index_dir,
    setting_defaults,
    sieve_home,
    where_pairs,
)
from rag.config.sources import (
    ENV_OTHER,
    config_file_path,
    load_dotenv,
    load_settings,
    parse_assignments,
)

__all__ = ["ANSWER_CONTEXTS", "BEFORE_THE_SETTING", "CRITIC_CHECKS", "CRITIC_MODES", "DATA_ROUTES", "DEMO_POSITIONS",
           "DENSE_INDEXES", "EMBEDDING_PRECISIONS", "EMBEDDING_RUNTIMES", "ENCODER_PRECISIONS", "ENV_OTHER",
           "EXTRA_BUFTS", "MODES", "PROJECT_ROOT", "ROLES", "ROUTERS", "SQL_LINKS", "SQL_OUTPUTS", "Settings",
           "config_file_path", "default_index_dir", "load_dotenv", "load_settings", "parse_assignments",
           "setting_defaults", "sieve_home", "where_pairs"]
