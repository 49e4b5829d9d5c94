"""pcplugins.GMG and pcplugins.ShiftedLaplace under mpiexec with 1-4 ranks (tests/mpi/mpi_solve.py):
the iterates do not depend on the number of ranks (global colours, nested partitions, a ghost
update after each colour, the coarse levels gathered onto every rank once some rank would own no
points). pcplugins.AMG runs with its hierarchy distributed by rows, and as the block solver of
PETSc's bjacobi."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, complex_scalars, gpu, pcplugins_env, real_scalars

HERE = os.path.dirname(__file__)
MPIEXEC = shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec")


def mpiexec(P, script, args, timeout=300):
    """``script`` (a path from tests/mpi/) under mpiexec on P ranks, pcplugins importable."""
    cmd = [MPIEXEC, "-n", str(P), sys.executable, os.path.join(HERE, script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=pcplugins_env())


def run(tmp_path, P, problem, options):
    out = str(tmp_path / f"out{P}.npz")
    res = mpiexec(P, "mpi_solve.py", [out, *map(str, problem), *options])
    assert res.returncode == 0, res.stdout + res.stderr
    with np.load(out) as saved:          # read now: the next run writes the same file
        return dict(saved)


# -pc_gmg_gather_size 0 keeps every level that can be divided distributed (more ghost updates to
# test); the default gathers these small grids right below the finest level.
NOGATHER = ["-pc_gmg_gather_size", "0"]
CASES = [((17, 3, "petsc", 0.0), NOGATHER),
         ((20, 3, "interior", 2.0), NOGATHER + ["-pc_gmg_smoother", "multicolor"]),
         ((45, 2, "interior", 3.0), NOGATHER + ["-pc_gmg_cycle", "w"]),
         ((33, 2, "petsc", 0.0), NOGATHER + ["-pc_gmg_operator", "laplacian", "-pc_gmg_coarse_size", "1"]),
         ((19, 3, "interior", 1.0), ["-pc_gmg_smoother", "chebyshev"]),
         # even axes: coarse levels of stencil.AxisLaplacian, its last cell on the last rank
         ((34, 3, "petsc", 0.0), NOGATHER),
         (("40x26", 2, "interior", 0.0), NOGATHER + ["-pc_gmg_operator", "laplacian", "-pc_gmg_coarse_size", "1"]),
         # the operator-dependent transfers' weights and their ghost layers: a nonsymmetric
         # constant stencil (convection at cell Peclet 10), odd and even
         ((63, 2, "convection", 10.0), NOGATHER), ((20, 3, "convection", 10.0), NOGATHER),
         # periodic axes: the ghost updates wrap between the first and last process columns (a rank
         # alone along an axis sends to itself), the gathered levels wrap their own halo
         ((32, 2, "periodic", 0.0), NOGATHER), (("24x20x16", 3, "periodic", 0.0), NOGATHER),
         (("40x26", 2, "periodic_x", 0.0), NOGATHER), (("24x20x16", 3, "periodic", 0.0), []),
         # kappa jumps on a periodic grid: black box weights and Galerkin probes across the wrap
         ((40, 2, "periodic", 2.0), NOGATHER), (("20x28x16", 3, "periodic_x", 3.0), NOGATHER),
         # an odd periodic axis, kept by the coarsening, below levels gathered onto every rank: the
         # black box transfer between two gathered levels is built on the whole coarse grid
         (("41x24", 2, "periodic_x", 2.0), []), (("21x16x16", 3, "periodic_x", 2.0), []),
         # the linear transfers' prolongation into the halo between the ranks on grids that keep
         # their ends (vertex-centred Neumann) and on cell-centred ones, and Feng et al.'s transfer
         *[(p, NOGATHER + ["-pc_gmg_transfer", "linear"]) for p in
           ((33, 2, "neumann_vertex", 0.0), (17, 3, "neumann_vertex", 0.0), (20, 2, "neumann_cell", 0.0))],
         ((33, 2, "petsc", 0.0), NOGATHER + ["-pc_gmg_operator", "laplacian", "-pc_gmg_transfer", "paper"]),
         # the design card's other Krylov methods around GMG: BiCGStab on an odd cube, GMRES on a box
         # with jumps
         ((19, 3, "interior", 0.0), NOGATHER + ["-ksp_type", "bcgs"]),
         (("26x21", 2, "interior", 1.0), NOGATHER + ["-ksp_type", "gmres"]),
         # a negative definite operator (-A, -b: the hierarchy of A, its output negated), with jumps
         (("26x21", 2, "interior", 1.0), NOGATHER + ["-ksp_type", "gmres", "-test_negate"]),
         ((19, 3, "interior", 0.0), NOGATHER + ["-ksp_type", "bcgs", "-test_negate"]),
         # ... with PETSc's identity rows negated too (a layer of negative identity rows), and periodic
         ((33, 2, "petsc", 0.0), NOGATHER + ["-ksp_type", "bcgs", "-test_negate"]),
         ((40, 2, "periodic", 2.0), NOGATHER + ["-ksp_type", "gmres", "-test_negate"])]


@pytest.mark.parametrize("problem,options", CASES, ids=lambda c: "-".join(map(str, c)))
@real_scalars  # pcplugins.GMG
def test_fixed_iterations_equal_serial(tmp_path, problem, options):
    fixed = options + ["-ksp_max_it", "4", "-ksp_norm_type", "none"]
    ref = run(tmp_path, 1, problem, fixed)
    for P in (2, 3, 4):
        got = run(tmp_path, P, problem, fixed)
        assert got["levels"] == ref["levels"] and got["replicated"] >= 1
        assert got["axis_levels"] == ref["axis_levels"] and (ref["axis_levels"] > 0) == (problem[0] in (34, "40x26"))
        if options[:2] == NOGATHER:
            assert got["replicated"] < got["levels"] - 1     # some coarse level stays distributed
        assert ("negative definite" in str(got["view"])) == ("-test_negate" in options)
        assert ("rows scaled" in str(got["view"])) == ("rowcoef" in problem), got["view"]
        assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-10 * np.linalg.norm(ref["u"])


# the same on the GPU (CUDA Vecs, aijcusparse): the ghost layers go device to device through CUDA
# IPC, or through pinned host buffers; every rank on GPU 0, as on a one-GPU machine
GPU = ["-mat_type", "aijcusparse"]
PAIRS = ["-pc_gmg_operator", "laplacian", "-pc_gmg_pre", "3", "-pc_gmg_post", "3", "-test_pair_min_size", "0"]
GPU_CASES = [CASES[0], CASES[1], CASES[5], CASES[6], CASES[8],
             CASES[-2],          # a layer of negative identity rows (the matrix negated whole)
             ((31, 3, "interior", 0.0), ["-pc_gmg_operator", "laplacian", "-pc_gmg_precision", "single"]),
             # the layers through pinned host buffers, and CUDA IPC ordered by MPI messages
             (CASES[0][0], CASES[0][1] + ["-pc_gmg_ghost_transport", "host"]),
             (CASES[1][0], CASES[1][1] + ["-pc_gmg_ghost_transport", "ipc"]),
             # ordered by counters on the GPU (time-sliced ranks wait a time slice per exchange),
             # the cycle a CUDA graph after the first application; the coarse levels gathered
             # through a mailbox too
             (CASES[0][0], CASES[0][1] + ["-pc_gmg_ghost_transport", "device"]),
             (CASES[5][0], CASES[5][1] + ["-pc_gmg_ghost_transport", "device"]),
             ((31, 3, "interior", 0.0), ["-pc_gmg_operator", "laplacian", "-pc_gmg_precision", "single",
                                         "-pc_gmg_ghost_transport", "device"]),
             # relax_pair on every level: the distributed levels sweep the faces between the ranks
             # first; 3 sweeps, an odd count (one sweep by colour kernels), each transport
             *[((31, 3, "interior", 0.0), NOGATHER + PAIRS + t) for t in ([], ["-pc_gmg_ghost_transport", "device"],
                                                                        ["-pc_gmg_ghost_transport", "host"])],
             ((33, 3, "petsc", 0.0), NOGATHER + PAIRS + ["-pc_gmg_precision", "single"]),
             # the fused prolongation into the halo between the ranks on a grid that keeps its ends
             ((17, 3, "neumann_vertex", 0.0), NOGATHER + ["-pc_gmg_transfer", "linear"])]


@gpu
@pytest.mark.parametrize("problem,options", GPU_CASES, ids=lambda c: "-".join(map(str, c)))
def test_gpu_fixed_iterations_equal_serial(tmp_path, problem, options):
    """Four CG iterations on 2 and 3 ranks sharing the GPU give the one-rank GPU solution to 1e-10
    (1e-5 with float32 cycles, whose rounding depends on the blocks), and the host's to 1e-8."""
    fixed = options + ["-ksp_max_it", "4", "-ksp_norm_type", "none"]
    host = run(tmp_path, 1, problem, fixed)
    ref = run(tmp_path, 1, problem, fixed + GPU)
    tol = 1e-5 if "single" in options else 1e-10
    assert np.linalg.norm(ref["u"] - host["u"]) <= max(tol, 1e-8) * np.linalg.norm(host["u"])
    for P in (2, 3):
        got = run(tmp_path, P, problem, fixed + GPU)
        assert got["levels"] == ref["levels"] and got["replicated"] >= 1
        assert np.linalg.norm(got["u"] - ref["u"]) <= tol * np.linalg.norm(ref["u"])
        if "-pc_gmg_ghost_transport" in options:
            assert str(got["transport"]) == options[options.index("-pc_gmg_ghost_transport") + 1]
        assert str(got["graph"]).startswith("on") == (str(got["transport"]) == "device"), got["graph"]
        if "-test_pair_min_size" in options:        # the distributed finest level sweeps by relax_pair
            assert "level 0:" in str(got["view"]) and "one fused kernel per sweep" in str(got["view"]).split(
                "level 1:")[0], got["view"]


