"""The cycle of the CSR hierarchies: V, W and F cycles, with the K-cycle as a coarse-correction
strategy, over one level type (``CSRLevel``).

Used by aggregation AMG (kcycle.AggregationMG: Wang, Hu, Cohen, Xu, "A parallel auxiliary grid
algebraic multigrid method for graphic processing units", Algorithms 2.1 and 2.2; the K-cycle of
Notay and Vassilevski) and by the shifted-Laplace multigrid on CSR levels (slmg.ShiftedLaplaceMG;
Erlangga, Oosterlee and Vuik). Level 0 is the finest; the last level is solved by ``coarse``.

B_k f (Algorithm 2.2): from u = 0, ``pre`` sweeps of the level's smoother, the restricted residual
r = R (f - A u), the coarse correction C_{k+1} r added through P, ``post`` sweeps (in reverse
order). The coarse correction of a residual r on level k:

- V: B_k r;
- W: e = B_k r, then e += B_k (r - A_k e) (the second cycle run from e as its first guess: the
  same for a linear cycle); from level ``v_from`` on, V (the GPU's levels there cost launch
  latency, not work, per visit);
- F: as W, the second visit a V-cycle (the F passes on to the first visit);
- K: ``kcycle_its`` steps of flexible CG on level k preconditioned by B_k (Algorithm 2.1); from
  level ``v_from`` on, V (a truncated K-cycle: the flexible CG above the truncation makes up for
  the V-cycles below it, where a doubling cycle would cost launch latency, not work, on the GPU);

and on the coarsest level the coarse solve, visited again by W and F only with
``revisit_coarsest`` (an inexact coarsest solve gains from the second visit).

Over-correction (``overcorrection`` alpha, on the levels a W-cycle visits): u += alpha P C_{k+1} r.
A piecewise-constant prolongation leaves the coarse correction too short in energy, and a fixed
alpha in (1, 2) lengthens it (Blaheta, "A multilevel method with overcorrection by aggregation for
solving discrete elliptic problems", J. Comput. Appl. Math. 24, 1988; Braess, "Towards algebraic
multigrid for elliptic problems of second order", Computing 55, 1995). The cycle stays
a symmetric positive definite preconditioner for a symmetric positive definite A and symmetric
smoothing where every coarse correction C it scales has eigenvalues of C A_{k+1} in (0, 1]: then
I - alpha P C P^T A_k has eigenvalues in (1 - alpha, 1], an A-norm nonexpansion for alpha < 2.
The W-cycle's coarse correction squares its error propagator E (E^2, eigenvalues in [0, 1) when
the coarser cycle converges), the V-cycles below the truncation take alpha = 1 (E a product of
contractions and a projection, eigenvalues in [0, 1)), and the coarse solve is exact; so no level
scales a correction that another scaling lengthened beyond A_{k+1}^-1. (A V-cycle scaled on
every level can overshoot: alpha 1.8 made CG fail on a P1 mesh.)

Each step makes new arrays; nothing waits for the host (the flexible CG's inner products stay 0-d
device arrays), so on the GPU a cycle is captured and replayed as a CUDA graph. The geometric
hierarchy (multigrid.Multigrid) runs the same V/W/F recursion in place on its preallocated padded
level arrays, which its ghost updates and fused kernels need.
"""
from .. import backend
from . import products, sparse

KINDS = ("v", "w", "f", "k")


def second_visit(kind):
    """The kind of the second visit a cycle of ``kind`` makes to the next coarser level, the first
    being of ``kind`` itself: W another W, F a V; V and K none. Both cycle drivers (Cycle here,
    multigrid.Multigrid's in-place one) recurse by it."""
    return {"w": "w", "f": "v"}.get(kind)


