"""Batched tridiagonal solves along the last axis: the Thomas algorithm (NumPy or CuPy, vectorised
over the systems) and, on the GPU, a partition method whose reduced system is solved by cyclic
reduction (Goddeke and Strzodka, "Cyclic reduction tridiagonal solvers on GPUs applied to mixed
precision multigrid", section 3).

The GPU kernel solves one system per thread block and reads every coefficient once, so that it runs
near the memory bandwidth on batches too large for the L2 cache:

1. The block copies the system's four arrays into shared memory (coalesced, asynchronous copies:
   all of a block's loads are in flight at once).
2. The system is cut into chunks of S - 1 unknowns, each followed by one separator unknown, one
   chunk a thread (S odd, about (n + 1) / threads). Each thread eliminates inside its chunk in
   registers, down and then up (the Thomas algorithm carried along with the two separators around
   the chunk), so that every unknown of the chunk is x_k = g_k - u_k x_left - v_k x_right.
3. Substituting these into the separators' own equations leaves a tridiagonal system of the
   separators, which one warp solves: each lane eliminates inside a few consecutive separators the
   same way, and parallel cyclic reduction solves the one equation a lane that remains (log2 32
   steps, each eliminating the couplings at the current stride in every equation at once, the
   neighbours exchanged by warp shuffles).
4. Each thread substitutes the separators into its chunk, and the block writes the solution out
   coalesced.

This is the paper's cyclic reduction turned around for a bandwidth-bound GPU: its first
reduction levels, the ones that touch every unknown, are replaced by the chunk eliminations
(sequential in each thread, so no synchronisation and no shared-memory traffic per level), and
only the system of the separators, 1/S of the unknowns, is left to the parallel reduction. The
odd stride keeps the threads' side-by-side walks over their chunks on distinct shared-memory
banks (the role of the paper's even/odd layout). benchmarks/tridiag.py measures its share of
the copy bandwidth against the paper's scheme (one reduction level in registers, the rest in
shared memory) and cuSPARSE.

The system takes 4 n words of dynamic shared memory, above 48 KB (n > 1536 in double) through the
opt-in limit; systems longer than that limit allows fall back to the Thomas algorithm. No
pivoting: the systems of the line smoothers are diagonally dominant (they come from M-matrix
stencils).
"""
import functools

import numpy

from .. import backend, kernels


def thomas(lower, diag, upper, rhs, xp):
    """Solve the tridiagonal systems along the last axis (batched over the others); lower[..., 0]
    and upper[..., -1] are ignored."""
    n = diag.shape[-1]
    c = xp.empty_like(diag)
    d = xp.empty_like(rhs)
    c[..., 0] = upper[..., 0] / diag[..., 0]
    d[..., 0] = rhs[..., 0] / diag[..., 0]
    for i in range(1, n):
        m = diag[..., i] - lower[..., i] * c[..., i - 1]
        c[..., i] = upper[..., i] / m
        d[..., i] = (rhs[..., i] - lower[..., i] * d[..., i - 1]) / m
    for i in range(n - 2, -1, -1):
        d[..., i] -= c[..., i] * d[..., i + 1]
    return d


_STATIC_LIMIT = 48 * 1024
_OPT_IN_LIMIT = 227 * 1024       # Hopper's largest dynamic shared memory a block can ask for


@functools.lru_cache(maxsize=None)
def _partition_kernel(ctype, threads, stride, couplings=-1):
    return kernels.kernel("tridiag", "partition_solve", VALUE=ctype, THREADS_PER_SYSTEM=threads,
                          CHUNK_STRIDE=stride, COUPLINGS=couplings)


