"""The ready line every hung program writes just before it blocks, for tests/hung.py to wait on.

tests/hung.py passes the write end of a pipe as HUNG_READY_FD; a line is `<role> <tid>`: what is
about to block and its OS thread id (a process's pid for its main thread).
"""
import os
import threading


def ready(role):
    """Say that `role` is about to block, in one write so lines of threads and processes never mix."""
    os.write(int(os.environ["HUNG_READY_FD"]), f"{role} {threading.get_native_id()}\n".encode())
