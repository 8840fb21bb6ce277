"""Stopping a run on SIGINT (Ctrl-C) or SIGTERM (a scheduler or a container stopping the job).

Both signals are one request: the run writes the rounds that finished (summary marked
interrupted) and the process exits with 128 + the signal's number (130, 143), like a shell. Python
runs a signal handler in the main thread, between two bytecodes of whatever that thread is doing,
so where the main thread is decides what the handler may do:

- before the run's set-up (the command's checks and imports) and in the summary it raises
  `Stopped` (a KeyboardInterrupt), which unwinds to the harness;
- in the run's set-up (`simulations.federation.run`: the clients' secrets, the server half, the
  records; `deferred`) it only records the request: Ray's workers may be up already, and the run
  then stops before its first round with a summary of none, as it would a moment later;
- inside Flower's simulation runtime (`deferred`) it only records the request: the main thread is
  there joining the threads that wait on Ray actors (`ray.get`), and unwinding it shuts Ray down
  under them, after which they wait forever (the interpreter joins them at exit) or crash in Ray's
  native code (SIGSEGV, SIGABRT). The ServerApp sees the request between two pulls
  (`server.strategy.StoppableGrid`) and returns; Flower's runtime then ends its threads and shuts
  Ray down in order, and the harness writes the summary;
- in the local engine's rounds (`deferred` too) the loop stops before the next round: unwound in
  the middle of the server's aggregation or record, a round would be in the ledger or the rows
  but not in metrics.csv.

A further signal while the stop is under way is ignored (SIG_IGN: it takes seconds and leaves
complete files, and an ignored signal cannot interrupt Ray's teardown or a system call in it).

Python runs a handler in the main thread only, once that thread executes bytecode again; the kernel
delivers a process-directed signal to any thread that does not block it. Inside Flower's runtime the
main thread waits in a join that only a signal delivered to it interrupts, so a signal that landed on
another thread (one of Flower's or Ray's, in a moment the main thread had it blocked) went unseen
until the run's end: a SIGTERM once Ray's workers came up left a 1,000-round run going. So in the
`deferred` block a watcher thread also takes the request: the interpreter's C-level handler writes
the signal's number to a wakeup pipe (`signal.set_wakeup_fd`) from whichever thread it runs in.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
END = 0  # no signal's number: written to the watcher's pipe when its block ends


class Stopped(KeyboardInterrupt):
    """A stop request raised in the main thread; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class StopRequest:
    """The run's stop request: the first SIGINT or SIGTERM received while `handling`."""

    def __init__(self) -> None:
        self.event = threading.Event()  # set on the request (read by the ServerApp thread)
        self.signum: int | None = None
        self._raising = True
        self._dispositions: dict[int, object] = {}  # per signal: this request's handler, or SIG_IGN

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        return Stopped(self.signum or signal.SIGINT).exit_code

    def record(self, signum: int = signal.SIGINT) -> None:
        """The request, also for a KeyboardInterrupt that did not come through the handler."""
        if self.signum is None:
            self.signum = signum
            self.event.set()

    def _handle(self, signum: int, frame) -> None:
        if self.signum is not None:
            return
        self.record(signum)
        self.install()  # now ignored: a further signal interrupts nothing, not even a system call
        if self._raising:
            raise Stopped(signum)

    def install(self) -> None:
        """(Re)install the handlers, in the main thread, e.g. after a library replaced them (`ray.init`
        called in the main thread replaces SIGTERM's with one that raises SystemExit)."""
        for signum, disposition in self._dispositions.items():
            signal.signal(signum, signal.SIG_IGN if self.requested else disposition)

    @contextlib.contextmanager
    def handling(self):
        """SIGINT and SIGTERM request the stop during the block; the previous handlers afterwards.
        A signal that the process inherited ignored stays ignored (what `nohup` and a shell's `&`
        ask for). Only the main thread receives Python's signals: elsewhere nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
        self._dispositions = {
            signum: signal.SIG_IGN if handler == signal.SIG_IGN else self._handle
            for signum, handler in previous.items()
        }
        self.install()
        try:
            yield self
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._dispositions = {}

    @contextlib.contextmanager
    def deferred(self):
        """In the block a signal records the request and raises nothing (code that must not be
        unwound); the handlers are installed again after it (see `install`). In the main thread a
        watcher records it too, wherever the main thread waits (module docstring)."""
        self._raising = False
        try:
            with self._watching():
                yield self
        finally:
            self._raising = True
            if self.installed:
                self.install()

    @contextlib.contextmanager
    def _watching(self):
        """A thread that records SIGINT or SIGTERM from the interpreter's wakeup pipe, which its
        C-level handler writes in whichever thread the signal lands on. Main thread only (where the
        wakeup fd is set); the previous wakeup fd is restored after the block."""
        if not self.installed or threading.current_thread() is not threading.main_thread():
            yield
            return
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

        def watch() -> None:
            signal.pthread_sigmask(signal.SIG_BLOCK, set(SIGNALS))  # the signals go to other threads
            while True:
                for number in os.read(read_end, 64):
                    if number == END:
                        return
                    if number in SIGNALS and self.signum is None:
                        self.record(number)

        watcher = threading.Thread(target=watch, name="stop-watcher", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            signal.set_wakeup_fd(previous)
            os.write(write_end, bytes([END]))
            watcher.join()
            os.close(read_end)
            os.close(write_end)

    @property
    def installed(self) -> bool:
        """The handlers are this request's (set in the main thread by `handling`)."""
        return bool(self._dispositions)


def sigint_ignored_notice() -> str | None:
    """One line for a process that inherited SIGINT ignored (started with `&` by a shell without job
    control, or by a parent that ignores it): a SIGINT then stops nothing (the disposition is kept,
    see `handling`), SIGTERM still does. None otherwise (and outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        return None
    return (
        "note: this process inherited SIGINT ignored (a background start without job control), "
        f"so Ctrl-C and kill -INT do not stop it; kill -TERM {os.getpid()} stops it with the finished results written"
    )
