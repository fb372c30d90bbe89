"""The ready line every hung program writes just before it blocks, for tests/hung.py to wait on.

tests/hung.py passes the write end of a pipe as HUNG_READY_FD; a line is `<role> <tid>`: what is
about to block and its OS thread id (a process's pid for its main thread).
"""
import os
import threading


def ready(role, value=None):
    """Say that `role` is about to block, in one write so lines of threads and processes never mix; with `value`, say
    a number the test checks instead (an object's address: `id()` in CPython)."""
    said = threading.get_native_id() if value is None else value
    os.write(int(os.environ["HUNG_READY_FD"]), f"{role} {said}\n".encode())