@real_scalars  # pcplugins.GMG
def test_converged_counts_match_serial(tmp_path):
    problem = (33, 3, "petsc", 4.0)
    its = [int(run(tmp_path, P, problem, [])["its"]) for P in (1, 2, 3, 4)]
    assert all(abs(k - its[0]) <= 1 for k in its), its
    assert its[0] < 60


# pcplugins.ShiftedLaplace, MP1 on (n + 1)^dim points with k = 0.625 n (tests/mpi/mpi_solve.py).
# -pc_sl_hierarchy stencil on one rank: the levels MPI runs use (the default there), which give the
# default CSR levels' preconditioner to rounding (test_shifted_laplace.py).
STENCIL = ["-pc_sl_hierarchy", "stencil"]
SL_CASES = [(32, 2, "helmholtz", 20.0), (16, 3, "helmholtz", 10.0),
            # even point counts: the virtual last coarse point lives on the last rank
            (31, 2, "helmholtz", 19.375), (15, 3, "helmholtz", 9.375)]


@pytest.mark.parametrize("problem", SL_CASES, ids=lambda c: f"{c[1]}d-{c[0] + 1}")
def test_shifted_laplace_fixed_iterations_equal_serial(tmp_path, problem):
    """Four Bi-CGSTAB iterations on 2-4 ranks give the serial solution to 1e-10 (measured 1e-15),
    with the finer two of three levels distributed (-pc_sl_gather_size 0): global colours and a
    ghost update after each colour. ``make test`` runs this in the complex build as well."""
    fixed = STENCIL + ["-pc_sl_gather_size", "0", "-ksp_max_it", "4"]
    ref = run(tmp_path, 1, problem, fixed)
    for P in (2, 3, 4):
        got = run(tmp_path, P, problem, fixed)
        assert got["levels"] == ref["levels"] == 3 and got["replicated"] == 1 and got["its"] == 4
        assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-10 * np.linalg.norm(ref["u"])


def test_shifted_laplace_under_idrs_equal_serial(tmp_path):
    """pcplugins.IDRS (IDR(4)) around ShiftedLaplace: three iterations on 2 and 3 ranks give the
    serial solution to 1e-10 (measured 4e-14): its shadow vectors are a hash of the natural grid
    index, not of the rank."""
    fixed = STENCIL + ["-ksp_type", "python", "-ksp_python_type", "pcplugins.IDRS", "-ksp_idrs_s", "4",
                       "-ksp_max_it", "3"]
    problem = SL_CASES[0]
    ref = run(tmp_path, 1, problem, fixed)
    for P in (2, 3):
        got = run(tmp_path, P, problem, fixed)
        assert got["its"] == ref["its"] == 3
        assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-10 * np.linalg.norm(ref["u"])


