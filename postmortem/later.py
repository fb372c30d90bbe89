"""Patterns compiled on first use, so that importing a source costs nothing until a line needs it.

The text sources hold some 450 patterns. Compiled at import they were a quarter of a one-line log's run
(issue 28): every run paid for every format, though a log touches a few. `compile` here returns a stand-in
that compiles its pattern the first time any attribute is asked of it, then keeps the compiled pattern's
methods on itself, so later calls cost what a compiled pattern's do. A match's `.re` is the compiled
pattern, not the stand-in: code that asks which pattern matched compares `.pattern`, never identity.

`plain` makes the same stand-in for the standard library's engine, for patterns over short names the program itself
gives (file paths of a core's modules, environment variable names, the placeholders of the database's own
explanations): `re` compiles them a few times faster, and a run that needs no other pattern (a core read to text)
never imports the regex module.

`compiled_count()` is what CI guards (tests/test_speed_counts.py): how many patterns a run really compiled.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import regex

IGNORECASE, MULTILINE, DOTALL, VERBOSE = 2, 8, 16, 64
"""The flags of `regex` (the same numbers as `re`'s) for patterns made here: a module that only makes patterns need
not import the regex module, whose import is a tenth of a one-line log's run; it is imported with the first compile."""

_MADE: list[LazyPattern] = []
"""Every stand-in made, in order: `compile_all` checks them all, `compiled_count` counts the compiled."""

_FORWARDED = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "splititer",
              "scanner", "pattern", "flags", "groups", "groupindex")
"""What a stand-in copies from its pattern once compiled, so that asking for it again is a plain lookup."""


class LazyPattern:
    """A regex.Pattern in waiting: the first attribute asked compiles it."""

    def __init__(self, source: str | bytes, flags: int, named_lists: dict[str, Any], origin: str,
                 engine: str = "regex") -> None:
        self._source = source
        self._flags = flags
        self._named_lists = named_lists
        self._engine = engine
        """"regex" (the regex module) or "re" (the standard library's, for `plain`)."""
        self._compiled: regex.Pattern | None = None
        self.origin = origin
        """`file:line` of the `compile` call that made it (the pattern census names a pattern by where it is
        written, not where it is first used)."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for what the instance lacks: the first use of each method, before compilation.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def compiled(self) -> regex.Pattern:
        """The pattern, compiled now if it was not yet."""
        if self._compiled is None:
            compiled: Any
            if self._engine == "re":
                import re

                compiled = re.compile(self._source, self._flags)  # the same methods as a regex.Pattern's
            else:
                import regex

                compiled = regex.compile(self._source, self._flags, **self._named_lists)
            for name in _FORWARDED:
                if hasattr(compiled, name):  # `splititer` is the regex module's only
                    setattr(self, name, getattr(compiled, name))
            self._compiled = compiled
        return self._compiled

    def __repr__(self) -> str:
        return f"later.{'plain' if self._engine == 're' else 'compile'}({self._source!r})"


@overload
def compile(source: str, flags: int = 0, **named_lists: Any) -> regex.Pattern[str]: ...


@overload
def compile(source: bytes, flags: int = 0, **named_lists: Any) -> regex.Pattern[bytes]: ...


def compile(source: str | bytes, flags: int = 0, **named_lists: Any) -> Any:
    """As `regex.compile`, but compiled when first used (a module-level pattern of a source module)."""
    caller = sys._getframe(1)
    made = LazyPattern(source, flags, named_lists, f"{caller.f_code.co_filename}:{caller.f_lineno}")
    _MADE.append(made)
    return made


def plain(source: str, flags: int = 0) -> regex.Pattern[str]:
    """As `re.compile`, compiled when first used: a pattern over names the program gives (module paths, variable
    names, its own templates) that needs nothing of the regex module."""
    caller = sys._getframe(1)
    made = LazyPattern(source, flags, {}, f"{caller.f_code.co_filename}:{caller.f_lineno}", "re")
    _MADE.append(made)
    return made  # type: ignore[return-value]  # a stand-in with the pattern's methods


def compiled_count() -> int:
    """How many of the patterns made here have been compiled so far."""
    return sum(made._compiled is not None for made in _MADE)


def compile_all() -> int:
    """Compile every pattern made so far (a test's check that each one is valid); how many there are."""
    for made in _MADE:
        made.compiled()
    return len(_MADE)
