"""What a recording must never hold: credentials, found by name, by shape, or because we know them.

A recording is evidence that gets attached to bug reports, so it is written as if it will be read
by strangers. Three nets, each catching what the others miss:

* **By name.** A value under a key that names a credential (``api_key``, ``Authorization``,
  ``auth``, ``authorization_code``, ``bearer``, ``client_secret``, ``refresh_token``,
  ``db_password``, ``cookie``, ...) is replaced, whatever it looks like. ``max_tokens`` and other
  names ending in ``tokens`` are counts, not credentials. Keys inside tool schemas are parameter
  names, not credentials, and are never looked at (a tool may well take a ``password``).
* **By shape.** Text shaped like a credential (a PEM private key block, an ``sk-...`` key and the
  other well-known key prefixes, a ``Bearer ...`` token, a JWT, a URL or connection string with a
  password) is masked wherever the recorder looks for shapes: every request parameter but the
  conversation (``messages``) and the tool schemas, and the error text and body of the footer.
* **Because we know it.** The client's API key, the client's own credential headers, and every
  value masked by the two nets above are *literal secrets*: the text of each is masked wherever it
  appears in what is written (chunks and a server error that echoes the key included). Literals
  shorter than :data:`MIN_LITERAL` characters are not searched for: masking ``"1"`` everywhere
  would destroy the recording and protect nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MIN_LITERAL", "REDACTED", "LiteralSecrets", "client_secrets", "is_secret_key", "mask_shapes"]

REDACTED = "[redacted]"
MIN_LITERAL = 8

# Parts of a key name that mean "credential" wherever they appear in the name.
_SECRET_PART = re.compile(
    r"api[-_]?key|secret|passw(?:or)?d|passphrase|credential|private[-_]?key|session|cookie|bearer"
    r"|access[-_]?key|connection[-_]?string|conn[-_]?str",
    re.IGNORECASE,
)
# Whole words of a key name (split at punctuation and camelCase) that mean "credential"; as words
# only, so ``author`` and ``authority`` stay readable while ``auth`` and ``x-auth-user`` do not.
_SECRET_WORDS = frozenset({"auth", "authorization", "authentication", "oauth", "pwd", "otp", "dsn", "jwt"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")

# Text shaped like a credential, and what replaces it.
_SHAPES: list[tuple[re.Pattern[str], str]] = [
    # A PEM private key block, to its END line (or to the end of the text when it was cut).
    (
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.S),
        REDACTED,
    ),
    # Well-known API key prefixes: OpenAI/Anthropic sk-, GitHub, GitLab, Slack, AWS, Google, JWTs.
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
            r"|glpat-[\w-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
            r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})"
        ),
        REDACTED,
    ),
    # "Bearer <token>" in any case.
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    # scheme://user:password@host: the password goes, the rest stays useful.
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/@:]*:)[^\s/@]+@"), rf"\1{REDACTED}@"),
    # key=value connection strings and query strings: Password=...; api_key=...&
    (
        re.compile(
            r"(?i)\b(password|passwd|pwd|secret|api[-_]?key|access[-_]?token|auth[-_]?token|token)"
            r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s;,&\"']+)"
        ),
        rf"\1\2{REDACTED}",
    ),
]


def is_secret_key(key: object) -> bool:
    """Does this key name a credential? (``max_tokens``: no; ``auth``, ``refresh_token``: yes.)"""
    if not isinstance(key, str):
        return False
    if _SECRET_PART.search(key):
        return True
    words = _WORD.findall(_CAMEL.sub(r"\1 \2", key).lower())
    if any(word in _SECRET_WORDS for word in words):
        return True
    # A name ending in "token" (singular) is a credential; "tokens" is a count.
    return bool(words) and words[-1].endswith("token")


def mask_shapes(text: str) -> str:
    """``text`` with everything shaped like a credential masked."""
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return text


def client_secrets(client: Any) -> list[str]:
    """The credentials an ``openai`` client sends: its API key and its credential headers.

    Read by duck typing (``api_key``, ``default_headers``), so any client-shaped object works and
    a missing attribute is simply no secret.
    """
    found: list[str] = []
    if client is None:
        return found
    key = getattr(client, "api_key", None)
    if isinstance(key, str):
        found.append(key)
    try:
        headers = getattr(client, "default_headers", None)
    except Exception:  # a property of someone else's client: never let it stop a recording
        headers = None
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if isinstance(value, str) and is_secret_key(name):
                found.append(value)
                # "Bearer sk-..." is sent as one header; the key alone is what a server echoes.
                found.extend(value.split()[1:])
    return found


class LiteralSecrets:
    """Known secret strings, masked wherever they appear in a record about to be written.

    Records are checked as serialised lines first (one substring test per secret, no walk), and
    only a record that holds a secret is walked. JSON escapes text character by character, so a
    secret inside any string of the record always shows in the line as its own escaped form.
    """

    __slots__ = ("_escaped", "_values")

    def __init__(self, values: Iterable[object] = ()) -> None:
        self._values: list[str] = []
        self._escaped: list[str] = []
        for value in values:
            self.add(value)

    def __bool__(self) -> bool:
        return bool(self._values)

    def add(self, value: object) -> None:
        """Remember ``value`` (a string of at least :data:`MIN_LITERAL` characters; others are ignored)."""
        if not isinstance(value, str) or len(value.strip()) < MIN_LITERAL or value in self._values:
            return
        self._values.append(value)
        # The longest first: a key that contains another secret is masked whole.
        self._values.sort(key=len, reverse=True)
        self._escaped = [json.dumps(v, ensure_ascii=False)[1:-1] for v in self._values]

    def found_in(self, line: str) -> bool:
        """Does this serialised record mention a secret?"""
        return any(escaped in line for escaped in self._escaped)

    def text(self, text: str) -> str:
        for value in self._values:
            if value in text:
                text = text.replace(value, REDACTED)
                # The marker and its neighbours may spell the secret again ("dacted]x..."): then
                # delete it until it is gone (each pass shortens the text, so this ends).
                while value in text:
                    text = text.replace(value, "")
        return text

    def mask(self, data: Any) -> Any:
        """``data`` (plain JSON data, owned by the caller) with every secret masked, in place where
        possible. Iterative, so a value nested 900 deep is walked like any other."""
        root = [data]
        stack: list[dict[Any, Any] | list[Any]] = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key in list(node):
                    value = node[key]
                    new_key = self.text(key) if isinstance(key, str) else key
                    if isinstance(value, str):
                        value = self.text(value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
                    if new_key != key:
                        del node[key]
                    node[new_key] = value
            else:
                for i, value in enumerate(node):
                    if isinstance(value, str):
                        node[i] = self.text(value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
        return root[0]
