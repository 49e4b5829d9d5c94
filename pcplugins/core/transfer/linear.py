"""Grid transfers between a fine level and the next coarser one.

Coarse point k sits on fine point 2k+1 (2k on grids that keep their ends) along each coarsened
axis (grid.py). Both transfer pairs are
given by the weight P[fine 2k+1+o, coarse k] of the prolongation for fine offsets o in {-1,0,1}^d;
the restriction is the scaled adjoint R = P^T / 2^c (c coarsened axes), which is full weighting for
the (bi/tri)linear P and reproduces the fine operator's scaling on the coarse grid.

- 'linear' (default): tensor-product linear interpolation, w(o) = prod_a (1 - |o_a|/2).
- 'paper': Feng, Shu, Xu, Zhang, "Multigrid methods for the Poisson equation on CPU-GPU
  computers", eq. (4.10): linear interpolation on the triangles (tetrahedra) cut by the (1,1)
  ((1,1,1)) diagonal, w(o) = 1 at o = 0 and 1/2 at o = +-a for a in {0,1}^d; with it R is their
  7-point restriction eq. (4.6) (15 points in 3D).
Both are applied as gathers on padded arrays (halo = ghosts), so they need no communication other
than the ghost update the cycle does before them.
"""
import functools
import itertools

from ... import backend
from .. import grid, kernels


@functools.lru_cache(maxsize=None)
def weights(kind, coarsened):
    """{fine offset o: P weight} for one coarse point; offsets are 0 along kept axes. Shared
    between calls (one per level of a setup): read it, do not change it."""
    d = len(coarsened)
    rng = [(-1, 0, 1) if c else (0,) for c in coarsened]
    w = {}
    for o in itertools.product(*rng):
        if kind == "linear":
            v = 1.0
            for x in o:
                v *= 1.0 - abs(x) / 2.0
        elif kind == "paper":
            nz = [x for x in o if x != 0]
            if not nz:
                v = 1.0
            elif all(x == nz[0] for x in nz):
                v = 0.5
            else:
                v = 0.0
        else:
            raise ValueError(f"unknown transfer {kind!r}")
        if v:
            w[o] = v
    assert len(o) == d
    return w


