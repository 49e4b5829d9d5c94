"""Galerkin coarse operators R A P of the stencil levels, formed stencil-wise by probing: R A P
applied to 3^d sums of coarse unit vectors (one per class of global index mod 3) gives every
coefficient of a coarse stencil whose couplings reach one point, as Curtis, Powell and Reid's
column groups estimate a sparse Jacobian ("On the estimation of sparse Jacobian matrices",
J. Inst. Math. Appl. 13, 1974).
"""
import itertools
import math

from .. import backend
from . import stencil, transfer

# probes per batch times padded fine values, at most: a batch saves launches on the GPU and
# Python calls on the host, where arrays beyond the caches cost more than the calls
BATCH_VALUES = {"gpu": 2 ** 25, "host": 2 ** 18}


def coarse_operator(op, T, cbox, cxp, dtype, exchange_fine, exchange_coarse=None, comm=None):
    """The coarse StencilOperator R A P on ``cbox`` (arrays of ``cxp``) of the fine operator ``op``
    and the transfer ``T``, with the fine and coarse levels' ghost updates (None: none) and the
    communicator of a distributed coarse level (None: it is whole on this rank). On one rank no
    ghost update comes between the probes' kernels, so plain transfers take them in batches."""
    xp = op.xp
    batch = None
    if (comm is None or comm.size == 1) and type(T) in (transfer.Transfer, transfer.BlackBox):
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
    return probe(rap, cbox, cxp, dtype, comm, batch)


def probe(rap, coarse_box, xp, dtype, comm=None, batch=None):
    """The coarse stencil of R A P by probing: 3^d applications of ``rap`` (a function of a padded
    coarse array returning an unpadded one), one per class of global index mod 3. Valid whenever
    R A P couples only points at most one apart (linear interpolation, 3-point stencils).
    ``batch``: rap takes a batch of that many probes at once (a leading axis), which spares most
    of the launches of a probe on the small coarse levels."""
    d = coarse_box.dim
    classes = list(itertools.product(range(3), repeat=d))
    gidx = [(xp.arange(s, s + n) % 3).reshape([-1 if b == a else 1 for b in range(d)])
            for a, (s, n) in enumerate(zip(coarse_box.start, coarse_box.shape))]
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
        # the probe whose class is (i + o) mod 3 sees A_c[i, i + o] at point i
        k = 0
        for a in range(d):
            k = k * 3 + (gidx[a] + o[a]) % 3
        K.append(xp.broadcast_to(k, coarse_box.shape))
    C = xp.take_along_axis(Y, xp.stack(K), axis=0)         # one gather for all offsets
    coefs = []
    for o, c in zip(offsets, C):
        inside = stencil.inside_slices(coarse_box, o)
        masked = xp.zeros_like(c)
        masked[inside] = c[inside]
        coefs.append(masked)
    return stencil.compress(coarse_box, offsets, coefs, xp, dtype, comm=comm)
