"""Smoothers of stencil levels: multicolour Gauss-Seidel, weighted Jacobi and Chebyshev (the
protocol: the package's docstring).

- Multicolour GS (Feng, Shu, Xu, Zhang, section 3): 'redblack' (2 colours, star stencils),
  'multicolor' (4 colours in 2D, 8 in 3D: valid for box stencils too). ``omega`` != 1 gives SOR.
- Weighted Jacobi: u += omega D^-1 (f - A u).
- Chebyshev (Adams, Brezina, Hu, Tuminaro 2003): polynomial in D^-1 A on [a, b] with
  b = 1.1 lambda_max and a = b / 10 (PETSc's defaults for multigrid smoothing); lambda_max the
  largest Ritz value of a few Jacobi-preconditioned CG steps during setup (estimate_lambda_max).
"""
import numpy

from .. import grid, kernels


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


class HostColourGS(ColourGS):
    """ColourGS on the host for stored coefficients: each colour's off-diagonal rows as one SciPy
    CSR matrix whose columns index the padded array, so a colour is one compiled product, a
    gather of f and a scatter into u, instead of two NumPy passes per term over strided
    sub-lattice views. The same smoother (iterates equal to rounding: the order of each row's
    sum); ColourGS is its reference in the tests, and the GPU's (fused_stored.StoredGS) twin."""

    def __init__(self, op, kind="multicolor", omega=1.0):
        super().__init__(op, kind, omega)
        self._made = None

    @property
    def _rows(self):
        """Per colour (CSR rows, f's and u's flat indices, 1/diagonal): made at the
        first sweep, as PETSc's MatSOR inverts its diagonal at first use."""
        if self._made is None:
            self._made = [self._colour_rows(col) for col in self.colours]
        return self._made

    def _colour_rows(self, col):
        import scipy.sparse
        op, padded = self.op, self.op.box.padded_shape
        strides = [int(numpy.prod(padded[a + 1:])) for a in range(op.box.dim)]
        off = sorted((sum(o * s for o, s in zip(off, strides)), k) for k, off in enumerate(op.offsets)
                     if k != op.kdiag)

        def gather(a):                        # the colour's values of a level array, lattice by lattice
            return numpy.concatenate([grid.view(a, lat).ravel() for lat in col] or [a[:0].ravel()])

        def flat(shape, pad):                 # the colour's flat indices into an array of ``shape``
            parts = []
            for lat in col:
                idx = numpy.zeros((1,) * len(lat), numpy.int64)
                for a, (first, step, count) in enumerate(lat):
                    axis = (first + pad + step * numpy.arange(count)) * int(numpy.prod(shape[a + 1:]))
                    idx = idx + axis.reshape((-1,) + (1,) * (len(lat) - a - 1))
                parts.append(idx.ravel())
            return numpy.concatenate(parts or [numpy.zeros(0, numpy.int64)])

        rows_f, rows_u = flat(op.box.shape, 0), flat(padded, 1)
        data = numpy.empty((rows_f.size, len(off)), op.dtype)
        for j, (_, k) in enumerate(off):
            data[:, j] = gather(op.coefs[k])
        cols = rows_u.astype(numpy.int32)[:, None] + numpy.array([d for d, _ in off], numpy.int32)
        B = scipy.sparse.csr_matrix((data.ravel(), cols.ravel(), numpy.arange(0, data.size + 1, len(off))),
                                    shape=(rows_f.size, int(numpy.prod(padded))))
        return B, rows_f, rows_u, gather(op.invdiag)

    def smooth(self, u, f, sweeps, exchange=_noop, reverse=False, zero_guess=False):
        if not u.flags.c_contiguous:                    # the products index u's memory
            return super().smooth(u, f, sweeps, exchange, reverse, zero_guess)
        if zero_guess:
            u[...] = 0
        uf, ff = u.reshape(-1), f.reshape(-1)
        rows = self._rows[::-1] if reverse else self._rows
        for _ in range(sweeps):
            for B, rows_f, rows_u, invd in rows:
                x = ff[rows_f] - B @ uf                # f - (A - D) u on the colour
                x *= invd
                if self.omega != 1.0:                  # SOR: u + omega (x - u)
                    x -= uf[rows_u]
                    x *= self.omega
                    x += uf[rows_u]
                uf[rows_u] = x
                exchange(u)
        return u

    def stored_values(self):
        """The rows' values, made or to be made: the off-diagonal coefficients, 1/diagonal and a
        row index per point."""
        return self.op.box.size * (len(self.op.offsets) + 1)


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


def lanczos_lambda_max(apply, invdiag, b, dot, its=12):
    """Largest eigenvalue of D^-1 A: the largest Ritz value of ``its`` Jacobi-preconditioned CG
    steps on A x = b (the Lanczos tridiagonal from CG's coefficients). ``apply(p)``: A p;
    ``dot``: the inner product (a global sum on several ranks, a host float). Both Chebyshev
    smoothers take their bound from here."""
    r = b.copy()
    z = r * invdiag
    p = z.copy()
    rz = dot(r, z)
    alphas, betas = [], []
    for _ in range(its):
        q = apply(p)
        pq = dot(p, q)
        if pq <= 0.0 or rz <= 0.0:
            break
        alpha = rz / pq
        r -= alpha * q
        z = r * invdiag
        rz_new = dot(r, z)
        beta = rz_new / rz
        alphas.append(alpha)
        betas.append(beta)
        rz = rz_new
        p = z + beta * p
    k = len(alphas)
    if k == 0:
        return 1.0
    T = numpy.zeros((k, k))
    for j in range(k):
        T[j, j] = 1.0 / alphas[j] + (betas[j - 1] / alphas[j - 1] if j > 0 else 0.0)
        if j + 1 < k:
            T[j, j + 1] = T[j + 1, j] = betas[j] ** 0.5 / alphas[j]
    return float(numpy.linalg.eigvalsh(T)[-1])