class Transfer:
    """Restriction and prolongation between ``fine`` and ``coarse`` boxes.

    ``omegas`` (linear only): per axis None or the weight omega of the last coarse point at the
    fine point between it and the far boundary, where that last fine cell is shorter than the
    others (stencil.AxisLaplacian: omega = r / (1 + r), linear interpolation on the
    non-uniform spacing; 1/2 on a uniform axis). Such a P is the uniform one with that fine plane
    scaled by 2 omega (its one coarse neighbour has weight 1/2 there), S P, and R = P^T S / 2^c:
    the generic code applies S in a padded fine work array.

    ``fill_halo``: prolong_add also adds P e to the halo on the faces that border other ranks
    (grid.Box.rank_faces): the coarse points those halo points need lie in the coarse halo, and
    the fine halo holds the neighbours' values, so afterwards it holds the neighbours' new values,
    edges and corners included, and the cycle needs no ghost update after the prolongation."""

    def __init__(self, fine, coarse, coarsened, kind="linear", omegas=None, fill_halo=False):
        self.fine, self.coarse, self.coarsened, self.kind = fine, coarse, coarsened, kind
        if fill_halo and any(fine.periodic):
            raise ValueError("transfer.Transfer: fill_halo needs a grid without periodic axes")
        self.fills_halo = bool(fill_halo)
        self.faces = fine.rank_faces() if fill_halo else 0
        self.omegas = tuple(omegas) if omegas is not None and any(w is not None for w in omegas) else None
        if self.omegas is not None and kind != "linear":
            raise ValueError("non-uniform spacing needs the linear transfer")
        self.w = weights(kind, tuple(bool(c) for c in coarsened))
        ncoarse = sum(coarsened)
        self.rscale = 0.5 ** ncoarse
        # phase: local fine index of the first owned coarse point (0 or 1) along coarsened axes
        self.phase = tuple((2 * cs + (0 if keep else 1) - fs) if c else 0
                           for c, cs, fs, keep in zip(coarsened, coarse.start, fine.start, fine.keep_ends))
        # axes whose last coarse point is virtual (grid.Box.virtual_end): it lies on the fine
        # point past the padded array's halo, which restriction reads as a zero plane
        self.virtual = fine.virtual_axes(coarsened)

    # the plans are built on first use: the fused GPU transfers (fused.LinearTransfer) never need
    # them, and building them is most of a GPU setup's host time
    @functools.cached_property
    def _restrict_terms(self):
        """[(coefficient, fine lattice)] of the restriction."""
        return [(self.w[o] * self.rscale, lat) for o, lat in self._restriction_lattices()]

    @functools.cached_property
    def _prolong_plan(self):
        """[(fine lattice, [(coefficient, coarse lattice)])] of the prolongation."""
        return [(flat, [(self.w[o], lat) for o, lat in terms]) for flat, terms in self._prolongation_lattices()]

    def _restriction_lattices(self):
        """[(o, the fine lattice of the points at offset o from the owned coarse points)]: coarse
        local k (padded k+1) gathers fine padded 2k + 1 + phase + o."""
        lat_c = grid.full_lattice(self.coarse)
        plan = []
        for o in self.w:
            lat = []
            for a, (c, (s, st, n)) in enumerate(zip(self.coarsened, lat_c)):
                if c:
                    lat.append((self.phase[a] + o[a], 2, n))
                else:
                    lat.append((0, 1, n))
            plan.append((o, tuple(lat)))
        return plan

    @functools.cached_property
    def _scaled(self):
        """[(the fine plane S scales, as an index of the padded array; its factor 2 omega)]."""
        planes = []
        for a, w in enumerate(self.omegas):
            if w is None:
                continue
            p = self.fine.global_shape[a] - 1 - self.fine.start[a] + 1
            if 0 <= p < self.fine.shape[a] + 2:
                planes.append((tuple(p if b == a else slice(None) for b in range(self.fine.dim)), 2 * w))
        return planes

    def _work(self, like):
        """A padded fine array like ``like``, made once (a cycle allocates nothing)."""
        t = getattr(self, "_t", None)
        if t is None or t.dtype != like.dtype or type(t) is not type(like):
            t = self._t = like.copy()
        return t

    def _extended(self, like):
        """A padded fine array like ``like`` (a batch of them: leading axes) with one more (zero)
        plane past the end of each virtual axis, made once per shape."""
        d = self.fine.dim
        shape = like.shape[:-d] + tuple(n + int(v) for n, v in zip(like.shape[-d:], self.virtual))
        t = getattr(self, "_te", None)
        if t is None or t.shape != shape or t.dtype != like.dtype or type(t) is not type(like):
            t = self._te = backend.array_module(like).zeros(shape, like.dtype)
        return t

    def _scale(self, t):
        for at, s in self._scaled:
            t[at] *= s
        return t

    def restrict(self, coarse_out, fine_pad):
        """coarse_out (unpadded view) = R r, from a padded fine array with current ghosts."""
        if any(self.virtual):
            t = self._extended(fine_pad)
            t[tuple(slice(0, n) for n in fine_pad.shape)] = fine_pad
            fine_pad = t
        elif self.omegas is not None:
            t = self._work(fine_pad)
            t[...] = fine_pad
            fine_pad = self._scale(t)
        cs = [v for v, _ in self._restrict_terms]
        us = [grid.view(fine_pad, lat, padded=True) for _, lat in self._restrict_terms]
        kernels.lincomb(coarse_out, cs, us)
        return coarse_out

    def _prolongation_lattices(self):
        """[(fine lattice, [(o, coarse lattice)])]: for each class of fine points (coincident with
        a coarse point or between two along each coarsened axis) its lattice, and for each offset
        o of its points from a coarse point, the lattice of those coarse points."""
        plan = []
        per_axis = []
        for a, c in enumerate(self.coarsened):
            # the fine points [lo, hi): the owned ones, and the halo on the faces filled
            lo, hi = -(self.faces >> 2 * a & 1), self.fine.shape[a] + (self.faces >> 2 * a + 1 & 1)
            if not c:
                per_axis.append([((lo, 1, hi - lo), None)])
                continue
            ph = self.phase[a]
            opts = []
            for cls in (0, 1):
                f0 = lo + (lo - ph + cls) % 2           # the first point of the class
                cnt = (hi - f0 + 1) // 2 if hi > f0 else 0
                # coarse padded index of the coarse point at or left of fine f0
                c0 = (f0 - ph - cls) // 2 + 1
                opts.append(((f0, 2, cnt), (cls, c0)))
            per_axis.append(opts)
        for combo in itertools.product(*per_axis):
            flat = tuple(fl for fl, _ in combo)
            if grid.lattice_empty(flat):
                continue
            terms = []
            # fine point = coarse left point + delta, delta in {0, 1} per axis (1: halfway)
            for o in self.w:
                lat_c = []
                ok = True
                for a, ((f0, st, cnt), info) in enumerate(combo):
                    if info is None:
                        lat_c.append((f0, 1, cnt))
                        continue
                    cls, c0 = info
                    # fine = 2k+1+phase-... : offset o from coarse point k to this fine point
                    # coincident (cls 0): o = 0 from k = c0; between (cls 1): o = +1 from c0,
                    # o = -1 from c0 + 1
                    if cls == 0:
                        if o[a] != 0:
                            ok = False
                            break
                        lat_c.append((c0 - 1, 1, cnt))
                    else:
                        if o[a] == 0:
                            ok = False
                            break
                        lat_c.append((c0 - 1 + (1 if o[a] < 0 else 0), 1, cnt))
                if ok:
                    terms.append((o, tuple(lat_c)))
            plan.append((flat, terms))
        return plan

    def prolong_add(self, fine_pad, coarse_pad):
        """fine (interior of padded, and the halo on ``faces``) += P e, from a padded coarse array
        with current ghosts."""
        if self.omegas is not None:
            t = self._work(fine_pad)
            t[...] = 0
            fine_pad += self._scale(self._prolong_uniform(t, coarse_pad))
            return fine_pad
        return self._prolong_uniform(fine_pad, coarse_pad)

    def _prolong_uniform(self, fine_pad, coarse_pad):
        for flat, terms in self._prolong_plan:
            out = grid.view(fine_pad, flat, padded=True)
            cs = [v for v, _ in terms]
            us = [grid.view(coarse_pad, lat, padded=True) for _, lat in terms]
            kernels.lincomb(out, cs, us, add=True)
        return fine_pad


