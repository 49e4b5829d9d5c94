"""PETSc log events for -log_view, one per phase of setup and application."""
import time

import numpy
from petsc4py import PETSc

from .. import backend

_events = {}


def event(name, xp=numpy):
    """A context manager timing ``name`` as a PETSc log event; work on ``xp``'s device is
    synchronised only when PETSc logging is on, so timings are right under -log_view and free
    otherwise."""
    ev = _events.get(name)
    if ev is None:
        ev = _events[name] = PETSc.Log.Event(name)
    return _Timed(ev, xp)


class _Timed:
    def __init__(self, ev, xp):
        self.ev, self.xp = ev, xp

    def __enter__(self):
        if PETSc.Log.isActive():
            backend.synchronize(self.xp)
        self.ev.begin()

    def __exit__(self, *exc):
        if PETSc.Log.isActive():
            backend.synchronize(self.xp)
        self.ev.end()


def clock():
    return time.perf_counter()

