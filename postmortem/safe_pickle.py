"""Read a pickle of plain data without running it.

A pickle is a program: `pickle.load` runs whatever GLOBAL/REDUCE it holds, and a flight-recorder dump
taken from a bug report is untrusted. This is a stack machine of our own over `pickletools.genops`
(which decodes opcode arguments and executes nothing) that admits only the opcodes building dicts,
lists, tuples, sets, str, bytes, numbers, booleans and None, and refuses every other opcode, naming it
and its byte offset, so the caller can show why a dump was not read.

Like `pickle.loads`, bytes after STOP are ignored (a file may hold several pickles back to back).
Protocol-0/1 byte strings (STRING, BINSTRING, SHORT_BINSTRING, written by Python 2) are decoded the
way `pickle.loads`'s default `encoding="ASCII"` does: ASCII becomes str, anything else is refused.
"""

from __future__ import annotations

import io
import itertools
import pickletools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

MAX_INPUT_BYTES = 256 * 1024 * 1024
"""Largest pickle read. A flight-recorder dump keeps 2,000 entries per rank by default: a few MB."""

MAX_OBJECTS = 10_000_000
"""Most objects (scalars and containers) one pickle may build, counting each reference pushed by GET
or DUP and each MARK as one too (a two-byte GET costs a stack slot): bounds memory whatever the input."""

MAX_DEPTH = 256
"""Deepest nesting of containers, in the result and in any dict key or set member. A caller walking
the result recursively (json.dumps, repr, a renderer) stays far from Python's recursion limit, and
hashing a nested tuple (CPython recurses in C) stays far from the end of the C stack.
A flight-recorder dump nests about 5 deep."""

MAX_EXPANDED = 20_000_000
"""Most nodes the result may have when every shared reference counts as a copy. Memo GET lets a few
bytes name one list twice, and a chain of such lists describes 2**n nodes ("billion laughs"); a
caller that walks the result as a tree would do all of that work. The same bound applies to the
total work of hashing dict keys and set members, which CPython does without regard to sharing."""

MAX_EXPANDED_BYTES = MAX_INPUT_BYTES
"""Most characters and bytes the result's strings, byte strings and ints may hold when every shared reference
counts as a copy. A reader that formats each value it meets (a flight-recorder frame's `name (file:line)`)
copies a shared string once per use: one 8 MiB str named from 400,000 frames would be 3.2 TB of copies. No
pickle without sharing can pass this bound, since each of its values is written out in the input; a real dump
with deep stacks (2,000 entries of 200 frames of some 200 characters) expands to about 80 MB."""

MAX_SAME_HASH = 32
"""Most distinct keys of one dict (or members of one set) that may share a hash. The hashes of ints,
floats and tuples are not salted and are easy to collide on purpose, and each colliding insert
compares with all earlier ones: N of them cost N**2 (a hash flood). str and bytes hashes are salted
per process and are not counted."""

HIGHEST_PROTOCOL = 5
"""The newest pickle protocol this reader knows (that of Python 3.8 to 3.13)."""

_OPCODE_NAMES = {op.code.encode("latin-1")[0]: op.name for op in pickletools.opcodes}
_CONTAINERS = (list, tuple, dict, set, frozenset)
_SALTED = (str, bytes)
_END = object()
_T = TypeVar("_T")


