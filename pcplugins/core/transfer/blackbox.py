"""Operator-dependent interpolation by collapsed stencils: the prolongation of black box multigrid
(Alcouffe, Brandt, Dendy and Painter, "The multi-grid method for the diffusion equation with
strongly discontinuous coefficients", SIAM J. Sci. Stat. Comput. 2, 1981; Dendy, "Black box
multigrid", J. Comput. Phys. 48, 1982; in 3D, Dendy, "Two multigrid methods for three-dimensional
problems with discontinuous and anisotropic coefficients", SIAM J. Sci. Stat. Comput. 8, 1987),
with the restriction R = P^T / 2^c and Galerkin coarse operators, so the cycle stays symmetric.

A fine point is classed by the set B of coarsened axes along which it lies between two coarse
points (B empty: it is a coarse point, and takes its value). The others take their values in
order of |B|: a point's value makes the row of A P vanish for the operator *collapsed* onto B
(the stencil's coefficients summed over the offsets along the other axes, which keeps the flux
across the point's B-faces and lumps the rest onto the diagonal):

    sum over o in {-1, 0, 1}^B of  Ac(o) (P e)(p + o) = 0,   Ac(o) = sum_{o' | B = o} a(o').

|B| = 1 is ABDP's interpolation along a line between two coarse points, the weights -Ac(-1)/Ac(0)
and -Ac(+1)/Ac(0) (for a coefficient that jumps between the two cells, the harmonic weighting
that keeps the flux continuous); |B| = 2 the rule of de Zeeuw's and Dendy's cell centres in 2D,
taken in the plane through the point; |B| = 3 the 3D cell centre from its whole row. The
neighbours it reads have smaller |B| and are known by then. For the constant-coefficient star
and box Laplacians this is (bi/tri)linear interpolation on every grid with an odd number of
points per axis; coefficient jumps make it follow the flux, and coarse operators R A P keep them.

Eliminated Dirichlet values need no special case: the coupling to an eliminated point stays on
the collapsed diagonal (the row's diagonal holds it), the interpolated value there is zero.
Grids that keep their ends (Neumann) have zero row sums and weights that sum to one.

The weights are made once, as arrays over the fine level (one per corner of the point's cell,
2^d of them; on the GPU a kernel per class, fused_stored.blackbox_class, whose twin is
``BlackBox._class``), with the fine level's ghost update between the classes under MPI, then
gathered by coarse point (``columns``: P's column of each coarse point, its 3^c entries, the
halo's coarse points included), which both transfers read: the linear transfer's lattice sums
with views of them as coefficients, or on the GPU one kernel each (fused_stored.BlackBoxTransfer).
"""
import functools
import itertools

from .. import fused, fused_stored, grid
from .linear import Transfer


