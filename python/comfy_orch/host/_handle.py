"""The library's host pointer and the holds on pool blocks (docs/host-library.md): what a Host
and the finalizers of its tensor views share, so that a view can outlive its Host safely."""

from __future__ import annotations

import collections
import contextlib
import ctypes
import threading
from collections.abc import Iterator

from ._errors import HostError
from ._library import Block


class _Held:
    """One hold on a pool block: released when the last view over it goes (or at stop)."""

    __slots__ = ("block", "__weakref__")

    def __init__(self, block: Block) -> None:
        self.block = block


class _Library:
    """The library's host pointer, shared by a Host and its finalizers. Calls count themselves
    in and stop waits for them; a finalizer only queues its block (it may run on any thread, at
    any allocation, even on the library's own thread inside an event), and the next call sends
    the queued releases."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.handle: int | None = None  # the orch_host pointer while the host runs
        self.cond = threading.Condition()
        self.calls = 0
        self.released: collections.deque[Block] = collections.deque()

    @contextlib.contextmanager
    def use(self) -> Iterator[int]:
        with self.cond:
            if self.handle is None:
                raise HostError("stopped", "the host was stopped")
            self.calls += 1
            handle = self.handle
        try:
            while self.released:
                block = self.released.popleft()
                self.lib.orch_host_release(handle, ctypes.byref(block))
            yield handle
        finally:
            with self.cond:
                self.calls -= 1
                self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            handle, self.handle = self.handle, None
            while self.calls:
                self.cond.wait()
        if handle is not None:
            self.released.clear()  # the stop releases every hold
            self.lib.orch_host_stop(handle)
