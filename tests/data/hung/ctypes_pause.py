"""A Python process blocked in a C call made through ctypes, two Python frames below the module."""
import ctypes

from ready import ready

libc = ctypes.CDLL(None)


def wait_for_signal():
    ready("main")
    libc.pause()  # HANG pause


def serve():
    wait_for_signal()  # HANG serve


serve()  # HANG module
