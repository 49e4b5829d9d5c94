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
