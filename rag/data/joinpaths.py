"""Join paths: how a table the question asks about reaches the table of a record it names, read from the schema.

"How many of Linden Textiles' claims are over the limit?" names a customer (customers.name, its key customer_id)
and asks about claims, which hold no customer_id: a claim reaches its customer only through its shipment. Told the
customer's key, a small SQL writer filters ``claims.customer_id`` (no such column) or drops the customer. The
value links (rag.data.valuelinks) then add one line with the way through, found from the schema alone:

    claims reach customers through shipments: claims.shipment_id = shipments.shipment_id AND
    shipments.customer_id = customers.customer_id

Two tables join where they share a column that is the key of one of them (its first column, named ``...id``), as
``claims.shipment_id`` and ``shipments.shipment_id``; a shared column that keys neither (``status``, ``name``) is
no join. The path is the shortest such chain, at most MAX_HOPS joins, and only when the two tables do not join
directly (a direct join the schema already shows). A table is asked about when the question says its name
(singular or plural).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rag.data.schemalink import key_of, stem, words

MAX_HOPS = 3  # joins in a path at most: longer chains are not a small writer's to follow from one line


@dataclass
class JoinPaths:
    # per table, the tables it joins: table -> [(neighbour, the column they share that keys one of them)]
    edges: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # a table's name as the question says it (stem) -> table

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> JoinPaths:
        """From a tables record (rag.data.build_database): its tables, their columns and keys."""
        return cls.from_columns({t["name"]: [c["name"] for c in t.get("columns") or []]
                                 for t in record.get("tables") or []})

    @classmethod
    def from_columns(cls, tables: dict[str, list[str]]) -> JoinPaths:
        """From each table's column names in order (a table's key is its first, when named ``...id``)."""
        keys = {t: key for t, columns in tables.items() if (key := key_of(list(columns)))}
        edges: dict[str, list[tuple[str, str]]] = {t: [] for t in tables}
        for a, columns in tables.items():
            for b, other in tables.items():
                shared = [c for c in columns if a != b and c in other and c in (keys.get(a), keys.get(b))]
                edges[a] += [(b, c) for c in shared[:1]]
        names = {stem(w): t for t in tables for w in words(t)[-1:]}
        return cls(edges, names)

    def asked(self, question: str) -> list[str]:
        """The tables ``question`` says the name of, in its order."""
        return list(dict.fromkeys(self.names[s] for s in map(stem, words(question)) if s in self.names))

    def line(self, start: str, goal: str) -> str | None:
        """How ``start`` reaches ``goal`` as one line (module docstring); None when they join directly, are the same
        table, or no path of at most MAX_HOPS joins links them."""
        hops = self.path([start], goal)
        if not hops or len(hops) < 2:
            return None
        through = ", ".join(b for _, b, _ in hops[:-1])
        joins = " AND ".join(f"{a}.{c} = {b}.{c}" for a, b, c in hops)
        return f"{start} reach {goal} through {through}: {joins}"

    def path(self, starts: Iterable[str], goal: str) -> list[tuple[str, str, str]] | None:
        """The shortest chain of joins from any of ``starts`` to ``goal``, as hops ``(table, next table, the column
        they join on)``: [] when ``goal`` is a start, None when no chain of at most MAX_HOPS joins reaches it."""
        starts = [s for s in starts if s in self.edges]
        if goal in starts:
            return []
        paths: deque[list[tuple[str, str, str]]] = deque([[("", s, "")] for s in starts])
        seen = set(starts)
        while paths:
            path = paths.popleft()
            table = path[-1][1]
            for neighbour, column in self.edges[table]:
                if neighbour in seen or len(path) > MAX_HOPS:
                    continue
                step = path + [(table, neighbour, column)]
                if neighbour == goal:
                    return step[1:]
                seen.add(neighbour)
                paths.append(step)
        return None
