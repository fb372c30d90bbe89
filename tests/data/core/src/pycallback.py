"""A CPython process that crashes in Python code called back from C: two eval-loop calls on one stack.

`outer` hands a Python comparator to libc's qsort (through ctypes); qsort calls it back, and
the callback crashes in native code two Python calls deeper. The native stack then holds an
eval-loop frame running `compare`/`inner`/`string_at` under qsort, and one running `outer` and
`<module>` above it.
"""

import ctypes

libc = ctypes.CDLL(None)
COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))


def inner():
    ctypes.string_at(0)


def compare(left, right):
    inner()
    return 0


def outer():
    values = (ctypes.c_int * 2)(2, 1)
    libc.qsort(values, 2, ctypes.sizeof(ctypes.c_int), COMPARE(compare))


outer()
