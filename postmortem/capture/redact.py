"""Redaction before anything leaves the machine: secrets always, identities with --anonymize.

Secrets are found by shape (data/secret-shapes.tsv: the token formats of
common services, `password=` style assignments and `--password VALUE` flags,
Authorization and Cookie headers, credentials in URLs; private-key blocks here)
and by value: the value of every environment variable whose name says it is a
secret is scrubbed wherever it appears. Each replacement names its kind
(`<redacted:github-token>`) and is counted; the manifest keeps the counts,
never the secret. Anonymizing maps each host name, user name, IP address and
home directory to a pseudonym that stays the same across the whole bundle.
"""

from __future__ import annotations

import base64
import binascii
import getpass
import os
import socket
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache, partial

import regex

from .. import later


@dataclass(frozen=True)
class SecretShape:
    """One row of data/secret-shapes.tsv: a family of secrets, the literals that announce it, its pattern."""

    kind: str
    keywords: tuple[str, ...]
    """Lowercase literals; the pattern only runs on a block of text that holds one of them (most hold none)."""
    pattern: regex.Pattern
    """A `keep` group, when present, is kept (the `=` after a secret's name); the rest of a match is the secret."""


@cache
def secret_shapes() -> tuple[SecretShape, ...]:
    """The table of secret families, compiled once."""
    from ..knowledge import data_rows

    return tuple(SecretShape(row["kind"], tuple(row["keywords"].split(",")), later.compile(row["pattern"]))
                 for row in data_rows("secret-shapes.tsv"))


_KEY_BEGIN = later.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = later.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
PLACEHOLDERS = frozenset({"", "None", "none", "null", "***", "xxx", "<redacted>"})
"""Values of a secret-named key that are no secret (and already-redacted markers, which start with `<redacted:`)."""

ENV_ALLOWED_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "NVIDIA_", "CUDNN_", "CUBLAS_", "CUBLASLT_",
                        "XLA_", "JAX_", "TF_", "OMP_", "MKL_", "KMP_", "NVTE_", "VLLM_", "TRITON_", "PYTHON",
                        "LC_", "SLURM_")
ENV_ALLOWED_NAMES = frozenset({
    "PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "LANG", "SHELL", "TERM", "VIRTUAL_ENV", "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "ROLE_RANK", "NODE_RANK", "HF_HOME", "TRANSFORMERS_CACHE", "HOME", "USER", "HOSTNAME",
})
"""Environment variables shown by value; every other one is listed by name only."""
_SECRET_NAME = later.compile(r"(?i)TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL"
                             r"|API_?KEY|ACCESS_?KEY|PRIVATE|AUTH|COOKIE|SESSION"
                             r"|(?:^|_)(?:PASS|KEY)(?:$|_)|_PWD(?:$|_)")
"""Environment variable names that say "secret" (DB_PASS and DB_PWD too, but not PWD, the working directory)."""
MIN_SECRET_VALUE = 6
"""Shorter secret-named values ("1", "true") are not scrubbed from text: they would hit everything."""
UNFINISHED = "A" * 64 + "@\"'"
"""What text cut before its end is read as going on with when looking for the secrets it may end in: a token's
characters, then the `@` that ends a URL's password (url-credential looks ahead for it) and the quotes that end a
quoted value."""
LOOKBEHIND = 64
"""Characters a shape's lookbehind reads before its match at the most (password-flag's: a dash or two, a prefix of
40 and `passphrase`)."""


BASE64_RUN = later.compile(r"(?<![\w+/-])[A-Za-z0-9+/_-]{16,8192}+={0,2}(?![\w+/=-])")
"""A run of base64 (standard or URL-safe alphabet) long enough to hide a secret: a Kubernetes Secret's `data:`
values, `.dockerconfigjson`, a basic-auth pair or a token encoded once more. Each is decoded and its text
redacted as any other; a run whose text holds a secret is the secret."""
BASE64_DEPTH = 2
"""Encodings undone inside each other at the most: `.dockerconfigjson` holds the base64 of a JSON whose `auth`
is itself the base64 of `user:password`."""


def _decoded(run: str) -> str | None:
    """The text a base64 run encodes, or None where it is no base64 or encodes bytes that are not text (a hash,
    a path, an identifier: most runs)."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    padded = body + "=" * (-len(body) % 4)
    try:
        raw = (base64.urlsafe_b64decode(padded) if "-" in body or "_" in body
               else base64.b64decode(padded, validate=True))
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if text.strip() and all(c.isprintable() or c in "\t\r\n" for c in text) else None


def env_value_allowed(name: str) -> bool:
    """Whether this variable's value may be shown (its name matters for GPU jobs and does not say "secret")."""
    allowed = name in ENV_ALLOWED_NAMES or name.startswith(ENV_ALLOWED_PREFIXES)
    return allowed and not _SECRET_NAME.search(name)