def probe_vector(starts, shape):
    """A fixed pseudo-random vector of global indices (``starts``: the local box's first global
    index per axis), so every rank count gives the same Lanczos estimate."""
    g = 0.0
    for a, (s, n) in enumerate(zip(starts, shape)):
        sh = [1] * len(shape)
        sh[a] = n
        g = g + (numpy.arange(s, s + n, dtype=float) * (12.9898 + 65.233 * a)).reshape(sh)
    b = numpy.sin(g) * 43758.5453
    return numpy.broadcast_to(b - numpy.floor(b) - 0.5, shape)


def estimate_lambda_max(op, exchange=_noop, dot=None, its=12):
    """lanczos_lambda_max of a stencil level: A p through the padded work array and its ghost
    update ``exchange``."""
    xp, box = op.xp, op.box
    dot = dot or (lambda a, b: float(xp.vdot(a, b)))
    pad = xp.zeros(box.padded_shape, op.dtype)
    zero = xp.zeros(box.shape, op.dtype)

    def apply(p):
        grid.interior(pad)[...] = p
        exchange(pad)
        q = xp.empty(box.shape, op.dtype)
        op.residual(q, zero, pad)
        q *= -1.0                       # q = A p
        return q

    b = xp.asarray(probe_vector(box.start, box.shape)).astype(op.dtype)
    return lanczos_lambda_max(apply, op.invdiag, b, dot, its)


# ||A - A^T||_F / ||A + A^T||_F up to which Gershgorin's bound caps Chebyshev's upper end. Upwind
# convection-diffusion has 0.16-0.2 at cell Peclet number 1 (AMG with the cap: 16-21 FGMRES
# iterations against 28-51 without) and 0.39-0.46 from Peclet 10 up (the cap: no convergence in 200)
NEAR_SYMMETRIC = 0.35


def capped_lambda_max(lam, bound, asymmetry):
    """Chebyshev's lambda_max: the Lanczos estimate ``lam`` (CG's Ritz values bound the spectrum of
    a symmetric operator only, and overshoot on a nonsymmetric one: 35x on 2D upwind convection at
    Peclet 1, so that the polynomial hardly damps the upper end), capped by Gershgorin's ``bound``
    (which holds for any operator) where the operator is nearly symmetric. Farther from symmetric
    the spectrum leaves the real axis, the interval's polynomial grows there, and the small steps
    of the overshooting interval are what keep it convergent. ``asymmetry()`` (collective where
    the others are global) is asked only where ``lam`` exceeds the bound by more than 5%."""
    return min(lam, bound) if lam <= 1.05 * bound or asymmetry() <= NEAR_SYMMETRIC else lam


def gershgorin(op):
    """Gershgorin's bound on the eigenvalues of D^-1 A for a stencil level: the largest sum of
    |coefficient| / |diagonal| over this rank's points (couplings to outside the grid counted
    where they are stored: a bound all the same)."""
    if op.constant:
        return sum(abs(c) for c in op.coefs) / abs(op.coefs[op.kdiag])
    xp = op.xp
    total = xp.abs(op.coefs[0]).astype(numpy.float64)
    for c in op.coefs[1:]:
        total += xp.abs(c)
    return float((total / xp.abs(op.diag)).max()) if total.size else 1.0


def asymmetry(op, allsum=None):
    """||A - A^T||_F / ||A + A^T||_F of a stencil level: the coefficient of offset o at point x
    against that of -o at x + o, over the pairs inside this rank's box (a constant stencil: per
    offset pair); ``allsum`` the global sum over the ranks."""
    xp, n = op.xp, op.box.shape
    index = {o: k for k, o in enumerate(op.offsets)}
    k2 = s2 = 0.0
    for k, o in enumerate(op.offsets):
        back = index.get(tuple(-v for v in o))
        if op.constant:
            c, t = op.coefs[k], 0.0 if back is None else op.coefs[back]
            k2, s2 = k2 + (c - t) ** 2, s2 + (c + t) ** 2
            continue
        here = tuple(slice(max(0, -v), m - max(0, v)) for v, m in zip(o, n))
        there = tuple(slice(max(0, v), m - max(0, -v)) for v, m in zip(o, n))
        c = op.coefs[k][here]
        t = 0.0 if back is None else op.coefs[back][there]
        k2, s2 = k2 + float(xp.sum(xp.abs(c - t) ** 2)), s2 + float(xp.sum(xp.abs(c + t) ** 2))
    if allsum is not None and not op.constant:
        k2, s2 = allsum(k2), allsum(s2)
    return float(numpy.sqrt(k2 / s2)) if s2 else 0.0


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
            if k == 0 and zero_guess:
                r[...] = f                   # from zero the first residual is f: no product
            else:
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
