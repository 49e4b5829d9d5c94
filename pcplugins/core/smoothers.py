"""Smoothers on one level: multicolour Gauss-Seidel, weighted Jacobi and Chebyshev.

Each smoother improves ``u`` (padded, ghosts current on entry) for ``A u = f`` in place.
``exchange(u)`` refreshes the ghost halo of ``u``: a DMDA ghost update under MPI, nothing in
serial. It is called after every colour, so the colours are global and the iterates do not depend
on the number of ranks. ``reverse=True`` runs the colours in the opposite order: the
post-smoother reverses the pre-smoother, which keeps the V-cycle symmetric (CG needs that).
``zero_guess=True`` starts from u = 0 whatever ``u`` holds (fused.py saves a pass with it).

- Multicolour GS (Feng, Shu, Xu, Zhang, section 3): 'redblack' (2 colours, star stencils),
  'multicolor' (4 colours in 2D, 8 in 3D: valid for box stencils too). ``omega`` != 1 gives SOR.
- Weighted Jacobi: u += omega D^-1 (f - A u).
- Chebyshev (Adams, Brezina, Hu, Tuminaro 2003): polynomial in D^-1 A on [a, b] with
  b = 1.1 lambda_max and a = b / 10 (PETSc's defaults for multigrid smoothing); lambda_max from
  power iterations during setup.
"""
import numpy

from .. import backend
from . import fused, grid, kernels, lines, sparse


def _noop(u):
    return u


