"""Every pattern postmortem compiles, caught as it is compiled: `python tests/pattern_census.py` prints them pickled.

A walk of module attributes misses what is built at run time: patterns compiled inside functions, from the
tables under postmortem/data/, or from the signature database. So this hooks the compile step of both engines
(`re._compile`, `regex._main._compile`, which every `compile`, `search`, `sub`... goes through) in a fresh
interpreter, before postmortem is imported, then imports every module, builds every table (each zero-argument
cached function of the package), every translator, and runs the pipeline over tests/data. A pattern counts when
the first caller outside the two engines (and functools) is a file of the package; it is named by that file and
line. A fresh process because in the test run postmortem is already imported, its tables already built.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pickle
import pkgutil
import re
import sys
from pathlib import Path
from types import FrameType

import regex
import regex._main

Key = tuple[str, object, int]

ENGINE_DIRS = (os.path.dirname(re.__file__) + os.sep, os.path.dirname(regex.__file__) + os.sep)
TEST_DATA = Path(__file__).parent / "data"


def census() -> dict[Key, tuple[str, re.Pattern | regex.Pattern]]:
    """(engine, pattern text, flags) -> (where it was compiled, the compiled pattern)."""
    found: dict[Key, tuple[str, re.Pattern | regex.Pattern]] = {}
    spec = importlib.util.find_spec("postmortem")  # where the package is, without running it before the hook
    assert spec is not None and spec.origin is not None
    root = str(Path(spec.origin).parent) + os.sep
    from postmortem.later import LazyPattern  # the hooks are set before any pattern of the package is compiled

    LATER = root + "later.py"

    def caller() -> str | None:
        frame: FrameType | None = sys._getframe(3)  # past caller, record and the hook
        while frame is not None:
            name = frame.f_code.co_filename
            if name == LATER and isinstance(made := frame.f_locals.get("self"), LazyPattern):
                name, line = made.origin.rsplit(":", 1)  # compiled on first use: named where it is written
                return f"{name[len(root):]}:{line}" if name.startswith(root) else None
            if not name.startswith(ENGINE_DIRS) and not name.endswith("functools.py"):
                return f"{name[len(root):]}:{frame.f_lineno}" if name.startswith(root) else None
            frame = frame.f_back
        return None

    def record(engine: str, pattern: object) -> None:
        if isinstance(pattern, (re.Pattern, regex.Pattern)):
            key = (engine, pattern.pattern, pattern.flags)
            if key not in found and (where := caller()):
                found[key] = (where, pattern)

    re_compile, regex_compile = re._compile, regex._main._compile  # type: ignore[attr-defined]

    def hooked_re(*args, **kwargs):
        pattern = re_compile(*args, **kwargs)
        record("re", pattern)
        return pattern

    def hooked_regex(*args, **kwargs):
        pattern = regex_compile(*args, **kwargs)
        record("regex", pattern)
        return pattern

    re._compile, regex._main._compile = hooked_re, hooked_regex  # type: ignore[attr-defined]
    try:
        _exercise()
    finally:
        re._compile, regex._main._compile = re_compile, regex_compile  # type: ignore[attr-defined]
    return found


def _exercise() -> None:
    import postmortem

    modules = [importlib.import_module(info.name)
               for info in pkgutil.walk_packages(postmortem.__path__, "postmortem.")
               if not info.name.endswith("__main__")]
    for module in modules:
        for value in list(vars(module).values()):
            if callable(value) and hasattr(value, "cache_info") and getattr(value, "__module__", "") == module.__name__:
                parameters = inspect.signature(value).parameters.values()
                if all(p.default is not p.empty for p in parameters):
                    value()
    from postmortem import later
    from postmortem.pipeline import analyze
    from postmortem.render.i18n import LANGUAGES, Translator

    for lang in LANGUAGES:
        Translator(lang)  # its sentence patterns are made (compiled on first use) when it is built
    for path in sorted(TEST_DATA.rglob("*")):
        if path.is_file():
            analyze([str(path)])
    later.compile_all()  # every pattern made: those compiled on first use, named where they are written


if __name__ == "__main__":
    sys.stdout.buffer.write(pickle.dumps(list(census().values())))
