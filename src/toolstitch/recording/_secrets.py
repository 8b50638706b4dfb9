"""What a recording must never hold: credentials, found by name, by shape, or because we know them.

A recording is evidence that gets attached to bug reports, so it is written as if it will be read
by strangers. Three nets, each catching what the others miss:

* **By name.** A value under a key that names a credential (``api_key``, ``Authorization``,
  ``auth``, ``authorization_code``, ``bearer``, ``client_secret``, ``refresh_token``,
  ``db_password``, ``cookie``, ``pem``, ``private_key``, ``ssh_key``, ``keystore``, ...), in any
  case and spelling (``privateKey``, ``PRIVATE-KEY``), is replaced at any depth, whatever it looks
  like. ``max_tokens`` and other names ending in ``tokens`` are counts, not credentials;
  ``prompt_cache_key`` and ``key`` alone are no credentials either. Keys inside the JSON schemas
  of a request (a tool's ``parameters``, ``json_schema.schema``) are parameter names, not
  credentials, and are never looked at (a tool may well take a ``password``); the rest of the
  tools is scrubbed (a remote MCP tool carries ``authorization`` and ``headers``).
* **By shape.** Text shaped like a credential (a PEM private key block, an ``sk-...`` key and the
  other well-known key prefixes, a ``Bearer ...`` token, a JWT, a URL or connection string with a
  password) is masked wherever the recorder looks for shapes: every request parameter but the
  conversation (``messages``) and the tool schemas, their keys as well as their values, and the
  error text and body of the footer. A PEM private key is never evidence of anything, so it is
  masked everywhere, in every record written (the conversation, the tool schemas and the chunks
  too), in any case and spacing of its BEGIN line, and also when it is spread over consecutive
  strings (a key given as a list of its lines): a block that is opened and not closed masks what
  follows until its END line. A key the model streams (content, reasoning, call arguments) is
  masked in every chunk it spans, even with its BEGIN or END line cut between two chunks.
* **Because we know it.** The client's API key, the client's own credential headers, and every
  value masked by the two nets above are *literal secrets*: the text of each is masked wherever it
  appears in what is written (chunks and a server error that echoes the key included), also when a
  server echoes it a few characters per chunk: each streamed text (content, reasoning, a call's
  arguments, a Responses delta) is one text, and each fragment loses the characters of it that
  belong to a secret (:class:`StreamedLiterals`; the recorder writes a chunk once no later fragment
  can change it). Whole or cut, one rule masks: each run of secret characters becomes one marker.
  Literals shorter than :data:`MIN_LITERAL` characters are not searched for: masking ``"1"``
  everywhere would destroy the recording and protect nothing.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "MIN_LITERAL",
    "REDACTED",
    "LiteralSecrets",
    "Piece",
    "PrivateKeys",
    "StreamedLiterals",
    "StreamedText",
    "client_secrets",
    "is_secret_key",
    "mask_private_keys",
    "mask_shapes",
    "secret_lines",
]

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
_SECRET_WORDS = frozenset(
    {
        "auth",
        "authorization",
        "authentication",
        "oauth",
        "pwd",
        "otp",
        "dsn",
        "jwt",
        # key material by its container's name: a PEM text, a PKCS#12 or Java keystore, a key file
        "pem",
        "pkcs8",
        "pkcs12",
        "p12",
        "pfx",
        "jks",
        "keystore",
        "keyfile",
        "privkey",
        "sshkey",
        "passcode",
    }
)
# Words that make the word ``key`` after them a credential (``ssh_key``, ``signingKey``): a key of
# a cipher, a signature or a service. ``prompt_cache_key``, ``idempotency_key`` and ``key`` alone
# name no credential.
_KEY_QUALIFIERS = frozenset(
    {
        "ssh",
        "signing",
        "sign",
        "cert",
        "certificate",
        "tls",
        "ssl",
        "gpg",
        "pgp",
        "hmac",
        "encryption",
        "decryption",
        "master",
        "client",
        "service",
        "account",
        "license",
        "shared",
        "deploy",
        "webhook",
        "jwk",
    }
)
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_WORD = re.compile(r"[a-z0-9]+")

# A PEM private key block (RFC 7468, and the SSH2 "---- BEGIN ... ----" form): any label that says
# PRIVATE KEY (RSA, EC, DSA, OPENSSH, ENCRYPTED, "X9.42 DH", PGP's "... KEY BLOCK"), in any case,
# with any spacing. Labels hold no "-", so a label never runs past its dashes.
_PEM_BEGIN = re.compile(r"(?i)-{3,}[ \t]*BEGIN[^-\r\n]*PRIVATE\s*KEY[^-\r\n]*-{3,}")
# The line that closes one: an END line of a *private key*. Any other "-----END ...-----" inside the
# block (a hostile key holding one) does not close it; a block that is never closed runs to the end.
_PEM_END = re.compile(r"(?i)-{3,}[ \t]*END[^-\r\n]*PRIVATE\s*KEY[^-\r\n]*-{3,}")

# Text shaped like a credential. Each pattern names the credential ``secret`` (masked, and what
# ``found`` collects) and keeps what is around it (``pre``, ``post``) readable.
_SHAPES: list[re.Pattern[str]] = [
    # Well-known API key prefixes: OpenAI/Anthropic sk-, GitHub, GitLab, Slack, AWS, Google, JWTs.
    re.compile(
        r"(?<![A-Za-z0-9])(?P<secret>sk-[A-Za-z0-9_-]{12,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}"
        r"|glpat-[\w-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
        r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,})"
    ),
    # "Bearer <token>" in any case.
    re.compile(r"(?i)\b(?P<pre>bearer\s+)(?P<secret>[A-Za-z0-9._~+/=-]{6,})"),
    # scheme://user:password@host: the password goes, the rest stays useful.
    re.compile(r"(?i)\b(?P<pre>[a-z][a-z0-9+.-]*://[^\s/@:]*:)(?P<secret>[^\s/@]+)(?P<post>@)"),
    # key=value connection strings and query strings: Password=...; api_key=...&
    re.compile(
        r"(?i)\b(?P<pre>(?:password|passwd|pwd|secret|api[-_]?key|access[-_]?token|auth[-_]?token|token)"
        r"\s*[=:]\s*)(?P<secret>\"[^\"]*\"|'[^']*'|[^\s;,&\"']+)"
    ),
]


class PrivateKeys:
    """Masks PEM private key blocks in a sequence of texts read in order, one block possibly spread
    over several of them (a key given as a list of its lines, or as a dict key and its value): a
    text that opens a block and does not close it leaves the following texts masked until one
    closes it. Each masked piece is added to ``found``."""

    __slots__ = ("found", "inside")

    def __init__(self, found: list[str] | None = None) -> None:
        self.found: list[str] = found if found is not None else []
        self.inside = False

    def text(self, text: str) -> str:
        """``text`` with every private key block (or the part of one it holds) masked."""
        if not self.inside and "-" not in text:
            return text
        out: list[str] = []
        pos = 0
        if self.inside:
            close = _PEM_END.search(text)
            if close is None:
                self.found.append(text)
                return REDACTED
            self.found.append(text[: close.end()])
            out.append(REDACTED)
            pos = close.end()
            self.inside = False
        while True:
            begin = _PEM_BEGIN.search(text, pos)
            if begin is None:
                out.append(text[pos:])
                break
            out.append(text[pos : begin.start()])
            out.append(REDACTED)
            close = _PEM_END.search(text, begin.end())
            if close is None:
                self.found.append(text[begin.start() :])
                self.inside = True
                break
            self.found.append(text[begin.start() : close.end()])
            pos = close.end()
        return "".join(out)


#: How much of a streamed field's last fragments is kept to find a BEGIN or END line cut in two.
_TAIL = 256


class StreamedText:
    """One text field streamed in fragments (a choice's content, a call's arguments): a private key
    the model writes there arrives over many chunks, its BEGIN or END line possibly cut between two
    of them. Fed each fragment in order, it masks what belongs to a key: everything from the chunk
    that completes a BEGIN line up to the one that completes its END line. Each masked piece is
    added to ``found``."""

    __slots__ = ("inside", "tail")

    def __init__(self) -> None:
        self.inside = False
        self.tail = ""  # the end of what came before (as sent), where a cut line starts

    def feed(self, text: str, found: list[str]) -> str:
        tail = self.tail
        self.tail = (tail + text)[-_TAIL:]
        keys = PrivateKeys(found)
        done = ""
        if tail and (self.inside or "-" in text):
            joined, cut_at = tail + text, len(tail)
            if self.inside:
                close = next((m for m in _PEM_END.finditer(joined) if m.end() > cut_at), None)
                if close is None:
                    found.append(text)
                    return REDACTED
                cut = close.end() - cut_at
                found.append(text[:cut])
                done, text, self.inside = REDACTED, text[cut:], False
            else:
                begin = next((m for m in _PEM_BEGIN.finditer(joined) if m.start() < cut_at < m.end()), None)
                if begin is not None:  # a BEGIN line cut in two: the block starts in this fragment
                    keys.inside = True
                    masked = keys.text(text[begin.end() - cut_at :])
                    self.inside = keys.inside
                    return masked
        keys.inside = self.inside
        masked = keys.text(text)
        self.inside = keys.inside
        return done + masked


def mask_private_keys(data: Any, found: list[str] | None = None) -> Any:
    """``data`` (plain JSON data, owned by the caller) with every PEM private key block masked, in
    keys and values; in place where possible. A block opened and not closed in one string of a list
    goes on in the strings that follow it in that list, up to its END line (a key given as the list
    of its lines); anywhere else it ends with its string. Iterative, so a value nested 900 deep is
    walked like any other."""
    found = found if found is not None else []
    if isinstance(data, str):
        return PrivateKeys(found).text(data)
    # Each frame: the container, its keys (or indices) in order, the next position, the dict keys
    # to rename once it is done (a key cannot change while it is walked), and for a list the block
    # its strings are in.
    Frame = tuple[Any, list[Any], list[int], dict[str, str], PrivateKeys]
    stack: list[Frame] = []

    def push(node: Any) -> None:
        if isinstance(node, dict):
            stack.append((node, list(node), [0], {}, PrivateKeys(found)))
        elif isinstance(node, list):
            stack.append((node, list(range(len(node))), [0], {}, PrivateKeys(found)))

    push(data)
    while stack:
        node, order, position, renames, run = stack[-1]
        if position[0] == len(order):
            stack.pop()
            if renames:
                items = list(node.items())
                node.clear()
                for k, v in items:
                    node[renames.get(k, k)] = v
            continue
        k = order[position[0]]
        position[0] += 1
        value = node[k]
        if isinstance(node, dict):
            if isinstance(k, str):
                new_key = PrivateKeys(found).text(k)
                if new_key != k:
                    renames[k] = new_key
            if isinstance(value, str):
                node[k] = PrivateKeys(found).text(value)
        elif isinstance(value, str):
            node[k] = run.text(value)
        else:
            run.inside = False  # a block spreads over the consecutive strings of a list only
        push(value)
    return data


def secret_lines(piece: str) -> list[str]:
    """What to remember of a masked piece as literal secrets: the piece, and each line of it that
    is not a BEGIN/END line (a server that echoes a key may wrap it differently)."""
    lines = [line.strip() for line in piece.splitlines()]
    return [piece, *(x for x in lines if x and "-----" not in x)]


def is_secret_key(key: object) -> bool:
    """Does this key name a credential? (``max_tokens``: no; ``auth``, ``refresh_token``: yes.)"""
    if not isinstance(key, str):
        return False
    if _SECRET_PART.search(key):
        return True
    words = _WORD.findall(_CAMEL.sub(r"\1 \2", key).lower())
    if any(word in _SECRET_WORDS for word in words):
        return True
    if any(word == "key" and before in _KEY_QUALIFIERS for before, word in itertools.pairwise(words)):
        return True
    # A name ending in "token" (singular) is a credential; "tokens" is a count.
    return bool(words) and words[-1].endswith("token")


def mask_shapes(text: str, found: list[str] | None = None) -> str:
    """``text`` with everything shaped like a credential masked; each masked credential is added
    to ``found`` when given (the recorder remembers them as literal secrets)."""
    text = PrivateKeys(found).text(text)

    def masked(match: re.Match[str]) -> str:
        if found is not None:
            found.append(match.group("secret"))
        groups = match.groupdict()
        return (groups.get("pre") or "") + REDACTED + (groups.get("post") or "")

    for pattern in _SHAPES:
        text = pattern.sub(masked, text)
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
    """Known secret strings, masked wherever they appear in a record about to be written, and in
    a text streamed in fragments (see :class:`StreamedLiterals`).

    Records are checked as serialised lines first (one substring test per secret, no walk), and
    only a record that holds a secret is walked. JSON escapes text character by character, so a
    secret inside any string of the record always shows in the line as its own escaped form.

    One rule masks a text, whole or streamed: every character of every occurrence of a secret
    goes, and each run of such characters (overlapping occurrences are one run) becomes one
    :attr:`marker`. The marker is :data:`REDACTED` unless a secret could be spelled again across
    it (a secret holding ``[`` or ``]``, or lying inside the marker); then it is a character no
    secret holds, so what is written can never spell a secret (the text between two runs never
    held one).
    """

    __slots__ = ("_ends", "_escaped", "_values", "marker")

    def __init__(self, values: Iterable[object] = ()) -> None:
        self._values: list[str] = []
        self._escaped: list[str] = []
        # For the end of a streamed text: the proper prefixes of the secrets by their last two
        # characters (a prefix of one character by itself), as their lengths, the shortest first.
        # Most ends of a text are in no entry, or in one. A table of lengths, not of prefix
        # strings: a long secret (a PEM block) costs its length, not its length squared.
        self._ends: dict[str, list[tuple[int, str]]] = {}
        self.marker = REDACTED
        """What a run of masked characters becomes."""
        for value in values:
            self.add(value)

    def __bool__(self) -> bool:
        return bool(self._values)

    def add(self, value: object) -> None:
        """Remember ``value`` (a string of at least :data:`MIN_LITERAL` characters; others are ignored)."""
        if not isinstance(value, str) or len(value.strip()) < MIN_LITERAL or value in self._values:
            return
        self._values.append(value)
        self._values.sort(key=len, reverse=True)
        self._escaped = [json.dumps(v, ensure_ascii=False)[1:-1] for v in self._values]
        ends: dict[str, list[tuple[int, str]]] = {}
        for v in self._values:
            for k in range(1, len(v)):
                ends.setdefault(v[max(0, k - 2) : k], []).append((k, v))
        for lengths in ends.values():
            lengths.sort(key=lambda entry: entry[0])
        self._ends = ends
        self.marker = _marker(self._values)

    def found_in(self, line: str) -> bool:
        """Does this serialised record mention a secret? (Asked for every record written: a loop
        costs half of what ``any`` over a generator does.)"""
        for escaped in self._escaped:  # noqa: SIM110
            if escaped in line:
                return True
        return False

    def spans(self, text: str, after: int = 0) -> list[tuple[int, int]]:
        """Where secrets occur in ``text`` (start, end), those ending after ``after`` only, in order."""
        found: list[tuple[int, int]] = []
        for value in self._values:
            if value not in text:
                continue
            at = text.find(value, max(0, after - len(value) + 1))
            while at >= 0:
                found.append((at, at + len(value)))
                at = text.find(value, at + 1)
        if len(found) > 1:
            found.sort()
        return found

    def live(self, text: str) -> int:
        """How many characters at the end of ``text`` may be the start of a secret: the length of
        the longest end of it that is a proper prefix of a secret (0 for most texts)."""
        ends = self._ends
        longest = 0
        for k, value in ends.get(text[-2:], ()):
            if k > len(text):
                break
            if value.startswith(text[-k:]):
                longest = k
        if not longest and len(text) > 1 and text[-1] in ends:
            longest = 1  # a secret starts with its last character
        return longest

    def text(self, text: str) -> str:
        """``text`` with every secret in it masked: a stream of one fragment."""
        if not any(value in text for value in self._values):
            return text
        piece = Piece(text)
        stream = StreamedLiterals()
        stream.feed(piece, self)
        stream.end()
        return piece.masked()

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


def _marker(values: list[str]) -> str:
    """:data:`REDACTED`, unless a secret in ``values`` could overlap it (then a character none
    of them holds): only a secret holding ``[`` or ``]``, or lying inside it, can."""
    if not any("[" in v or "]" in v or v in REDACTED for v in values):
        return REDACTED
    used = set().union(*values)
    codes = itertools.chain(range(0x2588, 0xD800), range(0xE000, 0x110000))  # from "\u2588", no surrogates
    return next(c for c in map(chr, codes) if c not in used)


class Piece:
    """One fragment of a streamed text, as :class:`StreamedLiterals` masks it: ``owner`` is
    whatever the caller needs to put :meth:`masked` back where the fragment came from."""

    __slots__ = ("cuts", "owner", "settled", "text")

    def __init__(self, text: str, owner: Any = None) -> None:
        self.text = text
        self.owner = owner
        self.cuts: list[tuple[int, int, str]] = []  # (start, end, what replaces them), in order
        self.settled = False
        """No later fragment can change it: :meth:`masked` is final."""

    def masked(self) -> str:
        """The fragment with the characters of secrets replaced (the first fragment of a run by
        the marker, the fragments after it by nothing)."""
        if not self.cuts:
            return self.text
        out: list[str] = []
        pos = 0
        for start, end, marker in self.cuts:
            out.append(self.text[pos:start])
            out.append(marker)
            pos = end
        out.append(self.text[pos:])
        return "".join(out)


class StreamedLiterals:
    """One text field streamed in fragments (a choice's content, a call's arguments, a Responses
    item's deltas), watched for literal secrets cut between fragments.

    A server that echoes the client's key a few characters per chunk sends no chunk holding it,
    yet the joined text does. Every fragment is kept as sent, so the characters of an occurrence
    are masked in each fragment that holds some. Only the end of the text that may still start a
    secret (:meth:`LiteralSecrets.live`, shorter than the longest secret) is kept, and a fragment
    holding some of it stays *pending*: the next fragment may complete a secret that began there.
    :meth:`feed` returns the fragments that became settled; the caller holds back writing a
    pending one (the recording's write waits, the user's stream does not). :meth:`force` settles
    pending fragments early, masking what in them may start a secret (fail closed), and
    :meth:`end` settles the rest as they are (nothing follows them).
    """

    __slots__ = ("cut_end", "live", "pending", "size")

    def __init__(self) -> None:
        self.live = ""  # the end of the text so far that may start a secret, as sent
        self.pending: deque[tuple[Piece, int]] = deque()  # fragments holding some of it, with their start
        self.size = 0  # characters so far
        self.cut_end = -1  # where the last masked run ends

    def passes(self, text: str, secrets: LiteralSecrets) -> bool:
        """Take the next fragment as it is when nothing is pending, it holds no secret and its
        end starts none (most fragments of most texts): then it is settled, unchanged. Otherwise
        take nothing: the caller feeds it as a :class:`Piece`."""
        if self.live or self.pending:
            return False
        for value in secrets._values:
            if value in text:
                return False
        ends = secrets._ends
        if (text[-2:] in ends or text[-1:] in ends) and secrets.live(text):
            return False
        self.size += len(text)
        return True

    def feed(self, piece: Piece, secrets: LiteralSecrets) -> list[Piece]:
        """Take the next fragment; the fragments settled by it (``piece`` too, most often)."""
        text = piece.text
        live = self.live
        joined = live + text if live else text
        base = self.size - len(live)
        self.pending.append((piece, self.size))
        self.size += len(text)
        for start, end in secrets.spans(joined, len(live)):
            self._cut(base + start, base + end, secrets.marker)
        keep = secrets.live(joined)
        self.live = joined[len(joined) - keep :] if keep else ""
        return self._settle(self.size - keep)

    def force(self, through: Piece, secrets: LiteralSecrets) -> list[Piece]:
        """Settle the pending fragments up to ``through``, masking in them what may start a secret."""
        settled: list[Piece] = []
        live_start = self.size - len(self.live)
        while self.pending and not through.settled:
            piece, start = self.pending[0]
            self._cut(max(start, live_start), start + len(piece.text), secrets.marker)
            self.pending.popleft()
            piece.settled = True
            settled.append(piece)
        return settled

    def end(self) -> list[Piece]:
        """The text is over: every pending fragment settles as it is."""
        settled = [piece for piece, _ in self.pending]
        self.pending.clear()
        for piece in settled:
            piece.settled = True
        return settled

    def _settle(self, upto: int) -> list[Piece]:
        settled: list[Piece] = []
        pending = self.pending
        while pending and pending[0][1] + len(pending[0][0].text) <= upto:
            piece = pending.popleft()[0]
            piece.settled = True
            settled.append(piece)
        return settled

    def _cut(self, start: int, end: int, marker: str) -> None:
        """Mask characters ``start`` to ``end`` of the text (all in pending fragments, or masked
        already): a run that overlaps the last one goes on without a second marker."""
        if end <= self.cut_end or start >= end:
            return
        if start < self.cut_end:
            start, marker = self.cut_end, ""
        self.cut_end = end
        for piece, at in self.pending:
            stop = at + len(piece.text)
            if stop <= start:
                continue
            if at >= end:
                break
            piece.cuts.append((max(start, at) - at, min(end, stop) - at, marker))
            marker = ""
