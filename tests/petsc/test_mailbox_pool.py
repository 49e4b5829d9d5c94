"""The device mailboxes' arena pool (petsc/mailbox.py: Mailboxes._new_arena, free, _Arenas) on
thread ranks with a stand-in for CuPy's memory and IPC calls, so the pool's collective logic runs
without a GPU: a later Mailboxes takes the arena an earlier one gave back, mapping nothing new;
ranks whose pools differ all map a new arena, none waits alone. The GPU run of the same pool:
tests/mpi/test_mpi.py::test_gpu_later_setups_reuse_the_mailbox_arenas."""
import itertools
import threading
import types

import numpy
import pytest

from pcplugins.petsc import mailbox

from conftest import on_threads


class _Memory:
    """cupy.cuda.Memory: a size and an address."""
    addresses = itertools.count(1 << 30, 1 << 26)

    def __init__(self, size):
        self.size, self.ptr = size, next(self.addresses)


class _Pointer:
    """cupy.cuda.MemoryPointer."""

    def __init__(self, mem, offset):
        self.mem, self.ptr = mem, mem.ptr + offset

    def memset(self, value, size):
        pass

    memset_async = memset


def _fake_cupy(opened):
    """The CuPy calls the pool makes; ``opened``: each rank's count of IPC mappings."""
    runtime = types.SimpleNamespace(
        ipcGetMemHandle=lambda ptr: ("handle", ptr),
        ipcOpenMemHandle=lambda handle, flag: opened.__setitem__(
            threading.current_thread().name, opened.get(threading.current_thread().name, 0) + 1) or handle[1] + 1,
        ipcCloseMemHandle=lambda ptr: None, cudaIpcMemLazyEnablePeerAccess=1)
    cuda = types.SimpleNamespace(Memory=_Memory, MemoryPointer=_Pointer, runtime=runtime,
                                 Device=lambda: types.SimpleNamespace(id=0))
    return types.SimpleNamespace(cuda=cuda, zeros=numpy.zeros)


class _Collective:
    """petsc.mpi.Collective's calls the pool makes, for thread ranks: allgather through a barrier,
    and this rank's own shared dict (each MPI process has its own)."""

    def __init__(self, rank, common):
        self.rank, self.common, self.size = rank, common, len(common["slots"])
        self._shared = {}

    def allgather(self, x):
        self.common["barrier"].wait()
        self.common["slots"][self.rank] = x
        self.common["barrier"].wait()
        return list(self.common["slots"])

    def shared(self):
        return self._shared


@pytest.mark.parametrize("size", [2, 3])
def test_arenas_are_reused_and_differing_pools_map_new_ones(monkeypatch, size):
    opened = {}
    monkeypatch.setattr(mailbox, "backend", types.SimpleNamespace(cupy=_fake_cupy(opened),
                                                                  synchronize=lambda xp: None))

    def work(coll):
        me = threading.current_thread().name
        steps = []

        def arena(nbytes):
            boxes = mailbox.Mailboxes(coll)
            boxes._new_arena(nbytes)
            memory, bases, serial = boxes._arenas[-1]
            steps.append((opened.get(me, 0), serial, memory.mem.size))
            boxes.free()
            return memory

        first = arena(100)
        assert arena(100) is first                  # given back, taken again: nothing mapped
        pool = mailbox._pool(coll)
        if coll.rank == 0:                            # rank 0's pool loses its arena
            pool.free.pop(0)
        arena(100)                                    # every rank maps a new one, none waits alone
        arena(2 * mailbox.Mailboxes.ARENA)            # larger than any in the pool: a new one
        return steps

    for steps in on_threads(size, work, _Collective, timeout=20):
        (o1, s1, _), (o2, s2, _), (o3, s3, _), (o4, s4, n4) = steps
        assert o1 == size - 1 and o2 == o1 and s2 == s1 == 0          # one mapping per peer, then none
        assert o3 == 2 * (size - 1) and s3 == 1                        # pools differed: a new arena
        assert o4 == 3 * (size - 1) and s4 == 2 and n4 == 2 * mailbox.Mailboxes.ARENA
