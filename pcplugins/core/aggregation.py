"""Pairwise aggregation for unsmoothed aggregation AMG, where there are no coordinates (those of
the auxiliary grid are auxgrid.py), and the strength measure the aggregations share.

A matching on the strong connections, -a_ij / sqrt(a_ii a_jj) at least ``theta`` times the row's
largest, where every unmatched unknown proposes to its strongest unmatched neighbour and mutual
proposals pair up (locally dominant edges, a few rounds), applied twice as in Notay's double
pairwise aggregation (aggregates of up to 4). Ties are broken by an integer hash of the edge, so
NumPy and CuPy build the same aggregates. The Gauss-Seidel colours of the pairwise levels are
colouring.py's.
"""
import numpy

from .. import backend, kernels
from . import sparse


def hash_edge(i, j, xp):
    """A symmetric 20-bit integer hash of the edge (i, j), the same on NumPy and CuPy: 32-bit
    unsigned arithmetic, whose products wrap modulo 2^32, in place."""
    u32 = numpy.uint32
    h = xp.minimum(i, j).astype(u32)
    h *= u32(0x9E3779B1)
    h += xp.maximum(i, j).astype(u32) * u32(0x85EBCA77)
    h ^= h >> u32(15)
    h *= u32(0x2C1B3C6D)
    h ^= h >> u32(12)
    h &= u32(0xFFFFF)
    return h.astype(numpy.int64)


def _hash(i, j, xp):
    """``hash_edge`` scaled to [0, 1)."""
    return hash_edge(i, j, xp).astype(numpy.float64) / 2.0 ** 20


def strength(A, xp):
    """The strength of each coupling, |a_ij| / sqrt(|a_ii a_jj|), symmetrized: the CSR matrix
    (S + S^T) / 2 on the pattern of A + A^T, without the diagonal. Symmetric, so that two unknowns
    see the same strength both ways and their picks can be mutual: for a nonsymmetric A (upwind
    convection) the one-way strengths chain and never pair, and coarsening stalls. The absolute
    value lets positive couplings count too (for an M-matrix it is -a_ij, Notay's measure)."""
    d = A.diagonal()               # first: cupyx's sums duplicates in place, which may change the rows
    rows = sparse.rows_of(A, xp)
    scale = xp.sqrt(xp.abs(d[rows] * d[A.indices]))
    w = xp.abs(A.data) / xp.where(scale > 0, scale, xp.inf)     # a zero diagonal (energies.py): none
    w = xp.where(rows != A.indices, w, 0.0)
    W = sparse.module(xp).csr_matrix((w, A.indices, A.indptr), shape=A.shape)
    S = ((W + W.T) * 0.5).tocsr()
    S.sum_duplicates()
    return S


def pair_matching(A, xp, theta=0.25, rounds=4, signs=True):
    """One pairwise aggregation of A: returns (agg, nc, sign, R), the signs of the prolongation's
    entries (_pair_signs; None: all +1, and always where not ``signs``) and the restriction of
    agg, without signs (sparse.members(agg, nc), made from the pairs: an aggregate is its
    representative and its partner, in that order, so no sort is needed)."""
    n = A.shape[0]
    if backend.is_gpu(xp):
        indptr, indices, score = A.indptr, A.indices, pair_scores_gpu(A, theta, xp)
        if score is None:                       # a pattern that is not symmetric: strength()'s sum
            S = strength(A, xp)
            indptr, indices, score = S.indptr, S.indices, pair_scores(S, theta, xp)
        partner = _match_gpu(indptr.astype(numpy.int32, copy=False), indices.astype(numpy.int32, copy=False),
                             score, xp, rounds)
    else:
        S = strength(A, xp)
        rows = sparse.rows_of(S, xp)
        score = pair_scores(S, theta, xp, rows)
        strong = score > 0
        partner = _match_host(n, rows[strong], S.indices[strong], score[strong], rounds)
    agg, nc, R = pair_lists(partner, xp)
    return agg, nc, _pair_signs(A, partner, xp) if signs else None, R