class BlackBox(Transfer):
    """The collapsed-stencil prolongation P and R = P^T / 2^c between ``fine`` and ``coarse``
    boxes, from the fine level's stencil operator ``op``; ``exchange`` is the fine level's ghost
    update (identity on one rank)."""

    def __init__(self, fine, coarse, coarsened, op, exchange):
        super().__init__(fine, coarse, coarsened, "linear")
        self.kind = "blackbox"
        # weight_planes stay for the Galerkin product (galerkin.stencil_product) until released;
        # the cycle keeps only the columns, (3/2)^d fine levels' worth of weights
        W = self._weights(op, exchange)
        if fused.supported(op.xp, op.dtype):       # a kernel for what are 3^d copies here
            self.columns = fused_stored.blackbox_columns(self)
        else:
            self.columns = self._columns(W, op.xp)

    # the linear transfer's lattice sums with views of the columns as coefficients (the
    # restriction's factor 2^-c, a power of two, is applied to the sum: the same rounding), built
    # on first use as the linear transfer's (the GPU's fused transfer never needs them)
    @functools.cached_property
    def _restrict_terms(self):
        slot = {o: k for k, o in enumerate(self.w)}
        inner = (slice(1, -1),) * self.fine.dim
        return [(self.columns[slot[o]][inner], lat) for o, lat in self._restriction_lattices()]

    @functools.cached_property
    def _prolong_plan(self):
        slot = {o: k for k, o in enumerate(self.w)}
        return [(flat, [(grid.view(self.columns[slot[o]], lat, padded=True), lat) for o, lat in terms])
                for flat, terms in self._prolongation_lattices()]

    def weights(self):
        """{corner s in {-1, +1}^d: its plane of ``weight_planes``} (see _weights)."""
        return dict(zip(itertools.product((-1, 1), repeat=self.fine.dim), self.weight_planes))

    def release_weights(self):
        """Free ``weight_planes`` (the cycle needs only the lattice cuts)."""
        self.weight_planes = None

    def stored_values(self):
        return self.columns.size

    def restrict(self, coarse_out, fine_pad):
        super().restrict(coarse_out, fine_pad)
        coarse_out *= self.rscale
        return coarse_out

    def _columns(self, W, xp):
        """P's columns: plane k (offset o, the k-th of ``self.w``) at padded coarse index I holds
        P[F(I) + o, I], F(I) the coarse point's fine point, for the coarse points of the padded
        box whose fine point F(I) + o lies in the padded fine box; zero elsewhere."""
        cols = xp.zeros((len(self.w),) + self.coarse.padded_shape, self.weight_planes.dtype)
        for k, o in enumerate(self.w):
            src, dst = [], []
            for a, c in enumerate(self.coarsened):
                nc, nf = self.coarse.shape[a] + 2, self.fine.shape[a] + 2
                if not c:
                    src.append(slice(0, nf))
                    dst.append(slice(0, nc))
                    continue
                # padded fine index of padded coarse I: phase + 2 (I - 1) + o + 1
                first = self.phase[a] + o[a] - 1
                lo = max(0, -(first // 2))                  # least I with index >= 0
                hi = min(nc, (nf - 1 - first) // 2 + 1)     # past the last I with index < nf
                if hi <= lo:
                    break
                src.append(slice(first + 2 * lo, first + 2 * (hi - 1) + 1, 2))
                dst.append(slice(lo, hi))
            else:
                cols[k][tuple(dst)] = W[self.corner(o)][tuple(src)]
        return cols

    def _axis_slice(self, a, between, halo):
        """The padded indices along axis ``a`` of the points between two coarse points
        (``between``) or on one, the halo included or not; None where there are none."""
        n = self.fine.shape[a]
        lo, hi = (0, n + 2) if halo else (1, n + 1)
        if not self.coarsened[a]:
            return None if between else slice(lo, hi)
        # padded index i is local fine index i - 1; coarse points at local phase + 2k
        first = lo + (self.phase[a] + 1 - lo + (1 if between else 0)) % 2
        return slice(first, hi, 2) if first < hi else None

    def _lattice(self, B, halo=False):
        sl = [self._axis_slice(a, a in B, halo) for a in range(self.fine.dim)]
        return None if any(s is None for s in sl) else tuple(sl)

    def _weights(self, op, exchange):
        """{corner s in {-1, +1}^d: padded fine array}: W[s][p] = P[p, the coarse point at p + s
        along B]; along the other axes a point's corner is the point itself, stored under s_a = -1."""
        xp, dtype, d = op.xp, op.dtype, self.fine.dim
        # one array of 2^d planes, corner bits in itertools order (the GPU kernels' layout)
        self.weight_planes = xp.zeros((2 ** d,) + self.fine.padded_shape, dtype)
        W = self.weights()
        first = (-1,) * d
        W[first][self._lattice((), halo=True)] = 1          # coarse points, the ghost ones too
        coefs = dict(zip(op.offsets, op.coefs))
        fast = fused.supported(xp, dtype)       # a kernel per class (fused_stored.blackbox_class)
        if fast:
            A, offs = fused_stored.coefficient_planes(op, dtype), fused_stored.offset_table(op)
        axes = [a for a in range(d) if self.coarsened[a]]
        for k in range(1, len(axes) + 1):
            for B in itertools.combinations(axes, k):
                lat = self._lattice(B)
                if lat is not None and fast:
                    fused_stored.blackbox_class(self.weight_planes, A, offs, self.fine, lat, B)
                elif lat is not None:
                    self._class(W, B, lat, coefs, xp, dtype)
            for s in W:
                exchange(W[s])
        return W

    def _class(self, W, B, lat, coefs, xp, dtype):
        """The weights of the points of class B (lattice ``lat`` of padded indices)."""
        d = self.fine.dim
        own = tuple(slice(s.start - 1, s.stop - 1, s.step) for s in lat)   # unpadded
        Ac = {}
        for o, c in coefs.items():
            oB = tuple(o[a] for a in B)
            v = c if not hasattr(c, "shape") else c[own]
            Ac[oB] = Ac.get(oB, 0) + v
        centre = Ac.pop((0,) * len(B))
        shape = W[(-1,) * d][lat].shape
        centre = xp.broadcast_to(xp.asarray(centre, dtype), shape)
        singular = centre == 0
        inv = xp.where(singular, 0, 1 / xp.where(singular, 1, centre)).astype(dtype)
        fallback = dtype.type(0.5 ** len(B))     # linear weights where the collapsed row is empty
        for s in itertools.product((-1, 1), repeat=len(B)):
            corner = [-1] * d
            for a, sa in zip(B, s):
                corner[a] = sa
            acc = xp.zeros(shape, dtype)
            for oB, c in Ac.items():
                # the neighbour p + oB has this corner too where oB is 0 or points toward it
                if not all(v in (0, sa) for v, sa in zip(oB, s)):
                    continue
                nb = list(corner)
                shifted = list(lat)
                for a, v in zip(B, oB):
                    if v:
                        nb[a] = -1                  # the neighbour lies on a coarse point along a
                        st = lat[a]
                        shifted[a] = slice(st.start + v, st.stop + v, st.step)
                acc += c * W[tuple(nb)][tuple(shifted)]
            W[tuple(corner)][lat] = xp.where(singular, fallback, -acc * inv)

    @staticmethod
    def corner(o):
        """The corner slot of the fine points at offset o from their coarse point."""
        return tuple(-v if v else -1 for v in o)
