"""Aggregates of no energy: a coarse unknown's diagonal, the energy of its prolongation column
(the diagonal of P^T A P), compared with its members' diagonals. Where the energies cancel, the
diagonal is rounding and a smoother would divide by it: a component of A's null space aggregated
whole (a floating Neumann part), or an aggregate of an indefinite matrix (PETSc's ksp ex9: its
symmetric part is indefinite, and an aggregate of seven rows has a coarse diagonal of exactly 0).
kcycle.AggregationMG looks at every level here before it builds the smoothers."""
import numpy

from .. import backend
from . import distributed, sparse


def look(mats, aggs, transfers, restrictions, xp, parallel, eps):
    """Flags on ``xp``, flags[k] = 1 where level k (below the finest) has an unknown of no energy
    (relative_energies below ``eps``): on the GPU a kernel a level (no_energy), no wait for the
    host, so that setup goes on while the device looks."""
    own = (lambda M: M.own) if parallel else (lambda M: M)
    flags = xp.zeros(len(mats), numpy.int32)
    for k in range(1, len(mats)):
        if backend.is_gpu(xp) and _at(transfers, k - 1) is None and hasattr(_at(restrictions, k - 1), "indptr"):
            no_energy(own(mats[k]), own(mats[k - 1]), restrictions[k - 1], eps, flags, k)
        else:
            flags[k] = xp.any(_energies(mats, aggs, transfers, restrictions, xp, own, k)[0] <= eps)
    return flags


def _at(L, k):
    return L[k] if k < len(L) else None                 # the lists stop short of the coarsest


def _energies(mats, aggs, transfers, restrictions, xp, own, k):
    P, R, M = _at(transfers, k - 1), _at(restrictions, k - 1), own(mats[k])
    if isinstance(P, distributed.Transfer):       # a smoothed prolongation across ranks: its transpose's rows
        d = xp.abs(own(mats[k - 1]).diagonal()).astype(float)
        s = sum(squared(B, xp) @ v for B, v in ((R.own, d), (R.ghost, xp.asarray(R.halo(d)))))
        return relative_energies(M, None, xp, s=s)
    return relative_energies(M, own(mats[k - 1]), xp, aggs[k - 1], P)


def zero_energies(mats, aggs, transfers, restrictions, xp, comm, parallel, eps):
    """The first level below the finest with an unknown of no energy (``eps``) that couples to
    others, or None (the coarsest too: on several ranks a gathered hierarchy may smooth it). One
    that couples to nothing is a null component of A aggregated whole (a floating Neumann part):
    its diagonal becomes its members' (in mats, in place), so that its correction is its
    residual's sum over that, where a direct solve would give none and a smoother would divide
    by rounding."""
    own = (lambda M: M.own) if parallel else (lambda M: M)
    found = numpy.flatnonzero(backend.to_host(look(mats, aggs, transfers, restrictions, xp, parallel, eps)))
    for k in range(comm.allmin(int(found[0]) if len(found) else len(mats)), len(mats)):
        M = own(mats[k])
        rho, s = _energies(mats, aggs, transfers, restrictions, xp, own, k)
        zero = rho <= eps
        if not comm.allsum(int(backend.any_true(zero))):
            continue
        off = sparse.l1_norms(M, xp) - xp.abs(M.diagonal()) + (mats[k].ghost_l1() if parallel else 0)
        if comm.allsum(int(backend.any_true(zero & (off > eps * s)))):
            return k
        fixed = (M + sparse.module(xp).diags(xp.where(zero, s - M.diagonal(), 0).astype(M.dtype))).tocsr()
        fixed.indices, fixed.indptr = (a.astype(M.indices.dtype) for a in (fixed.indices, fixed.indptr))
        mats[k] = distributed.Rows(fixed, mats[k].ghost, mats[k].ghosts, mats[k].starts, comm, xp,
                                   mats[k].halo) if parallel else fixed
    return None


def relative_energies(Ac, Af, xp, agg=None, P=None, s=None):
    """(rho, s): rho_i = |a^c_ii| / s_i, s_i = sum_j p_ji^2 |a^f_jj|: the energy of coarse unknown
    i's prolongation column, the diagonal of P^T A_f P, relative to its members' diagonals (``agg``,
    a piecewise-constant P of +-1 entries, the CSR matrix ``P``, or ``s`` given). Near zero where
    the energies cancel: an aggregate that holds a whole component of A's null space (a floating
    Neumann part), or an aggregate of an indefinite matrix (ksp ex9's: its symmetric part is)."""
    if s is None:
        d = xp.abs(Af.diagonal()).astype(numpy.float64)
        if P is None and backend.is_gpu(xp):     # CuPy's bincount would wait for its largest index
            s = xp.zeros(Ac.shape[0] + 1)
            sparse.elementwise("member_sum", "float64 d, int64 a, int64 n", "raw float64 s",
                               "atomicAdd(&s[a >= 0 ? a : n], d)")(d, agg.astype(numpy.int64), Ac.shape[0], s)
            s = s[:-1]
        elif P is None:
            keep = agg >= 0               # nodes left out of every aggregate (nullspace.drop_isolated)
            s = xp.bincount(agg[keep], weights=d[keep], minlength=Ac.shape[0])
        else:
            s = squared(P, xp).T @ d
    s = xp.where(s > 0, s, 1.0)            # a column of no fine support: an identity row (nullspace.py)
    return xp.abs(Ac.diagonal()) / s, s


def no_energy(Ac, Af, R, eps, flags, k):
    """flags[k] = 1 where some relative_energies(Ac, Af, R's aggregates) <= eps, in one kernel of a
    thread a coarse row on the GPU (its members from the member lists R, their diagonals and its
    own found in their rows): the setup's look at each level, without waiting for the host.
    ``relative_energies`` is its twin."""
    sparse.elementwise(
        "no_energy", "raw I cp, raw I ci, raw T cd, raw J rp, raw J rm, raw K fp, raw K fi, raw T fd, float64 eps, "
        "int32 k", "raw int32 flags",
        "double s = 0, c = 0;"
        "for (long long q = rp[i]; q < rp[i + 1]; ++q) { const long long j = rm[q];"
        "  for (long long p = fp[j]; p < fp[j + 1]; ++p) if (fi[p] == j) { s += magnitude(fd[p]); break; } }"
        "for (long long p = cp[i]; p < cp[i + 1]; ++p) if (ci[p] == i) { c = magnitude(cd[p]); break; }"
        "if (c <= eps * (s > 0 ? s : 1.0)) flags[k] = 1",
        preamble=sparse.MAGNITUDE)(Ac.indptr, Ac.indices, Ac.data, R.indptr, R.indices, Af.indptr, Af.indices,
                                   Af.data, eps, k, flags, size=Ac.shape[0])


def squared(A, xp):
    """|a_ij|^2 on A's pattern, real double."""
    return sparse.module(xp).csr_matrix((xp.abs(A.data).astype(numpy.float64) ** 2, A.indices, A.indptr),
                                        shape=A.shape)