def blank_process_strings(arguments: bytes, environment: bytes) -> tuple[bytes, bytes, int, int]:
    """A process's argument and environment blocks (NUL-separated strings, as the kernel put them at the top of its
    stack) with their secrets overwritten by `*`, byte for byte, so that nothing moves in the memory (a core) that
    holds them: the values of the environment variables whose values are not shown (`env_value_allowed`), and in
    the arguments what `Redactor.field` would redact there (the secret shapes, the values of the secret-named
    variables of that environment). Also the counts of both. A block may be cut short (pages a core left out)."""
    blanked_environment, environ = bytearray(environment), {}
    hidden = at = 0
    for entry in environment.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            key = name.decode("utf-8", "surrogateescape")
            environ[key] = value.decode("utf-8", "surrogateescape")
            if value and not env_value_allowed(key):
                start = at + len(name) + 1
                blanked_environment[start: start + len(value)] = b"*" * len(value)
                hidden += 1
        at += len(entry) + 1
    redactor = Redactor(environ)
    blanked_arguments = redactor.blank(arguments)
    return blanked_arguments, bytes(blanked_environment), hidden, sum(redactor.field_counts.values())


def environment_listing(environ: Mapping[str, str]) -> tuple[str, int]:
    """NAME=value lines, values outside the allow-list replaced by `<redacted:env>`, and how many were."""
    lines = [f"{name}={environ[name] if env_value_allowed(name) else '<redacted:env>'}" for name in sorted(environ)]
    return "".join(line + "\n" for line in lines), sum(1 for name in environ if not env_value_allowed(name))


class Redactor:
    """Scrubs secrets (always) and identities (with `anonymize`) from text, counting what it replaced."""

    def __init__(self, environ: Mapping[str, str], anonymize: bool = False):
        self.counts: Counter[str] = Counter()
        self.field_counts: Counter[str] = Counter()
        values = {v for k, v in environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET_VALUE}
        self._values = (regex.compile("|".join(regex.escape(v) for v in sorted(values, key=len, reverse=True)))
                        if values else None)
        self.anonymizer = Anonymizer(environ) if anonymize else None
        self._in_key = False

    def text(self, text: str) -> str:
        """One file's text scrubbed; call `reset` between files. Text may come in blocks of whole lines (or
        cut after a space, see collect.MAX_LINE): no pattern spans two lines."""
        out, pos = [], 0
        while pos < len(text):
            if self._in_key:
                end = _KEY_END.search(text, pos)
                if end is None:
                    break  # the block ends inside the key: all of it is dropped
                newline = text.find("\n", end.end())
                pos = len(text) if newline < 0 else newline + 1
                out.append("\n" if newline >= 0 else "")
                self._in_key = False
                continue
            begin = _KEY_BEGIN.search(text, pos)
            if begin is None:
                out.append(self._scrub(text[pos:], self.counts))
                break
            line_start = text.rfind("\n", pos, begin.start()) + 1
            out.append(self._scrub(text[pos:line_start], self.counts) + "<redacted:private-key>")
            self.counts["private-key"] += 1
            self._in_key, pos = True, begin.end()
        return "".join(out)

    def reset(self) -> None:
        """Forget an open private-key block at the end of a file."""
        self._in_key = False

    def field(self, text: str) -> str:
        """A member name or a manifest string scrubbed, counted apart from the files' contents (`field_counts`)."""
        if _KEY_BEGIN.search(text):
            self.field_counts["private-key"] += 1
            return "<redacted:private-key>"
        return self._scrub(text, self.field_counts)

    def blank(self, data: bytes) -> bytes:
        """`data` with each secret `field` would replace overwritten by `*` instead, byte for byte (same length:
        memory that holds it keeps its layout), counted in `field_counts`. NUL bytes, the separators of a command
        line's arguments, are read as spaces (`--password VALUE` is two arguments) and kept."""
        text = data.replace(b"\0", b" ").decode("utf-8", "surrogateescape")
        blanked = bytearray(self._secrets(text, self.field_counts, _stars).encode("utf-8", "surrogateescape"))
        at = data.find(b"\0")
        while at >= 0:
            blanked[at] = 0
            at = data.find(b"\0", at + 1)
        return bytes(blanked)

    def secret_spans(self, text: str) -> list[tuple[int, int]]:
        """Where in `text` the secrets lie (by value or by shape), each from LOOKBEHIND characters before its match
        (what its shape may read there) to its end; sorted, overlapping ones merged. Text cut inside one and
        redacted in two blocks would keep the secret's name in the one and its value, unrecognised, in the other."""
        patterns = [shape.pattern for shape in _shapes_in(text)]
        found = sorted((max(0, match.start() - LOOKBEHIND), match.end())
                       for pattern in ([self._values] if self._values is not None else []) + patterns
                       for match in pattern.finditer(text))
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def _scrub(self, line: str, counts: Counter[str]) -> str:
        line = self._secrets(line, counts, _replace)
        return self.anonymizer.text(line) if self.anonymizer else line

    def _secrets(self, line: str, counts: Counter[str], replace: Callable[..., str], depth: int = 0) -> str:
        """The line with each secret (by value, then by shape, then encoded in base64) replaced by what `replace`
        makes of its match."""
        if self._values is not None:
            line = self._values.sub(partial(replace, kind="env-secret-value", counts=counts), line)
        for shape in _shapes_in(line):
            line = shape.pattern.sub(partial(replace, kind=shape.kind, counts=counts), line)
        if depth < BASE64_DEPTH:
            line = BASE64_RUN.sub(partial(self._encoded, counts=counts, replace=replace, depth=depth), line)
        return line

    def _encoded(self, match: regex.Match, counts: Counter[str], replace: Callable[..., str], depth: int) -> str:
        """A base64 run redacted whole (as `replace` does) where the text it encodes holds a secret."""
        text = _decoded(match[0])
        found: Counter[str] = Counter()
        if text is None or self._secrets(text, found, _replace, depth + 1) == text:
            return match[0]
        return replace(match, kind="base64-encoded-secret", counts=counts)