def pair_lists(partner, xp):
    """The aggregates of a matching, (agg, nc, R): numbered in the order of their representatives
    (a pair's lower unknown), and R = sparse.members(agg, nc) made from the pairs: an aggregate's
    members are its representative, then its partner. On the GPU one scan and one kernel (the
    scan counts representatives in its high 32 bits and members in its low ones); the NumPy
    expressions are its twin."""
    n = partner.shape[0]
    if backend.is_gpu(xp) and n:
        key = sparse.elementwise("pair_key", "int64 p", "int64 key",
                                 "key = (p < 0 || p > i) ? ((1LL << 32) | (p >= 0 ? 2 : 1)) : 0")(partner)
        scan = xp.cumsum(key)
        nc = int(scan[-1] >> 32)
        agg, members, indptr = xp.empty(n, numpy.int32), xp.empty(n, numpy.int32), xp.empty(nc + 1, numpy.int32)
        sparse.elementwise(
            "pair_lists", "int64 p, raw int64 scan", "int32 agg, raw int32 members, raw int32 indptr",
            "const long long r = (p >= 0 && p < i) ? p : i, s = scan[r];"
            "const int id = (int)(s >> 32) - 1, end = (int)(s & 0xffffffffLL);"
            "agg = id;"
            "if (r == i) { indptr[id + 1] = end; members[end - (p >= 0 ? 2 : 1)] = i; if (i == 0) indptr[0] = 0; }"
            "else members[end - 1] = i")(partner, scan, agg, members, indptr)
        return agg, nc, sparse.member_lists(members, indptr, n, xp)
    i = xp.arange(n, dtype=numpy.int32)
    rep = xp.where(partner >= 0, xp.minimum(i, partner), i)
    ids = xp.cumsum(rep == i) - 1
    agg = ids[rep].astype(numpy.int32)
    nc = int(ids[-1]) + 1 if n else 0
    size = xp.where(rep == i, 1 + (partner >= 0), 0).astype(numpy.int32)
    end = xp.cumsum(size, dtype=numpy.int32)              # at a representative: its aggregate's end
    indptr = xp.zeros(nc + 1, numpy.int32)
    indptr[agg + 1] = end[rep]                            # each member writes its aggregate's end
    members = xp.empty(n, numpy.int32)
    members[end[rep] - size[rep] + (i != rep)] = i
    return agg, nc, sparse.member_lists(members, indptr, n, xp)


def pair_scores(S, theta, xp, rows=None):
    """The score of each stored entry of the strength matrix S: its strength where strong (> 0 and
    at least ``theta`` times the row's largest), with ties broken by a hash of the edge; 0 where
    not strong."""
    rows = sparse.rows_of(S, xp) if rows is None else rows
    w = xp.where(S.data > 0, S.data, 0.0)
    strong = xp.flatnonzero((w > 0) & (w >= theta * sparse.row_max(w, S, xp)[rows]))
    score = xp.zeros_like(w)
    score[strong] = w[strong] * (1.0 + 1e-6 * _hash(rows[strong], S.indices[strong], xp))
    return score


def pair_scores_gpu(A, theta, xp):
    """``pair_scores(strength(A))`` on A's own pattern in one kernel (``pair_scores`` in
    aggregation.cu): where the pattern is symmetric, the strength of entry (i, j) is its own and
    its mirror's (j, i), found by a search of row j, with no sum of sparse matrices. None where
    the pattern is not symmetric or A is not real double."""
    n = A.shape[0]
    if A.dtype != numpy.float64 or n == 0:
        return None
    score = xp.empty(A.nnz)
    missing = xp.zeros(1, numpy.int32)
    kernels.kernel("aggregation", "pair_scores")(
        ((n + 255) // 256,), (256,), (numpy.int32(n), numpy.float64(theta), A.indptr.astype(numpy.int32, copy=False),
                                      A.indices.astype(numpy.int32, copy=False), A.data, A.diagonal(), score, missing))
    return None if int(missing[0]) else score