def test_shifted_laplace_converged_counts_match_serial(tmp_path):
    """Bi-CGSTAB to 1e-6 on 33^2 (an odd grid: the ranks own unequal parts): the default levels on
    2-4 ranks need the serial count within one (measured 18 on every count of ranks)."""
    problem = SL_CASES[0]
    its = [int(run(tmp_path, 1, problem, STENCIL)["its"])] + [int(run(tmp_path, P, problem, [])["its"])
                                                              for P in (2, 3, 4)]
    assert all(abs(k - its[0]) <= 1 for k in its), its
    assert its[0] < 30


@gpu
@pytest.mark.parametrize("problem", SL_CASES, ids=lambda c: f"{c[1]}d-{c[0] + 1}")
def test_gpu_shifted_laplace_equal_serial(tmp_path, problem):
    """ShiftedLaplace's complex levels on the GPU under MPI: four Bi-CGSTAB iterations on 2 and 3
    ranks give the one-rank GPU solution to 1e-10."""
    fixed = STENCIL + ["-pc_sl_gather_size", "0", "-ksp_max_it", "4"] + GPU
    ref = run(tmp_path, 1, problem, fixed)
    for P, transport in ((2, "auto"), (3, "auto"), (2, "host"), (2, "device")):
        got = run(tmp_path, P, problem, fixed + ["-pc_sl_ghost_transport", transport])
        assert got["its"] == 4 and transport in ("auto", str(got["transport"]))
        # the device transport's cycle is captured as a CUDA graph, as one rank's is
        assert str(got["graph"]).startswith("on") == (str(got["transport"]) == "device"), got["graph"]
        assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-10 * np.linalg.norm(ref["u"])


@pytest.mark.parametrize("problem", [(33, 2, "rowcoef", 1e5), (15, 3, "rowcoef", 1e5),
                                     (33, 2, "mirrored", 10.0), (15, 3, "mirrored", 10.0)], ids=str)
@real_scalars  # pcplugins.GMG
def test_rows_scaled_on_uneven_ranks(tmp_path, problem):
    """ksp ex29's rows (rho 1e5: each row a multiple of the Laplacian's) and ts ex15's Neumann rows
    (scale 1 beside the interior's 1/h^2) under GMRES on 1-4 ranks (33 and 15 points split
    unevenly): every rank reads D^-1 A (detect.row_scaled decides on global extremes,
    detect.mirror_scaled on each rank's rows, alike where no rank's box is one point wide), the
    solution matches a direct solve and the count is one rank's."""
    exact = run(tmp_path, 1, problem, ["-ksp_type", "preonly", "-pc_type", "lu"])["u"]
    its = []
    for P in (1, 2, 3, 4):
        got = run(tmp_path, P, problem, [])
        assert int(got["reason"]) > 0 and "rows scaled" in str(got["view"]), (P, got["view"])
        assert np.linalg.norm(got["u"] - exact) <= 1e-6 * np.linalg.norm(exact), P
        its.append(int(got["its"]))
    assert len(set(its)) == 1 and its[0] <= 12, its


AMG = ["-ksp_type", "fcg", "-ksp_fcg_mmax", "1", "-pc_type", "python", "-pc_python_type", "pcplugins.AMG"]
# -pc_amg_gather_size 0 keeps every level distributed; 500 gathers from the second level on
AMG_CASES = [((45, 2, "interior", 3.0), ["-pc_amg_aggregation", "auxgrid", "-pc_amg_coarse_size", "10",
                                         "-pc_amg_gather_size", "0"]),
             ((45, 2, "interior", 3.0), ["-pc_amg_aggregation", "pairwise", "-pc_amg_coarse_size", "10",
                                         "-pc_amg_gather_size", "0"]),
             ((15, 3, "interior", 2.0), ["-pc_amg_smoother", "l1jacobi", "-pc_amg_cycle", "w",
                                         "-pc_amg_gather_size", "0"]),
             ((45, 2, "interior", 3.0), ["-pc_amg_coarse_size", "10", "-pc_amg_gather_size", "500"]),
             ((45, 2, "interior", 3.0), ["-pc_amg_smoother", "chebyshev", "-pc_amg_coarse_size", "10",
                                         "-pc_amg_gather_size", "0"]),
             ((45, 2, "interior", 3.0), ["-pc_amg_aggregation", "mis", "-pc_amg_coarse_size", "10",
                                         "-pc_amg_gather_size", "0"]),
             ((14, 3, "interior", 2.0), ["-pc_amg_aggregation", "mis", "-pc_amg_cycle", "v",
                                         "-pc_amg_coarse_size", "10", "-pc_amg_gather_size", "0"]),
             ((45, 2, "interior", 3.0), ["-pc_amg_aggregation", "pairwise", "-pc_amg_storage", "ell",
                                         "-pc_amg_coarse_size", "10", "-pc_amg_gather_size", "0"])]


@pytest.mark.parametrize("problem,options", AMG_CASES, ids=lambda c: "-".join(map(str, c)))
def test_distributed_amg(tmp_path, problem, options):
    """The distributed hierarchy (aggregates within a rank, hybrid smoothers, global inner products,
    the coarsest level gathered) on 1-4 ranks, fcg(1) to rtol 1e-8 (the DMDA's index grid gives the
    auxgrid case its coordinates): every coarse matrix equals P^T A P formed from the gathered finer
    matrix and aggregates, the solution matches a direct solve, and the iteration count grows by at
    most two over the one-rank count. Measured: 20, 20, 20, 20 (auxgrid), 15, 15, 16, 15 (pairwise),
    21, 19, 21, 19 (3D, l1-Jacobi, W-cycle), 20, 21, 21, 21 with the levels from the second on
    gathered onto every rank (-pc_amg_gather_size 500; the aux grid goes on over the gathered
    unknowns' centroids), 17, 17, 17, 16 with Chebyshev (the global
    polynomial, an exchange per product); smoothed aggregation (mis, its P reaching across the
    ranks: distributed.Transfer) 12, 10, 12, 10 and 11, 10, 10, 10 (3D, V-cycle), where a P
    kept within each rank took 12, 11, 15, 12 in 2D; pairwise with the smoothers in ELL storage
    (-pc_amg_storage ell) as in CSR."""
    exact = run(tmp_path, 1, problem, ["-ksp_type", "preonly", "-pc_type", "lu"])["u"]
    its = []
    for P in (1, 2, 3, 4):
        got = run(tmp_path, P, problem, AMG + options)
        assert int(got["reason"]) > 0 and got["levels"] >= (2 if "500" in options else 3), (P, got["levels"])
        assert 0 <= float(got["galerkin_error"]) < 1e-12, (P, got["galerkin_error"])
        assert np.linalg.norm(got["u"] - exact) <= 1e-6 * np.linalg.norm(exact), P
        if "500" in options and P > 1:
            # the aux grid goes on over the gathered level's centroids
            assert "replicated serial hierarchy (auxgrid" in str(got["view"]), got["view"]
        if "ell" in options:
            # the distributed levels' smoothers sweep the own block in ELL storage
            assert str(got["view"]).count("ELL (width") >= 2, got["view"]
        its.append(int(got["its"]))
    assert max(its) <= its[0] + 2 and its[0] <= 25, its


