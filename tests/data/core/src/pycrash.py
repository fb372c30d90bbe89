"""A CPython process that crashes in native code three Python calls deep, with a second thread."""

import ctypes
import threading
import time

started = threading.Event()


def background():
    started.set()
    while True:
        time.sleep(0.01)


def level3():
    ctypes.string_at(0)


def level2():
    level3()


def level1():
    level2()


threading.Thread(target=background, daemon=True).start()
started.wait()
level1()
