"""Unsmoothed aggregation multigrid and its cycles: the K-cycle (nonlinear AMLI), V and W.

Wang, Hu, Cohen, Xu, "A parallel auxiliary grid algebraic multigrid method for graphic processing
units", Algorithms 2.1 (nonlinear PCG) and 2.2 (nonlinear AMLI-cycle); the K-cycle of Notay and
Vassilevski. Level 0 is the finest. Level k+1's matrix is the Galerkin product P^T A_k P of the
piecewise-constant prolongation of level k's aggregates (sparse.galerkin), or of the prolongation
of a system's near null space or of smoothed aggregation (nullspace.py, smoothed.py); the coarsest
level is solved directly.

On every coarse level the K-cycle runs ``kcycle_its`` steps of a flexible CG preconditioned by the
next level's cycle. That makes the preconditioner nonlinear (it changes from one application to
the next): the outer Krylov method should be flexible (PETSc's ``fcg``, ``fgmres``).
Everything here works on NumPy or CuPy arrays, and a cycle never waits for the host (the flexible
CG's inner products stay on the device), so on the GPU it is captured and replayed as a CUDA graph.

On several ranks (``comm``, distributed.py) each level's matrix is distributed by rows: every rank
aggregates its own unknowns, products exchange the ghost values, the smoothers are hybrid (their
own rows by Gauss-Seidel or l1-Jacobi, other ranks' values fixed during a sweep; Chebyshev is the
global polynomial), the flexible CG's inner products are global sums, and the coarsest matrix is
gathered onto every rank.
"""
import dataclasses

from .. import backend
from . import (
    aggregation,
    auxgrid,
    coarse,
    colouring,
    cycle,
    distributed,
    energies,
    nullspace,
    products,
    replicated,
    smoothed,
    smoothers,
    sparse,
)
from .comm import Comm

# Pairwise levels needing over 3 x 8 colours (a kernel each a sweep) have them folded into 8 (the l1
# diagonal absorbs the couplings within a colour): the proper colouring's iteration counts at a
# fraction of the launches; into 4 the K-cycle loses some h-independence.
MAX_COLOURS = 8
# A coarse unknown whose energy is below this fraction of its members' (energies.py) has a
# diagonal that rounding made: a smoother would divide by it
ZERO_ENERGY = 1e-8
STALLED_LIMIT = 50000             # the largest coarsest level a stalled hierarchy may end in (its sparse LU)
# The K-cycle visits level k 2^k times. On the GPU a level of fewer unknowns than this costs the same
# per visit whatever its size (launch latency), and the flexible CG above makes up for V-cycles there
# (2D and 3D Poisson, both aggregations: the same counts); on the host the K-cycle runs everywhere.
KCYCLE_SIZE = {"gpu": 40000, "cpu": 0}
# The W-cycle likewise visits level k 2^k times, and has no flexible CG above to make up for
# V-cycles: from the first level below this size on the GPU it costs a few iterations, fewer than
# from the K-cycle's size, for less time (docs/amg.md). Real matrices only: measured on them.
WCYCLE_SIZE = {"gpu": 10000, "cpu": 0}
# ... but V-cycles from a level of over this many times the coarsest's unknowns lose the K-cycle's
# counts (2D 127^2 aux grid: 11 iterations from 16 times, 17 from 64; 3D 257^3: 17 from 8, 18 from
# 64); pairwise aggregation, coarsening by about 3.4 a level, keeps them from 33 times (2D 2048^2)
KCYCLE_V_RATIO = 40
# The W-cycle's over-correction of an unsmoothed prolongation (cycle.py; counts in docs/amg.md) of
# a real matrix of diagonally dominant rows (sparse.dominant); others, indefinite ones too, keep 1.
OVERCORRECTION = 1.5
# ... and where V-cycles replace its coarse visits (the GPU's WCYCLE_SIZE), of a nearly symmetric
# matrix only: upwind convection-diffusion at 1023^2 (pairwise) diverged from cell Peclet 0.3 on
# (||A - A^T|| / ||A + A^T|| = 0.086; 0.2 at Peclet 1), and converged at 0.1 (0.033, 42 iterations
# against 48 without); the whole W-cycle over-corrects every such matrix (docs/amg.md)
OVERCORRECTION_ASYMMETRY = 0.01
# On the GPU those V-cycle levels smooth by l1-Jacobi where the smoother is colour Gauss-Seidel:
# one kernel a sweep instead of one a colour, and no colouring in setup; the flexible CG above
# keeps the iteration counts, and pairwise levels (6 to 8 colours) gain most (docs/amg.md).
VCYCLE_SMOOTHER = {"gpu": {"gs": "l1jacobi"}, "cpu": {}}
# ... and so do a real matrix's levels but the finest of fewer unknowns than this, whatever the
# cycle: their colour kernels cost launch latency more than bandwidth; the W-cycle visits them most.
SMALL_JACOBI_SIZE = {"gpu": 300000, "cpu": 0}
# ... and every pairwise level but the finest: Jones-Plassmann colours are 6 to 8 kernels a sweep
# (the aux grid's cells give 4) and rounds in the setup; the W-cycle takes at most one iteration more
# (2D 2048^2: 17 -> 18; 3D 257^3: 12 both) in less time (docs/amg.md)
PAIRWISE_JACOBI = {"gpu": True, "cpu": False}
# -pc_amg_smoother auto: smoothed aggregation on the host by Chebyshev (2, 2) in D^-1 A (GAMG's way;
# no colouring in setup, and fewer iterations than Gauss-Seidel (1, 1): docs/amg.md), else gs


