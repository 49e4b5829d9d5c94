"""The shared part of the preconditioners on a DMDA grid (pcplugins.GMG, pcplugins.FFTPoisson).

A subclass names its options (``OPTIONS``, ``TITLE``, ``EVENT``) and builds its solver from the
fine-level stencil operator (``_build``); this class does the rest of the PCPYTHON protocol: the
grid from the PC's DMDA, the operator (declared Laplacian, or read from the assembled matrix), both
boundary conventions (PETSc's identity rows on the outer layer are eliminated), the device and
precision, MPI (a petsc.mpi.DMDAComm), the application on views of PETSc's Vecs with CUDA graphs,
NaN checks, -help, -ksp_view and -log_view.

The solver object ``self.mg`` offers ``cycle(f)`` (returns a padded u), ``fine_box``,
``coarsest_rhs`` (checked for NaN), ``memory_values()``, ``operator_complexity()`` and
``describe()``: multigrid.Multigrid does, and so does fft.LaplacianFFT.
"""
import numpy

from .. import backend
from ..core import defect, detect, fused, grid, kernels, stencil
from ..core.comm import Comm
from ..petsc import dmda, errors, log, mat, mpi, pcbase, periodic, vec
from ..petsc.pcbase import PythonPC

# a negative definite operator (a negative diagonal everywhere: div(k grad u) = -f, snes ex25): each
# sweep, transfer and coarse solve of -A gives the negative of A's, so the PC is -A's, output negated
NEGATED = "; negative definite (a negative diagonal everywhere): the preconditioner of -A, its output negated"
ROWS_SCALED = "; rows scaled (to one stencil, or to mirror the interior's couplings): the preconditioner of D^-1 A " \
    "applied to D^-1 x"