def _shapes_in(text: str) -> list[SecretShape]:
    """The secret shapes whose keywords `text` holds: only their patterns run on it (most text holds none)."""
    lowered = text.lower()
    return [shape for shape in secret_shapes() if any(word in lowered for word in shape.keywords)]


def _count(counts: Counter[str], kind: str) -> str:
    counts[kind] += 1
    return f"<redacted:{kind}>"


def _replace(match: regex.Match, kind: str, counts: Counter[str]) -> str:
    """The kept part and a marker; a placeholder value (empty, None, an earlier marker) is left as it is."""
    keep = match.groupdict().get("keep") or ""
    value = match[0][len(keep):]
    if value.startswith("<redacted:") or value.strip("\"'") in PLACEHOLDERS:
        return match[0]
    return keep + _count(counts, kind)


def _stars(match: regex.Match, kind: str, counts: Counter[str]) -> str:
    """`_replace`'s choice, the secret overwritten by as many `*` as its UTF-8 bytes instead of a marker (a value
    that is all `*` already was: an earlier shape's)."""
    keep = match.groupdict().get("keep") or ""
    value = match[0][len(keep):]
    if not value.strip("*") or _replace(match, kind, counts) == match[0]:
        return match[0]
    return keep + "*" * len(value.encode("utf-8", "surrogateescape"))


_IPV4 = later.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])")
_IPV6 = later.compile(r"(?<![\w:])(?=[0-9a-fA-F:]*\d)(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:])")
_HOME = later.compile(r"(?<=/(?:home|Users)/)(?P<user>[^/\s:'\"]+)")
KEPT_ADDRESSES = frozenset({"127.0.0.1", "0.0.0.0", "255.255.255.255", "::1"})
"""Addresses that say nothing about the machine."""


class Anonymizer:
    """Consistent pseudonyms: the same host, user or address gets the same replacement within one bundle."""

    def __init__(self, environ: Mapping[str, str]):
        self.names: dict[str, str] = {}
        self._counters: Counter[str] = Counter()
        for host in _local_hosts():
            self._pseudonym("host", host)
        for user in _local_users(environ):
            self._pseudonym("user", user)
        self._compile()

    def text(self, line: str) -> str:
        line = _HOME.sub(lambda m: self._pseudonym("user", m["user"], recompile=True), line)
        if self._known is not None:
            line = self._known.sub(lambda m: self.names[m[0].lower()], line)
        line = _IPV4.sub(lambda m: self._address(m[0], "ip"), line)
        return _IPV6.sub(lambda m: self._address(m[0], "ip6") if "::" in m[0] or m[0].count(":") == 7 else m[0], line)

    def _address(self, address: str, kind: str) -> str:
        return address if address in KEPT_ADDRESSES else self._pseudonym(kind, address)

    def _pseudonym(self, kind: str, name: str, recompile: bool = False) -> str:
        key = name.lower()
        if key not in self.names:
            self._counters[kind] += 1
            self.names[key] = f"{kind}-{self._counters[kind]}"
            if recompile:
                self._compile()
        return self.names[key]

    def _compile(self) -> None:
        """One pattern for every known host and user name, whole words, longest first."""
        words = sorted((n for n, p in self.names.items() if p.startswith(("host-", "user-")) and len(n) >= 2),
                       key=len, reverse=True)
        self._known = (regex.compile(r"(?i)(?<![\w-])(?:" + "|".join(regex.escape(w) for w in words) + r")(?![\w-])")
                       if words else None)


def _local_hosts() -> list[str]:
    names = [socket.gethostname()]
    try:
        names.append(socket.getfqdn())
    except OSError:
        pass
    return _distinct(part for name in names for part in (name, name.split(".")[0]) if part and part != "localhost")


def _local_users(environ: Mapping[str, str]) -> list[str]:
    names = [environ.get(k, "") for k in ("USER", "LOGNAME", "SUDO_USER")]
    try:
        names.append(getpass.getuser())
    except (KeyError, OSError):
        pass
    try:
        names.extend(entry.name for entry in os.scandir("/home") if entry.is_dir())
    except OSError:
        pass
    return _distinct(n for n in names if n and n != "root")


def _distinct(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