@dataclasses.dataclass
class Options:
    aggregation: str = "auto"      # auxgrid | pairwise | mis | auto (mis when smoothed, else auxgrid with coordinates)
    nsmooths: int = None           # smoothed aggregation: Jacobi steps on each tentative prolongation (smoothed.py;
                                   # None: auto, smoothed.auto)
    aggressive: int = 1            # mis aggregation: levels aggregated by distance-2 sets (then distance 1)
    threshold: float = 0.0         # mis aggregation: couplings weaker than this are dropped (smoothed.strong_graph)
    cycle: str = "k"               # k | v | w
    kcycle_its: int = 2
    overcorrection: float = None   # W-cycle: coarse corrections scaled by this (cycle.py; None: OVERCORRECTION's rule)
    kcycle_size: int = None        # K- and W-cycle: V-cycles on levels with fewer unknowns (default: KCYCLE_SIZE,
                                   # WCYCLE_SIZE)
    smoother: str = "auto"         # auto (the note below VCYCLE_SMOOTHER) | gs | l1jacobi | chebyshev
    vcycle_smoother: str = "auto"  # the K- and W-cycle's V-cycle levels: auto (VCYCLE_SMOOTHER) | gs | l1jacobi |
                                   # chebyshev
    pre: int = None                # sweeps; None: 2 for Chebyshev (a degree-2 polynomial, as PETSc's PCMG
    post: int = None               # smooths), else 1
    coarse_size: int = None       # default: 2048 on the GPU (one dense GEMV), 400 on the CPU
    max_levels: int = 25
    theta: float = 0.25            # pairwise: strength of connection
    gather_size: int = 65536       # several ranks: gather the first level this small (or a pair: unsmoothed, smoothed)
    graph: bool = True             # on the GPU, capture the gathered levels' cycle as a CUDA graph
    storage: str = "auto"          # auto (coarse on the GPU, csr on the host) | coarse | csr | ell
    dtype: object = None           # the cycle's values (None: A's; float32, complex64: set up in A's, run in it)


def _level(A, agg, nc, colours, smoother, xp, ell=False, sign=None, P=None, R=None, dtype=None):
    """A cycle.CSRLevel of the hierarchy: ``A`` this rank's own rows and columns (a distributed.Rows
    on several ranks), ``agg`` its aggregates (None on the coarsest: a direct solve) and the signs
    of its prolongation (None: all +1), or ``P`` its prolongation (a CSR matrix: the tentative
    prolongation of a near null space, smoothed or not: nullspace.py, smoothed.py); ``R`` the
    restriction of ``agg`` or P where it is made already (sparse.members, P^T); ``smoother`` its
    kind (smoothers.make_csr); ``ell``: the cycle's products use ELL storage (sparse.use_ell
    decides; on a distributed level the smoother's, of the own block); ``dtype``: the cycle's
    precision, of M, the transfers and the smoother (A, the setup's, stays as it is)."""
    rows = A if isinstance(A, distributed.Rows) else None
    A = A.own if rows else A
    last = agg is None and P is None
    M = sparse.astype(sparse.storage(A, xp, ell and not last), dtype)
    if last:
        return cycle.CSRLevel(A, xp, M, rows=rows)
    if smoother == "gs" and colours is None:
        colours = colouring.colour_graph(A, xp, MAX_COLOURS)
    if P is not None:
        smoother = smoothers.make_csr(smoother, A, xp, colours, rows, M)
        P, R = (T if T.dtype == M.dtype else T.astype(M.dtype)       # the row kernels take one value type
                for T in (P, P.T.tocsr() if R is None else R))
        return cycle.CSRLevel(A, xp, M, R=R, P=P, smoother=smoother, rows=rows)
    R = sparse.astype(sparse.members(agg, nc, xp, sign) if R is None else R, dtype)
    smoother = smoothers.make_csr(smoother, A, xp, colours, rows, M, agg, R)
    return cycle.CSRLevel(A, xp, M, R=R, agg=agg, sign=sparse.astype(sign, dtype), smoother=smoother, rows=rows)


