"""Two threads deadlock on two locks taken in opposite orders; the main thread joins them."""
import threading

from ready import ready

lock_a = threading.Lock()
lock_b = threading.Lock()
both_hold_one = threading.Barrier(2)


def a_then_b():
    with lock_a:
        both_hold_one.wait()
        ready("a_then_b")
        with lock_b:  # HANG a_then_b
            pass


def b_then_a():
    with lock_b:
        both_hold_one.wait()
        ready("b_then_a")
        with lock_a:  # HANG b_then_a
            pass


ready("lock_a", id(lock_a))  # CPython's id() is the object's address: where the snapshot must find each lock
ready("lock_b", id(lock_b))
threads = [threading.Thread(target=a_then_b), threading.Thread(target=b_then_a)]
for thread in threads:
    thread.start()
ready("main")
for thread in threads:
    thread.join()  # HANG main
