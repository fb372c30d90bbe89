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

import getpass
import os
import socket
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache, partial

import regex


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

    return tuple(SecretShape(row["kind"], tuple(row["keywords"].split(",")), regex.compile(row["pattern"]))
                 for row in data_rows("secret-shapes.tsv"))


_KEY_BEGIN = regex.compile(r"-----BEGIN [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = regex.compile(r"-----END [A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
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
_SECRET_NAME = regex.compile(r"(?i)TOKEN|SECRET|PASSW|PASSPHRASE|CREDENTIAL"
                             r"|API_?KEY|ACCESS_?KEY|PRIVATE|AUTH|COOKIE|SESSION"
                             r"|(?:^|_)(?:PASS|KEY)(?:$|_)|_PWD(?:$|_)")
"""Environment variable names that say "secret" (DB_PASS and DB_PWD too, but not PWD, the working directory)."""
MIN_SECRET_VALUE = 6
"""Shorter secret-named values ("1", "true") are not scrubbed from text: they would hit everything."""


def env_value_allowed(name: str) -> bool:
    """Whether this variable's value may be shown (its name matters for GPU jobs and does not say "secret")."""
    allowed = name in ENV_ALLOWED_NAMES or name.startswith(ENV_ALLOWED_PREFIXES)
    return allowed and not _SECRET_NAME.search(name)


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

    def _scrub(self, line: str, counts: Counter[str]) -> str:
        if self._values is not None:
            line = self._values.sub(lambda m: _count(counts, "env-secret-value"), line)
        lowered = line.lower()
        for shape in secret_shapes():
            if any(word in lowered for word in shape.keywords):
                line = shape.pattern.sub(partial(_replace, kind=shape.kind, counts=counts), line)
        return self.anonymizer.text(line) if self.anonymizer else line


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


_IPV4 = regex.compile(r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])")
_IPV6 = regex.compile(r"(?<![\w:])(?=[0-9a-fA-F:]*\d)(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}(?![\w:])")
_HOME = regex.compile(r"(?<=/(?:home|Users)/)(?P<user>[^/\s:'\"]+)")
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
