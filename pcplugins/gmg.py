"""pcplugins.GMG: geometric multigrid on a DMDA as a PETSc preconditioner (PCPYTHON).

    -ksp_type cg -pc_type python -pc_python_type pcplugins.GMG [-pc_gmg_* options]

Follows Feng, Shu, Xu, Zhang, "Multigrid methods for the Poisson equation on CPU-GPU computers"
(matrix-free 5/7-point stencils, multicolour Gauss-Seidel, V/W/F cycles) and extends it to any
assembled scalar operator on the DMDA (Galerkin coarse operators). With CUDA Vecs
(-vec_type cuda -mat_type aijcusparse) the cycle runs on the GPU on CuPy views of PETSc's device
memory; with host Vecs on NumPy (or on the GPU with -pc_gmg_device gpu, one copy each way).
"""
import numpy

from . import backend, bridge, fused, grid, multigrid, stencil
from .bridge import Option

OPTIONS = [
    Option("pc_gmg_levels", "int", None, "Number of levels (default: coarsen while the grid allows)"),
    Option("pc_gmg_coarse_size", "int", 256, "Stop coarsening at this many unknowns"),
    Option("pc_gmg_cycle", "str", "v", "Multigrid cycle", multigrid.CYCLES),
    Option("pc_gmg_smoother", "str", "redblack", "Smoother", multigrid.SMOOTHERS),
    Option("pc_gmg_omega", "real", None, "Relaxation weight (default 1 for Gauss-Seidel, 2/3 for Jacobi)"),
    Option("pc_gmg_pre", "int", 1, "Pre-smoothing sweeps"),
    Option("pc_gmg_post", "int", 1, "Post-smoothing sweeps"),
    Option("pc_gmg_transfer", "str", "linear",
           "Transfers: (bi/tri)linear + full weighting, or Feng et al. eqs. 4.6/4.10", ("linear", "paper")),
    Option("pc_gmg_operator", "str", "auto",
           "Operator: detect from the matrix, declare the constant Laplacian (matrix-free), "
           "or force stored coefficients", ("auto", "laplacian", "assembled")),
    Option("pc_gmg_coarse_solve", "str", "direct",
           "Coarsest level: direct solve, or smoothing as in Feng et al. Remark 3.1", ("direct", "smooth")),
    Option("pc_gmg_device", "str", "auto",
           "Where the cycle runs (auto: the GPU when PETSc's vectors are CUDA vectors)", ("auto", "cpu", "gpu")),
    Option("pc_gmg_precision", "str", "double",
           "Precision of the hierarchy and the cycle (single: float32 multigrid inside the "
           "float64 Krylov method)", ("double", "single")),
    Option("pc_gmg_fused", "bool", True,
           "On the GPU, fused CUDA kernels for the constant Laplacian (red-black GS, linear transfers)"),
    Option("pc_gmg_graph", "bool", True, "On the GPU, replay the whole cycle as one captured CUDA graph"),
]


