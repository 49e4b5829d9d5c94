"""High-occupancy multigrid (HOMG; Becerra-Sagredo, Malaga, Mandujano, "A novel and scalable
multigrid algorithm for many-core architectures").

Every level lives inside the fine array: level m is the sub-grid of stride l = 2^m of the padded
grid (boundary included, 2^k + 1 points per axis, so the sub-grids nest). One *iteration* on level
m is a damped Jacobi relaxation of the stride-l points for the rediscretized operator (weights
w_a / l^2) against the restricted right-hand side f_m, followed by (bi/tri)linear interpolation of
the stride-l values to the whole grid: every iteration is whole-grid work (on the GPU one fused kernel,
``fused.homg_iterate``, as in the paper; these array expressions are its twin and the host path),
and the fine array always holds the interpolated current approximation, so the next finer level
starts from it.

The modified full multigrid cycle (MFMG) runs 2 iterations on the coarsest level (one interior
point per axis) and doubles them on each finer level up to ``max_it`` (MaxI), coarse to fine.
Restarting on the residual equation is a Richardson iteration with this cycle as preconditioner:
``-ksp_type richardson -pc_gmg_cycle homg`` in PETSc.

Choices the paper leaves open, documented here: its eq. (3) has the wrong sign for the relaxation
of -Laplace u = f as written (it would amplify errors); we relax u += omega D^-1 (f - A u), and it
gives no damping factor: omega = 4/5, the smoothing-optimal damping of Jacobi for the 5-point
Laplacian. The order in which its Fig. 1 revisits levels is not recoverable from the text (its
31 iterations for MaxI = 2 on 128^2 suggest more visits than the coarse-to-fine sweep here), and
we use vertex-centred 2^k + 1 grids instead of its four-subdomain power-of-two layout.
"""
import numpy

from . import fused, grid


def _restrict(c, xp):
    """Full weighting of a compact stride-l array to the stride-2l points (separable 1/4 1/2 1/4)."""
    for a in range(c.ndim):
        c = xp.moveaxis(c, a, 0)
        out = c[::2].copy()
        out[1:-1] = 0.25 * c[1:-2:2] + 0.5 * c[2:-1:2] + 0.25 * c[3::2]
        c = xp.moveaxis(out, 0, a)
    return c


def _interpolate(c, l, xp):
    """Linear interpolation of compact stride-l values to every point (separable, whole grid)."""
    w = xp.arange(l, dtype=c.dtype) / l
    for a in range(c.ndim):
        c = xp.moveaxis(c, a, -1)
        fine = (c[..., :-1, None] * (1 - w) + c[..., 1:, None] * w).reshape(c.shape[:-1] + (-1,))
        c = xp.moveaxis(xp.concatenate([fine, c[..., -1:]], axis=-1), -1, a)
    return c


class HOMG:
    """One MFMG cycle as the solver of the DMDA preconditioners (interface of multigrid.Multigrid).
    ``fused_kernel=False`` keeps the array expressions on the GPU too (the twin, in the tests)."""

    def __init__(self, op, weights, max_it=32, omega=0.8, fused_kernel=True):
        box = op.box
        if box.shape != box.global_shape:
            raise ValueError("HOMG runs on one rank")
        ks = [numpy.log2(n + 1) for n in box.shape]
        if any(k != int(k) or k < 2 for k in ks):
            raise ValueError("HOMG needs 2^k - 1 interior points per axis (2^k + 1 with the boundary), "
                             f"got {box.shape}")
        self.box, self.xp, self.dtype = box, op.xp, op.dtype
        self.weights, self.diag = [float(w) for w in weights], float(op.diag)
        self.max_it, self.omega = max_it, omega
        self.levels_count = int(min(ks))            # strides 1 .. 2^(k-1)
        self.u = self.xp.zeros(box.padded_shape, self.dtype)
        self.coarsest_rhs = self.xp.zeros(1, self.dtype)
        # on the GPU one fused kernel per iteration (the paper's design) into a second whole grid
        self.fused = fused_kernel and fused.supported(self.xp, self.dtype)
        self._other = self.xp.zeros(box.padded_shape, self.dtype) if self.fused else None

    @property
    def fine_box(self):
        return self.box

    def iterations(self):
        """Iterations per level, coarsest first."""
        its, out = 2, []
        for _ in range(self.levels_count):
            out.append(its)
            its = min(2 * its, self.max_it)
        return out

    def cycle(self, f, u=None, kind=None):
        """u = MFMG(f) from a zero initial guess."""
        xp = self.xp
        fs = [xp.zeros(self.box.padded_shape, self.dtype)]
        grid.interior(fs[0])[...] = f
        for _ in range(self.levels_count - 1):
            fs.append(_restrict(fs[-1], xp))
        self.coarsest_rhs = fs[-1]
        if self.fused:
            return self._fused_cycle(fs)
        u = xp.zeros(self.box.padded_shape, self.dtype)
        for m, its in zip(range(self.levels_count - 1, -1, -1), self.iterations()):
            l = 2 ** m
            sub = tuple(slice(None, None, l) for _ in range(u.ndim))
            scale = self.omega * l * l / self.diag           # omega D_l^-1, D_l = diag / l^2
            for _ in range(its):
                v = u[sub].copy()
                vi = grid.interior(v)
                au = self.diag * vi
                for a, w in enumerate(self.weights):
                    lo = tuple(slice(0, -2) if b == a else slice(1, -1) for b in range(v.ndim))
                    hi = tuple(slice(2, None) if b == a else slice(1, -1) for b in range(v.ndim))
                    au = au + w * (v[lo] + v[hi])
                vi += scale * (grid.interior(fs[m]) - au / (l * l))
                u = _interpolate(v, l, xp) if l > 1 else v
        self.u[...] = u
        return self.u

    def _fused_cycle(self, fs):
        u, other = self.u, self._other
        u[...] = 0
        for m, its in zip(range(self.levels_count - 1, -1, -1), self.iterations()):
            l = 2 ** m
            scale = self.omega * l * l / self.diag
            f = fs[m] if fs[m].flags.c_contiguous else self.xp.ascontiguousarray(fs[m])
            for _ in range(its):
                fused.homg_iteration(other, u, f, l, self.weights, self.diag, scale)
                u, other = other, u
        if u is not self.u:
            self.u[...] = u
        return self.u

    def memory_values(self):
        return (3 if self.fused else 2) * self.u.size

    def operator_complexity(self):
        return 1.0

    def describe(self):
        kernel = "one fused kernel per iteration" if self.fused else "array expressions"
        return [f"HOMG modified full multigrid cycle ({kernel}), {self.levels_count} nested levels inside the "
                "fine array, "
                f"iterations per level (coarsest first) {self.iterations()}, damped Jacobi omega {self.omega:g}"]