# the default cycle (the W-cycle, linear) under each KSP the PC is for; 45^2 and 15^3 split unevenly
# on 2 and 4 ranks; the convection case is nonsymmetric (upwind, cell Peclet number 2)
KSP_CASES = [("cg", (45, 2, "interior", 3.0), []),
             ("bcgs", (15, 3, "interior", 2.0), []),
             ("gmres", (45, 2, "interior", 3.0), ["-pc_amg_aggregation", "pairwise"]),
             ("gmres", (33, 2, "convection", 2.0), ["-pc_amg_aggregation", "pairwise"]),
             # -A x = -b: a negative definite matrix (the hierarchy of A, its output negated)
             ("bcgs", (45, 2, "interior", 3.0), ["-test_negate"]),
             # ksp ex29's rows (rho 1000): the hierarchy of D^-1 A, the global measures deciding
             ("gmres", (33, 2, "rowcoef", 1000.0), []),
             ("bcgs", (15, 3, "rowcoef", 1000.0), []),
             # the boundary's lone rows (rows.py) taken out on each rank, the interior renumbered
             ("cg", (33, 2, "petsc", 0.0), []),
             ("gmres", (15, 3, "petsc", 2.0), ["-pc_amg_aggregation", "pairwise"])]


@pytest.mark.parametrize("ksp,problem,options", KSP_CASES, ids=lambda c: "-".join(map(str, c)) if isinstance(
    c, tuple) else str(c))
def test_distributed_amg_under_each_ksp(tmp_path, ksp, problem, options):
    """pcplugins.AMG's default cycle under cg, bcgs and gmres on 1-4 ranks, the levels distributed
    (-pc_amg_gather_size 0): the solution matches a direct solve and the count stays within two of
    one rank's. Measured on 1-4 ranks: cg 20, 20, 20, 20; bcgs 10, 10, 11, 10; gmres 15, 15, 15, 15;
    gmres on the convection problem 16, 17, 17, 16; a negative definite matrix under bcgs; ksp ex29's
    rows (the hierarchy of D^-1 A) under gmres and bcgs; PETSc's boundary rows, lone rows taken out
    on each rank (rows.py): cg 12, 12, 12, 13 (33^2), pairwise under gmres 11, 12, 12, 12 (15^3)."""
    exact = run(tmp_path, 1, problem, ["-ksp_type", "preonly", "-pc_type", "lu"])["u"]
    its = []
    for P in (1, 2, 3, 4):
        got = run(tmp_path, P, problem, ["-ksp_type", ksp, "-pc_type", "python", "-pc_python_type", "pcplugins.AMG",
                                         "-pc_amg_coarse_size", "10", "-pc_amg_gather_size", "0"] + options)
        assert int(got["reason"]) > 0 and got["levels"] >= 3, (P, got["reason"], got["levels"])
        assert "W-cycle" in str(got["view"]), got["view"]
        assert ("negative definite" in str(got["view"])) == ("-test_negate" in options)
        assert ("rows scaled" in str(got["view"])) == ("rowcoef" in problem), got["view"]
        assert ("lone rows" in str(got["view"])) == (problem[2] in ("rowcoef", "petsc")), got["view"]
        assert np.linalg.norm(got["u"] - exact) <= 1e-6 * np.linalg.norm(exact), P
        its.append(int(got["its"]))
    assert max(its) <= its[0] + 2, its


# smoothed aggregation on the GPU (its P and R = P^T exchange ghost values: distributed.Transfer)
GPU_SMOOTHED = (AMG_CASES[5][0], AMG_CASES[5][1] + ["-pc_amg_agg_nsmooths", "1"])


# PETSc's boundary rows: lone rows taken out on the device (rows.py), the interior renumbered
GPU_LONE = ((33, 2, "petsc", 0.0), ["-pc_amg_coarse_size", "10", "-pc_amg_gather_size", "0"])


@gpu
@pytest.mark.parametrize("problem,options", [AMG_CASES[0], AMG_CASES[1], AMG_CASES[3], GPU_SMOOTHED, GPU_LONE],
                         ids=lambda c: "-".join(map(str, c)))
def test_gpu_distributed_amg(tmp_path, problem, options):
    """The distributed AMG hierarchy on CUDA Vecs (aijcusparse) on 2 and 3 ranks sharing the GPU:
    every coarse matrix is P^T A P, the solution matches a direct solve, and the count is within two
    of the one-rank GPU count; PETSc's boundary rows taken out (GPU_LONE) as on the host."""
    exact = run(tmp_path, 1, problem, ["-ksp_type", "preonly", "-pc_type", "lu"])["u"]
    ref = run(tmp_path, 1, problem, AMG + options + GPU)
    assert int(ref["reason"]) > 0
    for P in (2, 3):
        got = run(tmp_path, P, problem, AMG + options + GPU)
        assert int(got["reason"]) > 0 and got["levels"] >= (2 if "500" in options else 3), (P, got["levels"])
        assert 0 <= float(got["galerkin_error"]) < 1e-12, (P, got["galerkin_error"])
        assert np.linalg.norm(got["u"] - exact) <= 1e-6 * np.linalg.norm(exact), P
        assert int(got["its"]) <= int(ref["its"]) + 2, (P, got["its"], ref["its"])
        assert ("lone rows" in str(got["view"])) == (problem[2] == "petsc"), got["view"]


@gpu
@pytest.mark.parametrize("problem,options", [AMG_CASES[0], AMG_CASES[2], GPU_SMOOTHED],
                         ids=lambda c: "-".join(map(str, c)))