class CSRLevel:
    """One level of a CSR hierarchy. ``A``: its matrix (this rank's rows on several ranks:
    ``rows``, a distributed.Rows, then holds the ghost exchange); ``M``: the storage its products
    use (A itself, or ELL); the transfers to the next level: ``R`` (CSR) and ``P`` (CSR) or ``agg``
    (aggregates: P piecewise constant, P[i, agg[i]] = 1 or ``sign[i]``, never formed);
    ``smoother``. The coarsest level has no transfers and no smoother."""

    def __init__(self, A, xp, M=None, R=None, P=None, agg=None, smoother=None, rows=None, sign=None):
        self.A, self.xp, self.rows = A, xp, rows
        self.M = A if M is None else M
        self.R, self.P, self.agg, self.sign, self.smoother = R, P, agg, sign, smoother
        self.n = A.shape[0]

    @property
    def storage(self):
        return f"ELL (width {self.M.width})" if isinstance(self.M, sparse.ELL) else "CSR"

    def spmv(self, x):
        return self.rows.spmv(x) if self.rows else products.spmv(self.M, x, self.xp)

    def residual(self, f, x):
        return self.rows.residual(f, x) if self.rows else products.residual(self.M, f, x, self.xp)

    def restrict(self, r):
        return products.spmv(self.R, r, self.xp)

    def restricted_residual(self, f, u, out=None):
        """R (f - A u) (in ``out`` where given): one product on the GPU
        (products.restricted_residual) in serial."""
        if self.rows:
            r = self.restrict(self.rows.residual(f, u))
            if out is None:
                return r
            out[...] = r
            return out
        return products.restricted_residual(self.R, self.M, f, u, self.xp, out=out)

    def correct_and_smooth(self, u, e, scale, f, sweeps):
        """u + scale P e, then ``sweeps`` post-sweeps (in reverse order): where the smoother takes
        the prolongation into its first sweep (l1-Jacobi's smooth_prolonged), one product fewer."""
        if self.agg is not None and self.rows is None and hasattr(self.smoother, "smooth_prolonged"):
            return self.smoother.smooth_prolonged(u, e, self.agg, self.sign, scale, f, sweeps)
        self.prolong_add(u, e, scale)
        return self.smoother.smooth(u, f, sweeps, reverse=True)

    def transposed(self):
        """This level of the transposed cycle (Cycle.transposed): A^T (on several ranks its rows,
        distributed.Rows.transposed, collective), the same transfers (R = P^T: P' = R^T = P and
        R' = P^T = R), the smoother's transpose."""
        rows = self.rows.transposed() if self.rows else None
        AT = rows.own if rows else self.A.T.tocsr()
        MT = sparse.astype(sparse.storage(AT, self.xp, isinstance(self.M, sparse.ELL)), self.M.dtype)
        smoother = self.smoother.transposed(AT, MT, rows) if self.smoother is not None else None
        return CSRLevel(AT, self.xp, MT, R=self.R, P=self.P, agg=self.agg, sign=self.sign, smoother=smoother, rows=rows)

    def prolong_add(self, u, e, scale=1.0):
        """u += scale P e."""
        if self.agg is not None:
            products.prolong_add(u, e, self.agg, self.sign, scale)
        else:
            u += products.spmv(self.P, e if scale == 1 else scale * e, self.xp)
        return u


