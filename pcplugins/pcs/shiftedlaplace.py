"""pcplugins.ShiftedLaplace: the complex shifted-Laplace multigrid preconditioner for Helmholtz
problems (PCPYTHON).

    -ksp_type bcgs -ksp_pc_side right -pc_type python -pc_python_type pcplugins.ShiftedLaplace
        -pc_sl_k 40 [-pc_sl_beta2 0.6 ...]

Knibbe, Oosterlee, Vuik, "GPU implementation of a Helmholtz Krylov solver preconditioned by a
shifted Laplace multigrid method": for -Laplace u - k^2 u on a 2D DMDA (the unit square; a 3D DMDA,
the unit cube, is our extension) the PC
builds M = -Laplace - (beta1 - i beta2) k^2 with the same boundary conditions and applies one
multigrid cycle on it (slmg.py). With a PETSc built for complex scalars the DMDA has one complex
unknown per point; with a real PETSc the real-equivalent form, dof 2, real and imaginary parts
interleaved (x = [Re u0, Im u0, Re u1, ...], the matrix in 2 x 2 blocks [[Re a, -Im a], [Im a, Re a]]):
one application gives the same result in both. The wavenumber is -pc_sl_k, or a field k(x) through
pcplugins.set_wavenumber(pc, k) (one value per grid point in natural grid order, the whole grid on
every rank) for heterogeneous media. On one rank the levels are CSR matrices (slmg.ShiftedLaplaceMG);
under MPI they are the stencil levels of the distributed DMDA (slmg.StencilMG, -pc_sl_hierarchy).
"""
import numpy

from .. import backend
from ..core import grid, helmholtz, slmg, stencil
from ..petsc import compose, dmda, errors, log, mat, mpi, options, vec
from ..petsc.pcbase import PythonPC

OPTIONS = [
    options.Option("pc_sl_k", "real", None, "Wavenumber k (or a field: pcplugins.set_wavenumber)", lo=0),
    options.Option("pc_sl_beta1", "real", 1.0, "Shift: M = -Laplace - (beta1 - i beta2) k^2"),
    options.Option("pc_sl_beta2", "real", 0.6, "Shift's imaginary part (the paper: 0.6 with bcgs, 0.65 with IDR(s))"),
    options.Option("pc_sl_boundary", "str", "absorbing",
           "Boundary of the DMDA grid: first-order absorbing (boundary nodes are unknowns) or Dirichlet",
           ("absorbing", "dirichlet")),
    options.Option("pc_sl_cycle", "str", "f", "Multigrid cycle", ("v", "w", "f")),
    options.Option("pc_sl_omega", "real", 0.9, "Damping of the 4-colour Gauss-Seidel smoother", lo=0, hi=2,
           open="lohi"),
    options.Option("pc_sl_pre", "int", 1, "Pre-smoothing sweeps", lo=0),
    options.Option("pc_sl_post", "int", 1, "Post-smoothing sweeps", lo=0),
    options.Option("pc_sl_max_kh", "real", 2.5, "Coarsen while the coarse grid keeps k h at most this", lo=0,
           open="lo"),
    options.Option("pc_sl_prolongation", "str", "auto",
           "Prolongation (auto: dezeeuw in 2D with the absorbing boundary, else bilinear)",
           ("auto", "bilinear", "dezeeuw")),
    options.Option("pc_sl_coarse", "str", "auto",
           "Coarsest-grid solve: dense inverse (direct; a host sparse LU beyond 4096 unknowns), a GMRES "
           "polynomial on the device, or auto (direct up to 2048 unknowns, the polynomial beyond)",
           ("auto", "direct", "polynomial")),
    options.Option("pc_sl_coarse_degree", "int", 16, "Degree of the coarsest grid's GMRES polynomial", lo=1),
    options.Option("pc_sl_hierarchy", "str", "auto",
           "Levels: csr (assembled matrices, one rank, the GPU cycle as one CUDA graph), stencil (stencil "
           "levels on the distributed DMDA, any number of ranks), auto (csr on one rank, stencil on several)",
           ("auto", "csr", "stencil")),
    options.Option("pc_sl_gather_size", "int", 32768,
           "Stencil levels under MPI: gather levels with at most this many points onto every rank", lo=0),
    options.Option("pc_sl_ghost_transport", "str", "auto", mpi.TRANSPORT_HELP, mpi.TRANSPORTS),
    options.Option("pc_sl_graph", "bool", True, "On the GPU, replay the whole cycle as one captured CUDA graph"),
    options.Option("pc_sl_precision", "str", "double",
           "Precision of the cycle (single: complex64 multigrid inside the complex128/float64 Krylov method)",
           ("double", "single")),
    options.Option("pc_sl_device", "str", "auto",
           "Where the cycle runs (auto: the GPU when PETSc's vectors or matrix live there: CUDA Vecs, "
           "aijcusparse)", ("auto", "cpu", "gpu")),
]