def _layout(n, threads, itemsize):
    """The chunk stride S (odd, so that threads walking their chunks side by side in shared memory
    hit distinct banks) and the dynamic shared memory for systems of n unknowns."""
    stride = max(2, -(-(n + 1) // threads))
    stride += 1 - stride % 2
    return stride, 4 * max(n, 7 * threads) * itemsize


def _lines(a, n):
    """(array, system stride, element stride) of a CuPy array of systems along its last axis,
    strides in elements, or None where its systems are not evenly spaced."""
    if a.ndim == 1:
        return a, 0, a.strides[0] // a.itemsize
    if a.ndim > 2:
        if not a.flags.c_contiguous:
            return None
        a = a.reshape(-1, n)
    if any(st % a.itemsize for st in a.strides):
        return None
    return a, a.strides[0] // a.itemsize, a.strides[1] // a.itemsize


def _threads(n, threads):
    if threads is None:   # about 11 unknowns a thread (benchmarks/tridiag.py compares the choices)
        threads = min(256, 32 * -(-(n + 1) // (11 * 32)))
    if threads % 32 or not 32 <= threads <= 256:
        raise ValueError(f"cyclic_reduction: threads={threads} is not a multiple of 32 from 32 to 256")
    return threads


def _relax(out, y, omega):
    """out <- out + omega (y - out), y itself where omega is 1."""
    out[...] = y if omega == 1.0 else out + omega * (y - out)
    return out


def fits(n, dtype, threads=None):
    """Whether the GPU kernel takes systems of n unknowns in shared memory (at ``threads``, by
    default its default); longer ones go through the Thomas algorithm."""
    return _layout(n, _threads(n, threads), numpy.dtype(dtype).itemsize)[1] <= _OPT_IN_LIMIT


def _launch(coefs, n, batch, threads, rhs, x, omega, stencil=None):
    """The partition kernel on systems with contiguous coefficients ``coefs``; rhs and x are
    (array, system stride, element stride); ``stencil``: (coefficient pointers, c0, c_sys, c_elem,
    shifts in u, their count) for right-hand sides made from the grid (see the kernel)."""
    dtype = numpy.dtype(coefs[0].dtype)
    stride, shared = _layout(n, threads, dtype.itemsize)
    kernel = _partition_kernel(kernels.CTYPES[dtype], threads, stride, -1 if stencil is None else int(stencil[-1]))
    if shared > _STATIC_LIMIT:
        kernel.max_dynamic_shared_size_bytes = shared
    ptrs, c0, c_sys, c_elem, shifts, count = stencil or (numpy.uint64(0), 0, 0, 0, numpy.uint64(0), 0)
    i64 = numpy.int64
    kernel((batch,), (threads,), (numpy.int32(n), *coefs, rhs[0], i64(rhs[1]), i64(rhs[2]), x[0], i64(x[1]),
                                  i64(x[2]), dtype.type(omega), ptrs, i64(c0), i64(c_sys), i64(c_elem), shifts),
           shared_mem=shared)


def cyclic_reduction(lower, diag, upper, rhs, out=None, threads=None, omega=1.0):
    """Solve the tridiagonal systems along the last axis on the GPU (CuPy arrays, float32 or
    float64). One thread block of ``threads`` per system (a multiple of 32 up to 256; by default
    the fewest that keep the chunks at 10 unknowns or fewer). ``rhs`` and ``out`` may be strided
    views (a line smoother's lines of a grid, no copies); with ``omega`` != 1 the solution y
    relaxes ``out`` in place: out + omega (y - out)."""
    cp = backend.cupy
    dtype = numpy.dtype(diag.dtype)
    n = diag.shape[-1]
    coefs = [cp.ascontiguousarray(a, dtype=dtype) for a in (lower, diag, upper)]
    if out is None:
        out = cp.empty(rhs.shape, dtype)
    batch = diag.size // n if n else 0
    if batch == 0:
        return out
    threads = _threads(n, threads)
    r = _lines(rhs, n) if rhs.dtype == dtype else None
    if r is None:
        r = _lines(cp.ascontiguousarray(rhs, dtype=dtype), n)
    x = _lines(out, n) if out.dtype == dtype else None
    if not fits(n, dtype, threads):
        return _relax(out, thomas(*coefs, r[0].reshape(rhs.shape), cp), omega)
    if x is None:               # out not evenly strided: solve into a new array, then copy
        return _relax(out, cyclic_reduction(*coefs, r[0].reshape(rhs.shape), threads=threads), omega)
    _launch(coefs, n, batch, threads, r, x, omega)
    return out


def relax_lines(lower, diag, upper, f, coefs, shifts, u, omega=1.0):
    """One colour of a line smoother on the GPU in one kernel: the right-hand sides
    f - sum_k coefs[k] u(+ shifts[k]) made for the lines solved, the solutions relaxing ``u``
    in place. ``f``, ``u`` and the coefficient arrays are seen as (lines, n) views of one
    selection, each with its own strides (u: of the padded grid, whose neighbours ``shifts``
    (device int64, in elements) reach); lower, diag, upper are contiguous. ``coefs`` is (device
    uint64 array of the coefficient arrays' addresses, one of those arrays, and its (lines, n)
    view: where the selection starts in it, and its strides)."""
    ptrs, array, view = coefs
    n = diag.shape[-1]
    batch = diag.size // n
    if batch == 0:
        return u
    c0 = (view.data.ptr - array.data.ptr) // view.itemsize
    _launch([lower, diag, upper], n, batch, _threads(n, None), _lines(f, n), _lines(u, n), omega,
            (ptrs, c0, *_lines(view, n)[1:], shifts, shifts.size))
    return u


def solve(lower, diag, upper, rhs, xp, out=None, omega=1.0):
    """The batched solve on ``xp``: the partition kernel on the GPU, Thomas on the host. With
    ``out``, the solution y relaxes it in place (out + omega (y - out), y itself where omega is 1)
    and ``out`` is returned."""
    if backend.is_gpu(xp) and numpy.dtype(diag.dtype).name in ("float64", "float32"):
        return cyclic_reduction(lower, diag, upper, rhs, out=out, omega=omega)
    y = thomas(lower, diag, upper, rhs, xp)
    return y if out is None else _relax(out, y, omega)