class Cycle:
    """B_0 and the coarse correction C_0 of ``levels`` (CSRLevel) with the coarsest solve
    ``coarse`` (``solve(f)`` -> an array, which may be the solve's own, valid until its next
    call). ``dots(*pairs)``: the K-cycle's inner products of the pairs (a, b), a sequence of 0-d
    arrays or scalars (global sums on several ranks, all pairs in one exchange)."""

    def __init__(self, levels, coarse, kind, pre, post, xp, dots=None, kcycle_its=2, revisit_coarsest=False,
                 v_from=None, overcorrection=1.0):
        if kind not in KINDS:
            raise ValueError(f"unknown cycle {kind!r} ({', '.join(KINDS)})")
        self.levels, self.coarse, self.kind, self.pre, self.post, self.xp = levels, coarse, kind, pre, post, xp
        self.dots = dots or (lambda *pairs: products.dots(pairs, xp))
        self.kcycle_its, self.revisit_coarsest = kcycle_its, revisit_coarsest
        self.v_from = len(levels) if v_from is None else v_from
        self.overcorrection = overcorrection
        # a doubling cycle's coarse visits, captured once each (backend.Subgraphs)
        self.subgraphs = backend.Subgraphs() if backend.is_gpu(xp) and kind != "v" else None

    def free(self):
        """Release the shared coarse visits' graphs and memory now."""
        if self.subgraphs is not None:
            self.subgraphs.free()

    def transposed(self):
        """The cycle B^T of the linear cycles (V, W, F; the K-cycle is nonlinear and has none):
        with E = S_post (I - P C R A) S_pre the error propagator, B = (I - E) A^-1, and
        B^T = (I - E') A^-T where E' = A^-T E^T A^T is the same cycle on A^T with P' = R^T,
        R' = P^T (the same transfers: a Galerkin hierarchy's R is P^T), C' = C^T and the
        smoothers transposed, the post-smoother's transpose first:
        the transpose of level k's cycle is the cycle of the transposed levels, ``post``
        pre-sweeps and ``pre`` post-sweeps (PCApplyTranspose: KSPSolveTranspose, bicg)."""
        if self.kind == "k":
            raise ValueError("the K-cycle is nonlinear: it has no transpose")
        levels = [lev.transposed() for lev in self.levels]
        last = levels[-1]         # the coarse solve's matrix, A_c^T, made only where it factors it
        coarse = self.coarse.transposed(lambda: last.rows.gathered() if last.rows else last.A)
        return Cycle(levels, coarse, self.kind, self.post, self.pre, self.xp, self.dots, self.kcycle_its,
                     self.revisit_coarsest, self.v_from, self.overcorrection)

    def __call__(self, f):
        """B_0 f: one cycle from u = 0 (a new array)."""
        return self.apply(0, f, self.kind)

    def correction(self, f):
        """C_0 f: what the cycle of a finer level gets from this hierarchy's finest level for the
        restricted residual f (the levels a distributed hierarchy gathered)."""
        return self.coarse_correction(0, f, self.kind)

    def apply(self, k, f, kind, u=None):
        """B_k f (Algorithm 2.2); from the first guess ``u`` (taken over) u + B_k (f - A_k u)."""
        if k == len(self.levels) - 1:
            # the coarse solve may return an array of its own that its next solve overwrites:
            # read before then within a cycle, copied where it is the cycle's result
            e = self.coarse.solve(f)
            return e.copy() if k == 0 else e
        lev = self.levels[k]
        if u is not None:
            u = lev.smoother.smooth(u, f, self.pre)
        else:   # the smoother's zero first guess sets u
            u = self.xp.empty_like(f) if self.pre > 0 else self.xp.zeros_like(f)
            u = lev.smoother.smooth(u, f, self.pre, zero_guess=True)
        below, shared = self._visit(k + 1, kind)
        r = lev.restricted_residual(f, u, out=self.subgraphs.input((k + 1, below)) if shared else None)
        e = self.coarse_correction(k + 1, r, kind)
        return lev.correct_and_smooth(u, e, self.overcorrection if kind == "w" else 1.0, f, self.post)

    def _visit(self, k, kind):
        """The kind of visit to level k that a ``kind`` cycle makes there (V from ``v_from`` on),
        and whether its visits are captured once for all (``subgraphs``: the levels below the
        first, which a doubling cycle visits more than once, serial, not the coarsest)."""
        if kind in ("k", "w") and k >= self.v_from:
            kind = "v"
        return kind, self.subgraphs is not None and 2 <= k < len(self.levels) - 1 and self.levels[k].rows is None

    def coarse_correction(self, k, f, kind):
        """C_k f for the residual f restricted from level k - 1; on the GPU a visit a doubling
        cycle repeats is captured once (backend.Subgraphs): its result, an array of the capture's,
        is read before the next visit to level k (correct_and_smooth)."""
        kind, shared = self._visit(k, kind)
        if shared:
            return self.subgraphs((k, kind), lambda g: self._correction(k, g, kind), f)
        return self._correction(k, f, kind)

    def _correction(self, k, f, kind):
        last = k == len(self.levels) - 1
        if kind == "k" and not last:
            return self.fcg(k, f)
        e = self.apply(k, f, kind)
        again = second_visit(kind)
        if again and not last:
            # the second visit's cycle from the first's result, e + B_k (f - A_k e) as the cycle is
            # linear: no residual and no sum of its own
            e = self.apply(k, f, again, u=e)
        elif again and self.revisit_coarsest:
            e = e.copy()                # the second solve overwrites the first's array
            e += self.apply(k, self.levels[k].residual(f, e), again)
        return e

    def fcg(self, k, f):
        """Algorithm 2.1: ``kcycle_its`` steps of flexible CG on level k preconditioned by B_k. The
        inner products stay on the device (0-d arrays), and each step's update takes its step
        length from them (products.fcg_update); a direction with (p, p)_A = 0 (the coarse residual
        already zero) gets step length 0. (p, A p) and (r, p) are taken together: one pass over
        the vectors, and one global sum for both on several ranks."""
        xp, lev = self.xp, self.levels[k]
        u, r = None, f
        ps, aps, paps = [], [], []
        for i in range(self.kcycle_its):
            p = self.apply(k, r, "k")
            for pj, apj, papj in zip(ps, aps, paps):
                products.axpy_ratio(p, self.dots((p, apj))[0], papj, pj, xp)
            ap = lev.spmv(p)
            pap, rp = self.dots((p, ap), (r, p))
            if i + 1 == self.kcycle_its:
                u = products.fcg_update(u, p, rp, pap, xp)
            else:
                u, r = products.fcg_update(u, p, rp, pap, xp, r=r, ap=ap)
                ps.append(p)
                aps.append(ap)
                paps.append(pap)
        return u
