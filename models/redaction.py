"""What a secret looks like in text, and how it is hidden: one pure function used for every log line and every
file, report or message the product writes.

Secrets are found by their *shape*, not by an exact match, because the text that carries them is rarely the value
as configured: an HTTP client quotes only the path of a URL, escapes or splits it at whitespace, truncates it.
Shapes hidden:

* credentials in a URL (``scheme://user:password@host``, ``scheme://token@host``), also when the password holds
  whitespace;
* Slack webhook paths (``hooks.slack.com/...``, and ``/services/T…/B…/…``, ``/workflows/…``, ``/triggers/…`` with
  or without the host, quoted, escaped or split at whitespace);
* Authorization-style headers, ``Bearer``/``Basic`` credentials and Slack tokens (``xoxb-…``);
* ``token=``, ``key=``, ``password=``, ``secret=``, ``sig=`` … in query strings and ``key=value`` text, and
  ``"password": "…"``-style JSON fields.

A value known to be secret (a configured webhook URL) is hidden as well wherever any fragment of its path or
query appears (``secret_fragments``), however the text around it was mangled. Redacting twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

REDACTED = "<redacted>"

_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*://"
# user[:password]@ ; a password mangled by whitespace may run over up to two more whitespace-separated chunks.
# (A raw "@" in a password is common: the userinfo runs to the last "@" before the path.)
_USERINFO = re.compile(rf"({_SCHEME})[^\s/?#]+(?:\s+[^\s/?#]+){{0,2}}@")
_SLACK_HOST = re.compile(r"(hooks\.slack(?:-gov)?\.com)(?:/|%2[Ff])[^\s'\"<>]+", re.IGNORECASE)
_SLACK_TOKEN = re.compile(r"\bxox[abposre]-[A-Za-z0-9\-]+")
# A chunk that continues a split webhook path: token-like (letters and digits, at least one digit).
_CONTINUATION = r"(?:(?:\s|\\[ntr]|%[0-9A-Fa-f]{2})+(?=[A-Za-z]*[0-9])[A-Za-z0-9]{4,}(?![\w/]))*"
_WEBHOOK_PATH = re.compile(rf"(/(?:services|workflows|triggers)/)[A-Z0-9][^\s'\"<>]*{_CONTINUATION}")
_HEADER = re.compile(
    r"((?:proxy-)?authorization|x-api-key|api-key|x-auth-token|private-token)(['\"]?\s*[:=]\s*['\"]?)"
    r"(?:(bearer|basic|token|digest)\s+)?[^\s'\",;}]+",
    re.IGNORECASE,
)
_SCHEME_CREDENTIAL = re.compile(
    r"\b(bearer|basic)\s+(?=[A-Za-z]*[0-9._~+/=\-])[A-Za-z0-9._~+/=\-]{6,}",
    re.IGNORECASE,
)
_NAMED = r"access_token|refresh_token|id_token|auth_token|token|api[_-]?key|apikey|client_secret|secret|password|passwd"
_ANYWHERE_PARAM = re.compile(rf"(?<![\w-])({_NAMED})=([^\s&'\"#,;)]+)", re.IGNORECASE)
_QUERY_PARAM = re.compile(r"([?&;](?:key|sig|signature|auth|code|pwd))=([^\s&'\"#,;)]+)", re.IGNORECASE)
_JSON_FIELD = re.compile(rf"([\"'](?:{_NAMED})[\"']\s*:\s*[\"'])[^\"']*", re.IGNORECASE)

_ORIGIN = re.compile(rf"^{_SCHEME}[^/?#]*")
_FRAGMENT_SPLIT = re.compile(r"(?:[/\s?&=#;]|\\[ntr]|%[0-9A-Fa-f]{2})+")
_GENERIC_SEGMENTS = frozenset({"services", "workflows", "triggers", "hooks", "hook", "webhook", "webhooks", "api"})
_MIN_FRAGMENT = 4

T = TypeVar("T")


def secret_fragments(secret: str) -> tuple[str, ...]:
    """The pieces of a secret URL that must never appear in output: the whole value, and each segment of its path
    and query of at least four characters (split at ``/``, whitespace, escapes), longest first.

    For a value that is not a URL, the value itself and its pieces. (Not ``urlsplit``: it silently drops tabs and
    newlines, and those are exactly the manglings that split a secret in an error message.)
    """
    value = secret.strip()
    if not value:
        return ()
    secret_part = _ORIGIN.sub("", value, count=1)
    pieces = {value}
    for piece in _FRAGMENT_SPLIT.split(secret_part):
        if len(piece) >= _MIN_FRAGMENT and piece.lower() not in _GENERIC_SEGMENTS:
            pieces.add(piece)
    return tuple(sorted(pieces, key=lambda p: (-len(p), p)))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret-shaped part, and every given secret fragment, replaced by ``<redacted>``.

    Shapes go first: a fragment replaced first could hide the shape that would have taken the whole path."""
    text = _USERINFO.sub(rf"\1{REDACTED}@", text)
    text = _SLACK_HOST.sub(rf"\1/{REDACTED}", text)
    text = _WEBHOOK_PATH.sub(rf"\1{REDACTED}", text)
    text = _SLACK_TOKEN.sub(REDACTED, text)
    text = _HEADER.sub(_header, text)
    text = _SCHEME_CREDENTIAL.sub(rf"\1 {REDACTED}", text)
    text = _ANYWHERE_PARAM.sub(rf"\1={REDACTED}", text)
    text = _QUERY_PARAM.sub(rf"\1={REDACTED}", text)
    text = _JSON_FIELD.sub(rf"\1{REDACTED}", text)
    for fragment in secrets:
        if fragment and fragment in text:
            text = text.replace(fragment, REDACTED)
    return text


def redact_tree(value: T, secrets: Iterable[str] = ()) -> T:
    """A copy of a JSON-like document (dicts, lists, tuples, strings, numbers) with every string redacted, keys
    included. Other values are returned as they are."""
    fragments = tuple(secrets)
    return _walk(value, fragments)  # type: ignore[no-any-return]


def _walk(value: Any, fragments: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        return redact(value, fragments)
    if isinstance(value, Mapping):
        return {_walk(k, fragments): _walk(v, fragments) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_walk(v, fragments) for v in value)
    return value


def _header(match: re.Match[str]) -> str:
    scheme = f"{match.group(3)} " if match.group(3) else ""
    return f"{match.group(1)}{match.group(2)}{scheme}{REDACTED}"
