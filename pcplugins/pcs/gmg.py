"""pcplugins.GMG: geometric multigrid on a DMDA as a PETSc preconditioner (PCPYTHON).

    -ksp_type cg -pc_type python -pc_python_type pcplugins.GMG [-pc_gmg_* options]

Follows Feng, Shu, Xu, Zhang, "Multigrid methods for the Poisson equation on CPU-GPU computers"
(matrix-free 5/7-point stencils, multicolour Gauss-Seidel, V/W/F cycles and full multigrid) and
extends it to any assembled scalar operator on the DMDA (Galerkin coarse operators). With CUDA Vecs
(-vec_type cuda -mat_type aijcusparse) the cycle runs on the GPU on CuPy views of PETSc's device
memory; with host Vecs on NumPy (or on the GPU with -pc_gmg_device gpu, one copy each way).
The grid, operator, boundary, device and MPI handling is dmdapc.DMDAPC's; this module builds the
hierarchy.
"""
from .. import backend
from ..core import grid, homg, multigrid, stencil
from ..petsc import errors, mpi, options, pcbase, periodic
from .dmdapc import DMDAPC

LINE_SMOOTHERS = ("line_x", "line_y", "line_z", "adi")

# -pc_gmg_gather_size's default. A distributed level costs about ten ghost updates a V-cycle; on
# the GPU each is latency (tens of microseconds) on every level up to half a million points,
# where one gather of the level and its work repeated on every rank cost less (docs/gmg.md, MPI,
# has the measurements); on the host the repeated work is what counts
GATHER_SIZE = {"gpu": 524288, "cpu": 32768}

OPTIONS = [
    options.Option("pc_gmg_levels", "int", None, "Number of levels (default: coarsen while the grid allows)", lo=1),
    options.Option("pc_gmg_coarse_size", "int", grid.COARSE_SIZE, "Stop coarsening at this many unknowns", lo=1),
    options.Option("pc_gmg_cycle", "str", "v", "Multigrid cycle (homg: Becerra-Sagredo et al.'s MFMG cycle)",
           multigrid.CYCLES + ("homg",)),
    options.Option("pc_gmg_multiplicative_cycles", "int", 1,
           "Cycles per application (as -pc_mg_multiplicative_cycles): fewer Krylov iterations for more cycles",
           lo=1),
    options.Option("pc_gmg_homg_max_it", "int", 32, "HOMG: most iterations per level (MaxI)", lo=1),
    options.Option("pc_gmg_fmg_interpolation", "str", "cubic",
           "FMG: interpolation of each level's starting solution", ("cubic", "linear")),
    options.Option("pc_gmg_smoother", "str", "redblack", "Smoother", multigrid.SMOOTHERS),
    options.Option("pc_gmg_omega", "real", None, "Relaxation weight (default 1 for Gauss-Seidel, 2/3 for Jacobi)",
           lo=0, hi=2, open="lohi"),
    options.Option("pc_gmg_pre", "int", 2, "Pre-smoothing sweeps (2, as PCMG's default smoother)", lo=0),
    options.Option("pc_gmg_post", "int", 2, "Post-smoothing sweeps", lo=0),
    options.Option("pc_gmg_transfer", "str", "auto",
           "Transfers: auto (blackbox where the coarse operators are Galerkin, else linear), (bi/tri)linear + full "
           "weighting, Feng et al. eqs. 4.6/4.10, or the operator-dependent interpolation of black box "
           "multigrid with R = P^T (Galerkin coarse operators)", ("auto", "linear", "paper", "blackbox")),
    options.Option("pc_gmg_operator", "str", "auto",
           "Operator: detect from the matrix, declare the constant Laplacian (matrix-free), "
           "or force stored coefficients", ("auto", "laplacian", "assembled")),
    options.Option("pc_gmg_coarse_solve", "str", "direct",
           "Coarsest level: direct solve, or smoothing as in Feng et al. Remark 3.1", ("direct", "smooth")),
    options.Option("pc_gmg_device", "str", "auto",
           "Where the cycle runs (auto: the GPU when PETSc's vectors or matrix live there: CUDA Vecs, "
           "aijcusparse)", ("auto", "cpu", "gpu")),
    options.Option("pc_gmg_precision", "str", "double",
           "Precision of the hierarchy and the cycle (single: float32 multigrid inside the "
           "float64 Krylov method)", ("double", "single")),
    options.Option("pc_gmg_coefficient_precision", "str", "single",
           "On the GPU, the value type of the stored coefficients that the fused smoothers and residuals of "
           "variable-coefficient and Galerkin levels read (single: float32, half the bytes of a sweep; vectors "
           "and sums stay in the cycle's precision; cycle: the cycle's own)", ("single", "cycle")),
    options.Option("pc_gmg_mixed_inner_cycles", "int", 0,
           "Mixed-precision defect correction (Goddeke, Strzodka): float32 cycles per application, "
           "float64 residuals and updates (0: off)", lo=0),
    options.Option("pc_gmg_mixed_inner_digits", "real", 0.0,
           "Defect correction: stop once the residual fell by this many digits (0: off; at most 50 cycles)",
           lo=0, hi=15),
    options.Option("pc_gmg_fused", "bool", True,
           "On the GPU, fused CUDA kernels for the constant Laplacian (red-black GS, linear transfers) "
           "and for stored stencils (multicolour GS)"),
    options.Option("pc_gmg_gpu_levels", "int", None,
           "Hybrid CPU-GPU cycle (Feng et al. Algorithm 3): the finest levels on the GPU, the rest "
           "on the CPU (0: all on the CPU; default: all on the GPU)", lo=0),
    options.Option("pc_gmg_gather_size", "int", None,
           "MPI: coarse levels with at most this many points are gathered onto every rank (default "
           f"{GATHER_SIZE['gpu']} on the GPU, {GATHER_SIZE['cpu']} on the host)", lo=0),
    options.Option("pc_gmg_ghost_transport", "str", "auto", mpi.TRANSPORT_HELP, mpi.TRANSPORTS),
    options.Option("pc_gmg_graph", "bool", True, "On the GPU, replay the whole cycle as one captured CUDA graph"),
    options.Option("pc_gmg_graph_coarse", "bool", True,
           "Where the whole cycle is not captured (-pc_gmg_graph 0, mixed digits): replay the coarse "
           "levels (from 2^18 unknowns down) as one CUDA graph on their own arrays"),
]