class Moved:
    """The transfer from the last device level to the first host level of the hybrid CPU-GPU
    cycle (Feng, Shu, Xu, Zhang, Algorithm 3): restriction runs on the device and its result
    is copied down, the coarse correction is copied up and prolongated on the device, so a cycle
    moves one coarse right-hand side down and one coarse correction up."""

    def __init__(self, inner, coarse_shape, xp, dtype):
        self.inner, self.xp = inner, xp
        self.kind = getattr(inner, "kind", None)
        self.f_dev = xp.zeros(coarse_shape, dtype)
        self.e_dev = xp.zeros(tuple(n + 2 for n in coarse_shape), dtype)

    def restrict(self, coarse_out, fine_pad):
        self.inner.restrict(self.f_dev, fine_pad)
        coarse_out[...] = backend.to_host(self.f_dev)
        return coarse_out

    def prolong_add(self, fine_pad, coarse_pad):
        self.e_dev[...] = backend.to_namespace(coarse_pad, self.xp)
        return self.inner.prolong_add(fine_pad, self.e_dev)


class Gathered:
    """The transfer from the last distributed level to a replicated one (every rank holds the
    whole coarse grid, as PCTELESCOPE gathers a coarse problem, here onto every rank so the
    coarse solve needs no broadcast). Restriction computes this rank's part of the coarse grid
    and gathers the parts; prolongation reads this rank's part, with its halo, of the replicated
    coarse correction."""

    def __init__(self, inner, part, comm, level, xp, dtype):
        self.inner, self.part, self.comm, self.level = inner, part, comm, level
        comm.expect_gather(level, part)
        self.kind = getattr(inner, "kind", None)
        self.f_part = xp.zeros(part.shape, dtype)
        self.e_part = xp.zeros(part.padded_shape, dtype)
        self._halo = tuple(slice(s, s + n + 2) for s, n in zip(part.start, part.shape))

    def restrict(self, coarse_out, fine_pad):
        self.inner.restrict(self.f_part, fine_pad)
        return self.comm.gather(self.level, self.f_part, self.part, coarse_out)

    def prolong_add(self, fine_pad, coarse_pad):
        self.e_part[...] = coarse_pad[self._halo]
        return self.inner.prolong_add(fine_pad, self.e_part)


def cubic_upsample(coarse_pad, xp):
    """FMG interpolation of a solution: tensor-product cubic interpolation from a padded coarse array
    to the padded fine array (vertex-centred, every axis coarsened, fine = 2 coarse + 1 per axis,
    the halo holding the boundary values). Midpoints use the 4-point rule (-1, 9, 9, -1)/16 and,
    next to the boundary, the one-sided (5, 15, -5, 1)/16; coincident points are copied. Fourth-
    order accurate, so the FMG start on each level carries less error than the discretization."""
    u = coarse_pad
    for a in range(u.ndim):
        c = xp.moveaxis(u, a, 0)
        K = c.shape[0]
        mid = xp.empty((K - 1,) + c.shape[1:], c.dtype)
        mid[1:-1] = (-c[:-3] + 9.0 * c[1:-2] + 9.0 * c[2:-1] - c[3:]) / 16.0
        mid[0] = (5.0 * c[0] + 15.0 * c[1] - 5.0 * c[2] + c[3]) / 16.0
        mid[-1] = (c[-4] - 5.0 * c[-3] + 15.0 * c[-2] + 5.0 * c[-1]) / 16.0
        fine = xp.empty((2 * K - 1,) + c.shape[1:], c.dtype)
        fine[0::2] = c
        fine[1::2] = mid
        u = xp.moveaxis(fine, 0, a)
    return u