def test_gpu_amg_device_halo_equals_host(tmp_path, problem, options):
    """-pc_amg_ghost_transport device (mailbox.DeviceHalo: the ghost values through CUDA IPC,
    ordered by counters on the GPU; the inner products and the gathered level's right-hand side
    likewise, the whole cycle one CUDA graph) on 2 and 3 ranks sharing the GPU: the transport is
    the one asked for, and the iterations and solution are those of the exchange through host
    buffers, an eager cycle. Not
    to the last bit: on 3 ranks sharing a GPU two runs through the host differ by 1e-13, and runs
    through the device by as much or, now and then, by 4e-11 (the nonlinear K-cycle amplifies
    rounding); a ghost value read before its owner wrote it would move the solution by about the
    solve's tolerance (1e-8) or change the count."""
    for P in (2, 3):
        host = run(tmp_path, P, problem, AMG + options + GPU + ["-pc_amg_ghost_transport", "host"])
        got = run(tmp_path, P, problem, AMG + options + GPU + ["-pc_amg_ghost_transport", "device"])
        assert str(host["transport"]) == "host" and str(got["transport"]) == "device", P
        assert int(got["reason"]) > 0 and int(got["its"]) == int(host["its"]), (P, got["its"], host["its"])
        assert np.linalg.norm(got["u"] - host["u"]) <= 1e-9 * np.linalg.norm(host["u"]), P


@gpu
@pytest.mark.parametrize("which", ["gmg", "amg"])
def test_gpu_later_setups_reuse_the_mailbox_arenas(which):
    """Three KSPs set up one after another on 2 ranks sharing the GPU, device transport
    (tests/mpi/mpi_repeat_setup.py): the later ones map no new memory (the arenas the earlier
    ones gave back to the communicator) and give the first one's solution to 1e-12; with the
    ranks' pools made to differ, a fourth maps new arenas on both and gives it too."""
    res = mpiexec(2, "mpi_repeat_setup.py", [which], timeout=300)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


@gpu
def test_gpu_device_allsum_and_gather_rows_match_the_host():
    """CSRComm's device collectives (tests/mpi/mpi_device_reduce.py) on 2 and 3 ranks sharing the
    GPU: mailbox_allsum's sums of 1 to 8 float64, float32 and complex128 values, the bits of the
    ranks' values added in rank order on the host, the same on every rank; gather_rows with uneven
    parts (a rank with none) gives their concatenation."""
    for P in (2, 3):
        res = mpiexec(P, "mpi_device_reduce.py", [], timeout=180)
        out = res.stdout + res.stderr
        assert res.returncode == 0 and out.count(": ok") == P, out


@pytest.mark.skipif(not complex_scalars(), reason="needs a PETSc with complex scalars (make test runs it in the "
                    "complex build)")
def test_distributed_amg_complex(tmp_path):
    """pcplugins.AMG on a complex matrix under MPI: MP1's Helmholtz matrix (absorbing boundary, complex
    entries on it; k = 10, 33^2 points) under Bi-CGSTAB to rtol 1e-6 on 1-3 ranks keeps its complex
    values on every distributed level: every coarse matrix is P^T A P, the solutions agree, and the
    counts stay bounded (measured 30, 20, 18)."""
    problem = (32, 2, "helmholtz", 10.0)
    options = ["-pc_type", "python", "-pc_python_type", "pcplugins.AMG", "-pc_amg_coarse_size", "10",
               "-pc_amg_gather_size", "0"]
    ref = run(tmp_path, 1, problem, options)
    assert int(ref["reason"]) > 0 and np.abs(ref["u"].imag).max() > 0.1 * np.abs(ref["u"]).max()
    for P in (2, 3):
        got = run(tmp_path, P, problem, options)
        assert int(got["reason"]) > 0 and got["levels"] >= 3 and int(got["its"]) <= 40, P
        assert 0 <= float(got["galerkin_error"]) < 1e-12, (P, got["galerkin_error"])
        assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-4 * np.linalg.norm(ref["u"]), P
    # the default gather size takes the whole problem onto every rank: its buffers were real, the
    # cycle's output lost its imaginary part
    got = run(tmp_path, 2, problem, options[:-2])
    assert int(got["reason"]) > 0 and int(got["its"]) <= 40, got["its"]
    assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-4 * np.linalg.norm(ref["u"])


@pytest.mark.parametrize("case,message", [("negative", "needs a positive diagonal; row 39"),
                                          ("nan", "NaN or Inf")])