class GMG(DMDAPC):
    TITLE, PREFIX, EVENT, OPTIONS = "pcplugins.GMG", "pc_gmg_", "GMG", OPTIONS
    GATHER_SIZE = GATHER_SIZE
    WHAT = "geometric multigrid"
    PERIODIC = True

    def inexact(self):
        digits = self.values["mixed_inner_digits"]
        return ((f"-pc_gmg_mixed_inner_digits {digits:g}", pcbase.NONLINEAR.format("the defect correction, whose "
                 "number of cycles varies,"), "fgmres or fcg", "-pc_gmg_mixed_inner_cycles N")
                if digits else super().inexact())

    def _cycle_not_symmetric(self):
        v = self.values
        if v["cycle"] in ("f", "fmg"):
            return (f"the {v['cycle'].upper()}-cycle is not symmetric (its coarse visits are not their own "
                    "reverse): use -pc_gmg_cycle v or w")
        if v["cycle"] == "homg":
            return "HOMG's MFMG cycle is not symmetric"
        if v["pre"] != v["post"]:
            return f"-pc_gmg_pre {v['pre']} and -pc_gmg_post {v['post']} differ"
        if v["mixed_inner_digits"]:
            return "the defect correction stops on a tolerance (-pc_gmg_mixed_inner_digits), which is nonlinear"
        return ""

    def _build(self, op, v):
        if any(op.box.periodic):
            # HOMG's hierarchy and the line solves know no wrap
            bad = [f"-pc_gmg_{k} {v[k]}" for k, no in (("cycle", ("homg",)), ("smoother", LINE_SMOOTHERS))
                   if v[k] in no]
            if bad:
                raise errors.error(f"pcplugins.GMG: option {bad[0]}: not on a grid periodic along "
                                   f"{periodic.periodic_names(op.box)}; leave it out")
        if v["cycle"] == "homg":
            if v["multiplicative_cycles"] != 1:
                raise errors.error("pcplugins.GMG: option -pc_gmg_multiplicative_cycles: HOMG's MFMG cycle is "
                                   "restarted by the Krylov method (-ksp_type richardson), not repeated inside the PC")
            return self._build_homg(op, v)
        opts = multigrid.Options(levels=v["levels"], coarse_size=v["coarse_size"], cycle=v["cycle"],
                                 cycles=v["multiplicative_cycles"],
                                 pre=v["pre"], post=v["post"], smoother=v["smoother"], omega=v["omega"],
                                 transfer=v["transfer"], coarse_solve=v["coarse_solve"], fused=v["fused"],
                                 coefficients="float32" if v["coefficient_precision"] == "single" else None,
                                 gpu_levels=v["gpu_levels"] if self.device == "gpu" else None,
                                 fmg_interpolation=v["fmg_interpolation"],
                                 coarse_operator="galerkin" if v["operator"] == "assembled" else "auto")
        try:
            mg = multigrid.Multigrid(op, opts, comm=self.comm,
                                     event=lambda name: self.event(name.capitalize()))
        except grid.CoarseningError as e:
            raise errors.error(f"pcplugins.GMG: option -pc_gmg_levels {v['levels']}: {e}; use -pc_gmg_levels "
                               f"{e.levels} or fewer, or leave it out") from None
        except ValueError as e:
            hint = "; use -pc_gmg_transfer auto or linear, or pcplugins.AMG" if any(op.box.periodic) else ""
            raise errors.error(f"pcplugins.GMG: {e}{hint}") from None
        backend.synchronize(self.xp)
        return mg

    def _build_homg(self, op, v):
        if self.mpi.size > 1:
            raise errors.error(f"pcplugins.GMG: -pc_gmg_cycle homg runs on one MPI rank, this PC has "
                               f"{self.mpi.size}: use another cycle (v, w, f, fmg) under MPI")
        w = stencil.laplacian_weights(op)
        if w is None:
            raise errors.error("pcplugins.GMG: -pc_gmg_cycle homg needs the constant-coefficient Laplacian; "
                               f"the operator is: {self.operator_kind}")
        try:
            return homg.HOMG(op, w, v["homg_max_it"], 0.8 if v["omega"] is None else v["omega"])
        except ValueError as e:
            raise errors.error(f"pcplugins.GMG: -pc_gmg_cycle homg: {e}") from None
