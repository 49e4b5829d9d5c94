"""pcplugins.AMG: aggregation AMG with the K-cycle as a PETSc preconditioner (PCPYTHON).

    -ksp_type fcg -pc_type python -pc_python_type pcplugins.AMG [-pc_amg_* options]

Follows Wang, Hu, Cohen, Xu, "A parallel auxiliary grid algebraic multigrid method for graphic
processing units": aggregates from an auxiliary quadtree/octree grid when vertex coordinates are
known (PCSetCoordinates, pcplugins.set_coordinates, a Vec composed on the PC as "coordinates", or
the PC's DMDA), double pairwise matching when not; Galerkin coarse matrices by summation over aggregates;
colour Gauss-Seidel; the K-cycle. Smoothed aggregation (core/smoothed.py, -pc_amg_agg_nsmooths)
on the host for nearly symmetric scalar matrices without coordinates. Any assembled AIJ matrix, no DM needed; with an
aijcusparse matrix and CUDA Vecs setup and cycle run on the GPU (CuPy). On several ranks the
hierarchy is distributed by rows (kcycle.py, distributed.py): aggregates within a rank, hybrid
smoothers, global inner products, the coarsest level gathered.
The default cycle is the W-cycle: a fixed linear operator (symmetric for a symmetric matrix), so
any KSP may use it, CG, GMRES and BiCGStab included. The K-cycle (-pc_amg_cycle k) converges in
fewer iterations but is nonlinear, a different operator at every application: only a flexible outer
method (fcg, fgmres, gcr) gives right answers with it. On CUDA vectors prefer fgmres: PETSc 3.26's
fcg computes its VecMTDot on the host there.
"""

import numpy

from .. import backend
from ..core import distributed, kcycle, nullspace, rows, smoothed, sparse
from ..petsc import compose, csrcomm, errors, log, mat, options, pcbase, vec

# the first coarse level gathered onto every rank under MPI, for unsmoothed and smoothed aggregation: on
# the GPU every visit of a distributed level costs exchanges, and a gathered level's repeated work costs
# each GPU little; on the host it is repeated on every rank, so fewer are gathered, and fewer still of
# smoothed aggregation, whose coarse rows are several times longer (docs/amg.md, MPI)
GATHER_SIZE = {"gpu": (300000, 300000), "cpu": (8192, 1024)}
SINGLE = {"f": numpy.float32, "c": numpy.complex64}      # -pc_amg_precision single's type of a real, complex matrix