def test_distributed_amg_bad_matrix_stops_every_rank(case, message):
    """A fault in one rank's rows (tests/mpi/mpi_amg_cases.py): every rank raises the error naming it,
    none hangs waiting for the others."""
    res = mpiexec(3, "mpi_amg_cases.py", [case], timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and out.count(message) >= 3, out


def test_distributed_amg_set_up_again_frees_its_communicators():
    """tests/mpi/mpi_amg_cases.py resetup on 3 ranks: each new operator builds a new hierarchy and
    frees the old one's neighbourhood communicators (the count stays at the levels' number), and
    PCReset frees them all."""
    res = mpiexec(3, "mpi_amg_cases.py", ["resetup"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    counts = {line.split(", ")[-1] for line in lines if line.startswith("solve")}
    assert len(counts) == 1 and counts != {"0 communicators"}, lines
    assert all("reason 2" in line for line in lines if line.startswith("solve")), lines
    assert lines[-1] == "after reset: 0 communicators", lines


@pytest.mark.parametrize("nsmooths", ["0", "1"])
@pytest.mark.parametrize("gather", ["0", "65536"])
def test_amg_floating_part_in_parallel(nsmooths, gather):
    """A floating Neumann chain beside a Dirichlet Laplacian (tests/mpi/mpi_amg_cases.py floating)
    on 2 and 3 ranks, distributed and gathered: its aggregate's coarse diagonal of rounding takes
    its members' (energies.zero_energies), on the rank that owns it. Before: a NaN cycle or a
    failed eigenvalue estimate in setup."""
    for P in (2, 3):
        res = mpiexec(P, "mpi_amg_cases.py", ["floating", nsmooths, gather], timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        its, residual = res.stdout.split("floating: ")[1].split(" iterations, residual ")
        assert int(its) <= 30 and float(residual) <= 1e-8, res.stdout


@pytest.mark.parametrize("gather", ["0", "65536"])
def test_amg_example_in_parallel(gather):
    """examples/amg_solve.py (P1 elements on a quasi-uniform Delaunay mesh, coefficient jump 10^3,
    fcg(1) + pcplugins.AMG to a true residual of 1e-8) on 1 and 2 ranks, with every level
    distributed (gather size 0) and, by default, the 9801 unknowns gathered whole onto every rank
    (the serial aux-grid AMG with the gathered coordinates): measured 19 iterations each."""
    its = []
    for P in (1, 2):
        res = mpiexec(P, os.path.join(ROOT, "examples", "amg_solve.py"),
                      ["-n", "100", "-jump", "3", "-pc_amg_gather_size", gather])
        assert res.returncode == 0 and "reason 2" in res.stdout, res.stdout + res.stderr
        assert float(res.stdout.split("residual ")[1].split(",")[0]) <= 1e-8, res.stdout
        its.append(int(res.stdout.split(" iterations")[0].split()[-1]))
    assert its[0] <= 22 and abs(its[1] - its[0]) <= 2, its


def _elasticity(P, args):
    res = mpiexec(P, os.path.join(ROOT, "examples", "elasticity.py"), args)
    assert res.returncode == 0 and "(2)" in res.stdout, res.stdout + res.stderr
    assert float(res.stdout.split("residual ")[1].split(",")[0]) <= 1e-8, res.stdout
    return int(res.stdout.split(" iterations")[0].split()[-1])


def test_amg_elasticity_in_parallel():
    """examples/elasticity.py (2D Q1 elasticity, block size 2, rigid body modes as the matrix's
    near null space, cg to 1e-8) on 1-3 ranks (3 splits the 1056 nodes unevenly), gathered whole
    (gather size 4096) and with every level distributed (gather size 0: each rank's tentative
    prolongation, the Galerkin product exchanging the ghost rows of P). Measured: 19 iterations
    in every case; with every unknown a scalar 54 and 53 on 2 and 3 ranks."""
    whole = [_elasticity(P, ["-ne", "32", "-pc_amg_gather_size", "4096"]) for P in (1, 2, 3)]
    assert whole[0] <= 20 and whole[1:] == [whole[0]] * 2, whole
    for P in (2, 3):
        nodes = _elasticity(P, ["-ne", "32", "-pc_amg_gather_size", "0"])
        scalar = _elasticity(P, ["-ne", "32", "-pc_amg_gather_size", "0", "-pc_amg_near_null_space", "none"])
        assert nodes <= whole[0] + 2 and 2 * nodes < scalar, (P, nodes, scalar)


def test_amg_elasticity_pcsetcoordinates_in_parallel():
    """examples/elasticity.py -coordinates: each rank gives its nodes' coordinates by PETSc's
    PCSetCoordinates (no near null space on the matrix); the PC builds the rigid body modes from
    them on 1-3 ranks (3 splits the 1056 nodes unevenly), gathered and distributed. Measured: 21,
    21, 22 iterations gathered, 20 distributed on 3 ranks (18 and 19 with the matrix's near null
    space)."""
    its = [_elasticity(P, ["-ne", "32", "-coordinates"]) for P in (1, 2, 3)]
    assert max(its) <= 24 and max(its) - min(its) <= 2, its
    assert _elasticity(3, ["-ne", "32", "-coordinates", "-pc_amg_gather_size", "0"]) <= 24


def test_amg_as_bjacobi_blocks_bounded(tmp_path):
    """fcg(1) + bjacobi (one block per rank, each block pcplugins.AMG, pairwise aggregation: the
    blocks have no coordinates) against the same with exact (LU) blocks, on 65^2 to rtol 1e-8.
    Measured: AMG blocks 13, 42, 50, 41 iterations on 1-4 ranks, LU blocks 1, 32, 42, 35: the growth
    is block Jacobi's, the AMG adds about ten iterations."""
    opts = ["-ksp_type", "fcg", "-ksp_fcg_mmax", "1", "-pc_type", "bjacobi", "-sub_ksp_type", "preonly"]
    amg = opts + ["-sub_pc_type", "python", "-sub_pc_python_type", "pcplugins.AMG"]
    lu = opts + ["-sub_pc_type", "lu"]
    problem = (65, 2, "interior", 0.0)
    for P in (1, 2, 3, 4):
        got, exact = run(tmp_path, P, problem, amg), run(tmp_path, P, problem, lu)
        assert int(got["reason"]) > 0 and int(got["its"]) <= max(16, int(exact["its"]) + 12), (P, got["its"])
        assert np.linalg.norm(got["u"] - exact["u"]) <= 1e-6 * np.linalg.norm(exact["u"])


def test_shifted_laplace_example_in_parallel(tmp_path):
    """examples/helmholtz_solve.py under mpiexec: the same iterations and the same PNG (the real
    part of the solution, gathered to rank 0) on 1 rank with the stencil levels MPI runs (the default
    there is the CSR levels with de Zeeuw's prolongation) and on 2 ranks."""
    out = {}
    for P in (1, 2):
        png = tmp_path / f"mp1_{P}.png"
        res = mpiexec(P, os.path.join(ROOT, "examples", "helmholtz_solve.py"),
                      ["-N", "32", "-png", str(png)] + STENCIL * (P == 1))
        assert res.returncode == 0 and "reason 2" in res.stdout, res.stdout + res.stderr
        out[P] = (res.stdout.split("iterations")[0], png.read_bytes())
    assert out[1] == out[2]


@pytest.mark.parametrize("case,message", [
    ("coords_rank0", "vertex coordinates were found on some ranks only"),
    ("coords_length", "the coordinates Vec has"),
    ("coords_nan", "the coordinates contain NaN or Inf"),
    ("wavenumber_length", "the Vec \"wavenumber\" composed on the PC has 288 entries, expected 289"),
    ("wavenumber_rank0", "pcplugins.ShiftedLaplace needs the wavenumber")])
def test_bad_input_on_one_rank_stops_every_rank(case, message):
    """An input wrong on one rank only (tests/mpi/mpi_bad_input.py): every rank raises the error with
    the failing rank's message, within the timeout (a hang fails the test)."""
    P = 2
    res = mpiexec(P, "mpi_bad_input.py", [case], timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and out.count(message) >= P, out
    assert "solved" not in out


@real_scalars  # pcplugins.GMG
def test_rank_with_one_boundary_layer(tmp_path):
    """A 33 x 33 x 7 DMDA split 2, 2, 2, 1 along z over 4 ranks: with interior unknowns only (every
    rank's rows see different stencil offsets; all must build the same stencil) the iterates are
    the serial ones; with the tutorial convention the last rank owns only the identity rows of the
    boundary layer, and every rank stops with the message that says so (no hang)."""
    split = ["-da_processors_x", "1", "-da_processors_y", "1", "-da_processors_z", "4"]
    fixed = ["-ksp_max_it", "4", "-ksp_norm_type", "none"]
    ref = run(tmp_path, 1, ("33x33x7", 3, "interior", 0.0), fixed)
    got = run(tmp_path, 4, ("33x33x7", 3, "interior", 0.0), fixed + split)
    assert np.linalg.norm(got["u"] - ref["u"]) <= 1e-10 * np.linalg.norm(ref["u"])
    res = mpiexec(4, "mpi_solve.py", [str(tmp_path / "x.npz"), "33x33x7", "3", "petsc", "0", *split], timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and out.count("rank 3 of 4 owns only boundary points") >= 4, out


@pytest.mark.parametrize("n,options", [(3, []), (7, []), (33, ["-pc_gmg_levels", "1"])])
@real_scalars  # pcplugins.GMG
def test_poisson_example_small_grids_rank_independent(n, options):
    """examples/poisson.py on 2D grids too small to coarsen (3^2: one unknown on the second rank's
    row, the hang of an earlier version; 7^2, within the default coarse size) and with one level
    forced: the coarsest solve is of the whole problem on every rank, so 2 ranks take the
    iterations of 1."""
    its = []
    for P in (1, 2):
        res = mpiexec(P, os.path.join(ROOT, "examples", "poisson.py"),
                      ["-n", str(n), "-dim", "2", "-ksp_rtol", "1e-8", *options], timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        its.append(res.stdout)
    count = [int(s.split(" iterations")[0].split()[-1]) for s in its]
    assert count[0] == count[1] and count[0] <= 2, its


@real_scalars  # pcplugins.GMG
def test_homg_under_mpi_names_the_rank_count():
    res = mpiexec(2, os.path.join(ROOT, "examples", "poisson.py"),
                  ["-n", "17", "-dim", "2", "-ksp_type", "richardson", "-pc_gmg_cycle", "homg"], timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0 and out.count("-pc_gmg_cycle homg runs on one MPI rank, this PC has 2") >= 2, out


def test_amg_on_a_periodic_grid_in_parallel():
    """pcplugins.AMG, where GMG's GPU refusal of periodic grids points: 2 ranks, the true residual."""
    res = mpiexec(2, os.path.join(ROOT, "examples", "poisson.py"), ["-n", "64", "-dim", "2", "-periodic", "x,y",
                  "-pc_python_type", "pcplugins.AMG", "-ksp_rtol", "1e-8"], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert float(res.stdout.split("true relative residual ")[1].split(",")[0]) <= 1e-7, res.stdout


BLAS_PROBE = """
import os, sys
from pcplugins.petsc import blas
cores = len(os.sched_getaffinity(0))
libs = blas._openblas_libraries()
assert libs, "no OpenBLAS found among the mapped libraries"
assert blas.share_cores(1) == {}
changed = blas.share_cores(cores)
assert changed and all(after == 1 < before for before, after in changed.values()), changed
assert all(int(get()) == 1 for _, get, _ in libs)
print("ok", changed)
"""


def test_blas_threads_shared_among_ranks():
    """With as many ranks on the node as cores, every OpenBLAS loaded (NumPy's at least) drops to
    one thread; with one rank nothing changes. In a fresh process started with a thread per core."""
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: nothing to share")
    cores = len(os.sched_getaffinity(0))
    env = pcplugins_env(OPENBLAS_NUM_THREADS=str(cores))
    res = subprocess.run([sys.executable, "-c", "import numpy, scipy.linalg\n" + BLAS_PROBE], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stdout + res.stderr


ONE_THREAD_PROBE = """
import os, sys
sys.path.insert(0, os.path.join(os.environ["PCPLUGINS_ROOT"], "examples"))
import numpy
import petsc4py
petsc4py.init([])
from petsc4py import PETSc
import meshes
from pcplugins.petsc import blas
libs = blas._openblas_libraries()
before = [int(get()) for _, get, _ in libs]
assert max(before) > 1, before
A, xy = meshes.p1_poisson(*meshes.mesh("quasi", 40))
M = meshes.petsc_matrix(A, None)
b, x = M.createVecs()
b.set(1.0)
ksp = PETSc.KSP().create()
ksp.setOperators(M)
ksp.setType("cg")
ksp.getPC().setType("python")
ksp.getPC().setPythonType("pcplugins.AMG")
ksp.setUp()
ctx = ksp.getPC().getPythonContext()
seen, cycle = [], ctx.mg.cycle
def counted(*args, **kw):
    seen.append([int(get()) for _, get, _ in blas._openblas_libraries()])
    return cycle(*args, **kw)
ctx.mg.cycle = counted
ksp.solve(b, x)
assert seen and all(n == 1 for counts in seen for n in counts), seen
assert [int(get()) for _, get, _ in libs] == before
print("ok", before, len(seen))
"""


def test_blas_one_thread_inside_the_pcs():
    """A PC's setup and applications run every loaded OpenBLAS on one thread (blas.one_thread: no
    NumPy thread left spinning while PETSc's vector operations run) and give the thread counts
    back after: here inside each application of a CG solve, in a fresh process with a thread per
    core."""
    if not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one core: one thread already")
    env = pcplugins_env(OPENBLAS_NUM_THREADS=str(len(os.sched_getaffinity(0))), PCPLUGINS_ROOT=ROOT)
    res = subprocess.run([sys.executable, "-c", ONE_THREAD_PROBE], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stdout + res.stderr


LOOK_PROBE = """
import sys
import numpy
from pcplugins.petsc import blas
calls, real = [], blas._openblas_libraries
def counted():
    calls.append(1)
    return real()
blas._openblas_libraries = counted
fresh = "scipy.linalg" not in sys.modules
for look in (True, True, False):
    with blas.one_thread(look=look):
        pass
assert len(calls) == 1, calls
before = len(blas._FOUND[0])
import scipy.linalg
with blas.one_thread(look=True):
    pass
assert len(calls) == 2, calls
assert not fresh or len(blas._FOUND[0]) > before, (before, blas._FOUND[0])
print("ok", before, len(blas._FOUND[0]))
"""


def test_blas_one_thread_looks_again_after_an_import():
    """A setup's look for loaded OpenBLAS copies reads the process's map of files only when a
    module was imported since the last look (it costs a millisecond a setup otherwise), and
    finds the copy an import brings (SciPy's): in a fresh process."""
    res = subprocess.run([sys.executable, "-c", LOOK_PROBE], env=pcplugins_env(), capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stdout + res.stderr


@pytest.mark.parametrize("P", [2, 3])
def test_pcs_on_one_communicator_share_what_they_keep(P):
    """petsc.mpi.Collective.shared and remembered (tests/mpi/mpi_shared.py): two PCs on one
    communicator share a dict that outlives them; a probe's answer is computed once; a key that
    some ranks lack makes every rank compute; a freed communicator closes what it kept."""
    res = mpiexec(P, "mpi_shared.py", [], timeout=60)
    assert res.returncode == 0 and "ok" in res.stdout, res.stdout + res.stderr


@pytest.mark.parametrize("gpus,mps,measure,own,together,probed", [
    # rank 0 alone on its GPU, ranks 1 and 2 share one: every rank probes, not only those sharing
    ("a,b,b", "1,1,1", "0", "1,1,1", True, True),
    # one rank's answer decides for all
    ("a,b,b", "1,1,1", "0", "1,1,0", False, True),
    # MPS seen by some ranks only: nobody probes (time-sliced ranks would pay a slice per wait)
    ("a,b,b", "0,1,1", "0", "1,1,1", False, False),
    # the device transport asked for: probed (its time goes to -ksp_view) even without MPS
    ("a,a,b", "0,0,0", "1", "1,1,1", True, True),
    # every neighbour on a GPU of its own: together, no probe
    ("a,b,a", "0,0,0", "0", "0,0,0", True, False)])
def test_ranks_agree_whether_their_kernels_run_together(gpus, mps, measure, own, together, probed):
    """mailbox.run_together on 3 ranks (tests/mpi/mpi_run_together.py): every rank gives the same
    answer and either all ranks run the collective probe or none, whatever each rank sees alone
    (a rank that probed alone would wait for ever: the run's timeout fails the test)."""
    res = mpiexec(3, "mpi_run_together.py", [gpus, mps, measure, own], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for r in range(3):
        assert f"rank {r}: together {together} probed {probed}" in out, out


TRANSPOSE_OPTIONS = [
    ["-pc_amg_gather_size", "0"],
    ["-pc_amg_gather_size", "60"],
    [],                                     # the whole matrix gathered: the replicated hierarchy's transpose
    ["-pc_amg_gather_size", "0", "-pc_amg_smoother", "l1jacobi", "-pc_amg_pre", "2", "-pc_amg_post", "1"],
    ["-pc_amg_gather_size", "0", "-pc_amg_agg_nsmooths", "1"],
    ["-pc_amg_gather_size", "0", "-pc_amg_agg_nsmooths", "1", "-pc_amg_smoother", "chebyshev", "-pc_amg_cycle", "v"],
    ["-pc_amg_gather_size", "100", "-pc_amg_agg_nsmooths", "1", "-pc_amg_smoother", "gs", "-pc_amg_pre", "1",
     "-pc_amg_post", "2"],
    # V-cycles below 40 unknowns: the over-correction's asymmetry measure, a global sum
    ["-pc_amg_gather_size", "0", "-pc_amg_kcycle_size", "40", "-pc_amg_agg_nsmooths", "0"],
    # lone rows taken out (rows.py), some of them other ranks' ghost columns
    ["-pc_amg_gather_size", "0", "-test_lone_rows"],
]


@pytest.mark.parametrize("options", TRANSPOSE_OPTIONS)
def test_amg_transpose_on_uneven_ranks(options):
    """PCApplyTranspose on 2 and 3 ranks (15x13: 98 + 97 rows, and 65 each, boundaries mid-line):
    the transposed cycle's distributed
    levels (distributed.Rows.transposed, hybrid smoothers, smoothed prolongations across ranks)
    and gathered levels (the replicated hierarchy's transpose) give B^T to rounding against
    PCApply's columns (measured 3e-16 to 7e-16), B being far from symmetric; KSPSolveTranspose
    then solves A^T x = b to a true residual of 1e-8 (measured 9-22 gmres iterations)."""
    for P in (2, 3):
        res = mpiexec(P, "mpi_transpose.py", ["15", "13", "-pc_amg_coarse_size", "12", *options], timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        diff, asym = (float(v) for v in res.stdout.split("matrix: difference ")[1].split(" levels")[0]
                      .split(" asymmetry "))
        assert diff <= 1e-12 and asym >= 1e-2, res.stdout
        its, residual = res.stdout.split("solve: ")[1].split(" iterations, residual ")
        assert int(its) <= 30 and float(residual) <= 1e-8, res.stdout


def test_amg_transpose_solve_takes_one_ranks_iterations():
    """KSPSolveTranspose at 64x63 on 1 and 3 ranks, gathered and distributed: the same gmres
    iterations within 2 (measured 16 each), a true residual of 1e-8."""
    its = []
    for P, gather in ((1, "65536"), (3, "65536"), (3, "0")):
        res = mpiexec(P, "mpi_transpose.py", ["64", "63", "-pc_amg_gather_size", gather], timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        n, residual = res.stdout.split("solve: ")[1].split(" iterations, residual ")
        assert float(residual) <= 1e-8, res.stdout
        its.append(int(n))
    assert max(its) - min(its) <= 2 and its[0] <= 25, its


@pytest.mark.parametrize("gather", ["0", "65536"])
def test_transpose_of_ksp_ex53s_matrix_on_every_rank_alike(gather):
    """ksp ex53's matrix (one asymmetric pair, its rows on the first and last rank) on 2 and 3
    ranks: whether the matrix is symmetric is the same answer on every rank (PETSc's MatIsSymmetric
    of MPIAIJ answered True on one rank and False on the other, so one rank applied the cycle and
    the other built its transpose, and both hung in different collectives); then
    KSPSolveTranspose solves A^T x = b to 1e-8."""
    for P in (2, 3):
        res = mpiexec(P, "mpi_transpose.py", ["ex53", "60", "-pc_amg_gather_size", gather, "-pc_amg_coarse_size", "12"],
                      timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        diff = float(res.stdout.split("matrix: difference ")[1].split()[0])
        residual = float(res.stdout.split("residual ")[1].split()[0])
        assert diff <= 1e-12 and residual <= 1e-8, res.stdout
