"""Rust v0 symbol names (`_R...`, rustc -C symbol-mangling-version=v0) spelled as gdb and rustfilt print them.

The grammar is rustc's (RFC 2603): paths, generic arguments, types and
constants, with back-references to earlier parts of the name. Like gdb
without `set print demangle verbose`, crate hashes and the impl's own path are
left out (`<std::fs::File as std::io::Read>::read`, `r::run::<4>`,
`std::rt::lang_start::{closure#0}`).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEPTH = 128
"""Nesting of paths and types followed (real names nest a few dozen deep; a crafted one may recurse forever)."""
MAX_NUMBER = 1 << 64
"""Largest base-62 number read (back-references and disambiguators are offsets and hashes: 64 bits)."""
MAX_STEPS = 50_000
"""Paths, types and constants decoded for one name: back-references may repeat a part exponentially often."""

_BASIC = {"a": "i8", "b": "bool", "c": "char", "d": "f64", "e": "str", "f": "f32", "h": "u8", "i": "isize",
          "j": "usize", "l": "i32", "m": "u32", "n": "i128", "o": "u128", "s": "i16", "t": "u16", "u": "()",
          "v": "...", "x": "i64", "y": "u64", "z": "!", "p": "_"}
_NAMESPACES = {"C": "closure", "S": "shim"}


class _Invalid(Exception):
    """Not a v0 name this demangler reads."""


def demangle_v0(mangled: str) -> str | None:
    """`_RNvCs1234_5crate4main` as `crate::main`; None when `mangled` is not a well-formed v0 name."""
    if not mangled.startswith("_R") or not mangled[2:3].isalpha():  # a digit would be an unknown encoding version
        return None
    parser = _Parser(mangled[2:])
    try:
        text = parser.path(value=True)
        if parser.at < len(parser.text) and parser.text[parser.at] != ".":
            parser.path(value=False)  # the instantiating crate: not shown
        rest = parser.text[parser.at:]
        return text if not rest or rest.startswith(".") else None  # a `.0` or `.llvm.N` suffix is not shown
    except (_Invalid, IndexError, ValueError):  # ValueError: also a bad punycode or an over-long number
        return None


@dataclass
class _Parser:
    """Where in the name (after `_R`) decoding stands, and the budgets spent."""

    text: str
    at: int = 0
    depth: int = 0
    steps: int = 0
    bound: int = 0  # lifetimes bound by the enclosing `for<...>` binders

    def _next(self) -> str:
        char = self.text[self.at]
        self.at += 1
        return char

    def _eat(self, char: str) -> bool:
        if self.text.startswith(char, self.at):
            self.at += 1
            return True
        return False

    def _enter(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS or self.depth > MAX_DEPTH:
            raise _Invalid
        self.depth += 1

    def _base62(self) -> int:
        """`_` is 0; digits 0-9a-zA-Z then `_` are their value plus one."""
        if self._eat("_"):
            return 0
        value = 0
        while (char := self._next()) != "_":
            if not char.isascii() or not char.isalnum():
                raise _Invalid
            value = value * 62 + (int(char) if char.isdigit() else ord(char) - (87 if char.islower() else 29))
            if value > MAX_NUMBER:
                raise _Invalid
        return value + 1

    def _opt62(self, tag: str) -> int:
        return self._base62() + 1 if self._eat(tag) else 0

    def _decimal(self) -> int:
        """`0`, or digits not starting with 0 (so `00` is two zeros)."""
        start = self.at
        if self._eat("0"):
            return 0
        while self.text[self.at].isdigit():
            self.at += 1
        if self.at == start:
            raise _Invalid
        return int(self.text[start:self.at])

    def _identifier(self) -> str:
        puny = self._eat("u")
        size = self._decimal()
        self._eat("_")
        raw = self.text[self.at:self.at + size]
        if len(raw) != size:
            raise _Invalid
        self.at += size
        if not puny:
            return raw
        head, _, tail = raw.rpartition("_")
        return (head + "-" + tail if head else tail).encode("ascii").decode("punycode")

    def _backref(self, decode):
        start = self.at - 1
        target = self._base62()
        if target >= start:
            raise _Invalid
        saved, self.at = self.at, target
        try:
            return decode()
        finally:
            self.at = saved

    def path(self, value: bool) -> str:
        self._enter()
        try:
            return self._path(value)
        finally:
            self.depth -= 1

    def _path(self, value: bool) -> str:
        tag = self._next()
        if tag == "C":
            self._opt62("s")
            return self._identifier()
        if tag in "MX":
            self._opt62("s")
            self.path(value=False)  # the impl's own path: not shown
        if tag in "MXY":
            shown = self.type()
            return f"<{shown}>" if tag == "M" else f"<{shown} as {self.path(value=False)}>"
        if tag == "N":
            namespace = self._next()
            parent = self.path(value)
            number = self._opt62("s")
            name = self._identifier()
            if namespace.isupper():
                label = _NAMESPACES.get(namespace, namespace) + (f":{name}" if name else "")
                return f"{parent}::{{{label}#{number}}}"
            return f"{parent}::{name}" if name else parent
        if tag == "I":
            base = self.path(value)
            args = self._list(self._generic_arg)
            return f"{base}{'::' if value else ''}<{', '.join(args)}>"
        if tag == "B":
            return self._backref(lambda: self.path(value))
        raise _Invalid

    def _list(self, decode) -> list[str]:
        items = []
        while not self._eat("E"):
            items.append(decode())
        return items

    def _generic_arg(self) -> str:
        if self._eat("L"):
            return self._lifetime(self._base62())
        return self.const() if self._eat("K") else self.type()

    def _lifetime(self, index: int) -> str:
        if index == 0:
            return "'_"
        depth = self.bound - index
        if depth < 0:
            raise _Invalid
        return "'" + chr(ord("a") + depth) if depth < 26 else f"'_{depth}"

    def _binder(self) -> str:
        count = self._opt62("G")
        names = []
        for _ in range(count):
            self.bound += 1
            names.append(self._lifetime(1))
        return f"for<{', '.join(names)}> " if names else ""

    def type(self) -> str:
        self._enter()
        saved = self.bound
        try:
            return self._type()
        finally:
            self.depth -= 1
            self.bound = saved

    def _type(self) -> str:
        tag = self._next()
        if tag in _BASIC:
            return _BASIC[tag]
        if tag in "RQ":
            lifetime = self._base62() if self._eat("L") else 0
            shown = f"{self._lifetime(lifetime)} " if lifetime else ""
            return f"&{shown}{'mut ' if tag == 'Q' else ''}{self.type()}"
        if tag in "PO":
            return f"*{'const' if tag == 'P' else 'mut'} {self.type()}"
        if tag == "A":
            element = self.type()
            return f"[{element}; {self.const()}]"
        if tag == "S":
            return f"[{self.type()}]"
        if tag == "T":
            items = self._list(self.type)
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if tag == "F":
            return self._fn_signature()
        if tag == "D":
            return self._dyn()
        if tag == "B":
            return self._backref(self.type)
        self.at -= 1
        return self.path(value=False)

    def _fn_signature(self) -> str:
        binder = self._binder()
        unsafe = "unsafe " if self._eat("U") else ""
        abi = ""
        if self._eat("K"):
            abi = 'extern "C" ' if self._eat("C") else f'extern "{self._identifier().replace("_", "-")}" '
        args = self._list(self.type)
        result = self.type()
        return f"{binder}{unsafe}{abi}fn({', '.join(args)})" + (f" -> {result}" if result != "()" else "")

    def _dyn(self) -> str:
        binder = self._binder()
        traits = self._list(self._dyn_trait)
        lifetime = self._base62() if self._eat("L") else 0
        return f"dyn {binder}{' + '.join(traits)}" + (f" + {self._lifetime(lifetime)}" if lifetime else "")

    def _dyn_trait(self) -> str:
        trait = self.path(value=False)
        bindings = []
        while self._eat("p"):
            name = self._identifier()
            bindings.append(f"{name} = {self.type()}")
        if not bindings:
            return trait
        if trait.endswith(">"):
            return f"{trait[:-1]}, {', '.join(bindings)}>"
        return f"{trait}<{', '.join(bindings)}>"

    def const(self) -> str:
        self._enter()
        try:
            return self._const()
        finally:
            self.depth -= 1

    def _const(self) -> str:
        if self._eat("B"):
            return self._backref(self.const)
        tag = self._next()
        if tag == "p":
            return "_"
        negative = tag in "alnsxi" and self._eat("n")
        start = self.at
        while self._next() != "_":
            pass
        digits = self.text[start:self.at - 1]
        number = int(digits, 16) if digits else 0
        if tag == "b" and number < 2:
            return "true" if number else "false"
        if tag == "c" and number <= 0x10FFFF:
            return repr(chr(number))
        if tag in "hmjyotalnsxi":
            return str(-number if negative else number)
        raise _Invalid