OPTIONS = [
    options.Option("pc_amg_aggregation", "str", "auto",
           "Aggregation (auto: mis for smoothed aggregation, else auxgrid when coordinates are known, else "
           "pairwise; mis: standard aggregates about a maximal independent set of the strength graph)",
           ("auto", "auxgrid", "pairwise", "mis")),
    options.Option("pc_amg_agg_nsmooths", "int", None, "Smoothed aggregation: damped Jacobi steps on each tentative "
           "prolongation (0: unsmoothed; default: 1 on the host for a real matrix without a near null space, "
           f"aggregation mis or auto without coordinates, that is symmetric to within {smoothed.ASYMMETRY:g} "
           f"(|A - A^T| / |A + A^T|) with at most {smoothed.POSITIVE:g} of its off-diagonal weight in positive "
           f"couplings or rows that sum to at most {smoothed.CONSTANT:g} of their weight, else 0)",
           lo=0),
    options.Option("pc_amg_threshold", "real", 0.0, "mis aggregation: drop couplings weaker than this "
           "(symmetrized |a_ij| / sqrt(|a_ii a_jj|)) from the strength graph", lo=0, hi=1, open="hi"),
    options.Option("pc_amg_aggressive_coarsening", "int", 1, "mis aggregation: the number of levels aggregated "
           "about a distance-2 independent set (the coarser ones about a distance-1 set)", lo=0),
    options.Option("pc_amg_cycle", "str", "w", "Cycle: w and v are linear (any KSP); k: the K-cycle (nonlinear "
           "AMLI), fewer iterations, but ONLY under a flexible KSP (-ksp_type fcg or fgmres)", ("k", "v", "w")),
    options.Option("pc_amg_kcycle_its", "int", 2, "K-cycle: flexible CG steps on each coarse level", lo=1),
    options.Option("pc_amg_overcorrection", "real", None,
           "W-cycle: scale each coarse correction by this (over-correction; it stays a symmetric positive definite "
           "preconditioner below 2: docs/amg.md); default "
           f"{kcycle.OVERCORRECTION:g} for unsmoothed aggregation of a real matrix whose rows are diagonally dominant "
           "(an indefinite one is not) and, where V-cycles replace the coarse visits (the GPU), that is within "
           f"{kcycle.OVERCORRECTION_ASYMMETRY:g} of symmetric; else 1", lo=0, hi=2, open="lohi"),
    options.Option("pc_amg_kcycle_size", "int", None,
           "K- and W-cycle: V-cycles on the levels with fewer unknowns (default on the GPU "
           f"{kcycle.KCYCLE_SIZE['gpu']} for the K-cycle, {kcycle.WCYCLE_SIZE['gpu']} for the W-cycle of a real "
           f"matrix; {kcycle.KCYCLE_SIZE['cpu']} (none) on the host)", lo=0),
    options.Option("pc_amg_smoother", "str", "auto", "Smoother (gs: colour Gauss-Seidel; chebyshev: Chebyshev "
           "in D^-1 A on [b/10, b], b 1.1 times a Lanczos estimate of its largest eigenvalue, capped by "
           "Gershgorin's bound where the level is nearly symmetric; auto: chebyshev for smoothed aggregation on "
           "the host, else gs)",
           ("auto", "gs", "l1jacobi", "chebyshev")),
    options.Option("pc_amg_vcycle_smoother", "str", "auto",
           "K- and W-cycle: smoother of the levels they run V-cycles on (-pc_amg_kcycle_size; auto: l1jacobi on "
           "the GPU where the smoother is gs, one kernel a sweep instead of one a colour, and so on a real "
           f"matrix's GPU levels but the finest of fewer than {kcycle.SMALL_JACOBI_SIZE['gpu']} unknowns, and "
           "every pairwise one but the finest; else -pc_amg_smoother)",
           ("auto", "gs", "l1jacobi", "chebyshev")),
    options.Option("pc_amg_pre", "int", None, "Pre-smoothing sweeps (default: 2 with Chebyshev, else 1)", lo=0),
    options.Option("pc_amg_post", "int", None, "Post-smoothing sweeps (default: 2 with Chebyshev, else 1)", lo=0),
    options.Option("pc_amg_coarse_size", "int", None,
           "Stop coarsening at this many unknowns (default: 2048 on the GPU, 400 on the CPU)", lo=1),
    options.Option("pc_amg_max_levels", "int", 25, "Most levels", lo=2),
    options.Option("pc_amg_storage", "str", "auto", "Storage of the levels' matrices in the cycle (coarse: ELL "
           "on the aux grid's coarse levels whose rows have at most 9 (3D: 27) entries, CSR elsewhere; "
           "ell: every serial level; auto: coarse on the GPU, csr on the CPU)", ("auto", "coarse", "csr", "ell")),
    options.Option("pc_amg_strength", "real", 0.25, "Pairwise aggregation: strength-of-connection threshold",
           lo=0, hi=1, open="hi"),
    options.Option("pc_amg_gather_size", "int", None,
           "MPI: gather the first coarse level with at most this many unknowns onto every rank "
           "(a serial hierarchy continues there); 0: keep every level distributed; default "
           f"{GATHER_SIZE['gpu'][0]} on the GPU, on the host {GATHER_SIZE['cpu'][0]} ({GATHER_SIZE['cpu'][1]} for "
           "smoothed aggregation)", lo=0),
    options.Option("pc_amg_ghost_transport", "str", "auto",
           "MPI on the GPU: how ghost values travel between ranks: host (MPI through host buffers), device "
           "(CUDA IPC, ordered by counters on the GPU; for ranks whose kernels run at the same time: one GPU "
           "each, or MPS), auto (device where every rank can map the others' memory and their kernels run "
           "together, else host)", ("auto", "device", "host")),
    options.Option("pc_amg_graph", "bool", True, "On the GPU, replay the whole cycle as one captured CUDA graph "
           "(under MPI with the ghost transport through the host: the gathered levels' part)"),
    options.Option("pc_amg_near_null_space", "str", "auto",
           "Systems (matrix block size > 1, or MatSetNearNullSpace): auto: the matrix's near null space, else "
           "rigid body modes of coordinates set on the PC where the block size is their dimension, else the block's "
           "components, in each aggregate's tentative prolongation; components: each component aggregated "
           "on its own; none: every unknown a scalar", ("auto", "components", "none")),
    options.Option("pc_amg_diagonal_scaling", "str", "auto",
           "Build the hierarchy of D^-1 A (D the diagonal of A) and apply it to D^-1 x: auto where A is not "
           f"symmetric and D^-1 A at least {1 / smoothed.DIAGONAL_GAIN:g} times as close to symmetric "
           "(|X - X^T| / |X + X^T|: rows that each carry a coefficient, -rho_i (Laplacian u)_i, as PETSc's ksp ex29 "
           "with -rho); rows: for any matrix; none: never", ("auto", "none", "rows")),
    options.Option("pc_amg_eliminate_lone_rows", "bool", True,
           "Take the rows that are their diagonal alone (a boundary value's identity row, as MatZeroRows leaves it; "
           f"or the other entries together at most {rows.LONE:g} of it, as a penalty's) out of the hierarchy: "
           "solved by their diagonal, their couplings moved to the right-hand side"),
    options.Option("pc_amg_precision", "str", "double",
           "The cycle's arithmetic: single runs it in float32 (complex64 for a complex matrix), about half the "
           "bytes a cycle moves, the setup staying in double; one rank", ("double", "single")),
    options.Option("pc_amg_device", "str", "auto",
           "Where setup and cycle run (auto: the GPU when PETSc's vectors or matrix live there: CUDA Vecs, "
           "aijcusparse)", ("auto", "cpu", "gpu")),
]


