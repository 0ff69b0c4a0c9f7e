"""Whether a PromQL query written by hand is scoped to this cluster: every series selector in it carries each
matcher of ``prometheus.cluster_selector``.

In a Prometheus view of several clusters (Google Managed Prometheus, Thanos, Mimir) a selector without the
cluster's matchers reads every cluster's series: a count of nodes counts another cluster's too, and a fallback
such as ``or on() (0 * count(kube_node_info))`` is kept alive by another cluster's kube-state-metrics while this
cluster's is down, so "no answer" reads 0. The default queries carry the matchers
(``agent.sources.prometheus_queries``); a query a person writes (an on-prem pool's ``capacity_query``) is read as
written, so the agent can only say which of its selectors lack them.

The scan is lexical, after the PromQL grammar (prometheus/prometheus, promql/parser/lex.go): string literals and
``[...]`` ranges are skipped; ``name{...}`` and ``{...}`` are selectors; a bare name is a selector unless it is a
keyword, a function or aggregation (a name followed by ``(``, or by ``by``/``without``), or a label in the list a
``by``, ``without``, ``on``, ``ignoring``, ``group_left`` or ``group_right`` takes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from config.prometheus import label_matchers

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_NUMBER = re.compile(r"[0-9.][0-9a-zA-Z_.]*(?:(?<=[eE])[+-][0-9]+)?")  # 8, 0.5, 1e+06, 0x1f, 5m (a duration)
_LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}) | _LABEL_LISTS
_QUOTES = "\"'`"


def unscoped_selectors(query: str, cluster: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Each series selector of ``query`` (as written) that lacks one of the matcher texts ``cluster``, with the
    matchers it lacks; none when every selector carries them all (or ``cluster`` is empty)."""
    wanted = [(_parts(text), text) for text in cluster]
    if not wanted:
        return []
    out: list[tuple[str, list[str]]] = []
    for selector, matchers in _selectors(query):
        have = {_parts(text) for text in matchers}
        missing = [text for parts, text in wanted if parts not in have]
        if missing:
            out.append((selector, missing))
    return out


def _selectors(query: str) -> list[tuple[str, list[str]]]:
    """Each series selector of ``query`` as written, with its matcher texts."""
    found: list[tuple[str, list[str]]] = []
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        if char in _QUOTES:
            i = _after_string(query, i)
        elif char == "[":
            i = _past(query, i, "]")
        elif char == "{":
            end = _closing_brace(query, i)
            found.append((query[i:end], _matcher_texts(query[i + 1 : end - 1])))
            i = end
        elif (number := _NUMBER.match(query, i)) is not None:
            i = number.end()
        elif (name := _NAME.match(query, i)) is not None:
            word, i = name.group(), name.end()
            following = _next_char(query, i)
            if word in _LABEL_LISTS and following == "(":
                i = _past(query, i, ")")  # a list of label names, not selectors
            elif following == "{":
                start = query.index("{", i)
                end = _closing_brace(query, start)
                found.append((query[name.start() : end], _matcher_texts(query[start + 1 : end - 1])))
                i = end
            elif following != "(" and word not in _KEYWORDS and not _is_aggregation(query, i):
                found.append((word, []))
        else:
            i += 1
    return found


def _is_aggregation(query: str, at: int) -> bool:
    """Whether the name ending at ``at`` is followed by an aggregation's ``by`` or ``without`` clause."""
    rest = query[at:].lstrip()
    return re.match(r"(by|without)\s*\(", rest) is not None


def _past(query: str, at: int, char: str) -> int:
    """The index after the first ``char`` from ``at`` on (the end when there is none)."""
    found = query.find(char, at)
    return len(query) if found < 0 else found + 1


def _next_char(query: str, at: int) -> str:
    rest = query[at:].lstrip()
    return rest[:1]


def _after_string(query: str, at: int) -> int:
    quote, i = query[at], at + 1
    while i < len(query) and query[i] != quote:
        i += 2 if query[i] == "\\" and quote != "`" else 1
    return i + 1


def _closing_brace(query: str, at: int) -> int:
    """The index after the ``}`` that closes the ``{`` at ``at`` (strings inside skipped)."""
    i = at + 1
    while i < len(query) and query[i] != "}":
        i = _after_string(query, i) if query[i] in _QUOTES else i + 1
    return i + 1


def _matcher_texts(inside: str) -> list[str]:
    matchers = label_matchers(inside.strip().rstrip(","))
    return [text for _, text in matchers] if matchers is not None else []


def _parts(text: str) -> tuple[str, str, str]:
    """A matcher text as (label, operator, value), the value's quoting undone, so that ``cluster='prod'`` and
    ``cluster="prod"`` compare equal."""
    match = re.match(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$", text, re.DOTALL)
    if match is None:
        return (text, "", "")
    label, operator, quoted = match.groups()
    value = quoted[1:-1] if quoted[:1] == "`" else re.sub(r"\\(.)", r"\1", quoted[1:-1])
    return (label, operator, value)