class ColourGS:
    def __init__(self, op, kind="multicolor", omega=1.0):
        self.op, self.omega, self.kind = op, omega, kind
        self.colours = grid.colours(op.box, kind)
        self._lat = [[(lat, op.diag_on(lat), op.invdiag_on(lat)) for lat in col] for col in self.colours]

    def smooth(self, u, f, sweeps, exchange=_noop, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        cols = self._lat[::-1] if reverse else self._lat
        op = self.op
        for _ in range(sweeps):
            for col in cols:
                for lat, cd, invd in col:
                    cs, us = op.terms(u, lat, skip_diag=True)
                    kernels.relax(grid.view(u, lat, padded=True), grid.view(f, lat), invd,
                                  self.omega, cd, cs, us)
                exchange(u)
        return u

    def describe(self):
        n = len(self.colours)
        name = "red-black" if self.kind == "redblack" else f"{n}-colour"
        w = "" if self.omega == 1.0 else f", omega {self.omega:g}"
        return f"{name} Gauss-Seidel{w}"


class Jacobi:
    def __init__(self, op, omega=2.0 / 3.0):
        self.op, self.omega = op, omega
        self.r = op.xp.zeros(op.box.shape, op.dtype)

    def smooth(self, u, f, sweeps, exchange=_noop, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        ui = grid.interior(u)
        for _ in range(sweeps):
            self.op.residual(self.r, f, u)
            kernels.relax(ui, self.r, self.op.invdiag, self.omega, 0.0, [], [])
            exchange(u)
        return u

    def describe(self):
        return f"weighted Jacobi, omega {self.omega:g}"


def make(kind, op, omega=None, fused_level=None, scratch=None, exchange=_noop, dot=None):
    """The smoother ``kind`` (multigrid.SMOOTHERS) of a stencil level ``op``: the one factory of
    the geometric hierarchy. ``omega`` None: 1 for Gauss-Seidel and lines, 2/3 for Jacobi;
    ``fused_level``: the level's fused.Laplacian where the fast path applies (red-black then runs
    fused, ``scratch`` a padded work array that lets it sweep both colours in one pass);
    ``exchange`` and ``dot`` (a global inner product) for Chebyshev's eigenvalue estimate."""
    gs_omega = 1.0 if omega is None else omega
    if fused_level is not None and kind == "redblack":
        return fused.RedBlack(fused_level, gs_omega, scratch=scratch)
    if kind in ("redblack", "multicolor"):
        if kind == "redblack" and any(sum(abs(v) for v in o) > 1 for o in op.offsets):
            kind = "multicolor"   # red-black is not a valid colouring of a box stencil
        return ColourGS(op, kind, gs_omega)
    if kind.startswith("line_") or kind == "adi":
        d = op.box.dim
        if kind == "adi":
            axes = tuple(range(d))[::-1]                     # x lines first
        else:
            axis = d - 1 - "xyz".index(kind[-1])             # array axis of the named direction
            if axis < 0:
                raise ValueError(f"smoother {kind} needs a {d + 1}D grid")
            axes = (axis,)
        return lines.LineGS(op, axes, gs_omega)
    if kind == "jacobi":
        return Jacobi(op, 2.0 / 3.0 if omega is None else omega)
    return Chebyshev(op, estimate_lambda_max(op, exchange, dot))


def estimate_lambda_max(op, exchange=_noop, dot=None, its=12):
    """Largest eigenvalue of D^-1 A: the largest Ritz value of ``its`` Jacobi-preconditioned CG
    steps (the Lanczos tridiagonal from CG's coefficients). The right-hand side is a fixed
    pseudo-random function of global indices, so every rank count gives the same estimate."""
    xp, box = op.xp, op.box
    dot = dot or (lambda a, b: float(xp.vdot(a, b)))
    g = 0.0
    for a, (s, n) in enumerate(zip(box.start, box.shape)):
        sh = [1] * box.dim
        sh[a] = n
        g = g + (numpy.arange(s, s + n, dtype=float) * (12.9898 + 65.233 * a)).reshape(sh)
    b = numpy.sin(g) * 43758.5453
    b = xp.asarray(numpy.broadcast_to(b - numpy.floor(b) - 0.5, box.shape))
    p = xp.zeros(box.padded_shape, op.dtype)
    q = xp.zeros(box.shape, op.dtype)
    zero = xp.zeros(box.shape, op.dtype)
    r = b.astype(op.dtype)
    z = r * op.invdiag
    grid.interior(p)[...] = z
    rz = dot(r, z)
    alphas, betas = [], []
    for _ in range(its):
        exchange(p)
        op.residual(q, zero, p)
        q *= -1.0                       # q = A p
        pq = dot(grid.interior(p), q)
        if pq <= 0.0 or rz <= 0.0:
            break
        alpha = rz / pq
        r -= alpha * q
        z = r * op.invdiag
        rz_new = dot(r, z)
        beta = rz_new / rz
        alphas.append(alpha)
        betas.append(beta)
        rz = rz_new
        grid.interior(p)[...] = z + beta * grid.interior(p)
    k = len(alphas)
    if k == 0:
        return 1.0
    T = numpy.zeros((k, k))
    for j in range(k):
        T[j, j] = 1.0 / alphas[j] + (betas[j - 1] / alphas[j - 1] if j > 0 else 0.0)
        if j + 1 < k:
            T[j, j + 1] = T[j + 1, j] = betas[j] ** 0.5 / alphas[j]
    return float(numpy.linalg.eigvalsh(T)[-1])


def chebyshev_steps(a, b, sweeps):
    """The Chebyshev iteration's coefficients on [a, b] (Saad, Iterative Methods, Algorithm 12.1,
    preconditioned by D): for each sweep (c_d, c_r) with d <- c_d d + c_r D^-1 r and u <- u + d,
    r the residual before the sweep; the first sweep has c_d = 0. Both Chebyshev smoothers (the
    stencil levels' and the CSR levels') take their recurrence from here."""
    if sweeps < 1:
        return
    theta, delta = (b + a) / 2, (b - a) / 2
    sigma = theta / delta
    rho = 1.0 / sigma
    yield 0.0, 1.0 / theta
    for _ in range(sweeps - 1):
        rho_new = 1.0 / (2.0 * sigma - rho)
        yield rho_new * rho, 2.0 * rho_new / delta
        rho = rho_new


class Chebyshev:
    def __init__(self, op, lambda_max, ratio=0.1, safety=1.1):
        self.op = op
        self.b = safety * lambda_max
        self.a = ratio * self.b
        self.r = op.xp.zeros(op.box.shape, op.dtype)
        self.d = op.xp.zeros(op.box.shape, op.dtype)

    def smooth(self, u, f, sweeps, exchange=_noop, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        op, r, d = self.op, self.r, self.d
        ui = grid.interior(u)
        for k, (c_d, c_r) in enumerate(chebyshev_steps(self.a, self.b, sweeps)):
            op.residual(r, f, u)
            if k == 0:
                d[...] = 0
            else:
                d *= c_d
            kernels.relax(d, r, op.invdiag, c_r, 0.0, [], [])          # d += c_r D^-1 r
            ui += d
            exchange(u)
        return u

    def describe(self):
        return f"Chebyshev on [{self.a:.3g}, {self.b:.3g}] (Jacobi-preconditioned)"


# -- on CSR matrices (pcplugins.AMG) -------------------------------------------------------------------
# These work on 1-D arrays and a SciPy/cupyx CSR matrix A. ``M``: the same matrix as the sweeps
# multiply by it (sparse.storage: ELL on the aux grid's coarse levels), A when not given; the
# set-up analysis stays on the CSR matrix.

class CSRColourGS:
    """Gauss-Seidel by colours: the unknowns of one colour are updated together,
    u_c += omega (f - A u)_c / D_c. D is the diagonal plus the absolute couplings to other unknowns
    of the same colour (the l1 idea of Baker, Falgout, Kolev, Yang 2011): with a proper colouring
    that is plain Gauss-Seidel; with the aux grid's aggregate colouring (vertices of one cell share
    a colour, Wang, Hu, Cohen, Xu section 4.5) it stays convergent for any SPD matrix.
    ``extra``: more to add to D (CSRHybrid's couplings to other ranks)."""

    def __init__(self, A, colours, xp, omega=1.0, extra=None, M=None):
        self.A, self.xp, self.omega = A, xp, omega
        rows, cols = sparse.rows_of(A, xp), A.indices
        same = (colours[rows] == colours[cols]) & (rows != cols)
        D = A.diagonal() + xp.bincount(rows[same], weights=xp.abs(A.data[same]), minlength=A.shape[0])
        if extra is not None:
            D = D + extra
        self.ncolours = int(colours.max()) + 1
        self.parts = []
        for c in range(self.ncolours):
            idx = xp.nonzero(colours == c)[0].astype(numpy.int32)
            if idx.size:
                self.parts.append((idx, (A if M is None else M)[idx], (omega / D[idx]).astype(A.dtype)))
        self.proper = not backend.any_true(same)

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        parts = self.parts[::-1] if reverse else self.parts
        for _ in range(sweeps):
            for idx, Ac, invd in parts:
                sparse.relax_rows(u, f, Ac, idx, invd, self.xp, independent=self.proper)
        return u

    def describe(self):
        kind = "Gauss-Seidel" if self.proper else "l1 Gauss-Seidel (same-colour couplings in the diagonal)"
        w = "" if self.omega == 1.0 else f", omega {self.omega:g}"
        return f"{self.ncolours}-colour {kind}{w}"


class CSRL1Jacobi:
    """u += (f - A u) / l1, with l1 the row sums of |a_ij|: convergent for any SPD matrix.
    ``extra``: more to add to l1 (CSRHybrid's couplings to other ranks)."""

    def __init__(self, A, xp, extra=None, M=None):
        l1 = sparse.l1_norms(A, xp)
        self.A, self.xp, self.inv = A if M is None else M, xp, 1.0 / (l1 if extra is None else l1 + extra)

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        for _ in range(sweeps):
            u += self.inv * sparse.residual(self.A, f, u, self.xp)
        return u

    def describe(self):
        return "l1-Jacobi"


class CSRHybrid:
    """A CSR smoother of this rank's rows of a distributed matrix (distributed.Rows): the values
    other ranks own are exchanged once per sweep and held fixed during it, so within a rank it is
    ``inner`` (Gauss-Seidel or l1-Jacobi), across ranks Jacobi: the hybrid smoother of Baker,
    Falgout, Kolev and Yang (2011). ``inner`` must be built with the row sums of |a_ij| over the
    other ranks' columns in its diagonal (Rows.ghost_l1), their l1 smoothers, which stay
    convergent for any SPD matrix whatever the number of ranks."""

    def __init__(self, inner, A):
        self.inner, self.A = inner, A

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        for s in range(sweeps):
            first = zero_guess and s == 0           # every rank starts from zero: no exchange
            g = f if first else f - self.A.off_rank(u)
            self.inner.smooth(u, g, 1, reverse=reverse, zero_guess=first)
        return u

    def describe(self):
        return f"hybrid {self.inner.describe()} (Jacobi across ranks, one exchange per sweep)"


class CSRChebyshev:
    """Chebyshev polynomial in D^-1 A on [b/10, b], b = 1.1 lambda_max (as ``Chebyshev``);
    lambda_max from power iterations in setup. ``rows``: the distributed.Rows A belongs to on
    several ranks; the polynomial is then the global one (an exchange per product, global norms)."""

    def __init__(self, A, xp, its=15, rows=None, M=None):
        self.A, self.xp, self.rows = A if M is None else M, xp, rows
        self.invd = 1.0 / A.diagonal()
        first = int(rows.starts[rows.comm.rank]) if rows else 0
        v = xp.asarray(numpy.sin((first + numpy.arange(A.shape[0])) * 12.9898) + 1.5)
        norm = (lambda x: float(xp.linalg.norm(x))) if rows is None else \
            (lambda x: float(rows.comm.allsum(float(xp.vdot(x, x)))) ** 0.5)
        lam = 1.0
        for _ in range(its):
            w = self.invd * (rows.spmv(v) if rows else A @ v)
            nw = norm(w)                  # a global sum on several ranks: once per iteration
            lam = nw / norm(v)
            v = w / nw
        self.b = 1.1 * lam
        self.a = 0.1 * self.b

    def _residual(self, f, u):
        return self.rows.residual(f, u) if self.rows else sparse.residual(self.A, f, u, self.xp)

    def smooth(self, u, f, sweeps, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        d = None
        for c_d, c_r in chebyshev_steps(self.a, self.b, sweeps):
            r = self._residual(f, u)
            d = self.invd * r * c_r if d is None else c_d * d + c_r * self.invd * r
            u += d
        return u

    def describe(self):
        return f"Chebyshev on [{self.a:.3g}, {self.b:.3g}] (Jacobi-preconditioned)"