class DMDAPC(PythonPC):
    WHAT = ""
    PERIODIC = False                  # whether periodic (and mirror) DMDA boundaries are taken
    PERIODIC_ON_GPU = False           # and on the GPU, where the PC needs only a constant stencil
    GATHER_SIZE = {"gpu": 0, "cpu": 0}  # MPI: the default of a gather_size option left unset

    def _release(self):
        self._elim = self._elim_fused = self._op64 = self.comm = self._rows = None

    def not_symmetric(self, pc):
        """A symmetric operator, and a cycle that is its own reverse (``_cycle_not_symmetric``)."""
        if self.mg is None:
            return "not set up"
        if not self.operator_symmetric(pc, self.values["operator"] == "laplacian"):
            return "the operator is not symmetric"
        return self._cycle_not_symmetric()

    def _cycle_not_symmetric(self):
        return ""

    # -- setup -----------------------------------------------------------------------------------------
    def _setup(self, pc):
        v = self.values
        self.timings = {}
        if mat.scalar_is_complex():
            raise errors.error(f"{self.TITLE} supports real PETSc scalars only (this PETSc was configured "
                               "with complex scalars); for complex Helmholtz problems use pcplugins.ShiftedLaplace")
        dm, box = dmda.dmda_box(pc, who=self.TITLE, periodic=self.PERIODIC)
        M, converted = mat.operator_matrix(pc, box, self.TITLE), ""
        if mat.convertible(M):           # BAIJ, SBAIJ (-dm_mat_type): read a copy; a shell stays (declared operator)
            M, converted = mat.as_aij(pc, M, self.TITLE)
        # the hybrid cycle with no GPU level runs on the host
        xp = self.select_device(M, "cpu" if v.get("gpu_levels") == 0 else None)
        self.dtype = numpy.dtype(numpy.float32 if v["precision"] == "single" else numpy.float64)
        self.mixed = (v.get("mixed_inner_cycles") or 0, v.get("mixed_inner_digits") or 0.0)
        if any(self.mixed):
            # defect correction: the elimination and the fine residual in double, the cycle in single
            self.dtype = numpy.dtype(numpy.float64)
        self._elim_fused, self._faces, self.negated, self._rows = None, (), False, None    # see NEGATED
        self.mpi = mpi.Collective(pc)
        t = log.clock()
        op, self.layer, self.operator_kind = self._fine_operator(v, box, dm, M, xp)
        self.operator_kind += NEGATED * self.negated + ROWS_SCALED * (self._rows is not None) + converted
        self.timings["operator"] = log.clock() - t
        if self.mpi.size > 1:
            gather = v.get("gather_size", 0)
            if gather is None:
                gather = self.GATHER_SIZE["gpu" if backend.is_gpu(xp) else "cpu"]
            self.comm = mpi.DMDAComm(pc, dm, self.layer, xp, gather, who=self.TITLE,
                                     transport=v.get("ghost_transport", "auto"))
            self.comm.distribute(0, op.box)
        else:
            self.comm = Comm(box.periodic)
        self._inner = _inner_slices(box, op.box, self.layer)
        t = log.clock()
        self._op64 = None
        if any(self.mixed):
            self._op64 = op
            op = stencil.StencilOperator(op.box, op.offsets, op.coefs if op.constant else
                                         [c.astype(numpy.float32) for c in op.coefs], xp, numpy.float32)
        self.mg = self._build(op, v)
        backend.synchronize(xp)
        self.timings["hierarchy"] = log.clock() - t
        self.box = box
        self.copy_time = 0.0
        self.applications = 0
        if self.mpi.size > 1:
            self.comm.exchanges, self.comm.exchange_time = 0, 0.0   # those of the applications only
        self._prepare_apply()

    def _fine_operator(self, v, box, dm, M, xp):
        dt, collective = self.dtype, self.mpi
        if any(box.periodic):
            op, kind, self.negated = periodic.periodic_operator(v["operator"], M, box, dm, xp, dt, collective,
                                                                self.TITLE, self.PREFIX, self.PERIODIC_ON_GPU)
            return op, False, kind
        if v["operator"] == "laplacian":
            w, layer, bdiag = dmda.sample_laplacian(M if mat.is_aij(M) else None, box, dm, collective)
            mgbox = dmda.interior_box(box) if layer else box
            self.negated = all(c > 0 for c in w)     # the couplings of A: the elimination takes them
            op = stencil.laplacian(mgbox, [-c for c in w] if self.negated else w, xp, dt)
            if layer:
                dmda.check_interior(mgbox, self.mpi, self.TITLE)
                self._elim = stencil.laplacian(mgbox, w, xp, dt) if self.negated else op
                self._invdb = 1.0 / bdiag          # one value on the whole identity layer
                self._use_fused_elimination(v, op, w)
            return op, layer, "declared constant-coefficient Laplacian (matrix-free)"
        offsets, coefs, stats = dmda.stencil_from_aij(M, box, dm, xp, dt, collective, self.TITLE)
        coefs, self._rows = detect.row_scaled(box, offsets, coefs, collective, stats)
        if self._rows is None:            # Neumann rows at another scale than the interior's
            coefs, self._rows = detect.mirror_scaled(box, offsets, coefs, collective, stats)
        stats = stats if self._rows is None else None
        one = stats is not None and collective.size == 1     # the reading kernel's class statistics
        found = dmda.constant_stencil(box, offsets, coefs, dt, collective, stats) if v["operator"] == "auto" else None
        if found is not None:
            return self._constant_operator(v, found, box, offsets)
        layer = dmda.dirichlet_layer(box, offsets, coefs, collective, stats)
        mgbox = box
        if layer:
            mgbox = dmda.interior_box(box)
            dmda.check_interior(mgbox, self.mpi, self.TITLE)
            inner = _inner_slices(box, mgbox, layer)
            centre = offsets.index((0,) * box.dim)
            dfull = coefs[centre]
            lo, hi = dmda.layer_diagonal_range(box, dfull, collective, stats[centre, detect.LAYER] if one else None)
            if lo == hi:
                self._invdb = 1.0 / lo                 # one value on the whole identity layer
            else:
                self._invdb = xp.where(dmda.layer_mask(box, xp), 1.0 / dfull, 0.0).astype(dt)
            coefs = [c[inner] for c in coefs]
            # the couplings of interior rows to the boundary values: f_I = x_I - A_IB y_B
            self._elim = stencil.StencilOperator(mgbox, offsets, coefs, xp, dt)
        # no entry beyond the grid; the interior rows' couplings to an eliminated layer dropped
        masked = stencil.inside_planes(mgbox, offsets, coefs, xp, dt) if layer else coefs
        d = masked[offsets.index((0,) * box.dim)]
        self.negated = dmda.negative_everywhere(d, collective)
        if self.negated:              # the arrays are this setup's own (the elimination keeps A's)
            for c in masked:
                c *= -1
        keep = () if layer else detect.neumann_axes(mgbox, masked, d, collective)
        if any(keep):
            # the boundary nodes across these axes are unknowns of a Neumann-type condition (ex29,
            # ex50): they stay coarse points on every level (coarse k on fine 2k), so interpolation
            # keeps the constants, P 1 = 1, where zero halos would pull the coarse corrections to
            # zero there
            mgbox = grid.Box(box.global_shape, box.start, box.shape, keep_ends=keep)
        dmda.check_positive_diagonal(d, mgbox, 1 if layer else 0, collective, self.TITLE)
        nonzero = detect.varying_offsets(offsets, stats, layer) if one and v["operator"] == "auto" else None
        tol = None if v["operator"] == "assembled" or nonzero is not None else 0.0
        op = stencil.compress(mgbox, offsets, masked, xp, dt, tol=tol, comm=collective, nonzero=nonzero)
        w = stencil.laplacian_weights(op)
        if layer:        # the fused elimination takes the weights of A (not of -A) as the star's
            self._use_fused_elimination(v, op, w if w is not None and numpy.isscalar(self._invdb)
                                        and not self.negated else None)
        if op.constant:
            kind = "constant-coefficient stencil detected from the matrix (matrix-free)"
        else:
            kind = f"assembled {op.nnz_per_row}-point stencil (stored coefficients, Galerkin coarse operators)"
        return op, layer, kind

    def _constant_operator(self, v, found, box, offsets):
        """The fine operator of a constant stencil read from the matrix (detect.ConstantRead):
        what the arrays' path builds, from numbers alone."""
        xp, dt = self.xp, self.dtype
        mgbox = grid.Box(box.global_shape, box.start, box.shape, keep_ends=found.keep_ends)
        if found.layer:
            mgbox = dmda.interior_box(box)
            dmda.check_interior(mgbox, self.mpi, self.TITLE)
            self._invdb = 1.0 / found.layer_diagonal
            self._elim = stencil.StencilOperator(mgbox, offsets, found.elim, xp, dt)
        self.negated = found.consts[found.offsets.index((0,) * box.dim)] < 0
        op = stencil.StencilOperator(mgbox, found.offsets, [-c if self.negated else c for c in found.consts], xp, dt)
        w = stencil.laplacian_weights(op)
        same = dict(zip(found.offsets, found.consts))
        if found.layer:
            self._use_fused_elimination(v, op, w if w is not None and not self.negated and all(
                same.get(o, 0.0) == c for o, c in zip(offsets, found.elim)) else None)
        return op, found.layer, "constant-coefficient stencil detected from the matrix (matrix-free)"

    def _use_fused_elimination(self, v, op, w):
        """fused.eliminate on one GPU rank: a constant star's weights ``w``, or (None) the face rows after."""
        if v.get("fused", True) and fused.supported(self.xp, self.dtype) and self.mpi.size == 1:
            self._elim_fused = (0.0,) * (3 - op.box.dim) + tuple(w if w is not None else (0.0,) * op.box.dim)
            self._faces = grid.face_lattices(op.box, disjoint=True) if w is None else ()

    # -- apply -------------------------------------------------------------------------------------------
    def _apply(self, pc, x, y):
        xp, shape = self.xp, self.box.shape
        self.applications += 1
        if not bool(self._finite):      # the previous application's check
            pcbase.set_failed(pc, True)
        self.comm.check()                 # MPI: an exchange that failed stops every rank
        with vec.vec_array(x, "r") as xa, vec.vec_array(y, "w") as ya:
            src, dst = xa.reshape(shape), ya.reshape(shape)
            host_vecs = backend.array_module(xa) is not xp or backend.array_module(ya) is not xp
            if host_vecs:                       # -pc_gmg_device gpu with host Vecs, or a KSP mixing kinds
                if self._x is None:
                    self._x, self._y = xp.zeros(shape), xp.zeros(shape)
                t = log.clock()
                self._x[...] = backend.to_namespace(src, xp)
                self.copy_time += log.clock() - t
                src, out = self._x, self._y
            else:
                out = dst
            if self._rows is not None:          # D^-1 x, for the cycle of D^-1 A (detect.row_scaled)
                src = xp.multiply(src, self._rows, out=self._xr)
            self._run(src, out)
            if self._op64 is not None and self.stalled:
                pcbase.set_failed(pc, True)
            if host_vecs:
                t = log.clock()
                dst[...] = backend.to_namespace(out, backend.array_module(dst))
                self.copy_time += log.clock() - t
        if xp is numpy and not self._finite:
            pcbase.set_failed(pc, True)

    def _prepare_apply(self):
        xp = self.xp
        self._finite = xp.ones((), bool)
        if self.layer:
            self._f = xp.zeros(self.mg.fine_box.shape, self.dtype)
            self._ypad = xp.zeros(self.box.padded_shape, self.dtype) if self.mpi.size > 1 else None
        self._x_low = self._y_low = None
        # the layer's values for the face rows (inside zero); the cycle's own copies of x and y, in
        # its precision (the fused elimination reads x in double and casts y as it copies it out)
        self._yb = xp.zeros(self.box.shape, self.dtype) if self._faces else None
        if self.dtype != numpy.float64 and self._elim_fused is None:
            self._x_low = xp.zeros(self.box.shape, self.dtype)
            self._y_low = xp.zeros(self.box.shape, self.dtype)
        self._x = self._y = None                # device buffers, for host Vecs only
        self._xr = None if self._rows is None else xp.empty(self.box.shape)
        if self._op64 is not None:              # defect correction: u and r in double, r in single
            self._u64 = xp.zeros(self.mg.fine_box.padded_shape)
            self._r64 = xp.zeros(self.mg.fine_box.shape)
            self._r32 = xp.zeros(self.mg.fine_box.shape, numpy.float32)
            self.inner_cycles = []
        # ghost updates through the host (MPI), host levels (hybrid cycle) and the digits test are
        # host work: no graph capture. What the exchanges need opens now, not in a capture
        self.comm.prepare()
        use_graph = (backend.is_gpu(xp) and self.values.get("graph", True) and self.comm.capturable
                     and not getattr(self.mg, "host_levels", 0) and not self.mixed[1])
        self._graphs = backend.CycleGraphs(self._cycle) if use_graph else None
        # otherwise the coarse levels alone, on their own arrays (Multigrid.replay_coarse_levels)
        if (not use_graph and self.values.get("graph_coarse", True) and self.comm.capturable
                and hasattr(self.mg, "replay_coarse_levels")):
            self.mg.replay_coarse_levels()

    def _run(self, x, out):
        """out = B x; on the GPU replayed as a CUDA graph (backend.CycleGraphs)."""
        if self._graphs is None:
            return self._cycle(x, out)
        self._graphs(x, out)

    @property
    def graph_note(self):
        if self._graphs is not None:
            return self._graphs.note
        start = getattr(self.mg, "coarse_graph", None)
        if start is not None:
            shape = "x".join(str(n) for n in self.mg.levels[start].box.shape)
            return (f"off for the whole cycle; levels from {shape} down replayed as one graph "
                    f"({self.mg.coarse_graph_note})")
        return "off"

    def _cycle(self, x, out):
        if self._op64 is not None:
            self._defect_correction(x, out)
        elif self._x_low is not None:
            self._x_low[...] = x
            self._cycle_in_precision(self._x_low, self._y_low)
            out[...] = self._y_low
        else:
            self._cycle_in_precision(x, out)
        # NaN/Inf in x reaches the solver's coarsest right-hand side: a cheap check, inside the
        # cycle's graph; its flag is read at the next application (on the GPU no synchronisation
        # here)
        kernels.all_finite(self.mg.coarsest_rhs, self._finite)

    def _cycle_in_precision(self, x, out):
        if self.layer:
            self._eliminate(self._f, x, out)
            u = self._signed(self.mg.cycle(self._f))
            if self._elim_fused is not None:
                fused.copy_inside(out, u)
            else:
                out[self._inner] = grid.interior(u)
        else:
            out[...] = grid.interior(self._signed(self.mg.cycle(x)))

    def _signed(self, u):
        """The cycle's output u for A: for a negative definite A, built from -A, its negative."""
        if self.negated:
            u *= -1
        return u

    _MAX_INNER = 50

    def _defect_correction(self, x, out):
        """Mixed-precision defect correction (core/defect.py): ``mixed_inner_cycles`` float32 cycles
        or until the residual fell by ``mixed_inner_digits`` digits."""
        f = self._eliminate(self._f, x, out) if self.layer else x
        cycles, digits = self.mixed
        used, reached = defect.correct(self.mg.cycle, self._op64, f, self._u64, self._r64, self._r32,
                                       lambda u: self.comm.exchange(0, u), self._norm, cycles, digits, self._MAX_INNER)
        if digits:
            self.inner_cycles.append(used if reached else f"{used}, short of the digits asked for")
        self.stalled = not reached          # the PC reports a failure (no silent inaccurate answer)
        ui = grid.interior(self._signed(self._u64))
        if self.layer:
            out[self._inner] = ui
        else:
            out[...] = ui

    def _norm(self, a):
        return self.comm.allsum(float(self.xp.vdot(a, a))) ** 0.5

    def _eliminate(self, f, x, y):
        """y_B = x_B / d_B on the identity layer, and f_I = x_I - A_IB y_B: f = x inside, and the
        stencil on the rows of the faces of this rank's box, the only ones that reach the layer
        or another rank's points (which are zero in y)."""
        if self._elim_fused is not None:
            fused.eliminate(f, x, y, self._invdb, self._elim_fused, self._yb)
            for lat in self._faces:
                self._elim.residual(grid.view(f, lat), grid.view(f, lat), self._yb, lat)
            return f
        # in parallel a neighbouring boundary value may live on another rank: a ghost update;
        # on one rank y is its own halo
        yp = y if self.mpi.size == 1 else self._ypad
        yi = yp if self.mpi.size == 1 else grid.interior(yp)
        self.xp.multiply(x, self._invdb, out=yi)
        if numpy.isscalar(self._invdb):
            yi[self._inner] = 0
        if self.mpi.size > 1:
            self.comm.exchange(-1, yp)
            y[...] = yi
            yp = yp[tuple(slice(s.start, s.stop + 2) for s in self._inner)]
        xi = x[self._inner]
        f[...] = xi
        for lat in grid.face_lattices(self._elim.box):
            self._elim.residual(grid.view(f, lat), grid.view(xi, lat), yp, lat)
        return f

    # -- view --------------------------------------------------------------------------------------------
    def _precision_note(self):
        if self._op64 is not None:
            cycles, digits = self.mixed
            stop = " or ".join(([f"{cycles} cycles"] if cycles else [])
                               + ([f"{digits:g} digits gained"] if digits else []))
            used = f" (last application: {self.inner_cycles[-1]} cycles)" if self.inner_cycles else ""
            return f"mixed defect correction: float32 cycles, float64 residual and update, stopping after {stop}{used}"
        return "double" if self.dtype == numpy.float64 else "single (float32 cycle in a float64 Krylov method)"

    def describe(self):
        if self.mg is None:
            return [f"{self.TITLE}: not set up"]
        gs = grid.shape_name(self.box)
        mem = self.mg.memory_values()
        ranks = f", distributed over {self.mpi.size} MPI ranks" if self.mpi.size > 1 else ""
        lines = [f"{self.TITLE}: {self.WHAT} on the DMDA grid {gs}{ranks}",
                 f"device {self.device} ({f'CuPy, GPU {self.gpu_id}' if backend.is_gpu(self.xp) else 'NumPy'}), "
                 "precision " + self._precision_note() + (f", CUDA graph {self.graph_note}" if backend.is_gpu(self.xp)
                                                          else ""),
                 f"operator: {self.operator_kind}",
                 *([f"not a symmetric preconditioner: {self._cycle_not_symmetric()}; with CG use fcg, or "
                    "fgmres/bcgs"] if self._cycle_not_symmetric() else []),
                 "boundary: " + (periodic.periodic_boundary(self.mg.fine_box) if any(self.mg.fine_box.periodic) else
                                 "identity rows on the grid's outer layer eliminated (PETSc DMDA tutorial convention)"
                                 if self.layer else
                                 "Neumann-type (boundary rows sum to zero): the boundary nodes are coarse points "
                                 f"on every level, across axes {dmda.axis_names(self.box, self.mg.fine_box.keep_ends)}"
                                 if any(self.mg.fine_box.keep_ends) else
                                 "Dirichlet values eliminated (interior unknowns only)"),
                 f"operator complexity {self.mg.operator_complexity():.3f}, "
                 f"hierarchy memory {mem * 8 / 2**20:.1f} MiB ({mem / self.box.size:.2f} values per unknown)"]
        lines += self.mg.describe()
        lines.append("setup: operator %.3g s, hierarchy %.3g s" % (self.timings.get("operator", 0),
                                                                    self.timings.get("hierarchy", 0)))
        if self.copy_time:
            lines.append(f"host-device copies so far: {self.copy_time:.3g} s")
        if self.mpi.size > 1 and self.applications:
            lines.append(self.comm.describe(self.applications))
        return lines


def _inner_slices(box, mgbox, layer):
    """Where the multigrid's box sits in this rank's part of the user's grid (one layer in when
    the outer layer of identity rows is eliminated)."""
    shift = 1 if layer else 0
    return tuple(slice(s + shift - s0, s + shift - s0 + n) for s, s0, n in zip(mgbox.start, box.start, mgbox.shape))
