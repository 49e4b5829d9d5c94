"""The CUDA sources of pcplugins, one ``.cu`` file per family, and the one loader that compiles them.

Each file is plain CUDA C. Its compile-time parameters (value type, dimension, tile sizes) are
macros: :func:`module` and :func:`kernel` put one ``#define`` per keyword before the file, then a
``#line 1`` directive, so that the compiler's messages name the file and the line of the source.

========================  ==========================================  =================================
file                      kernels                                      Python wrapper and NumPy twin
========================  ==========================================  =================================
``fused.cu``              red-black relaxation, residual, transfers,   ``pcplugins.core.fused``
                          HOMG iteration, cubic upsampling             (twins: ``core.stencil``,
                                                                       ``core.smoothers``, ``core.transfer``,
                                                                       ``core.homg``)
``tridiag.cu``            partitioned tridiagonal line solve           ``pcplugins.core.tridiag``
``sparse.cu``             CSR/ELL row products, dot partial sums,      ``pcplugins.core.sparse``
                          sums of sorted duplicates, aggregate
                          Galerkin rows
``aggregation.cu``        pairwise aggregation's strength scores and   ``pcplugins.core.aggregation``
                          matching rounds
``csrstencil.cu``         a structured matrix's stencil from CSR       ``pcplugins.core.csrstencil``
``stored.cu``             stored-stencil residual and colour sweep     ``pcplugins.core.fused_stored``
                                                                       (twins: ``core.stencil``,
                                                                       ``core.smoothers``)
``mailbox.cu``            the waits and signals of device mailboxes    ``pcplugins.petsc.mailbox`` (no
                          (MPI ranks ordering their exchanges on the   twin: they compute nothing; the
                          GPU)                                         MPI tests compare the transports)
========================  ==========================================  =================================

The tests (``tests/gpu/test_kernels.py`` and the core tests) compare each kernel with its twin.
This package imports only ``pcplugins.backend``, and CuPy only when a kernel is compiled.
"""
import functools
import pathlib

import numpy

from .. import backend

_DIR = pathlib.Path(__file__).resolve().parent

# the C type of each value type the kernels take (CuPy's complex<T> for the complex ones)
CTYPES = {numpy.dtype(numpy.float64): "double", numpy.dtype(numpy.float32): "float",
          numpy.dtype(numpy.complex128): "complex<double>", numpy.dtype(numpy.complex64): "complex<float>"}


def source(name, **defines):
    """The text compiled for ``name``.cu: the defines, a ``#line`` directive, the file."""
    head = "".join(f"#define {k} {v}\n" for k, v in defines.items())
    return f'{head}#line 1 "{name}.cu"\n{(_DIR / f"{name}.cu").read_text()}'


@functools.lru_cache(maxsize=None)
def _module(name, defines):
    return backend.cupy.RawModule(code=source(name, **dict(defines)))


def module(name, **defines):
    """``name``.cu compiled with ``defines`` as a CuPy RawModule (once per name and defines)."""
    return _module(name, tuple(defines.items()))


@functools.lru_cache(maxsize=None)
def _kernel(name, entry, defines):
    return backend.cupy.RawKernel(source(name, **dict(defines)), entry)


def kernel(name, entry, **defines):
    """The C-linkage kernel ``entry`` of ``name``.cu as a CuPy RawKernel, whose launch
    attributes (dynamic shared memory) can be set."""
    return _kernel(name, entry, tuple(defines.items()))