def _match_gpu(indptr, indices, score, xp, rounds):
    """The matching's rounds on the GPU, two kernels a round (aggregation.cu): every unmatched
    unknown picks its unmatched neighbour of the largest score, and mutual picks pair. All
    ``rounds`` run, with no wait for the host: a round that pairs nobody leaves the next ones
    the same picks, so they pair nobody either (the host twin's early stop gives the same)."""
    n = indptr.size - 1
    partner = xp.full(n, -1, numpy.int64)
    if n == 0:
        return partner
    choice = xp.empty(n, numpy.int32)
    grid, block, m = ((n + 255) // 256,), (256,), numpy.int32(n)
    choose, mutual = (kernels.kernel("aggregation", name) for name in ("pair_choose", "pair_mutual"))
    for _ in range(rounds):
        choose(grid, block, (m, indptr, indices, score, partner, choice))
        mutual(grid, block, (m, choice, partner))
    return partner


def _match_host(n, rows, cols, score, rounds):
    """_match_gpu's twin on the host, on the strong edges (``rows`` sorted, ``score`` > 0) alone:
    every round keeps the edges whose two ends are still unmatched, so it works on fewer, and
    takes each row's best score by a segmented maximum over them; the last of equal scores wins,
    as in the kernel."""
    partner = numpy.full(n, -1, numpy.int64)
    i = numpy.arange(n)
    for k in range(rounds):
        if k:
            keep = (partner[rows] < 0) & (partner[cols] < 0)
            rows, cols, score = rows[keep], cols[keep], score[keep]
        if not rows.size:
            break
        start = numpy.empty(rows.size, bool)
        start[0], start[1:] = True, rows[1:] != rows[:-1]
        best = numpy.maximum.reduceat(score, numpy.flatnonzero(start))
        pick = score == best[numpy.cumsum(start) - 1]
        choice = numpy.full(n, -1, numpy.int64)
        choice[rows[pick]] = cols[pick]
        mutual = (choice >= 0) & (choice[numpy.maximum(choice, 0)] == i)
        if not mutual.any():
            break
        partner = numpy.where(mutual, choice, partner)
    return partner


def positive_couplings(A, xp):
    """Whether A has a positive off-diagonal entry (real part). Where it has none, neither has
    P^T A P for a P of ones and zeros (its couplings sum A's), so no level of a pairwise hierarchy
    needs signs. On the GPU one kernel, a thread a row, and one wait for the host."""
    data = A.data.real if xp.iscomplexobj(A.data) else A.data
    if backend.is_gpu(xp):
        if not A.shape[0]:
            return False
        return backend.any_true(sparse.elementwise(
            "positive_couplings", "raw T a, raw I ptr, raw I col", "bool any",
            "any = false; for (I j = ptr[i]; j < ptr[i + 1]; j++) if (col[j] != i && a[j] > 0) any = true")(
            xp.ascontiguousarray(data), A.indptr, A.indices, size=A.shape[0]))
    return bool(((data > 0) & (sparse.rows_of(A, xp) != A.indices)).any())


def _pair_signs(A, partner, xp):
    """The signs of the prolongation's entries, +-1 per unknown (None when all are +1): the second
    unknown of a pair whose coupling a_ij + a_ji is positive takes -1, so that P follows a
    near-null vector that changes sign across positive couplings (for D A D with D = diag(+-1)
    and A an M-matrix, the hierarchy of A up to the signs D)."""
    n = A.shape[0]
    data = A.data.real if xp.iscomplexobj(A.data) else A.data
    if backend.is_gpu(xp):
        # one thread an unknown: its row and its partner's row searched for the pair's couplings
        flip = sparse.elementwise(
            "pair_flip", "int64 p, raw T a, raw I ptr, raw I col", "bool flip",
            "T c = 0; if (p >= 0) { for (I j = ptr[i]; j < ptr[i + 1]; j++) if (col[j] == p) c += a[j];"
            "for (I j = ptr[p]; j < ptr[p + 1]; j++) if (col[j] == i) c += a[j]; }"
            "flip = p >= 0 && p < i && c > 0")(partner, xp.ascontiguousarray(data), A.indptr, A.indices)
    else:
        if not positive_couplings(A, xp):                # no pair to sign
            return None
        rows, cols = sparse.rows_of(A, xp), A.indices
        paired = partner >= 0
        c = xp.zeros(n)
        for mine, other in ((rows, cols), (cols, rows)):     # a_{i, partner(i)} and a_{partner(i), i}
            hit = paired[mine] & (other == partner[mine])
            c += xp.bincount(mine[hit], weights=data[hit], minlength=n)
        flip = paired & (partner < xp.arange(n)) & (c > 0)       # the pair's second unknown
    if not backend.any_true(flip):
        return None
    return xp.where(flip, -1.0, 1.0)


def pairwise(A, xp, coarse_size, max_levels, theta=0.25, passes=2, comm=None):
    """Double pairwise aggregation, level by level: returns (aggs, sizes, Acs, signs, members):
    ``auxgrid``'s aggregates and sizes, the Galerkin matrices it formed on the way (Acs[k] for
    level k+1), the signs of each level's prolongation (None where all are +1: an M-matrix;
    _pair_signs) and each level's member lists (R = P^T without the signs: the passes' lists
    joined, each aggregate's members those of its first pass-aggregate, then its second's).
    On several ranks (``comm``) A is the block of this rank's own rows and columns: each rank
    matches its own unknowns, the sizes compared are the global sums, and a pass has signs on
    every rank where it has them on one (distributed.Rows.galerkin exchanges them, collectively)."""
    total = (lambda v: v) if comm is None else comm.allsum
    aggs, sizes, Acs, signs, members = [], [A.shape[0]], [], [], []
    signed = total(int(positive_couplings(A, xp))) > 0
    while total(sizes[-1]) > coarse_size and len(sizes) < max_levels:
        agg, sign, nc, Ak, Rk = None, None, sizes[-1], A, None
        for _ in range(passes):
            a, nc, s, R = pair_matching(Ak, xp, theta, signs=signed)
            if comm is not None and comm.allsum(int(s is not None)):
                s = xp.ones(Ak.shape[0]) if s is None else s
            # P = P_1 P_2: the sign of fine unknown i is s_1[i] s_2[a_1[i]]
            if s is not None:
                sign = s if agg is None else (s[agg] if sign is None else sign * s[agg])
            agg = a if agg is None else a[agg]
            Ak = sparse.galerkin(Ak, a, nc, xp, s, R)
            Rk = R if Rk is None else _joined(Rk, R, xp)
        if total(nc) > 0.9 * total(sizes[-1]):     # coarsening has stalled: stop here
            break
        aggs.append(agg)
        sizes.append(nc)
        Acs.append(Ak)
        signs.append(sign)
        members.append(Rk)
        A = Ak
    return aggs, sizes, Acs, signs, members


def _joined(R1, R2, xp):
    """The member lists of two aggregations in turn (R1: fine to middle, R2: middle to coarse):
    R1's rows in the order R2 lists them (a row gather), split at R2's row bounds. No sort:
    a coarse aggregate's members come as its middle aggregates' lists, one after the other."""
    G = sparse.gathered_rows(R1, R2.indices, xp)
    return sparse.member_lists(G.indices, G.indptr[R2.indptr], R1.shape[1], xp)