class GMG:
    def __init__(self):
        self.mg = None
        self.values = None
        self.timings = {}

    # -- PCPYTHON protocol ---------------------------------------------------------------------------
    def setFromOptions(self, pc):
        self.values = bridge.read_options(pc, OPTIONS, "pcplugins.GMG")

    def setUp(self, pc):
        with bridge.event("GMGSetUp"):
            self._setup(pc)

    def reset(self, pc):
        self.mg = None

    def apply(self, pc, x, y):
        with bridge.event("GMGApply"):
            self._apply(pc, x, y)

    def view(self, pc, viewer=None):
        bridge.view_lines(viewer, self.describe())

    # -- setup -----------------------------------------------------------------------------------------
    def _setup(self, pc):
        v = self.values if self.values is not None else bridge.read_options(pc, OPTIONS, "pcplugins.GMG")
        self.values = v
        self.timings = {}
        dm, box = bridge.dmda_box(pc)
        M = bridge.operator_matrix(pc, box)
        device = v["device"]
        if device == "auto":
            gpu_vecs = "cuda" in (M.getVecType() or "") or "cusparse" in M.getType()
            device = "gpu" if gpu_vecs else "cpu"
        try:
            xp = backend.namespace(device)
        except RuntimeError as e:
            raise bridge.error(f"-pc_gmg_device {v['device']}: {e}") from None
        bridge.set_event_namespace(xp)
        self.xp, self.device = xp, device
        self.gpu_id = bridge.use_petsc_device(M) if backend.is_gpu(xp) else None
        self.dtype = numpy.dtype(numpy.float32 if v["precision"] == "single" else numpy.float64)
        self._elim_fused = None
        self.mpi = bridge.Collective(pc)
        t = bridge.clock()
        op, self.layer, self.operator_kind = self._fine_operator(v, box, dm, M, xp)
        self.timings["operator"] = bridge.clock() - t
        if self.mpi.size > 1:
            self.comm = bridge.DMDAComm(pc, dm, self.layer, xp)
            self.comm.distribute(0, op.box)
        else:
            self.comm = multigrid.Comm()
        # where the multigrid's interior box sits in this rank's part of the user's grid
        self._inner = tuple(slice(s - s0, s - s0 + n) for s, s0, n in
                            zip((b + 1 for b in op.box.start) if self.layer else op.box.start,
                                box.start, op.box.shape))
        opts = multigrid.Options(levels=v["levels"], coarse_size=v["coarse_size"], cycle=v["cycle"],
                                 pre=v["pre"], post=v["post"], smoother=v["smoother"], omega=v["omega"],
                                 transfer=v["transfer"], coarse_solve=v["coarse_solve"], fused=v["fused"],
                                 coarse_operator="galerkin" if v["operator"] == "assembled" else "auto")
        t = bridge.clock()
        try:
            self.mg = multigrid.Multigrid(op, opts, comm=self.comm,
                                          event=lambda name: bridge.event("GMG" + name.capitalize()))
        except ValueError as e:
            raise bridge.error(f"pcplugins.GMG: {e}") from None
        backend.synchronize(xp)
        self.timings["hierarchy"] = bridge.clock() - t
        self.box = box
        self._bad = None
        self.copy_time = 0.0
        self._prepare_apply()

    def _fine_operator(self, v, box, dm, M, xp):
        dt, mpi = self.dtype, self.mpi
        if v["operator"] == "laplacian":
            w, layer, bdiag = bridge.sample_laplacian(M if bridge.is_aij(M) else None, box, dm, mpi)
            mgbox = bridge.interior_box(box) if layer else box
            op = stencil.laplacian(mgbox, w, xp, dt)
            if layer:
                self._elim = op
                self._invdb = 1.0 / bdiag          # one value on the whole identity layer
                if v["fused"] and fused.supported(xp, dt) and mpi.size == 1:
                    self._elim_fused = fused.Laplacian(op, w)
            return op, layer, "declared constant-coefficient Laplacian (matrix-free)"
        offsets, coefs = bridge.stencil_from_aij(M, box, dm, xp, dt, mpi)
        layer = bridge.dirichlet_layer(box, offsets, coefs, mpi)
        mgbox = box
        if layer:
            mgbox = bridge.interior_box(box)
            inner = tuple(slice(s + 1 - s0, s + 1 - s0 + n) for s, s0, n in zip(mgbox.start, box.start, mgbox.shape))
            on_layer = bridge.layer_mask(box, xp)
            dfull = coefs[offsets.index((0,) * box.dim)]
            db = dfull[on_layer]
            lo = mpi.min(float(db.min()) if db.size else numpy.inf)
            hi = -mpi.min(-float(db.max()) if db.size else numpy.inf)
            if lo == hi:
                self._invdb = 1.0 / lo                 # one value on the whole identity layer
            else:
                self._invdb = xp.where(on_layer, 1.0 / dfull, 0.0).astype(dt)
            coefs = [c[inner] for c in coefs]
            # the couplings of interior rows to the boundary values: f_I = x_I - A_IB y_B
            self._elim = stencil.StencilOperator(mgbox, offsets, coefs, xp, dt)
        masked = [c * stencil.inside_mask(mgbox, o, xp) for o, c in zip(offsets, coefs)]
        d = masked[offsets.index((0,) * box.dim)]
        if mpi.min(int(bool(xp.all(d > 0)))) == 0:
            raise bridge.error("pcplugins.GMG needs a positive diagonal; the operator has a zero or "
                               "negative diagonal entry")
        tol = None if v["operator"] == "assembled" else 0.0
        op = stencil.compress(mgbox, offsets, masked, xp, dt, tol=tol, comm=_Reduce(mpi))
        w = stencil.laplacian_weights(op)
        if (layer and w is not None and numpy.isscalar(self._invdb) and v["fused"]
                and fused.supported(xp, dt) and mpi.size == 1):
            self._elim_fused = fused.Laplacian(op, w)
        if op.constant:
            kind = "constant-coefficient stencil detected from the matrix (matrix-free)"
        else:
            kind = f"assembled {op.nnz_per_row}-point stencil (stored coefficients, Galerkin coarse operators)"
        return op, layer, kind

    # -- apply -------------------------------------------------------------------------------------------
    def _apply(self, pc, x, y):
        xp, shape = self.xp, self.box.shape
        if self._bad is not None and bool(self._bad):
            bridge.set_failed(pc, True)
        with bridge.vec_array(x, "r") as xa, bridge.vec_array(y, "w") as ya:
            src, dst = xa.reshape(shape), ya.reshape(shape)
            host_vecs = backend.array_module(xa) is not xp
            if host_vecs:                       # -pc_gmg_device gpu with host Vecs
                if self._x is None:
                    self._x, self._y = xp.zeros(shape), xp.zeros(shape)
                t = bridge.clock()
                self._x.set(numpy.ascontiguousarray(src))
                self.copy_time += bridge.clock() - t
                src, out = self._x, self._y
            else:
                out = dst
            self._run(src, out)
            # NaN/Inf anywhere in x reaches the coarsest right-hand side (every fine point has a
            # restriction weight), so a check there costs nothing; the flag is read on the next
            # apply, so there is no synchronisation here.
            self._bad = ~xp.isfinite(xp.sum(self.mg.levels[-1].f))
            if host_vecs:
                t = bridge.clock()
                dst[...] = backend.to_host(out)
                self.copy_time += bridge.clock() - t
        if xp is numpy and bool(self._bad):
            bridge.set_failed(pc, True)

    def _prepare_apply(self):
        xp = self.xp
        if self.layer:
            self._f = xp.zeros(self.mg.levels[0].box.shape, self.dtype)
            self._ypad = xp.zeros(self.box.padded_shape, self.dtype) if self.mpi.size > 1 else None
        self._x_low = self._y_low = None
        if self.dtype != numpy.float64:        # the cycle's own copies of x and y
            self._x_low = xp.zeros(self.box.shape, self.dtype)
            self._y_low = xp.zeros(self.box.shape, self.dtype)
        self._x = self._y = None                # device buffers, for host Vecs only
        self._graphs = {}
        self._warm = False
        # ghost updates go through PETSc and MPI on the host: no graph capture in parallel
        self._use_graph = backend.is_gpu(xp) and self.values["graph"] and self.mpi.size == 1
        self.graph_note = "on (whole cycle captured)" if self._use_graph else "off"

    _MAX_GRAPHS = 8

    def _run(self, x, out):
        """out = B x. On the GPU the whole cycle is captured once per (input, output) pair of
        device buffers as a CUDA graph and replayed: one launch instead of hundreds of small ones
        (the coarse levels are launch-bound). KSPs pass the same few work Vecs every iteration, so
        the graphs read and write PETSc's own memory with no extra copies."""
        if not self._use_graph:
            return self._cycle(x, out)
        key = (x.data.ptr, out.data.ptr)
        graph = self._graphs.get(key)
        if graph is None:
            if not self._warm:
                self._cycle(x, out)      # compiles every kernel; capturing comes on the next call
                self._warm = True
                return
            graph = self._capture(x, out)
            if graph is None:
                return self._cycle(x, out)
            if len(self._graphs) >= self._MAX_GRAPHS:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[key] = graph
        graph.launch(backend.cupy.cuda.get_current_stream())

    def _capture(self, x, out):
        cupy = backend.cupy
        stream = cupy.cuda.Stream(non_blocking=True)
        cupy.cuda.get_current_stream().synchronize()
        try:
            with stream:
                stream.begin_capture()
                try:
                    self._cycle(x, out)
                finally:
                    graph = stream.end_capture()
            stream.synchronize()
            return graph
        except Exception as e:                  # stay correct: run the cycle eagerly from now on
            self._use_graph = False
            self.graph_note = f"off (capture failed: {str(e).splitlines()[0][:80]})"
            return None

    def _cycle(self, x, out):
        if self._x_low is not None:
            self._x_low[...] = x
            self._cycle_in_precision(self._x_low, self._y_low)
            out[...] = self._y_low
        else:
            self._cycle_in_precision(x, out)

    def _cycle_in_precision(self, x, out):
        if self.layer:
            self._eliminate(self._f, x, out)
            out[self._inner] = grid.interior(self.mg.cycle(self._f))
        else:
            out[...] = grid.interior(self.mg.cycle(x))

    def _eliminate(self, f, x, y):
        """y_B = x_B / d_B on the identity layer, and f_I = x_I - A_IB y_B."""
        if self._elim_fused is not None:
            return self._elim_fused.eliminate(f, x, y, self._invdb)
        if self.mpi.size == 1:          # this rank's box is the whole grid: y is its own halo
            self.xp.multiply(x, self._invdb, out=y)
            if numpy.isscalar(self._invdb):
                y[self._inner] = 0
            return self._elim.residual(f, x[self._inner], y)
        # in parallel a neighbouring boundary value may live on another rank: a ghost update
        yp = self._ypad
        yi = grid.interior(yp)
        self.xp.multiply(x, self._invdb, out=yi)
        if numpy.isscalar(self._invdb):
            yi[self._inner] = 0
        self.comm.exchange(-1, yp)
        y[...] = yi
        halo = tuple(slice(s.start, s.stop + 2) for s in self._inner)
        self._elim.residual(f, x[self._inner], yp[halo])

    # -- view --------------------------------------------------------------------------------------------
    def describe(self):
        if self.mg is None:
            return ["pcplugins.GMG: not set up"]
        gs = "x".join(str(m) for m in reversed(self.box.global_shape))
        mem = self.mg.memory_values()
        ranks = f", distributed over {self.mpi.size} MPI ranks" if self.mpi.size > 1 else ""
        lines = [f"pcplugins.GMG: geometric multigrid on the DMDA grid {gs}{ranks}",
                 f"device {self.device} ({'CuPy, GPU %s' % self.gpu_id if backend.is_gpu(self.xp) else 'NumPy'}), precision "
                 + ("double" if self.dtype == numpy.float64 else "single (float32 cycle in a float64 Krylov method)")
                 + (f", CUDA graph {self.graph_note}" if backend.is_gpu(self.xp) else ""),
                 f"operator: {self.operator_kind}",
                 "boundary: " + ("identity rows on the grid's outer layer eliminated (PETSc DMDA tutorial convention)"
                                 if self.layer else "Dirichlet values eliminated (interior unknowns only)"),
                 f"operator complexity {self.mg.operator_complexity():.3f}, "
                 f"hierarchy memory {mem * 8 / 2**20:.1f} MiB ({mem / self.box.size:.2f} values per unknown)"]
        lines += self.mg.describe()
        lines.append("setup: operator %.3g s, hierarchy %.3g s" % (self.timings.get("operator", 0),
                                                                    self.timings.get("hierarchy", 0)))
        if self.copy_time:
            lines.append(f"host-device copies so far: {self.copy_time:.3g} s")
        return lines


class _Reduce:
    """bridge.Collective as the core's ``comm.allmin``."""

    def __init__(self, mpi):
        self.allmin = mpi.min
