"""N threads spinning in pure-Python loops, each in a function of its own name (spin_0, spin_1, ...).

Every 50 ms the main thread replaces the file named by argv[2] with one line of every thread's
count, so a test can see afterwards that each thread kept running.
"""
import os
import sys
import threading
import time

from ready import ready

counts = [0] * int(sys.argv[1])


def spin(index):
    ready(f"spin_{index}")
    while True:
        counts[index] += 1  # HANG spin


def report(path):
    """Replace the counts file at once (write, then rename): a reader never sees half a line."""
    with open(f"{path}.tmp", "w") as out:
        out.write(" ".join(map(str, counts)) + "\n")
    os.replace(f"{path}.tmp", path)


for index in range(len(counts)):
    named = spin.__code__.replace(co_name=f"spin_{index}", co_qualname=f"spin_{index}")
    function = type(spin)(named, spin.__globals__, f"spin_{index}")
    threading.Thread(target=function, args=(index,), name=f"spin_{index}", daemon=True).start()
while not all(counts):
    time.sleep(0.001)
report(sys.argv[2])
ready("main")
while True:
    time.sleep(0.05)  # HANG report
    report(sys.argv[2])