class AggregationMG:
    """The hierarchy, built from the finest CSR matrix ``A`` and, for the auxiliary grid, the
    vertex coordinates (n x dim, or None). On several ranks ``A`` is this rank's distributed.Rows,
    ``coords`` this rank's vertices and ``comm`` the communicator."""

    def __init__(self, A, xp, opts=None, coords=None, comm=None, block_size=1, near_null=None, energies_now=False):
        self.xp, self.opts = xp, dataclasses.replace(opts or Options())
        self.comm = comm = comm or Comm()
        o = self.opts
        parallel = isinstance(A, distributed.Rows)
        if parallel and o.dtype is not None and A.own.dtype != o.dtype:
            raise ValueError("a cycle in another precision than the matrix's runs on one rank")
        mine = A.own if parallel else A           # this rank's own rows and columns
        if o.coarse_size is None:
            # on the GPU the dense inverse is one GEMV a cycle; larger, its LU grows the setup more than the cycle gains
            o.coarse_size = 2048 if backend.is_gpu(xp) else 400
        for name, value, known in (("cycle", o.cycle, "k v w"), ("storage", o.storage, "auto coarse csr ell")):
            if value not in known.split():
                raise ValueError(f"unknown {name} {value!r}")
        self.smoothing = None             # why auto chose (un)smoothed aggregation, for describe()
        if o.nsmooths is None:
            system = "near null" if near_null is not None else "components" if block_size > 1 else None
            o.nsmooths, self.smoothing = smoothed.auto(mine, xp, o.aggregation, coords is not None,
                                                       system, A.ghost if parallel else None,
                                                       comm.allsum if parallel else None)
        if isinstance(o.gather_size, tuple):     # the defaults of unsmoothed and smoothed aggregation
            o.gather_size = o.gather_size[bool(o.nsmooths)]
        if o.smoother == "auto":
            o.smoother = "chebyshev" if o.nsmooths and not backend.is_gpu(xp) else "gs"
        o.pre, o.post = (n if n is not None else 2 if o.smoother == "chebyshev" else 1 for n in (o.pre, o.post))
        self.method = o.aggregation
        if self.method == "auto":
            self.method = "mis" if o.nsmooths else "auxgrid" if coords is not None else "pairwise"
        if self.method not in ("auxgrid", "pairwise", "mis"):
            raise ValueError(f"unknown aggregation {self.method!r}")
        clock = backend.Clock(xp)
        # several ranks: coarsen while distributed down to gather_size, then replicated.py continues
        stop = max(o.coarse_size, o.gather_size) if parallel else o.coarse_size
        transfers, members, graphs = [None], [], []
        coarsest = (block_size, near_null)        # a system's block size and near null space on the last level
        if near_null is not None or block_size > 1 or o.nsmooths or self.method == "mis":
            mats, aggs, sizes, graphs, members, transfers, coarsest = nullspace.system_levels(
                A, xp, block_size, near_null, coords, stop, self.method, o.theta, o.max_levels,
                comm if parallel else None, o.nsmooths, o.threshold, o.aggressive)
            signs = [None] * len(aggs)
            colours = [None] * len(mats)          # the node graphs' colours, for the levels that take them
        elif self.method == "auxgrid":
            if coords is None:
                raise ValueError("auxiliary-grid aggregation needs vertex coordinates")
            aggs, sizes, colours, members = auxgrid.auxgrid(coords, xp, stop, o.max_levels,
                                                                comm if parallel else None)
            signs = [None] * len(aggs)
            mats = [A]
            for agg, nc, R in zip(aggs, sizes[1:], members):
                mats.append(mats[-1].galerkin(agg, nc) if parallel else sparse.galerkin(mats[-1], agg, nc, xp, R=R))
        else:
            aggs, sizes, Acs, signs, lists = aggregation.pairwise(mine, xp, stop, o.max_levels,
                                                                  o.theta, comm=comm if parallel else None)
            members = [sparse.signed(R, s) for R, s in zip(lists, signs)]
            mats, colours = [A], [None] * len(sizes)
            for agg, nc, Ac, sign in zip(aggs, sizes[1:], Acs, signs):
                mats.append(mats[-1].galerkin(agg, nc, Ac, sign) if parallel else Ac)
        self.timings = {"coarsening": clock()}
        # coarse unknowns of no energy (energies.py): a level with one that couples to others is the
        # coarsest, solved directly. On the GPU they are looked for on the device and the flags read
        # at the end (no wait here; Jacobi and Gauss-Seidel set up on any diagonal), and where there
        # are some the hierarchy is built again with them handled
        flags, bad = None, None
        if energies_now or not backend.is_gpu(xp) or "chebyshev" in (o.smoother, o.vcycle_smoother):
            bad = energies.zero_energies(mats, aggs, transfers, members, xp, comm, parallel, ZERO_ENERGY)
        else:
            flags = energies.look(mats, aggs, transfers, members, xp, parallel, ZERO_ENERGY)
        if bad is not None:
            del mats[bad + 1:], sizes[bad + 1:], aggs[bad:], signs[bad:], members[bad:], transfers[bad:]
            del graphs[bad:], colours[bad + 1:]
        # a hierarchy that stopped coarsening above coarse_size ends in a direct solve of what is
        # left: said in describe(), and refused where that would be a sparse LU of a large matrix
        self.stalled = None
        if (not parallel or bad is not None) and mats[-1].shape[0] > o.coarse_size:
            n = mats[-1].shape[0]
            why = (f"level {bad}'s Galerkin operator has a diagonal entry of no energy: an indefinite matrix, "
                   "whose aggregates' energies cancel" if bad is not None else
                   "-pc_amg_max_levels reached" if len(mats) >= o.max_levels else
                   "the matching found too few strong pairs")
            if n > STALLED_LIMIT:
                raise ValueError(f"coarsening stopped at {n} unknowns on level {len(mats) - 1} ({why}), above "
                                 f"-pc_amg_coarse_size {o.coarse_size}; a direct solve of more than {STALLED_LIMIT} "
                                 "unknowns is no preconditioner: check the matrix (its diagonal, its scaling), or "
                                 "raise -pc_amg_max_levels")
            self.stalled = f"coarsening stopped at {n} unknowns, above the coarse size {o.coarse_size} ({why})"
        transfers += [None] * (len(mats) - len(transfers))
        members += [None] * (len(mats) - len(members))
        # each level's smoother: the K- or W-cycle's V-cycle levels may take another
        device = "gpu" if backend.is_gpu(xp) else "cpu"
        if o.kcycle_size is None:
            if o.cycle != "w":
                o.kcycle_size = KCYCLE_SIZE[device]
            else:   # a complex matrix (indefinite Helmholtz-type ones: ksp ex11) keeps the whole W-cycle
                o.kcycle_size = 0 if mine.dtype.kind == "c" else WCYCLE_SIZE[device]
        unknowns = [M.shape[0] for M in mats]           # global sizes on several ranks
        self.v_from = self._truncation(unknowns) if o.cycle in ("k", "w") else None
        self.no_overcorrection = None
        if o.overcorrection is None:
            ok = not o.nsmooths and mine.dtype.kind != "c" and sparse.dominant(
                mine, xp, A.ghost_l1() if parallel else 0)
            overcorrect = comm.allsum(int(not ok)) == 0
            if overcorrect and o.cycle == "w" and self.v_from is not None:
                asym = smoothed.asymmetry(mine, xp, comm.allsum if parallel else None)
                if asym > OVERCORRECTION_ASYMMETRY:
                    overcorrect = False
                    self.no_overcorrection = (f"no over-correction: V-cycles below level {self.v_from} and "
                                              f"|A - A^T| / |A + A^T| = {asym:.2g} > {OVERCORRECTION_ASYMMETRY:g}")
            o.overcorrection = OVERCORRECTION if overcorrect else 1.0
        auto = o.vcycle_smoother == "auto"
        vsmoother = VCYCLE_SMOOTHER[device].get(o.smoother, o.smoother) if auto else o.vcycle_smoother
        small = vsmoother if auto and mine.dtype.kind != "c" else o.smoother
        every = PAIRWISE_JACOBI[device] and self.method == "pairwise"
        kinds = [vsmoother if self.v_from is not None and k >= self.v_from else
                 small if 0 < k and (every or n < SMALL_JACOBI_SIZE[device]) else o.smoother
                 for k, n in enumerate(unknowns)]
        for k, (graph, bs) in enumerate(graphs):
            if kinds[k] == "gs":
                colours[k] = nullspace.node_colours(graph, bs, xp, MAX_COLOURS)
        # each level's unknowns in the cycle's order (colouring.colour_order; None: the matrix's),
        # on the host, for the Gauss-Seidel levels (on several ranks those of aggregates, each
        # rank's own rows: a prolongation across ranks keeps its order)
        self.orders = [None] * len(mats)
        gs = [k < len(aggs) and kind == "gs" for k, kind in enumerate(kinds)]
        if any(gs) and not backend.is_gpu(xp) and not (parallel and any(T is not None for T in transfers)):
            colours = [None if not g else c if c is not None else
                       colouring.colour_graph(M.own if parallel else M, xp, MAX_COLOURS)
                       for g, M, c in zip(gs, mats, colours)]
            mats, aggs, signs, colours, moved, members, self.orders = colouring.colour_order(
                mats, aggs, signs, colours, transfers[:len(aggs)], members[:len(aggs)])
            transfers, members = moved + [None], members + [None]
        # a serial hierarchy's coarsest inverse is queued first: its factorization runs on the
        # device while the host sets up the smoothers
        queued = None if parallel else coarse.CSRDirectSolve(mats[-1], xp, o.dtype, wait=False)
        storage = o.storage if o.storage != "auto" else "coarse" if backend.is_gpu(xp) else "csr"
        ell = [sparse.use_ell(storage, getattr(M, "own", M), self.method == "auxgrid", coords) for M in mats]
        self.levels = [_level(M, agg, nc, col, kind, xp, e, s, P, R, o.dtype) for M, agg, nc, col, kind, e, s, P, R
                       in zip(mats, aggs + [None], sizes[1:] + [None], colours, kinds, ell, signs + [None],
                              transfers, members)]
        self.timings["smoothers"] = clock()
        if parallel:
            comm.prepare()                # the inner products' exchange, device to device where it can be
        if not parallel:
            self.coarse = queued.finish()
        elif mats[-1].shape[0] <= o.coarse_size or bad is not None:
            self.coarse = coarse.GatheredRowsSolve(mats[-1], xp)
        else:
            self.coarse = replicated.gathered(mats, aggs, sizes[1:], coords, self.orders[0], self.method, o, comm,
                                              coarsest, block_size > 1 or near_null is not None, xp, AggregationMG)
        self._cycle = cycle.Cycle(self.levels, self.coarse, o.cycle, o.pre, o.post, xp, self._dots, o.kcycle_its,
                                  v_from=self.v_from, overcorrection=o.overcorrection)
        self._transposed = None           # cycle_transpose's, built when first asked for
        self.dtype = self.levels[0].M.dtype             # the cycle's
        self.timings["coarse"] = clock()
        if flags is not None and comm.allmax(int(backend.to_host(flags).any())):
            self.free()
            self.__init__(A, xp, opts, coords, comm, block_size, near_null, energies_now=True)

    def _truncation(self, sizes):
        """The first level of the K- or W-cycle's V-cycles (None: none) of levels of ``sizes``
        unknowns (global sizes on several ranks): the first below kcycle_size unknowns and at most
        KCYCLE_V_RATIO times the coarsest level's, never level 1 (a small problem keeps the
        flexible CG or the W-cycle's second visit there)."""
        first = next((k for k, n in enumerate(sizes)
                      if k >= 2 and n < self.opts.kcycle_size and n <= KCYCLE_V_RATIO * sizes[-1]), None)
        return first if first is not None and first < len(sizes) - 1 else None

    def free(self):
        """Release the levels now, the shared coarse visits' graphs, and the replicated levels'
        graphs (their callback refers back to the hierarchy: a reference cycle that would hold the
        GPU memory until Python's cyclic garbage collector runs)."""
        for solve in (self.coarse, self._transposed and self._transposed.coarse):
            rep = getattr(solve, "inner", None)
            if isinstance(rep, replicated.Replicated):
                rep.free()
        for c in (self._cycle, self._transposed):
            if c is not None:
                c.free()
        self.levels, self.coarse, self._cycle, self._transposed = [], None, None, None

    def cycle(self, f):
        """An approximation of A^-1 f (a new array): B_0 f, cycle.Cycle."""
        return self._in_order(self._cycle, f)

    def cycle_transpose(self, f):
        """B_0^T f (a new array): the transposed cycle of the V- and W-cycles
        (cycle.Cycle.transposed), built at the first call (on several ranks collective)."""
        return self._in_order(self.transposed_cycle(), f)

    def correction_transpose(self, f):
        """The transpose of ``correction`` (the gathered levels' part of a transposed cycle)."""
        return self._in_order(self.transposed_cycle().correction, f)

    def transposed_cycle(self):
        """The transposed cycle, built now if not yet: it waits for the host (and on several ranks
        exchanges), so a CUDA graph may capture its use, never its making."""
        if self._transposed is None:
            self._transposed = self._cycle.transposed()
        return self._transposed

    def correction(self, f):
        """What the cycle of a finer level gets from this hierarchy's finest level for the
        restricted residual f (replicated.Replicated: the levels a distributed hierarchy gathered)."""
        return self._in_order(self._cycle.correction, f)

    def _in_order(self, run, f):
        f, order = f.astype(self.dtype, copy=False), self.orders[0]
        if order is None:
            return run(f)
        u = self.xp.empty_like(f)
        u[order] = run(f[order])
        return u

    def _dots(self, *pairs):
        """(a, b) of each pair, a 1-D array; on several ranks their global sums in one exchange (on
        the device where the communicator is capturable, else through the host)."""
        d = products.dots(pairs, self.xp)
        return d if self.comm.size == 1 else self.comm.allsum_array(d)

    # -- information ----------------------------------------------------------------------------------
    def counts(self):
        """(unknowns, stored entries) of each level, over all ranks, the replicated levels included."""
        tail = getattr(getattr(self.coarse, "inner", None), "mg", None)
        return ([(self.comm.allsum(lev.n), lev.rows.nnz if lev.rows else lev.A.nnz) for lev in self.levels]
                + (tail.counts()[1:] if tail else []))

    def complexities(self, counts=None):
        """Operator and grid complexity (from ``counts()``, computed here unless given)."""
        n, nnz = zip(*(counts or self.counts()))
        return sum(nnz) / nnz[0], sum(n) / n[0]

    def describe(self):
        o = self.opts
        counts = self.counts()                    # collective on several ranks: once
        oc, gc = self.complexities(counts)
        cyc = {"k": f"K-cycle ({o.kcycle_its} flexible CG steps per coarse level)",
               "v": "V-cycle", "w": "W-cycle"}[o.cycle]
        if o.cycle == "w" and o.overcorrection != 1:
            cyc += f", its coarse corrections scaled by {o.overcorrection:g} (over-correction)"
        if self.v_from is not None:
            cyc += f", V-cycles from level {self.v_from} (fewer than {o.kcycle_size} unknowns)"

        lines = [f"{cyc}, smoothing ({o.pre}, {o.post}), {len(counts)} levels, "
                 f"operator complexity {oc:.3f}, grid complexity {gc:.3f}"]
        if o.pre != o.post and o.cycle != "k":        # the K-cycle's own note says more
            lines.append("not a symmetric preconditioner: pre- and post-sweeps differ; with CG use fcg, or gmres, "
                         "fgmres, bcgs")
        if self.smoothing:
            lines.append(f"-pc_amg_agg_nsmooths auto: {self.smoothing}")
        if self.no_overcorrection:
            lines.append(self.no_overcorrection)
        if self.stalled:
            lines.append(f"WARNING: {self.stalled}: the coarsest solve is a direct solve of that size")
        for k, (lev, (n, nnz)) in enumerate(zip(self.levels, counts)):
            s = lev.smoother.describe() if lev.smoother else self.coarse.describe()
            store = f"{lev.storage}, " if lev.smoother else ""
            lines.append(f"  level {k}: {n} unknowns, {nnz} nonzeros, {store}{s}")
        return lines