class PickleRefused(ValueError):
    """The pickle holds code, is malformed, or is over a limit; the message says which, and where."""

    def __init__(self, message: str, offset: int, opcode: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.opcode = opcode


@dataclass
class _Machine:
    """The unpickler's state: the stack, the stacks saved under each MARK, the memo, and the budgets spent."""

    stack: list[object] = field(default_factory=list)
    marks: list[list[object]] = field(default_factory=list)
    memo: dict[int, object] = field(default_factory=dict)
    objects: int = 0
    hash_work: int = 0
    same_hash: dict[tuple[int, int], int] = field(default_factory=dict)
    hashed_into: dict[int, object] = field(default_factory=dict)  # keeps the ids in same_hash alive and unique
    tuple_costs: dict[int, tuple[tuple[object, ...], int, int]] = field(default_factory=dict)  # id: (it, height, cost)
    size: int = 0  # of the input
    op: str = "PROTO"
    pos: int = 0


def loads(data: bytes) -> object:
    """Decode `data` as `pickle.loads` would, for plain data only; anything else raises PickleRefused."""
    if len(data) > MAX_INPUT_BYTES:
        raise PickleRefused(f"pickle is {len(data):,} bytes, over the limit of {MAX_INPUT_BYTES:,}", 0)
    m = _Machine(size=len(data))
    stream = io.BytesIO(data)
    ops = pickletools.genops(stream)
    while True:
        start = stream.tell()
        try:
            op, arg, _ = next(ops)
        except Exception as exc:  # noqa: BLE001 - genops raises ValueError, struct.error, warnings...; all mean junk
            raise _unreadable(data, start, exc) from None
        m.op, m.pos = op.name, start
        if op.name == "STOP":
            result = _pop(m)
            _check_shape(m, result)
            return result
        handler = _HANDLERS.get(op.name)
        if handler is None:
            raise _code(m, arg)
        handler(m, arg)


def _refuse(m: _Machine, why: str) -> PickleRefused:
    return PickleRefused(f"pickle refused: {why} ({m.op} at byte {m.pos})", m.pos, m.op)


def _code(m: _Machine, arg: object) -> PickleRefused:
    """The refusal of an opcode that imports or calls: name what it asked for where the pickle says."""
    if m.op in ("GLOBAL", "INST") and isinstance(arg, str):
        asks = f"asks for {_short(arg.replace(' ', '.'))}"
    elif m.op == "STACK_GLOBAL" and len(m.stack) >= 2:
        module, name = m.stack[-2:]
        asks = f"asks for {_short(module)}.{_short(name)}"
    else:
        asks = f"uses {m.op}"
    return PickleRefused(
        f"pickle {asks} ({m.op} at byte {m.pos}): refused, only plain data is read", m.pos, m.op
    )


def _unreadable(data: bytes, offset: int, exc: Exception) -> PickleRefused:
    """Say why genops could not read the opcode at `offset`: end of input, an unknown byte, or a bad argument."""
    if offset >= len(data):
        return PickleRefused(f"pickle refused: input ends at byte {offset} before STOP (truncated?)", offset)
    name = _OPCODE_NAMES.get(data[offset])
    if name is None:
        return PickleRefused(
            f"pickle has an unknown opcode 0x{data[offset]:02x} (at byte {offset}): refused, only plain data is read",
            offset,
        )
    return PickleRefused(
        f"pickle refused: {name} at byte {offset} has a truncated or malformed argument ({_short(str(exc))})",
        offset,
        name,
    )


def _short(value: object, limit: int = 100) -> str:
    """Text from the pickle fit for a one-line diagnostic: not too long, no control characters."""
    text = value if isinstance(value, str) else f"<{type(value).__name__}>"
    text = text if text.isprintable() else ascii(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _count(m: _Machine) -> None:
    m.objects += 1
    if m.objects > MAX_OBJECTS:
        raise _refuse(m, f"it builds more than {MAX_OBJECTS:,} objects")


def _push(m: _Machine, value: object) -> None:
    _count(m)
    m.stack.append(value)


def _pop(m: _Machine) -> object:
    if not m.stack:
        raise _refuse(m, "stack underflow")
    return m.stack.pop()


def _top(m: _Machine) -> object:
    if not m.stack:
        raise _refuse(m, "stack underflow")
    return m.stack[-1]


def _pop_mark(m: _Machine) -> list[object]:
    """The items pushed since the last MARK (pickle.py's metastack: each MARK saves the stack below it)."""
    if not m.marks:
        raise _refuse(m, "no MARK to pop to")
    items, m.stack = m.stack, m.marks.pop()
    return items


def _target(m: _Machine, kind: type[_T]) -> _T:
    """The container under the operands of APPEND/SETITEM/ADDITEMS, which must be exactly a `kind`."""
    target = _top(m)
    if type(target) is not kind:
        raise _refuse(m, f"adds to a {type(target).__name__}, not a {kind.__name__}")
    return target


def _memo_index(m: _Machine, arg: object) -> int:
    if not isinstance(arg, int) or arg < 0:
        raise _refuse(m, f"bad memo key {_short(repr(arg))}")
    return arg


def _check_key(m: _Machine, container: dict[object, object] | set[object], key: object) -> None:
    """Refuse a key CPython could not hash, or whose hashing would be too deep, too costly or a hash flood."""
    if type(key) in _SALTED:
        m.hash_work += 1
    else:
        m.hash_work += _hash_cost(m, key)
        if m.hash_work <= MAX_EXPANDED and key not in container:
            slot = (id(container), hash(key))
            count = m.same_hash[slot] = m.same_hash.get(slot, 0) + 1
            m.hashed_into[id(container)] = container
            if count > MAX_SAME_HASH:
                raise _refuse(m, f"more than {MAX_SAME_HASH} keys of one dict or set share a hash (a hash flood)")
    if m.hash_work > MAX_EXPANDED:
        raise _refuse(m, f"hashing its keys would visit more than {MAX_EXPANDED:,} nodes")


def _hash_cost(m: _Machine, key: object) -> int:
    """The nodes hash(key) visits. CPython hashes a tuple item by item, a shared item each time, so a
    tuple costs its expanded size; that is computed here once per tuple (they are immutable), bottom-up."""
    if type(key) is not tuple:
        return _scalar_hash_cost(m, key)
    todo: list[tuple[object, ...]] = [key]
    while todo:
        top = todo[-1]
        if id(top) in m.tuple_costs:
            todo.pop()
            continue
        pending = [x for x in top if type(x) is tuple and id(x) not in m.tuple_costs]
        if pending:
            todo.extend(pending)
            continue
        todo.pop()
        height, cost = 1, 1
        for item in top:
            if type(item) is tuple:
                _, item_height, item_cost = m.tuple_costs[id(item)]
                height, cost = max(height, item_height + 1), cost + item_cost
            else:
                cost += _scalar_hash_cost(m, item)
        if height > MAX_DEPTH:
            raise _refuse(m, f"a key nests more than {MAX_DEPTH} deep")
        m.tuple_costs[id(top)] = (top, height, cost)
    return m.tuple_costs[id(key)][2]


def _scalar_hash_cost(m: _Machine, item: object) -> int:
    if type(item) is int:
        return 1 + item.bit_length() // 1024  # a big int hashes digit by digit
    if type(item) in (str, bytes, float, bool, type(None), frozenset):  # str, bytes and frozenset cache theirs
        return 1
    raise _refuse(m, f"a {type(item).__name__} is used as a dict key or set member (not hashable)")


def _set_items(m: _Machine, target: dict[object, object], items: list[object]) -> None:
    if len(items) % 2:
        raise _refuse(m, "odd number of items for a dict")
    for key, value in zip(items[::2], items[1::2]):
        _check_key(m, target, key)
        target[key] = value


def _add_items(m: _Machine, target: set[object], items: list[object]) -> None:
    for item in items:
        _check_key(m, target, item)
        target.add(item)


def _check_shape(m: _Machine, root: object) -> None:
    """Refuse a result that refers to itself, nests deeper than MAX_DEPTH, or expands past MAX_EXPANDED nodes
    or MAX_EXPANDED_BYTES of text.

    One depth-first walk, iterative, each container visited once: a shared container's height and
    expanded size are remembered by id, so a billion-laughs DAG costs its edges, not its expansion.
    """
    if type(root) not in _CONTAINERS:
        return
    done: dict[int, tuple[int, int, int]] = {}  # id -> (height, expanded size, expanded text)
    path = [_Frame(root, _children(root))]
    on_path = {id(root)}
    while path:
        top = path[-1]
        child = next(top.children, _END)
        if child is _END:
            path.pop()
            on_path.discard(id(top.obj))
            done[id(top.obj)] = (top.height, top.size, top.text)
            if path:
                _grow(m, path, top.height, top.size, top.text)
        elif type(child) not in _CONTAINERS:
            _grow(m, path, 0, 1, _text_size(child))
        elif id(child) in on_path:
            raise _refuse(m, f"the result contains itself (a {type(child).__name__} inside its own items)")
        elif id(child) in done:
            _grow(m, path, *done[id(child)])
        else:
            on_path.add(id(child))
            path.append(_Frame(child, _children(child)))
            _grow(m, path, 0, 0, 0)


@dataclass
class _Frame:
    """A container being walked by _check_shape: its remaining items, its height, size and text so far."""

    obj: object
    children: Iterator[object]
    height: int = 1
    size: int = 1
    text: int = 0


def _grow(m: _Machine, path: list[_Frame], child_height: int, child_size: int, child_text: int) -> None:
    """Add a finished child to the container on top of `path`, and check the limits that may now be past."""
    top = path[-1]
    top.height = max(top.height, child_height + 1)
    top.size += child_size
    top.text += child_text
    if len(path) - 1 + top.height > MAX_DEPTH:
        raise _refuse(m, f"the result nests more than {MAX_DEPTH} deep")
    if top.size > MAX_EXPANDED:
        raise _refuse(m, f"the result expands to more than {MAX_EXPANDED:,} nodes through shared references")
    if top.text > MAX_EXPANDED_BYTES:
        raise _refuse(m, f"the result expands to more than {MAX_EXPANDED_BYTES:,} bytes of text through shared "
                         "references")


def _text_size(leaf: object) -> int:
    """What a copy of `leaf` holds beyond its node: the characters of a str, the bytes of bytes or bytearray,
    the digits (in bytes) of an int."""
    if isinstance(leaf, str | bytes | bytearray):
        return len(leaf)
    return leaf.bit_length() // 8 if isinstance(leaf, int) else 0  # a bool's is 0 too


def _children(obj: object) -> Iterator[object]:
    if type(obj) is dict:
        return itertools.chain.from_iterable(obj.items())
    return iter(obj)  # type: ignore[call-overload]  # list, tuple, set or frozenset


# The opcodes admitted, by name; each takes the machine and genops' decoded argument.


def _push_ascii(m: _Machine, arg: object) -> None:
    """BINSTRING/SHORT_BINSTRING, which genops decodes as latin-1: keep them only if ASCII, as pickle.loads does."""
    assert isinstance(arg, str)
    if not arg.isascii():
        raise _refuse(m, "a protocol-0/1 string is not ASCII (pickle.loads's default encoding refuses it too)")
    _push(m, arg)


def _constant(value: object) -> Callable[[_Machine, object], None]:
    return lambda m, _arg: _push(m, value)


def _empty(kind: Callable[[], object]) -> Callable[[_Machine, object], None]:
    return lambda m, _arg: _push(m, kind())


def _proto(m: _Machine, arg: object) -> None:
    if not isinstance(arg, int) or arg > HIGHEST_PROTOCOL:
        raise _refuse(m, f"unsupported pickle protocol {_short(repr(arg))}")


def _frame(m: _Machine, arg: object) -> None:
    """FRAME says how many bytes follow, for buffered readers: only check they are there, as pickle.loads does."""
    if not isinstance(arg, int) or arg > m.size - m.pos - 9:  # the frame starts after FRAME and its 8-byte length
        raise _refuse(m, f"a frame of {_short(repr(arg))} bytes runs past the end of the input (truncated?)")


def _mark(m: _Machine, arg: object) -> None:
    _count(m)
    m.marks.append(m.stack)
    m.stack = []


def _pop_op(m: _Machine, arg: object) -> None:
    """POP with nothing above the last MARK pops the mark, as both pickle.py and _pickle do."""
    if m.stack:
        m.stack.pop()
    else:
        _pop_mark(m)


def _pop_mark_op(m: _Machine, arg: object) -> None:
    _pop_mark(m)


def _dup(m: _Machine, arg: object) -> None:
    _push(m, _top(m))


def _tuple_n(n: int) -> Callable[[_Machine, object], None]:
    def build(m: _Machine, arg: object) -> None:
        if len(m.stack) < n:
            raise _refuse(m, "stack underflow")
        items = tuple(m.stack[-n:])
        del m.stack[-n:]
        _push(m, items)

    return build


def _from_mark(kind: Callable[[list[object]], object]) -> Callable[[_Machine, object], None]:
    return lambda m, _arg: _push(m, kind(_pop_mark(m)))


def _dict(m: _Machine, arg: object) -> None:
    items = _pop_mark(m)
    built: dict[object, object] = {}
    _set_items(m, built, items)
    _push(m, built)


def _frozenset(m: _Machine, arg: object) -> None:
    items = _pop_mark(m)
    _add_items(m, set(), items)  # check every member before CPython hashes them all
    _push(m, frozenset(items))


def _setitem(m: _Machine, arg: object) -> None:
    value = _pop(m)
    key = _pop(m)
    _set_items(m, _target(m, dict), [key, value])


def _setitems(m: _Machine, arg: object) -> None:
    items = _pop_mark(m)
    _set_items(m, _target(m, dict), items)


def _append(m: _Machine, arg: object) -> None:
    value = _pop(m)
    _target(m, list).append(value)


def _appends(m: _Machine, arg: object) -> None:
    items = _pop_mark(m)
    _target(m, list).extend(items)


def _additems(m: _Machine, arg: object) -> None:
    items = _pop_mark(m)
    _add_items(m, _target(m, set), items)


def _put(m: _Machine, arg: object) -> None:
    m.memo[_memo_index(m, arg)] = _top(m)


def _memoize(m: _Machine, arg: object) -> None:
    m.memo[len(m.memo)] = _top(m)


def _get(m: _Machine, arg: object) -> None:
    index = _memo_index(m, arg)
    if index not in m.memo:
        raise _refuse(m, f"memo key {index} was never stored")
    _push(m, m.memo[index])


_HANDLERS: dict[str, Callable[[_Machine, object], None]] = {
    **dict.fromkeys(
        "INT BININT BININT1 BININT2 LONG LONG1 LONG4 FLOAT BINFLOAT STRING UNICODE SHORT_BINUNICODE BINUNICODE "
        "BINUNICODE8 SHORT_BINBYTES BINBYTES BINBYTES8 BYTEARRAY8".split(),
        _push,  # the value genops decoded
    ),
    # genops decodes STRING's argument as ASCII already, like pickle.loads; the binary ones as latin-1.
    **dict.fromkeys("BINSTRING SHORT_BINSTRING".split(), _push_ascii),
    "NONE": _constant(None),
    "NEWTRUE": _constant(True),
    "NEWFALSE": _constant(False),
    "EMPTY_DICT": _empty(dict),
    "EMPTY_LIST": _empty(list),
    "EMPTY_TUPLE": _empty(tuple),
    "EMPTY_SET": _empty(set),
    "PROTO": _proto,
    "FRAME": _frame,
    "MARK": _mark,
    "POP": _pop_op,
    "POP_MARK": _pop_mark_op,
    "DUP": _dup,
    "TUPLE1": _tuple_n(1),
    "TUPLE2": _tuple_n(2),
    "TUPLE3": _tuple_n(3),
    "TUPLE": _from_mark(tuple),
    "LIST": _from_mark(list),
    "DICT": _dict,
    "FROZENSET": _frozenset,
    "SETITEM": _setitem,
    "SETITEMS": _setitems,
    "APPEND": _append,
    "APPENDS": _appends,
    "ADDITEMS": _additems,
    **dict.fromkeys("PUT BINPUT LONG_BINPUT".split(), _put),
    "MEMOIZE": _memoize,
    **dict.fromkeys("GET BINGET LONG_BINGET".split(), _get),
}