TITLE = "pcplugins.ShiftedLaplace"


class ShiftedLaplace(PythonPC):
    TITLE, PREFIX, EVENT, OPTIONS = TITLE, "pc_sl_", "SL", OPTIONS

    def __init__(self):
        super().__init__()
        self._run = self._comm = None

    def _release(self):
        self._run = self._comm = None

    def not_symmetric(self, pc):
        return ("the cycle is not its own transpose (the F-cycle; in the real-equivalent form the transpose is "
                "the conjugate); use -ksp_type bcgs, gmres or fgmres")

    def _apply(self, pc, x, y):
        if self._comm is not None:
            self._comm.check()            # MPI: an exchange that failed stops every rank
        with vec.vec_array(x, "r") as xa, vec.vec_array(y, "w") as ya:
            if backend.array_module(xa) is self.xp and backend.array_module(ya) is self.xp:
                self._run(xa, ya)
            else:                     # host Vecs with -pc_sl_device gpu, or a KSP mixing kinds
                out = self.xp.empty(xa.shape, xa.dtype)
                self._cycle(backend.to_namespace(xa, self.xp), out)
                ya[...] = backend.to_namespace(out, backend.array_module(ya))

    def _cycle(self, a, out):
        """out = one cycle on a (PETSc's layout: interleaved real and imaginary parts, or complex)."""
        if self.real_equivalent:
            u = self.mg.cycle(a[0::2] + 1j * a[1::2])
            out[0::2], out[1::2] = u.real, u.imag
        else:
            out[...] = self.mg.cycle(a)

    # -- setup -----------------------------------------------------------------------------------------
    def _setup(self, pc):
        v = self.values
        self.real_equivalent = not mat.scalar_is_complex()
        dof = 2 if self.real_equivalent else 1
        n, dim = dmda.square_dmda(pc, dof, TITLE)
        points = n ** dim
        M = mat.pc_matrix(pc, TITLE)
        if M.getSize()[0] != points * dof:
            raise errors.error(f"{TITLE}: the operator has {M.getSize()[0]} rows, the {n}^{dim} DMDA "
                               f"{'(dof 2) ' if self.real_equivalent else ''}needs {points * dof}")
        collective = mpi.Collective(pc)
        # a field given on some ranks only, or wrong on some, stops every rank with the message
        k, self.k_source = collective.agreed(self._wavenumber, pc, v, points)
        if len(set(collective.allgather(self.k_source))) > 1:
            raise errors.error(f"{TITLE}: a wavenumber field was set on some ranks only; set it on every rank "
                               "(pcplugins.set_wavenumber with the whole field)")
        if v["boundary"] == "absorbing" and float(k.max()) == 0:
            raise errors.error(f"{TITLE}: k = 0 everywhere with -pc_sl_boundary absorbing makes M the pure "
                               "Neumann Laplacian, which is singular: give k > 0, or -pc_sl_boundary dirichlet")
        size = pc.getComm().getSize()
        hierarchy = v["hierarchy"] if v["hierarchy"] != "auto" else ("stencil" if size > 1 else "csr")
        if hierarchy == "csr" and size > 1:
            raise errors.error(f"{TITLE}: -pc_sl_hierarchy csr runs on one rank, this PC has {size}: use stencil")
        self.hierarchy, self.ranks = hierarchy, size
        dezeeuw_fits = dim == 2 and v["boundary"] == "absorbing"
        prolongation = v["prolongation"]
        if prolongation == "auto":
            prolongation = "dezeeuw" if dezeeuw_fits else "bilinear"
        if prolongation == "dezeeuw" and not dezeeuw_fits:
            raise errors.error(f"{TITLE}: -pc_sl_prolongation dezeeuw needs 2D and the absorbing boundary (the "
                               f"boundary nodes on every level); here: {dim}D, {v['boundary']}")
        self.select_device(M)
        shift = (v["beta1"], v["beta2"])
        dtype = numpy.complex64 if v["precision"] == "single" else numpy.complex128
        self.n, self.dim, self.kmax = n, dim, float(k.max())
        t0 = log.clock()
        if hierarchy == "stencil":
            dm, box = dmda.dmda_box(pc, dof, TITLE)
            if v["boundary"] == "absorbing":  # the boundary nodes are unknowns: coarse points on them too
                box = grid.Box(box.global_shape, box.start, box.shape, keep_ends=True, virtual_end=True)
            if k.ndim:                    # the field is given on the whole grid: this rank's part
                k = k.reshape((n,) * dim)[tuple(slice(s, s + m) for s, m in zip(box.start, box.shape))]
            offsets, coefs = helmholtz.coefficients(box, self.xp.asarray(k), shift, v["boundary"], self.xp)
            op = stencil.StencilOperator(box, offsets, coefs, self.xp, dtype)
            comm = None
            if size > 1:
                comm = mpi.DMDAComm(pc, dm, False, self.xp, v["gather_size"], who=TITLE,
                                      transport=v["ghost_transport"])
                comm.distribute(0, box)
            t1 = log.clock()
            self.mg = slmg.StencilMG(op, self.kmax, self._h(), comm, cycle=v["cycle"], omega=v["omega"],
                                     pre=v["pre"], post=v["post"], max_kh=v["max_kh"], coarse_solve=v["coarse"],
                                     degree=v["coarse_degree"], event=lambda name: self.event(name.capitalize()),
                                     prolongation=prolongation)
            self._comm, local = comm, box.size
            if comm is not None:
                comm.prepare()            # what a captured cycle's exchanges need, opened now
        else:
            self._comm, local = None, points
            Mh = helmholtz.operator(n, k.reshape((n,) * dim) if k.ndim else k, shift, v["boundary"], self.xp, dim)
            backend.synchronize(self.xp)
            t1 = log.clock()
            self.mg = slmg.ShiftedLaplaceMG(Mh, n, self.xp, self.kmax,
                                            keep_boundary=v["boundary"] == "absorbing", cycle=v["cycle"],
                                            omega=v["omega"], pre=v["pre"], post=v["post"], max_kh=v["max_kh"],
                                            coarse_solve=v["coarse"], degree=v["coarse_degree"], dtype=dtype, dim=dim,
                                            prolongation=prolongation)
        backend.synchronize(self.xp)
        self.timings = {"operator": t1 - t0, "hierarchy": log.clock() - t1}
        if backend.is_gpu(self.xp) and v["graph"] and self.mg.on_device_only:
            # the cycle's temporaries come from a pool of their own, which the graphs keep using
            m = local * dof               # this rank's part of the grid
            dtype = numpy.float64 if self.real_equivalent else numpy.complex128
            self._graphs = backend.CycleGraphs.on_buffers(self._cycle, m, dtype)
        self._run = self._graphs or self._cycle

    @staticmethod
    def _wavenumber(pc, v, points):
        """(k, where from): -pc_sl_k or the field composed on the PC, checked."""
        k = compose.composed_real_array(pc, "wavenumber", points, TITLE)
        source = "the Vec \"wavenumber\" composed on the PC"
        if k is None:
            if v["k"] is None:
                raise errors.error(f"{TITLE} needs the wavenumber: -pc_sl_k K, or a field through "
                                   "pcplugins.set_wavenumber(pc, k)")
            k, source = v["k"], f"-pc_sl_k {v['k']:g}"
        elif v["k"] is not None:
            raise errors.error(f"{TITLE}: both -pc_sl_k and a wavenumber field were given; choose one")
        k = numpy.asarray(k, dtype=float)
        if not numpy.all(numpy.isfinite(k)) or numpy.any(k < 0):
            raise errors.error(f"{TITLE}: the wavenumber must be finite and >= 0")
        return k, source

    # -- view --------------------------------------------------------------------------------------------
    def describe(self):
        if self.mg is None:
            return [f"{TITLE}: not set up"]
        v = self.values
        form = ("real-equivalent form (dof 2, real and imaginary parts interleaved)" if self.real_equivalent
                else "complex scalars")
        graph = (", CUDA graph " + (self._graphs.note if self._graphs else "off")) if backend.is_gpu(self.xp) else ""
        t = self.timings
        return ([f"{TITLE}: M = -Laplace - ({v['beta1']:g} - {v['beta2']:g} i) k^2 on the {self.n}^{self.dim} "
                 f"DMDA grid, {v['boundary']} boundary, {form}",
                 f"wavenumber from {self.k_source} (max {self.kmax:g}, k h = {self.kmax * self._h():.3g}); "
                 f"device {self.device}{graph}" + (f", {self.ranks} ranks" if self.ranks > 1 else "")]
                + self.mg.describe() +
                [f"setup: shifted operator {t['operator']:.3g} s, hierarchy (Galerkin, smoothers, coarse solve) "
                 f"{t['hierarchy']:.3g} s"])

    def _h(self):
        return 1.0 / (self.n - 1) if self.values["boundary"] == "absorbing" else 1.0 / (self.n + 1)