class AMG(pcbase.PythonPC):
    TITLE, PREFIX, EVENT, OPTIONS = "pcplugins.AMG", "pc_amg_", "AMG", OPTIONS

    def __init__(self):
        super().__init__()
        self._bad = self._run = self.comm = self._run_t = self._graphs_t = self.scaling = None
        self.empty, self.block_size, self.system, self.rows, self.lone = False, 1, None, None, None

    def create(self, pc):
        compose.accept_set_coordinates(pc)       # PCSetCoordinates reaches this PC as it reaches GAMG

    def destroy(self, pc):
        super().destroy(pc)
        compose.accept_set_coordinates(pc, on=False)

    def _release(self):
        for held in (self.comm, self._graphs_t):     # the previous hierarchy's communicators, graphs
            if held is not None:
                held.free()
        self._run = self._run_t = self._graphs_t = None
        self.empty = False

    def not_symmetric(self, pc):
        """The V- and W-cycles with as many pre- as post-sweeps are symmetric for a symmetric
        matrix."""
        v = self.values
        if v["cycle"] == "k":
            return "the K-cycle is nonlinear (-pc_amg_cycle k); use -pc_amg_cycle w or v"
        mg = getattr(self, "mg", None)            # the sweeps as set up (unset: by the smoother)
        pre, post = (mg.opts.pre, mg.opts.post) if mg is not None else (v["pre"], v["post"])
        if pre != post:
            return f"-pc_amg_pre {pre} and -pc_amg_post {post} differ"
        if self.scaling is not None:
            return "the rows are scaled by the inverse diagonal (-pc_amg_diagonal_scaling)"
        return "" if self.operator_symmetric(pc) else "the matrix is not symmetric"

    def inexact(self):
        return (("-pc_amg_cycle k", pcbase.NONLINEAR.format("the K-cycle"), "fgmres or fcg", "-pc_amg_cycle w")
                if self.values["cycle"] == "k" else super().inexact())

    def no_transpose(self, pc, why):
        """The V- and W-cycles have their transpose (cycle.Cycle.transposed); the K-cycle none."""
        return why if self.values["cycle"] == "k" else ""

    def _apply(self, pc, x, y):
        self._applied(pc, x, y, self._run, self._cycle)

    def _apply_transpose(self, pc, x, y):
        """(B D)^T x = D B^T x, B^T the transposed cycle (D: the rows' scaling, _scaled), built
        at the first call and on the GPU captured as a graph of its own."""
        if self._run_t is None and not self.empty:
            self.mg.transposed_cycle()
            if self._graphs is not None:
                bx = self._graphs.buffers[0]
                self._graphs_t = backend.CycleGraphs.on_buffers(self._cycle_transpose, bx.size, bx.dtype)
            self._run_t = self._graphs_t or self._cycle_transpose
        self._applied(pc, x, y, self._run_t, self._cycle_transpose)

    def _applied(self, pc, x, y, run, eager):
        """y = run(x) (the graph, or ``eager`` where there is none); ``eager`` alone where the Vecs
        are not on the PC's device."""
        if self.empty:                    # a 0 x 0 matrix: nothing to do, as PETSc's own PCs
            return
        xp = self.xp
        if self._bad is not None and bool(self._bad):
            pcbase.set_failed(pc, True)
        if self.comm.size > 1:
            self.comm.check_transport()     # MPI: an exchange that failed stops every rank
        with vec.vec_array(x, "r") as xa, vec.vec_array(y, "w") as ya:
            if backend.array_module(xa) is xp and backend.array_module(ya) is xp:
                run(xa, ya)
                out = ya
            else:                     # host Vecs with -pc_amg_device gpu, or a KSP mixing kinds
                xd = backend.to_namespace(xa, xp)
                out = xp.empty_like(xd)
                eager(xd, out)
                ya[...] = backend.to_host(out)
            # NaN/Inf: checked where the result was computed, the flag read at the next
            # application (no synchronisation here)
            self._bad = ~xp.isfinite(xp.sum(out))
        if xp is numpy and bool(self._bad):
            pcbase.set_failed(pc, True)

    def _cycle(self, x, out):
        if self.lone is not None:       # the lone rows by their diagonal, the others by the cycle
            out[...] = self.lone.apply(x, lambda t: self.mg.cycle(self._scaled(t)))
        else:
            out[...] = self.mg.cycle(self._scaled(x))

    def _cycle_transpose(self, x, out):
        if self.lone is not None:
            out[...] = self.lone.apply_transpose(x, lambda t: self._scaled(self.mg.cycle_transpose(t)))
        else:
            out[...] = self._scaled(self.mg.cycle_transpose(x))

    def _scaled(self, x):
        """D x, the right-hand side of D A (``rows`` D: a negative definite A's rows negated, or its
        inverse diagonal: _diagonal_scaling)."""
        return x if self.rows is None else x * self.rows

    # -- setup -----------------------------------------------------------------------------------------
    def _setup(self, pc):
        v = self.values
        if v["overcorrection"] is not None and v["cycle"] != "w":
            raise errors.error(f"pcplugins.AMG: option -pc_amg_overcorrection scales the W-cycle's coarse corrections, "
                               f"and the cycle is {v['cycle']}: use -pc_amg_cycle w (the default), or leave it out")
        M = mat.pc_matrix(pc, self.TITLE)
        single = v["precision"] == "single"
        if single and M.getComm().getSize() > 1:
            raise errors.error(f"pcplugins.AMG: -pc_amg_precision single runs on one rank; on {M.getComm().getSize()} "
                               "ranks leave it out (double, the default)")
        self.block_size = M.getBlockSize()
        if M.getSize()[0] == 0:
            self.empty = True
            return
        t0 = log.clock()
        xp = self.select_device(M)
        self.comm = csrcomm.CSRComm(pc, v["ghost_transport"], self.TITLE)
        A, self.matrix_source = mat.aij_csr(pc, xp, self.comm)
        n = (A.own if self.comm.size > 1 else A).shape[0]         # this rank's rows
        A, self.rows = self._check(A, v["eliminate_lone_rows"])
        self.scaling = None
        scale = self._diagonal_scaling(A, v["diagonal_scaling"])
        self.rows = self.rows if scale is None else scale
        if self.rows is not None:     # D A, copies: PETSc's own arrays (the device CSR) stay as they are
            A = (distributed.Rows(sparse.rows_scaled(A.own, self.rows, xp), sparse.rows_scaled(A.ghost, self.rows, xp),
                                  A.ghosts, A.starts, A.comm, xp, A.halo)
                 if self.comm.size > 1 else sparse.rows_scaled(A, self.rows, xp))
        backend.synchronize(xp)
        t1 = log.clock()
        mine = A.own if self.comm.size > 1 else A          # this rank's rows and columns (but lone ones)
        bs, B, coords, source = self._system(pc, M, n, xp)
        if self.lone is not None:
            B = None if B is None else B[self.lone.inside]
            coords = None if coords is None else coords[self.lone.nodes(bs)]
        if v["aggregation"] != "pairwise":
            if len(set(self.comm.allgather(coords is None))) > 1:
                raise errors.error("pcplugins.AMG: vertex coordinates were found on some ranks only; set them on "
                                   "every rank (pcplugins.set_coordinates with each rank's own rows)")
            if coords is None and v["aggregation"] == "auxgrid":
                raise errors.error("pcplugins.AMG: -pc_amg_aggregation auxgrid needs vertex coordinates, but "
                                   f"there are {source}: call pcplugins.set_coordinates(pc, xyz) or compose a Vec "
                                   "\"coordinates\" (block size = dimension) on the PC")
        self.coord_source = source
        opts = kcycle.Options(aggregation=v["aggregation"], nsmooths=v["agg_nsmooths"], threshold=v["threshold"],
                              aggressive=v["aggressive_coarsening"], cycle=v["cycle"], kcycle_its=v["kcycle_its"],
                              overcorrection=v["overcorrection"],
                              kcycle_size=v["kcycle_size"], smoother=v["smoother"],
                              vcycle_smoother=v["vcycle_smoother"], pre=v["pre"], post=v["post"],
                              coarse_size=v["coarse_size"], max_levels=v["max_levels"], theta=v["strength"],
                              gather_size=GATHER_SIZE[self.device] if v["gather_size"] is None else v["gather_size"],
                              graph=v["graph"], storage=v["storage"], dtype=SINGLE[mine.dtype.kind] if single else None)
        try:
            self.mg = kcycle.AggregationMG(A, xp, opts, coords, self.comm, bs, B)
        except ValueError as e:
            raise errors.error(f"pcplugins.AMG: {e}") from None
        backend.synchronize(xp)
        t2 = log.clock()
        self.timings = {"matrix": t1 - t0, "hierarchy": t2 - t1}
        self.timings.update(self.mg.timings)
        self._bad = None
        if (backend.is_gpu(xp) and v["graph"] and self.mg.coarse.capturable
                and (self.comm.size == 1 or self.comm.capturable)):
            # the cycle's temporaries come from a pool of their own, which the graphs keep using;
            # under MPI the exchanges and inner products go device to device, captured with it
            self._graphs = backend.CycleGraphs.on_buffers(self._cycle, n, mine.dtype)
        self._run = self._graphs or self._cycle

    def _system(self, pc, M, n, xp):
        """What aggregation takes of a system (nullspace.py): (block size, near null space B or None,
        coordinates (one row a node) or None, where they came from); ``self.system`` says it for
        the view. -pc_amg_near_null_space auto takes the matrix's near null space, else the rigid
        body modes of coordinates given to the PC where the block size is their dimension (as GAMG
        does with PCSetCoordinates; a DMDA's coordinates say nothing of the physics: two species
        on a 2D grid are no elastic body), else the components of each node."""
        v = self.values
        mode, bs = v["near_null_space"], self.block_size
        B = self.comm.agreed(compose.near_null_space, M, xp) if mode == "auto" else None
        if B is not None and bs == 1 and B.shape[1] == 1:
            # the constant of a scalar matrix is the scalar aggregation's own coarse space
            constant = not B.size or backend.all_true(B == B[0, 0])
            B = None if self.comm.allmin(int(constant)) else B
        if mode == "none":
            bs = 1
        if B is not None and B.shape[1] > 16 * bs:
            raise errors.error(f"pcplugins.AMG: the near null space has {B.shape[1]} vectors for block size {bs}; "
                               "an aggregate of a few nodes cannot represent that many")
        coords, source = None, "not looked for (-pc_amg_aggregation pairwise)"
        rigid = mode == "auto" and B is None and bs in (2, 3)
        if v["aggregation"] != "pairwise" or rigid:
            coords, source = self.comm.agreed(compose.amg_coordinates, pc, n, xp, self.block_size)
        if coords is not None and coords.shape[0] != n // bs:            # one a node, one an unknown
            coords = coords[::bs] if bs > 1 else xp.repeat(coords, self.block_size, axis=0)
        self.system = None
        if rigid and coords is not None and coords.shape[1] == bs and source == compose.COMPOSED:
            B = nullspace.rigid_body_modes(coords, xp)
            self.system = f"nodes of {bs} unknowns, rigid body modes of the coordinates ({source})"
        elif B is not None:
            self.system = f"nodes of {bs} unknown{'s' if bs > 1 else ''}, the matrix's near null space " \
                          f"({B.shape[1]} vectors)"
        elif bs > 1:
            self.system = f"nodes of {bs} unknowns, each component aggregated on its own"
        if v["aggregation"] == "pairwise":
            coords, source = None, "not looked for (-pc_amg_aggregation pairwise)"
        return bs, B, coords, source

    def _check(self, A, eliminate):
        """(the matrix the hierarchy is built of, its rows' signs): rows.finite, the lone rows
        taken out where ``eliminate`` (``self.lone``), rows.signs; errors PETSc's, on every rank."""
        try:
            rows.finite(A, self.xp, self.comm)
            self.lone = rows.LoneRows.find(A, self.xp, self.comm, self.block_size) if eliminate else None
            A = A if self.lone is None else self.lone.interior
            return A, rows.signs(A, self.xp, self.comm, self.lone and self.lone.number)
        except ValueError as e:
            raise errors.error(f"pcplugins.AMG: {e}") from None

    def _diagonal_scaling(self, A, mode):
        """D^-1, the inverse of A's diagonal on this rank's rows, where -pc_amg_diagonal_scaling
        asks for it (auto: smoothed.diagonal_scaling decides, where the diagonal is not constant:
        else D^-1 A is A's multiple), else None; ``self.scaling`` says why for the view."""
        if mode == "none":
            return None
        xp, comm = self.xp, self.comm
        own = A.own if comm.size > 1 else A
        d = own.diagonal()
        if mode == "rows":
            self.scaling = "-pc_amg_diagonal_scaling rows"
            return 1 / xp.where(d != 0, d, 1)
        a = xp.abs(d)
        if comm.allmax(float(a.max()) if a.size else 0.0) <= comm.allmin(float(a.min()) if a.size else numpy.inf):
            return None
        scale, before, after = smoothed.diagonal_scaling(own, d, xp, self.rows, comm.allsum if comm.size > 1 else None)
        if scale is not None:
            self.scaling = f"|A - A^T| / |A + A^T| = {before:.2g}, of D^-1 A {after:.2g}"
        return scale

    # -- view --------------------------------------------------------------------------------------------
    def describe(self):
        if self.empty:
            return ["pcplugins.AMG: the matrix is empty (0 x 0): the preconditioner does nothing"]
        if self.mg is None:
            return ["pcplugins.AMG: not set up"]
        why = {"auxgrid": f"auxiliary grid (quadtree/octree) from {self.coord_source}",
               "pairwise": f"double pairwise matching ({self.coord_source})",
               "mis": f"standard aggregates about maximal independent sets of the strength graph (distance 2 on "
                      f"{self.mg.opts.aggressive} level(s), then 1; threshold {self.mg.opts.threshold:g})"
               }[self.mg.method]
        dev = f"CuPy, GPU {self.gpu_id}" if backend.is_gpu(self.xp) else "NumPy"
        if backend.is_gpu(self.xp):
            dev += ", CUDA graph " + (self._graphs.note if self._graphs else "off")
        t = self.timings
        if self.comm.size > 1:
            # a replayed graph makes no host call to count
            count = ("ghost exchanges and inner products inside the captured cycle" if self._graphs else
                     f"{self.comm.exchanges} ghost exchanges so far")
            dev += f", {self.comm.size} ranks, {count} ({self.comm.transport_note()})"
        notes = []
        if self.values["cycle"] == "k":
            notes.append("the K-cycle is a NONLINEAR preconditioner: right answers only under a flexible KSP "
                         "(-ksp_type fcg or fgmres); under cg, gmres or bcgs use -pc_amg_cycle w")
        if self.system:
            notes.append(f"system: {self.system}")
        if self.lone is not None:
            notes.append(self.lone.describe() + " (-pc_amg_eliminate_lone_rows)")
        kind = (f"smoothed aggregation AMG ({self.mg.opts.nsmooths} Jacobi step(s) on P)" if self.mg.opts.nsmooths
                else "unsmoothed aggregation AMG")
        if self.values["precision"] == "single":
            kind += f", the cycle in {self.mg.dtype} (setup in double)"
        if self.scaling is not None:
            notes.append(f"rows scaled ({self.scaling}): the preconditioner of D^-1 A (D the diagonal) applied "
                         "to D^-1 x")
        elif self.rows is not None:
            notes.append("negative definite (a negative diagonal on every row but lone diagonals): the preconditioner "
                         "of D A (D the diagonal's signs) applied to D x")
        if self.mg._transposed is not None:
            notes.append("PCApplyTranspose: the transposed cycle (each level's A^T, the smoothers transposed, "
                         f"{self.mg.opts.post} pre- and {self.mg.opts.pre} post-sweeps)")
        return ([f"pcplugins.AMG: {kind}, device {self.device} ({dev})",
                 f"matrix: {self.matrix_source}", f"aggregation: {why}"] + notes + self.mg.describe() +
                ["setup: matrix %.3g s, aggregation + Galerkin %.3g s, smoothers %.3g s, coarse solve %.3g s"
                 % (t["matrix"], t["coarsening"], t["smoothers"], t["coarse"])])
