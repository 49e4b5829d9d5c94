"""Galerkin coarse operators R A P of the stencil levels, formed stencil-wise, two ways:

- by stencil algebra (:func:`stencil_product`; on the GPU its fused twin
  fused_stored.galerkin_product), where the prolongation's weights are stored as arrays
  (transfer.BlackBox) and the level is whole on this rank: each coarse coefficient is a sum of
  products of a restriction weight, a fine coefficient and a prolongation weight, as black box
  multigrid forms its coarse operators (Dendy 1982);
- by probing (any transfer, any rank count): R A P applied to 3^d sums of coarse unit vectors
  (one per class of global index mod 3) gives every coefficient of a coarse stencil whose
  couplings reach one point, as Curtis, Powell and Reid's column groups estimate a sparse
  Jacobian ("On the estimation of sparse Jacobian matrices", J. Inst. Math. Appl. 13, 1974).
"""
import functools
import itertools
import math

import numpy

from .. import backend
from . import fused, fused_stored, kernels, stencil, transfer

# probes per batch times padded fine values, at most: a batch saves launches on the GPU and
# Python calls on the host, where arrays beyond the caches cost more than the calls
BATCH_VALUES = {"gpu": 2 ** 25, "host": 2 ** 18}


def coarse_operator(op, T, cbox, cxp, dtype, exchange_fine, exchange_coarse=None, comm=None):
    """The coarse StencilOperator R A P on ``cbox`` (arrays of ``cxp``) of the fine operator ``op``
    and the transfer ``T``, with the fine and coarse levels' ghost updates (None: none) and the
    communicator of a distributed coarse level (None: it is whole on this rank). On one rank no
    ghost update comes between the probes' kernels, so plain transfers take them in batches.
    The coarse operator of a stored (variable) one stays stored, with no search for constant
    coefficients (passes over every coefficient array): the host drops its all-zero offsets, the
    GPU's fused product only those with no neighbour in the grid."""
    xp = op.xp
    tol = 0.0 if op.constant else None
    one_rank = comm is None or comm.size == 1
    if (one_rank and type(T) is transfer.BlackBox and cxp is xp and T.weight_planes is not None
            and not (any(op.box.periodic) and backend.is_gpu(xp))):   # the GPU kernel knows no wrap
        if not backend.is_gpu(xp):
            return stencil_product(op, T, cbox, dtype, tol)
        if fused.supported(xp, dtype):     # its thousands of array passes in one kernel
            coefs = fused_stored.galerkin_product(op, T, cbox, dtype)
            # every offset that has a neighbour in the grid stays: which planes hold only zeros
            # would wait for the GPU at every level, where the setup's launches run ahead of it
            inside = [all(m > 1 for m, v in zip(cbox.shape, o) if v) for o in coefs]
            return stencil.compress(cbox, list(coefs), list(coefs.values()), xp, dtype, tol, nonzero=inside)
    batch = None
    if one_rank and type(T) in (transfer.Transfer, transfer.BlackBox):
        limit = BATCH_VALUES["gpu" if backend.is_gpu(xp) else "host"]
        batch = max(1, min(3 ** cbox.dim, limit // math.prod(op.box.padded_shape)))
    lead = (batch,) if batch else ()
    pf = xp.zeros(lead + op.box.padded_shape, dtype)
    af = xp.zeros(lead + op.box.padded_shape, dtype)
    out = cxp.zeros(lead + cbox.shape, dtype)
    zero = xp.zeros(op.box.shape, dtype)
    inner = (Ellipsis,) + (slice(1, -1),) * op.box.dim
    ex_coarse = exchange_coarse or (lambda u: u)

    def rap(e_pad):
        n = e_pad.shape[0] if batch else None         # the last batch may be shorter
        p, a, o = (pf[:n], af[:n], out[:n]) if batch else (pf, af, out)
        ex_coarse(e_pad)
        p[...] = 0
        T.prolong_add(p, e_pad)
        exchange_fine(p)
        op.residual(a[inner], zero, p)     # -A P e
        exchange_fine(a)
        T.restrict(o, a)
        return -o
    return probe(rap, cbox, cxp, dtype, comm, batch, tol)


def axis_classes(m, periodic):
    """The probing class of each global index 0..m-1 along an axis (and of the index past either
    end, at m + 1 and 0 of the result: the array is padded by one), such that two points at most
    two apart never share a class: the index mod 3, and along a periodic axis whose length is no
    multiple of 3 the last m mod 3 points in classes of their own (the wrap joins the last points
    to the first). Returns (classes of -1..m, the number of classes)."""
    c = numpy.arange(-1, m + 1) % 3
    r = m % 3 if periodic else 0
    if r:
        c[m + 1 - r:m + 1] = 3 + numpy.arange(r)
        c[0], c[-1] = c[m], c[1]          # past the ends: the other end's
    return c, 3 + r


def probe(rap, coarse_box, xp, dtype, comm=None, batch=None, tol=0.0):
    """The coarse stencil of R A P by probing: 3^d applications of ``rap`` (a function of a padded
    coarse array returning an unpadded one), one per class of global index mod 3 (up to 5 classes
    along a periodic axis: axis_classes). Valid whenever R A P couples only points at most one
    apart (linear interpolation, 3-point stencils). ``batch``: rap takes a batch of that many
    probes at once (a leading axis), which spares most of the launches of a probe on the small
    coarse levels; ``tol``: stencil.compress's."""
    d = coarse_box.dim
    tables = [axis_classes(m, p) for m, p in zip(coarse_box.global_shape, coarse_box.periodic)]
    counts = [n for _, n in tables]
    classes = list(itertools.product(*[range(n) for n in counts]))

    # per axis and shift -1, 0, 1: the classes of this rank's points shifted so, shaped to broadcast
    along = []
    for a, ((c, _), s, n) in enumerate(zip(tables, coarse_box.start, coarse_box.shape)):
        shape = [-1 if b == a else 1 for b in range(d)]
        along.append({t: xp.asarray(c[s + 1 + t:s + 1 + t + n]).reshape(shape) for t in (-1, 0, 1)})
    gidx = [along[a][0] for a in range(d)]
    responses = []
    inner = (Ellipsis,) + (slice(1, -1),) * d
    for first in range(0, len(classes), batch or 1):
        chunk = classes[first:first + (batch or 1)]
        e = xp.zeros(((len(chunk),) if batch else ()) + coarse_box.padded_shape, dtype=dtype)
        for i, q in enumerate(chunk):
            ind = None
            for a in range(d):
                m = gidx[a] == q[a]
                ind = m if ind is None else ind & m
            (e[i] if batch else e)[inner] = ind
        y = rap(e)
        responses += list(y.copy()) if batch else [y.copy()]
    Y = xp.stack(responses)
    offsets = stencil.box_offsets(d)
    K = []
    for o in offsets:
        # the probe of the class of i + o sees A_c[i, i + o] at point i
        k = 0
        for a in range(d):
            k = k * counts[a] + along[a][o[a]]
        K.append(xp.broadcast_to(k, coarse_box.shape))
    C = xp.take_along_axis(Y, xp.stack(K), axis=0)         # one gather for all offsets
    return _coarse_stencil(coarse_box, dict(zip(offsets, C)), xp, dtype, comm, tol)


def _coarse_stencil(coarse_box, coefs, xp, dtype, comm=None, tol=0.0):
    """The compressed StencilOperator of {offset: array}, each array zeroed where the neighbour
    lies outside the grid (``tol``: stencil.compress's)."""
    arrays = list(coefs.values())
    out = stencil.inside_planes(coarse_box, list(coefs), arrays, xp, arrays[0].dtype)
    return stencil.compress(coarse_box, list(coefs), out, xp, dtype, tol, comm)


def stencil_product(op, T, cbox, dtype, tol=0.0):
    """R A P of the fine StencilOperator ``op`` and a transfer.BlackBox ``T`` (one rank) by stencil
    algebra. With F(I) the fine point of coarse point I, P's weights W_t(j) = P[j, J] for the
    fine point j = F(J) + t and R = P^T / 2^c:

        A_c[I, I + O] = sum_s sum_o  R[I, F(I) + s] a_o(F(I) + s) W_t(F(I) + s + o),
                        t = s + o - 2 O  in {-1, 0, 1} along coarsened axes (O = o, t = 0 along the others),

    s the fine offsets of I's restriction, o the fine stencil's offsets; each term is a product
    of strided views over the coarse grid. The terms are grouped by v = s + o, on which t and the
    weight's point F(I) + v depend, so each weight multiplies one sum

        G_v = sum_{s + o = v} R[I, F(I) + s] a_o(F(I) + s):   A_c[I, I + O] = sum_v G_v W_{v - 2O}(F(I) + v)

    (5^d sums of 27 x 27 terms on a Galerkin level instead of a product per term and O)."""
    xp, d = op.xp, op.box.dim
    ax, phase, nc = T.coarsened, T.phase, cbox.shape
    parities = list(itertools.product(*[(0, 1) if c else (0,) for c in ax]))

    def split(X):
        """X's even and odd points along the coarsened axes, each a contiguous array: the
        products then run along unit-stride rows."""
        return {q: xp.ascontiguousarray(X[tuple(slice(p, None, 2) if c else slice(None) for p, c in zip(q, ax))])
                for q in parities}

    def at(S, v, pad):
        """X[F(I) + v] over the coarse points I, from X's split S (X padded by ``pad``)."""
        q, sl = [], []
        for a in range(d):
            first = phase[a] + v[a] + pad if ax[a] else v[a] + pad
            q.append(first % 2 if ax[a] else 0)
            first = first // 2 if ax[a] else first
            sl.append(slice(first, first + nc[a]))
        return S[tuple(q)][tuple(sl)]

    # zero beyond the grid: a by one layer (F(I) + s reaches it), the weights by two (F(I) + s + o)
    per = op.box.periodic

    def pad(X, halo=0):
        """X (with a halo of ``halo`` points) one more point each side: zero, or along a periodic axis
        the grid's other end (its halo rebuilt from the points inside)."""
        if any(per):
            inside = tuple(slice(halo, X.shape[a] - halo) if p else slice(None) for a, p in enumerate(per))
            X = xp.pad(X[inside], [(halo + 1,) * 2 if p else (0, 0) for p in per], mode="wrap")
        return xp.pad(X, [(0, 0) if p else (1, 1) for p in per])
    A = {o: split(pad(c)) for o, c in zip(op.offsets, op.coef_arrays())}
    W = {k: split(pad(w, halo=1)) for k, w in T.weights().items()}
    acc = {O: xp.zeros(nc, dtype) for O in stencil.box_offsets(d)}
    G = xp.empty(nc, dtype)
    by_v = {}                    # v: the (R, a_o) view pairs of its terms
    for s in itertools.product(*[(-1, 0, 1) if c else (0,) for c in ax]):
        R = at(W[transfer.BlackBox.corner(s)], s, 2)
        for o, a in A.items():
            by_v.setdefault(tuple(x + y for x, y in zip(s, o)), []).append((R, at(a, s, 1)))
    for v, terms in by_v.items():
        kernels.lincomb(G, [a for _, a in terms], [R for R, _ in terms])
        for O in _coarse_offsets(v, ax):
            t = tuple(x - 2 * y if c else 0 for x, y, c in zip(v, O, ax))
            kernels.lincomb(acc[O], [G], [at(W[transfer.BlackBox.corner(t)], v, 2)], add=True)
    for c in acc.values():
        c *= T.rscale
    return _coarse_stencil(cbox, acc, xp, dtype, tol=tol)


@functools.lru_cache(maxsize=None)
def _coarse_offsets(v, ax):
    """The coarse offsets O with v - 2 O in {-1, 0, 1} along coarsened axes (O = v along the others)."""
    choices = [tuple(O for O in (-1, 0, 1) if abs(x - 2 * O) <= 1) if c else (x,) for x, c in zip(v, ax)]
    return list(itertools.product(*choices))
