"""BLAS threads under MPI: the ranks on one node share its cores.

NumPy's and SciPy's OpenBLAS start a thread per core in every process, and those threads spin
while they wait for work. With several MPI ranks on a node every rank's threads compete for the
same cores, and a small dense product or inverse (a coarsest level's, a Gram matrix of a Krylov
method) waits for time slices instead of running. MPI codes run one BLAS thread per core for this
reason (OMP_NUM_THREADS=1 is the usual advice); a PETSc user may not know that NumPy threads.

``share_cores`` lowers each loaded OpenBLAS's thread count to the cores this process may use over
the ranks on its node, never raising it; the libraries are found among the process's mapped
files (Linux) and set through OpenBLAS's own ``openblas_set_num_threads`` (with the symbol
prefixes and suffixes the scipy-openblas wheels add). Elsewhere it does nothing.

On one rank the same spinning costs PETSc's own vector operations. A process holds several
OpenBLAS copies (NumPy's, SciPy's, the one PETSc links), each with its threads. After a threaded
NumPy call in a PC's setup (a coarsest level's inverse), NumPy's threads spin for a while, and
PETSc's threaded VecTDot and VecAXPY wait for time slices through the next solve (docs/amg.md has
the figures). ``one_thread`` runs the PCs' own setup and applications with one thread in every
copy and gives the counts back after: the dense work there is small, and no thread is left
spinning.
"""
import contextlib
import ctypes
import os
import sys

_DONE = []                        # [True] once this process's libraries were looked at
_FOUND = [None, -1]               # the libraries one_thread sets, and len(sys.modules) when looked up
_LOADED = {}                      # path: (get, put) or None, for the libraries seen so far
# the names of openblas_{get,set}_num_threads in the reference build and in the scipy-openblas wheels
_AFFIXES = [("", ""), ("scipy_", "64_"), ("scipy_", ""), ("", "64_")]


def _openblas_libraries():
    try:
        with open("/proc/self/maps") as fh:
            paths = {line.split()[-1] for line in fh if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    for path in sorted(paths - _LOADED.keys()):
        _LOADED[path] = _thread_calls(path)
    return [(path, *_LOADED[path]) for path in sorted(paths) if _LOADED[path]]


def _thread_calls(path):
    """(openblas_get_num_threads, openblas_set_num_threads) of the library at ``path``, or None."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    for pre, post in _AFFIXES:
        get = getattr(lib, f"{pre}openblas_get_num_threads{post}", None)
        put = getattr(lib, f"{pre}openblas_set_num_threads{post}", None)
        if get is not None and put is not None:
            return get, put
    return None


def share_cores(ranks_on_node):
    """At most cores // ranks_on_node BLAS threads in this process (at least one); returns
    {library path: (threads before, after)} for the libraries it changed."""
    if ranks_on_node <= 1:
        return {}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    want = max(1, cores // ranks_on_node)
    changed = {}
    if _DONE:                     # an earlier PC of this process did it
        return changed
    _DONE.append(True)
    for path, get, put in _openblas_libraries():
        before = int(get())
        if before > want:
            put(ctypes.c_int(want))
            changed[path] = (before, int(get()))
    return changed


@contextlib.contextmanager
def one_thread(look=False):
    """Every loaded OpenBLAS on one thread inside the block, its own count again after.
    ``look``: find the loaded libraries anew (a setup; an application uses the last setup's) if
    a module was imported since the last look: an OpenBLAS comes with an extension module (NumPy,
    SciPy) or with PETSc, and reading the process's map of files takes a millisecond."""
    if _FOUND[0] is None or (look and _FOUND[1] != len(sys.modules)):
        _FOUND[:] = [_openblas_libraries(), len(sys.modules)]
    changed = []
    for _, get, put in _FOUND[0]:
        n = int(get())
        if n > 1:
            put(ctypes.c_int(1))
            changed.append((put, n))
    try:
        yield
    finally:
        for put, n in changed:
            put(ctypes.c_int(n))


# the ranks on this process's node, as the usual launchers tell them (MPICH's Hydra, Open MPI)
_LOCAL_SIZE = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE")


def ranks_on_node(comm):
    """The MPI ranks on this node: from the launcher's environment, else (collective on the PETSc
    communicator ``comm``) the ranks of ``comm`` that share memory with this one."""
    for name in _LOCAL_SIZE:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    if comm.getSize() == 1:
        return 1
    from mpi4py import MPI
    node = comm.tompi4py().Split_type(MPI.COMM_TYPE_SHARED)
    try:
        return node.Get_size()
    finally:
        node.Free()
