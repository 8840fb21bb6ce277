"""simulations/stopping.py in this process: SIGINT and SIGTERM as one stop request (the real
signals to a real `ldpfed simulate` are tests/test_simulate_stop.py)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from simulations.stopping import Stopped, StopRequest


@pytest.fixture
def default_handlers():
    """Python's own SIGINT handler and SIGTERM's default, as in an interactive shell (the suite may
    run as a background job with SIGINT ignored); restored afterwards."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_raises_stopped_with_the_shells_exit_code_and_a_second_is_ignored(default_handlers, signum, code):
    stop = StopRequest()
    with pytest.raises(Stopped) as raised, stop.handling():
        signal.raise_signal(signum)
    assert raised.value.exit_code == code == stop.exit_code and stop.event.is_set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the previous handlers are back
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    stop = StopRequest()
    with pytest.raises(Stopped), stop.handling():
        try:
            signal.raise_signal(signum)
        finally:
            signal.raise_signal(signal.SIGINT)  # during the cleanup: ignored
    assert stop.signum == signum


def test_deferred_only_records_the_request_and_reinstalls_the_handlers(default_handlers):
    """Inside Flower's runtime nothing may be raised; `ray.init` replaces SIGTERM's handler."""
    stop = StopRequest()
    with stop.handling():
        with stop.deferred():
            signal.signal(signal.SIGTERM, lambda signum, frame: None)  # what ray.init does
            stop.install()
            signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGINT)
        assert stop.requested and stop.signum == signal.SIGTERM and stop.exit_code == 143
        assert stop.event.is_set()


def test_a_signal_inherited_ignored_stays_ignored(default_handlers):
    """`nohup` or a shell's `&` ask for it: the run neither handles it nor stops on it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = StopRequest()
    with stop.handling():
        signal.signal(signal.SIGINT, signal.default_int_handler)  # e.g. replaced by a library
        stop.install()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)
    assert not stop.requested and signal.getsignal(signal.SIGINT) == signal.SIG_IGN


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_on_another_thread_is_recorded_while_the_main_thread_waits(default_handlers, signum):
    """Inside `deferred`, a signal that lands on another thread while the main thread waits on a lock
    (which only a signal delivered to the main thread interrupts, as in Flower's runtime) is recorded
    at once, by the watcher; Python's own handler would run only when the main thread's wait ends."""
    stop = StopRequest()
    seen: list[bool] = []
    wait = threading.Lock()
    wait.acquire()

    def other_thread() -> None:
        time.sleep(0.2)  # the main thread is waiting on the lock by now
        os.kill(os.getpid(), signum)  # the main thread blocks it: it lands on another thread
        seen.append(stop.event.wait(5))
        wait.release()

    with stop.handling(), stop.deferred():
        thread = threading.Thread(target=other_thread)
        thread.start()  # before the block below: it inherits the main thread's mask
        signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
        try:
            wait.acquire()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
        thread.join()
    assert seen == [True] and stop.signum == signum
    assert signal.set_wakeup_fd(-1) == -1  # the watcher's wakeup fd is gone with the block
