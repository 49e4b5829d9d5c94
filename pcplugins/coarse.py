"""Direct solve on the coarsest level.

The coarsest operator is small (a few hundred unknowns by default), so its inverse is formed once
in setup (pseudo-inverse, which also handles a singular pure-Neumann coarse operator) and each
solve is one dense matrix-vector product on the level's device: a single GEMV launch on the GPU.
Larger coarse grids (when the grid cannot be coarsened further) use a sparse LU on the host.
"""
import numpy

from . import backend, grid, kernels

DENSE_LIMIT = 4096


class DirectSolve:
    def __init__(self, op):
        self.op = op
        self.xp = op.xp
        self.n = op.box.size
        A = op.to_scipy().toarray() if self.n <= DENSE_LIMIT else None
        if A is not None:
            self.inv = self.xp.asarray(numpy.linalg.pinv(A).astype(op.dtype))
            self.out = self.xp.zeros(self.n, op.dtype)
            self.lu = None
        else:
            import scipy.sparse.linalg
            self.inv = None
            self.lu = scipy.sparse.linalg.splu(op.to_scipy().tocsc())

    def solve(self, u, f):
        """u (padded; interior overwritten) = A^-1 f."""
        ui = grid.interior(u)
        if self.inv is not None:
            kernels.gemv(self.out, self.inv, f.reshape(-1))
            ui[...] = self.out.reshape(ui.shape)
        else:
            x = self.lu.solve(backend.to_host(f).reshape(-1).astype(numpy.float64))
            ui[...] = backend.to_namespace(x.reshape(ui.shape).astype(self.op.dtype), self.xp)
        return u

    def describe(self):
        kind = "dense inverse" if self.inv is not None else "sparse LU (host)"
        return f"direct solve ({kind}), {self.n} unknowns"


class CSRDirectSolve:
    """The coarsest level of a CSR hierarchy (pcplugins.AMG, pcplugins.ShiftedLaplace): up to
    DENSE_LIMIT unknowns the dense inverse, by LU on the level's device (the pseudo-inverse where
    LU fails: a singular, e.g. pure Neumann, coarse matrix), each solve one GEMV into a
    preallocated array (capturable in a CUDA graph); beyond, a sparse LU on the host. The inverse
    is computed in A's precision and kept in ``dtype``."""

    def __init__(self, A, xp, dtype=None):
        self.xp = xp
        self.n = A.shape[0]
        self.dtype = numpy.dtype(dtype or A.dtype)
        host = A.get() if backend.array_module(A.data) is not numpy else A
        self.inv = self.lu = None
        if self.n <= DENSE_LIMIT:
            dense = xp.asarray(host.toarray())
            try:
                inv = xp.linalg.inv(dense)
                if not bool(xp.isfinite(inv).all()):
                    raise numpy.linalg.LinAlgError("inverse not finite")
            except numpy.linalg.LinAlgError:
                inv = xp.asarray(numpy.linalg.pinv(host.toarray()))
            self.inv = inv.astype(self.dtype)
            self.out = xp.zeros(self.n, self.dtype)
        else:
            import scipy.sparse.linalg
            self.lu = scipy.sparse.linalg.splu(host.tocsc())
            self.lu_dtype = host.dtype

    def solve(self, f):
        """A^-1 f (a new array)."""
        if self.inv is not None:
            return kernels.gemv(self.out, self.inv, f).copy()
        x = self.lu.solve(backend.to_host(f).astype(self.lu_dtype))
        return backend.to_namespace(x.astype(self.dtype), self.xp)

    def describe(self):
        kind = "dense inverse" if self.inv is not None else "sparse LU (host)"
        return f"direct solve ({kind}), {self.n} unknowns"
