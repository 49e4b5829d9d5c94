"""The PCs on PETSc's CUDA vectors and matrices against the same solves on the host (skipped where
CuPy, a GPU or a CUDA PETSc is missing)."""
import numpy as np
import pytest

from conftest import amg_solve, gpu, petsc_options, petsc_solve, real_scalars

pytestmark = gpu

def _petsc_solve(n, extra, jump=1.0):
    """The solution, the PC's Python context and the KSP (keep it while reading the context:
    destroying the KSP resets its PC)."""
    from petsc4py import PETSc

    from problems import poisson_system
    with petsc_options(extra):      # -mat_type must be set before the matrix is created
        da, A, b = poisson_system(n, 3, "petsc", jump=jump)
        ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", max_it=6,
                             norm_type=PETSc.KSP.NormType.NONE)
    return x.getArray().copy(), ksp.getPC().getPythonContext(), ksp


@real_scalars
@pytest.mark.parametrize("variant", [{"mat_type": "aijcusparse"}, {"mat_type": "aijcusparse", "pc_gmg_graph": "0"},
                                     {"mat_type": "aijcusparse", "pc_gmg_fused": "0"},
                                     {"mat_type": "aijcusparse", "pc_gmg_operator": "laplacian"},
                                     {"mat_type": "aijcusparse", "pc_gmg_gpu_levels": "2"},
                                     {"mat_type": "aijcusparse", "pc_gmg_operator": "laplacian", "pc_gmg_pre": "2",
                                      "pc_gmg_post": "2", "pc_gmg_multiplicative_cycles": "2"},
                                     {"mat_type": "aijcusparse", "pc_gmg_operator": "laplacian", "pc_gmg_graph": "0",
                                      "pc_gmg_multiplicative_cycles": "3"},
                                     {"mat_type": "aijcusparse", "pc_gmg_graph": "0", "pc_gmg_graph_coarse": "0"},
                                     {"pc_gmg_device": "gpu"}])
def test_petsc_cuda_vectors_match_host(variant):
    jump = 0.0 if variant.get("pc_gmg_operator") == "laplacian" else 1.0   # declared: kappa = 1
    device_only = ("pc_gmg_graph", "pc_gmg_graph_coarse", "pc_gmg_fused", "pc_gmg_device", "pc_gmg_gpu_levels")
    same = {k: v for k, v in variant.items() if k.startswith("pc_gmg_") and k not in device_only}
    host, hctx, hksp = _petsc_solve(33, same, jump)
    dev, dctx, dksp = _petsc_solve(33, variant, jump)
    assert hctx.device == "cpu" and dctx.device == "gpu"
    if variant.get("pc_gmg_graph") == "0":       # the coarse levels' graph unless turned off too
        replayed = "replayed as one graph" in dctx.graph_note
        assert replayed == (variant.get("pc_gmg_graph_coarse") != "0"), dctx.graph_note
    assert np.linalg.norm(host - dev) <= 1e-10 * np.linalg.norm(host)


@real_scalars
@pytest.mark.parametrize("smoother", [{}, {"pc_gmg_operator": "laplacian"}, {"pc_gmg_smoother": "adi"}])
def test_single_precision_cycle_cuda_matches_host(smoother):
    host, _, _ = _petsc_solve(33, dict(smoother, pc_gmg_precision="single"), 0.0)
    dev, ctx, ksp = _petsc_solve(33, dict(smoother, pc_gmg_precision="single", mat_type="aijcusparse"), 0.0)
    assert ctx.device == "gpu" and ctx.mg.levels[0].u.dtype == np.float32
    assert np.linalg.norm(host - dev) <= 1e-5 * np.linalg.norm(host)


@real_scalars
@pytest.mark.parametrize("n,dim", [(33, 3), (20, 3), (34, 2), (33, 2)])
@pytest.mark.parametrize("pattern", ["boxes", "checkerboard"])
@pytest.mark.parametrize("precision,tol", [("double", 1e-10), ("single", 1e-5)])
def test_stored_fine_level_eliminates_the_layer_in_one_pass(n, dim, pattern, precision, tol):
    """Variable coefficients in PETSc's convention (identity rows on the outer layer: one diagonal
    value where the jumps stay inside (boxes), one a point where they reach the faces
    (checkerboard)): on CUDA vectors fused.eliminate reads PETSc's x once, the face rows are
    finished in place and fused.copy_inside writes y; the solution equals the host's."""
    from petsc4py import PETSc

    from problems import poisson_system
    out = []
    for extra in ({}, {"mat_type": "aijcusparse"}):
        with petsc_options(dict(extra, pc_gmg_precision=precision)):
            da, A, b = poisson_system(n, dim, "petsc", jump=2.0, pattern=pattern)
            ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", max_it=4,
                                 norm_type=PETSc.KSP.NormType.NONE)
        out.append((x.getArray().copy(), ksp.getPC().getPythonContext(), ksp))
    (host, hctx, _), (dev, dctx, _) = out
    assert hctx.device == "cpu" and dctx.device == "gpu" and dctx.layer
    assert dctx._elim_fused == (0.0, 0.0, 0.0) and dctx._faces and hctx._elim_fused is None
    assert np.isscalar(dctx._invdb) == (pattern == "boxes")
    assert np.linalg.norm(host - dev) <= tol * np.linalg.norm(host)


@real_scalars
@pytest.mark.parametrize("extra", [{}, {"pc_gmg_precision": "single"}, {"pc_gmg_fused": "0"},
                                   {"pc_gmg_graph": "0"}])
def test_nan_on_cuda_vectors_sets_failed_reason(extra):
    """The finiteness check runs inside the cycle (and its CUDA graph); its flag, read at the
    next application, sets the PC's failed reason. (PCApply directly: CG would see the NaN in
    its own dot products first.)"""
    from petsc4py import PETSc

    from problems import poisson_system
    with petsc_options({"mat_type": "aijcusparse", "pc_gmg_operator": "laplacian", **extra}):
        da, A, b = poisson_system(17, 3, "petsc")
        ksp, _ = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", max_it=2)
    pc, y, bad = ksp.getPC(), b.duplicate(), b.copy()
    ctx = pc.getPythonContext()
    assert ctx.device == "gpu" and ctx.graph_note.startswith("on") == ("pc_gmg_graph" not in extra)
    bad.setValue(100, np.nan)
    bad.assemble()
    pc.apply(b, y)
    pc.apply(b, y)
    assert pc.getFailedReason() == PETSc.PC.FailedReason.NOERROR
    pc.apply(bad, y)
    pc.apply(b, y)
    assert pc.getFailedReason() == PETSc.PC.FailedReason.SUBPC_ERROR


@real_scalars
@pytest.mark.parametrize("mixed", [{"pc_gmg_mixed_inner_cycles": "2"},
                                   {"pc_gmg_mixed_inner_cycles": "2", "pc_gmg_operator": "laplacian"},
                                   {"pc_gmg_mixed_inner_digits": "6"}])
def test_mixed_defect_correction_cuda_matches_host(mixed):
    """Defect correction on the GPU (float64 residual on the device, float32 cycles; captured as a
    graph when the cycle count is fixed) against the host."""
    host, _, _ = _petsc_solve(33, mixed, 0.0)
    dev, ctx, ksp = _petsc_solve(33, dict(mixed, mat_type="aijcusparse"), 0.0)
    assert ctx.device == "gpu" and ctx.mg.levels[0].u.dtype == np.float32
    assert ctx.graph_note.startswith("on") == ("pc_gmg_mixed_inner_cycles" in mixed)
    # the digits test reads a norm between cycles: the coarse levels alone are a graph
    assert ("replayed as one graph" in ctx.graph_note) == ("pc_gmg_mixed_inner_digits" in mixed)
    assert np.linalg.norm(host - dev) <= 1e-5 * np.linalg.norm(host)


@real_scalars
@pytest.mark.parametrize("precision,tol", [("double", 1e-12), ("single", 1e-5)])
@pytest.mark.parametrize("dense", [0, 512])
def test_fft_poisson_cuda_matches_host(precision, tol, dense, monkeypatch):
    """The sine transforms by cuFFT (DENSE_DST 0) or cuBLAS, the cycle one CUDA graph either way."""
    from pcplugins.core import fft

    from problems import poisson_system
    monkeypatch.setattr(fft, "DENSE_DST", dense)
    out = []
    for extra in ({}, {"mat_type": "aijcusparse"}):
        with petsc_options(dict(extra, pc_fft_precision=precision)):
            da, A, b = poisson_system(33, 3, "petsc")
            # the second application replays the captured graph when capture works
            ksp, x = petsc_solve(da, A, b, None, "preonly", pc="pcplugins.FFTPoisson", solves=2)
        out.append((x.getArray().copy(), ksp.getPC().getPythonContext()))
    (host, hctx), (dev, dctx) = out
    assert hctx.device == "cpu" and dctx.device == "gpu"
    assert dctx.graph_note.startswith("on"), dctx.graph_note
    assert ("cuBLAS" in dctx.mg.describe()[0]) == bool(dense)
    assert np.linalg.norm(host - dev) <= tol * np.linalg.norm(host)


@real_scalars
@pytest.mark.parametrize("method", ["auxgrid", "pairwise"])
def test_amg_petsc_cuda_matches_host(method):
    """aijcusparse + CUDA Vecs: the matrix is read on the device, setup and cycle run on CuPy,
    and the iteration count equals the host run's; coordinates given as a CuPy array (a CUDA Vec
    composed on the PC) give the same solve as a NumPy array's."""
    import cupy

    import meshes
    A, xy = meshes.p1_poisson(*meshes.mesh("disk", 24))
    its = {}
    for mat_type, where in (("aij", "host"), ("aijcusparse", "host"), ("aijcusparse", "device")):
        options = {"pc_amg_aggregation": method, "pc_amg_coarse_size": 100, "pc_amg_kcycle_size": 0}
        coords = cupy.asarray(xy) if where == "device" else xy
        it, res, ksp = amg_solve(A, coords, options, rtol=1e-8, mat_type=mat_type)
        ctx = ksp.getPC().getPythonContext()
        its[mat_type, where] = (it, ctx.device, ctx.matrix_source, ksp.getSolution().getType(),
                                ksp.getPC().query("coordinates").getType(), ksp.getSolution().getArray().copy())
    host, dev, devxy = its["aij", "host"], its["aijcusparse", "host"], its["aijcusparse", "device"]
    assert host[1] == "cpu" and dev[1] == devxy[1] == "gpu"
    assert "cuda" in dev[3] and "device" in dev[2]
    assert "cuda" not in dev[4] and "cuda" in devxy[4]
    assert abs(host[0] - dev[0]) <= 1, its
    assert dev[0] == devxy[0] and np.array_equal(dev[5], devxy[5])


@real_scalars
@pytest.mark.parametrize("shape", [(65, 33), (17, 9, 11)])
@pytest.mark.parametrize("ksp_type,cycle", [("cg", "w"), ("bcgs", "w"), ("gmres", "w"), ("fgmres", "k")])
def test_amg_cell_layout_on_odd_grids(shape, ksp_type, cycle):
    """Odd grids, whose cubic aux-grid cells hold 2 to 6 (2D) or 2 to 12 (3D) points: the finest
    level's Gauss-Seidel runs in the cell layout on the GPU (a kernel a colour) under each KSP,
    the true residual meets the preconditioned norm's rtol within cond(B A) (as on the host), and
    the count is within one of the host run's (the same hierarchy and cycle on every level: no
    V-cycles below -pc_amg_kcycle_size; sweeps equal to rounding)."""
    from conftest import laplacian
    A = laplacian(shape)
    xy = np.stack([a.ravel() for a in np.meshgrid(*[np.arange(m, dtype=float) for m in shape], indexing="ij")], 1)
    rhs = np.random.default_rng(3).random(A.shape[0])
    its, texts = {}, {}
    for mat_type in ("aij", "aijcusparse"):
        with petsc_options({"ksp_norm_type": "preconditioned"} if ksp_type != "fgmres" else {}):
            it, res, ksp = amg_solve(A, xy, {"pc_amg_coarse_size": 64, "pc_amg_kcycle_size": 0}, ksp_type=ksp_type,
                                     rtol=1e-8, mat_type=mat_type, rhs=rhs, cycle=cycle)
        its[mat_type], texts[mat_type] = it, "\n".join(ksp.getPC().getPythonContext().describe())
        assert res < 1e-6 and ksp.getConvergedReason() > 0, (mat_type, it, res)
    assert "cell layout" in texts["aijcusparse"] and "cell layout" not in texts["aij"], texts["aijcusparse"]
    assert abs(its["aij"] - its["aijcusparse"]) <= 1, its


@real_scalars
@pytest.mark.parametrize("shape,ksp_type", [((129, 129), "gmres"), ((33, 20, 17), "bcgs")])
def test_amg_rows_scaled_on_the_device(shape, ksp_type):
    """ksp ex29's rows (rho 1000): the GPU decides as the host does (smoothed.diagonal_scaling on
    CuPy arrays), builds the hierarchy of D^-1 A and converges in the host's count, within one
    (Bi-CGSTAB two: 19 on the host and 17 on the GPU at 33x20x17, whose coarse levels smooth by
    l1-Jacobi where the host's take Gauss-Seidel)."""
    from problems import row_coefficient_laplacian
    A, xy = row_coefficient_laplacian(shape, 1000.0)
    rhs = np.random.default_rng(3).random(A.shape[0])
    its = {}
    for mat_type in ("aij", "aijcusparse"):
        with petsc_options({"ksp_pc_side": "right"} if ksp_type == "gmres" else {}):
            it, res, ksp = amg_solve(A, xy, {"pc_amg_kcycle_size": 0}, ksp_type=ksp_type, rtol=1e-8,
                                     mat_type=mat_type, rhs=rhs, cycle=None)
        ctx = ksp.getPC().getPythonContext()
        assert any("rows scaled" in line for line in ctx.describe()), ctx.describe()
        assert ksp.getConvergedReason() > 0 and res <= 1e-8, (mat_type, it, res)
        its[mat_type] = (it, ctx.device)
    slack = 2 if ksp_type == "bcgs" else 1
    assert its["aijcusparse"][1] == "gpu" and abs(its["aij"][0] - its["aijcusparse"][0]) <= slack, its


@pytest.mark.parametrize("shape,ksp_type,options", [((129, 129), "cg", {}), ((64, 41), "gmres", {}),
                                                   ((33, 20, 17), "bcgs", {"pc_amg_aggregation": "pairwise"}),
                                                   ((129, 129), "fgmres", {"pc_amg_cycle": "k"})])
def test_amg_lone_rows_on_the_device(shape, ksp_type, options):
    """Boundary rows that are their diagonal alone, the interior still coupled to them (ksp ex45,
    ts ex15): the GPU takes them out as the host does (rows.LoneRows on CuPy arrays, the cycle with
    them inside the captured cycle) and converges in the host's count within one, to the true
    residual."""
    from problems import row_coefficient_laplacian
    A, xy = row_coefficient_laplacian(shape, 1.0)
    rhs = np.random.default_rng(5).random(A.shape[0])
    its = {}
    for mat_type in ("aij", "aijcusparse"):
        it, res, ksp = amg_solve(A, xy, options, ksp_type=ksp_type, rtol=1e-8, mat_type=mat_type, rhs=rhs, cycle=None)
        ctx = ksp.getPC().getPythonContext()
        text = "\n".join(ctx.describe())
        assert "lone rows" in text and ksp.getConvergedReason() > 0, (mat_type, text)
        assert res <= 1e-8, (mat_type, it, res)
        its[mat_type] = (it, ctx.device)
    assert its["aijcusparse"][1] == "gpu" and abs(its["aij"][0] - its["aijcusparse"][0]) <= 1, its


@real_scalars
@pytest.mark.parametrize("pc", ["pcplugins.GMG", "pcplugins.FFTPoisson"])
@pytest.mark.parametrize("n,dim", [(129, 2), ((64, 41), 2), ((17, 12, 9), 3)])
@pytest.mark.parametrize("rows", ["ex29", "ex15"])
def test_rows_scaled_on_the_device(pc, n, dim, rows):
    """ksp ex29's rows (rho 1e5) and ts ex15's Neumann rows (scale 1 beside the interior's 1/h^2) on
    aijcusparse and CUDA vectors: GMG and FFTPoisson (ex29's only) read D^-1 A on the device
    (detect.row_scaled, detect.mirror_scaled on CuPy arrays, with the reading kernel's class
    statistics), apply the cycle to D^-1 x, and solve as the host does: the same iterations within
    one, the true residual at the KSP's tolerance."""
    from petsc4py import PETSc

    from conftest import true_relative_residual
    from problems import neumann_rows_system, row_coefficient_system
    if rows == "ex15" and pc == "pcplugins.FFTPoisson":
        pytest.skip("ex15's shifted operator is no Laplacian: FFTPoisson refuses it")
    da, A, b = row_coefficient_system(n, dim, 1e5) if rows == "ex29" else neumann_rows_system(n, dim)
    unpre = PETSc.KSP.NormType.UNPRECONDITIONED
    its = {}
    for mat_type in ("aij", "aijcusparse"):
        M, f = A, b
        if mat_type == "aijcusparse":
            M = A.convert("aijcusparse", PETSc.Mat())      # a copy: without out petsc4py converts A itself
            f = M.createVecs()[0]
            b.copy(f)
        ksp, x = petsc_solve(da, M, f, {"ksp_pc_side": "right"}, "gmres", pc=pc, rtol=1e-8, max_it=60,
                             norm_type=unpre)
        ctx = ksp.getPC().getPythonContext()
        assert "rows scaled" in "\n".join(ctx.describe()), ctx.describe()
        assert ksp.getConvergedReason() > 0 and true_relative_residual(M, f, x) <= 1e-7, mat_type
        its[mat_type] = (ksp.getIterationNumber(), ctx.device)
    assert its["aijcusparse"][1] == "gpu" and abs(its["aij"][0] - its["aijcusparse"][0]) <= 1, its


@real_scalars
def test_amg_smooths_positive_couplings_on_rows_that_sum_to_zero():
    """ksp ex3's matrix (problems.zero_sum_q1: positive corner couplings, rows that sum to zero) on
    aijcusparse: the GPU takes smoothed aggregation (smoothed._positive_rows_residual), where the signed
    pairwise W-cycle took 236 cg iterations at 256^2 elements (smoothed 51) and did not converge in
    400 at 512^2 (smoothed 61); the true residual decides."""
    import meshes
    from conftest import pc_solve
    from problems import zero_sum_q1
    A = zero_sum_q1(64)
    rhs = np.random.default_rng(2).random(A.shape[0])
    it, res, ksp = pc_solve(meshes.petsc_matrix(A, "aijcusparse"), "pcplugins.AMG", "cg", {}, 1e-8, rhs)
    ctx = ksp.getPC().getPythonContext()
    assert ctx.device == "gpu" and ctx.mg.opts.nsmooths == 1, ctx.describe()
    assert any("smoothed: GPU" in line for line in ctx.describe()), ctx.describe()
    assert ksp.getConvergedReason() > 0 and res <= 1e-8 and it <= 60, (it, res)


@pytest.mark.parametrize("nsmooths", ["0", "1"])
def test_amg_floating_part_and_indefinite_levels_on_the_device(nsmooths):
    """energies.zero_energies on CuPy: a floating Neumann chain beside a Dirichlet Laplacian on
    aijcusparse (its aggregate's coarse diagonal of rounding takes its members'), solved to 1e-8
    as on the host; ksp ex9's indefinite matrix stops coarsening at the level of a zero diagonal
    (unsmoothed; smoothed aggregation makes none there)."""
    import meshes
    from conftest import pc_solve
    from problems import ex9_matrix, floating_part
    A, z = floating_part(128)
    rhs = np.random.default_rng(1).random(A.shape[0])
    rhs -= (z @ rhs) * z
    it, res, ksp = pc_solve(meshes.petsc_matrix(A, "aijcusparse"), "pcplugins.AMG", "cg",
                            {"pc_amg_agg_nsmooths": nsmooths, "pc_amg_coarse_size": 100}, 1e-8, rhs)
    ctx = ksp.getPC().getPythonContext()
    assert ctx.device == "gpu" and len(ctx.mg.levels) > 2, ctx.describe()
    assert ksp.getConvergedReason() > 0 and res <= 1e-8 and it <= 30, (it, res)
    if nsmooths == "0":          # pairwise: the same aggregates as the host's, whose level 2 has the zero
        it, res, ksp = pc_solve(meshes.petsc_matrix(ex9_matrix(20000, 1), "aijcusparse"), "pcplugins.AMG", "gmres",
                                {"pc_amg_agg_nsmooths": nsmooths}, 1e-8, np.ones(40000))
        assert ksp.getConvergedReason() != -11 and "no energy" in (ksp.getPC().getPythonContext().mg.stalled or "")


@pytest.mark.parametrize("options,coords", [({"pc_amg_cycle": "w"}, True), ({"pc_amg_cycle": "v"}, False),
                                            ({"pc_amg_pre": "1", "pc_amg_post": "2"}, True),
                                            ({"pc_amg_smoother": "l1jacobi", "pc_amg_cycle": "v"}, False),
                                            ({"pc_amg_agg_nsmooths": "1", "pc_amg_smoother": "chebyshev"}, False)])
def test_amg_transpose_on_the_device(options, coords):
    """PCApplyTranspose on aijcusparse (cycle.Cycle.transposed, captured as a graph of its own):
    B^T to rounding against PCApply's columns, for the cell layout's Gauss-Seidel (the aux grid),
    pairwise CSR levels, l1-Jacobi and Chebyshev; then KSPSolveTranspose at 128^2 under gmres to a
    true residual of 1e-8 of A^T x = b, in the plain solve's iterations (within one)."""
    from petsc4py import PETSc

    import pcplugins

    import meshes
    from conftest import complex_scalars, pc_matrices, python_pc_ksp
    from problems import convection_box
    for shape, check in (((17, 14), "matrix"), ((128, 128), "solve")):
        A = convection_box(shape, 3.0, complex_part=complex_scalars())
        M = meshes.petsc_matrix(A, "aijcusparse")
        with petsc_options(dict({"pc_amg_coarse_size": "12"} if check == "matrix" else {}, **options)):
            ksp = python_pc_ksp(M, "pcplugins.AMG", ksp_type="gmres")
            if coords:
                pcplugins.set_coordinates(ksp.getPC(), np.indices(shape).reshape(2, -1)[::-1].T * 1.0)
            ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
            ksp.setTolerances(rtol=1e-8)
            ksp.setFromOptions()
            ksp.setUp()
        ctx = ksp.getPC().getPythonContext()
        assert ctx.device == "gpu" and len(ctx.mg.levels) >= 3
        if check == "matrix":
            B, T = pc_matrices(ksp.getPC())
            scale = abs(B).max()
            assert abs(T - B.T).max() <= 1e-10 * scale and abs(B - B.T).max() >= 1e-3 * scale
            # captured at its first application: built before, outside the capture
            assert ctx._graphs_t.graphs and not ctx._graphs_t.failed, "the transposed cycle was not captured"
            continue
        b, x = M.createVecs()
        rhs = np.random.default_rng(4).random(A.shape[0])
        b.setArray(rhs)
        its = []
        for transpose in (True, False):
            x.set(0.0)
            (ksp.solveTranspose if transpose else ksp.solve)(b, x)
            res = np.linalg.norm(rhs - (A.T if transpose else A) @ x.getArray()) / np.linalg.norm(rhs)
            assert ksp.getConvergedReason() > 0 and res <= 1e-7, (transpose, res)
            its.append(ksp.getIterationNumber())
        assert its[0] <= its[1] + 1, its


@real_scalars
@pytest.mark.parametrize("shape", [(65, 33), (17, 9, 11)])
@pytest.mark.parametrize("ksp_type,cycle", [("cg", "w"), ("fgmres", "k")])
def test_amg_single_precision_on_the_device(shape, ksp_type, cycle):
    """-pc_amg_precision single on the GPU: the float32 cycle captured as a graph, on CUDA Vecs and
    on host Vecs with -pc_amg_device gpu (the cycle run eagerly, the Vecs copied), each within one
    iteration of the host's single cycle and of the double one, to rtol 1e-8 on the true residual;
    gmres at rtol 1e-10, beyond its reach around the float32 cycle, is a named error there too."""
    from petsc4py import PETSc

    from conftest import laplacian
    A = laplacian(shape)
    xy = np.stack([a.ravel() for a in np.meshgrid(*[np.arange(m, dtype=float) for m in shape], indexing="ij")], 1)
    its = {}
    for label, mat_type, extra in (("host", "aij", {}), ("cuda", "aijcusparse", {}),
                                   ("host vecs", "aij", {"pc_amg_device": "gpu"}),
                                   ("double", "aijcusparse", {"pc_amg_precision": "double"})):
        options = dict({"pc_amg_precision": "single", "pc_amg_coarse_size": 64}, **extra)
        it, res, ksp = amg_solve(A, xy, options, ksp_type=ksp_type, rtol=1e-8, mat_type=mat_type, cycle=cycle)
        ctx = ksp.getPC().getPythonContext()
        assert res <= 1.01e-8 and ksp.getConvergedReason() > 0, (label, it, res)
        its[label] = it
        if label == "cuda":
            text = "\n".join(ctx.describe())
            assert "the cycle in float32" in text and "CUDA graph on" in text and not ctx._graphs.failed, text
        if label == "host vecs":
            assert ctx.device == "gpu" and "cuda" not in ksp.getSolution().getType()
    assert max(its.values()) - min(its.values()) <= 1, its
    with pytest.raises(PETSc.Error) as err:
        amg_solve(A, xy, {"pc_amg_precision": "single", "pc_amg_coarse_size": 64}, ksp_type="gmres", rtol=1e-10,
                  mat_type="aijcusparse", cycle="w")
    assert "-pc_amg_precision single under KSP gmres" in str(err.value.__cause__)


@real_scalars
def test_amg_cycle_is_captured_as_a_graph():
    """The cycle is captured (on the first application: no eager run first) and PCReset frees the
    graphs at once: they refer back to the PC's context, a cycle only the garbage collector breaks."""
    import gc
    import weakref

    import meshes
    A, xy = meshes.p1_poisson(*meshes.mesh("uniform", 48))
    it, res, ksp = amg_solve(A, xy, rtol=1e-8, mat_type="aijcusparse")
    ctx = ksp.getPC().getPythonContext()
    text = "\n".join(ctx.describe())
    assert "CUDA graph on" in text, text
    assert res < 1e-8 and it <= 14
    assert not ctx._graphs.failed
    graphs = weakref.ref(ctx._graphs)
    gc.disable()
    try:
        ksp.getPC().reset()
        assert graphs() is None
    finally:
        gc.enable()


@pytest.mark.parametrize("krylov", ["bcgs", "idrs"])
@pytest.mark.parametrize("coarse_solve", ["direct", "polynomial"])
def test_shifted_laplace_petsc_cuda_matches_host(coarse_solve, krylov):
    """aijcusparse + CUDA Vecs: the PC reads and writes PETSc's device memory (DLPack with a real
    PETSc, the raw device pointer with complex scalars), replays its cycle as a CUDA graph and gives
    the host run's result and iteration count, under Bi-CGSTAB and pcplugins.IDRS (run with both
    builds: PCPLUGINS_SCALAR=complex .gpu/setup.sh)."""
    from problems import helmholtz_system
    N, k = 32, 20.0
    options = {"pc_sl_k": k, "ksp_pc_side": "right", "pc_sl_coarse": coarse_solve}
    if krylov == "idrs":
        options.update(ksp_python_type="pcplugins.IDRS", ksp_idrs_s=4)
    out = {}
    for mat_type in ("aij", "aijcusparse"):
        with petsc_options({"mat_type": mat_type}):
            da, A, b = helmholtz_system(N, k)
        ksp, x = petsc_solve(da, A, b, options, ksp_type="python" if krylov == "idrs" else krylov,
                             pc="pcplugins.ShiftedLaplace", rtol=1e-6)
        assert ksp.getConvergedReason() > 0, (mat_type, ksp.getConvergedReason())
        pc, y = ksp.getPC(), b.duplicate()
        pc.apply(b, y)
        out[mat_type] = (ksp.getIterationNumber(), pc.getPythonContext().device, b.getType(),
                         y.getArray().copy(), x.getArray().copy())
        text = "\n".join(pc.getPythonContext().describe())
        from petsc4py import PETSc
        y_host = PETSc.Vec().createSeq(b.getSize(), comm=PETSc.COMM_SELF)   # a KSP may mix Vec kinds
        pc.apply(b, y_host)
        assert np.allclose(y_host.getArray(), out[mat_type][3], rtol=1e-12, atol=0)
    assert "CUDA graph on" in text, text
    assert out["aij"][1] == "cpu" and out["aijcusparse"][1] == "gpu" and "cuda" in out["aijcusparse"][2]
    assert out["aij"][0] == out["aijcusparse"][0]
    for i in (3, 4):
        ref = out["aij"][i]
        assert np.allclose(out["aijcusparse"][i], ref, rtol=0, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("dim,N", [(2, 32), (3, 16), (2, 31), (3, 15)])
def test_shifted_laplace_stencil_levels_on_cuda_vecs(dim, N):
    """-pc_sl_hierarchy stencil (the levels MPI runs use) on CUDA Vecs: multigrid.py's CuPy kernels
    on complex arrays give the host run's application and Bi-CGSTAB count (both builds)."""
    from problems import helmholtz_system
    k = 0.625 * N
    out = {}
    for mat_type in ("aij", "aijcusparse"):
        with petsc_options({"mat_type": mat_type}):
            da, A, b = helmholtz_system(N, k, dim=dim)
        ksp, x = petsc_solve(da, A, b, {"pc_sl_k": k, "ksp_pc_side": "right", "pc_sl_hierarchy": "stencil"},
                             ksp_type="bcgs", pc="pcplugins.ShiftedLaplace", rtol=1e-6)
        pc, y = ksp.getPC(), b.duplicate()
        pc.apply(b, y)
        ctx = pc.getPythonContext()
        out[mat_type] = (ksp.getIterationNumber(), ctx.device, y.getArray().copy(), ctx._graphs)
    assert out["aij"][1] == "cpu" and out["aijcusparse"][1] == "gpu"
    # on the GPU the cycle is captured as a CUDA graph, as the CSR levels' is
    assert out["aijcusparse"][3] is not None and out["aijcusparse"][3].graphs
    assert abs(out["aij"][0] - out["aijcusparse"][0]) <= 1
    ref = out["aij"][2]
    assert np.allclose(out["aijcusparse"][2], ref, rtol=0, atol=1e-12 * np.abs(ref).max())


@gpu
@real_scalars
@pytest.mark.parametrize("pc,extra", [
    ("pcplugins.GMG", {}), ("pcplugins.GMG", {"pc_gmg_graph": "0"}),
    ("pcplugins.GMG", {"pc_gmg_operator": "laplacian", "pc_gmg_precision": "single", "pc_gmg_pre": "2",
                       "pc_gmg_post": "2", "pc_gmg_multiplicative_cycles": "5", "pc_gmg_graph": "0"}),
    ("pcplugins.AMG", {}), ("pcplugins.FFTPoisson", {})])
def test_destroy_returns_gpu_memory_without_the_collector(pc, extra):
    """Create, solve, destroy four times with Python's cyclic collector off: the GPU memory in use
    after each round stays that of the first (the graphs' and the hierarchy's reference cycles are
    broken by PCDestroy; before, each round left the hierarchy for the collector)."""
    import gc

    import cupy
    from petsc4py import PETSc

    from problems import poisson_system
    gc.collect()
    gc.disable()
    try:
        used = []
        for _ in range(4):
            with petsc_options(dict({"mat_type": "aijcusparse"}, **extra)):
                da, A, b = poisson_system(65, 3, "petsc", jump=0.0)
                ksp, x = petsc_solve(da, A, b, None, "cg", pc=pc, max_it=3, norm_type=PETSc.KSP.NormType.NONE)
            assert ksp.getPC().getPythonContext().device == "gpu"
            for obj in (ksp, x, b, A, da):
                obj.destroy()
            del ksp, x, b, A, da
            cupy.cuda.Device().synchronize()
            # the default pool's cached free blocks are no leak (and vary with fragmentation):
            # given back first, so what stays in use is what is still referenced
            cupy.get_default_memory_pool().free_all_blocks()
            free, total = cupy.cuda.runtime.memGetInfo()
            used.append(total - free)
    finally:
        gc.enable()
    assert max(used[1:]) - used[1] < 2 ** 20, [u / 2 ** 20 for u in used]


@gpu
@real_scalars
@pytest.mark.parametrize("dim,n", [(2, 65), (3, 33)])
def test_neumann_on_the_gpu_matches_the_host(dim, n):
    """The Neumann hierarchy (boundary nodes kept as coarse points) on CUDA vectors, with the fused
    linear transfers, gives the host's iterates."""
    from petsc4py import PETSc

    from problems import neumann_system
    out = {}
    for mat_type in ("aij", "aijcusparse"):
        with petsc_options({"mat_type": mat_type}):
            da, A, b = neumann_system(n, dim, "vertex")
        if mat_type == "aijcusparse":
            da.setVecType("cuda")
            A = A.convert("aijcusparse")
            A.setNullSpace(PETSc.NullSpace().create(constant=True))
            bc = A.createVecLeft()
            bc.setArray(b.getArray())
            b = bc
        ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", max_it=5, norm_type=PETSc.KSP.NormType.NONE)
        ctx = ksp.getPC().getPythonContext()
        assert ctx.mg.levels[0].box.keep_ends and ctx.device == ("gpu" if mat_type == "aijcusparse" else "cpu")
        out[mat_type] = x.getArray().copy()
    assert np.linalg.norm(out["aij"] - out["aijcusparse"]) <= 1e-10 * np.linalg.norm(out["aij"])


@gpu
@real_scalars
@pytest.mark.parametrize("n,dim,convention", [(17, 3, "interior"), (16, 3, "petsc"), ((20, 9), 2, "petsc"),
                                              ((12, 9, 10), 3, "interior")], ids=str)
@pytest.mark.parametrize("precision", ["double", "single"])
def test_constant_read_on_the_gpu(n, dim, convention, precision, monkeypatch):
    """A constant stencil read from an aijcusparse matrix (dmda.constant_stencil, the class_stats
    kernel) builds what the arrays' path builds on the GPU, and gives the host's iterates."""
    from petsc4py import PETSc

    import pcplugins.petsc.dmda as dmda

    from problems import poisson_system
    out = {}
    for name, mat_type in (("host", "aij"), ("read", "aijcusparse"), ("arrays", "aijcusparse")):
        if name == "arrays":
            monkeypatch.setattr(dmda, "constant_stencil", lambda *a: None)
        with petsc_options({"mat_type": mat_type, "pc_gmg_precision": precision}):
            da, A, b = poisson_system(n, dim, convention)
            ksp, x = petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG", max_it=4,
                                 norm_type=PETSc.KSP.NormType.NONE)
        ctx = ksp.getPC().getPythonContext()
        assert ctx.device == ("cpu" if name == "host" else "gpu") and ctx.mg.levels[0].op.constant
        out[name] = x.getArray().copy()
    assert np.array_equal(out["read"], out["arrays"])
    tol = 1e-10 if precision == "double" else 1e-5
    assert np.linalg.norm(out["host"] - out["read"]) <= tol * np.linalg.norm(out["host"])


def test_amg_reads_a_dense_cuda_matrix():
    """A seqdensecuda matrix is read through an AIJ copy (mat.CONVERTIBLE), as a dense host one:
    before, it was refused by name. A 2D Laplacian of 20^2, cg to a true residual of 1e-8."""
    from petsc4py import PETSc

    from conftest import laplacian, pc_solve
    A = laplacian((20, 20)).tocsr()
    M = PETSc.Mat().createDense(A.shape, array=A.toarray().astype(PETSc.ScalarType))
    M = M.convert("seqdensecuda") if M.getType() != "seqdensecuda" else M
    assert M.getType() == "seqdensecuda"
    it, res, ksp = pc_solve(M, "pcplugins.AMG", "cg", {"pc_amg_coarse_size": 50}, 1e-8,
                            np.random.default_rng(0).random(A.shape[0]))
    assert res <= 1e-8 and it <= 30, (it, res)
    assert "converted from seqdensecuda" in ksp.getPC().getPythonContext().matrix_source


@real_scalars
def test_amg_system_on_cuda_matches_host():
    """A system on aijcusparse + CUDA Vecs (2D Q1 elasticity, block size 2, the rigid body modes
    as the matrix's near null space): the tentative prolongation and node colours built by CuPy,
    the cycle captured as a graph; the iterations those of the host run (the whole W-cycle and
    Gauss-Seidel on every level on both: by default the GPU's truncates the one and takes l1-Jacobi
    on its small levels)."""
    from conftest import elasticity_solve
    its = {}
    for mat_type in ("aij", "aijcusparse"):
        options = {"pc_amg_coarse_size": 100, "pc_amg_kcycle_size": 0, "pc_amg_vcycle_smoother": "gs"}
        it, res, ksp = elasticity_solve(24, 2, "cg", options, mat_type=mat_type)
        ctx = ksp.getPC().getPythonContext()
        assert res <= 1e-8 and ksp.getConvergedReason() > 0, (mat_type, it, res)
        text = "\n".join(ctx.describe())
        assert "system: nodes of 2 unknowns, the matrix's near null space (3 vectors)" in text, text
        its[mat_type] = (it, ctx.device, text)
    assert its["aij"][1] == "cpu" and its["aijcusparse"][1] == "gpu"
    assert "CUDA graph on" in its["aijcusparse"][2], its["aijcusparse"][2]
    assert abs(its["aij"][0] - its["aijcusparse"][0]) <= 1, (its["aij"][0], its["aijcusparse"][0])


@real_scalars
@pytest.mark.parametrize("n,periodic", [((64, 40), (True, True)), ((12, 10, 14), (True, False, True)),
                                        ((9, 8, 12), (False, True, False))])
@pytest.mark.parametrize("operator", ["auto", "laplacian"])
def test_fft_poisson_periodic_on_cuda(n, periodic, operator):
    """FFTPoisson on a periodic DMDA with an aijcusparse matrix: the operator read on the host,
    the transforms on the GPU; the direct solve's (mean-free) answer, as on the host. GMG still
    sends such a grid to the host, by name."""
    import scipy.sparse
    import scipy.sparse.linalg
    from petsc4py import PETSc

    from problems import poisson_csr, poisson_system
    with petsc_options({"mat_type": "aijcusparse", "pc_fft_operator": operator}):
        da, A, b = poisson_system(n, len(n), periodic=periodic)
        ksp, x = petsc_solve(da, A, b, None, "preonly", pc="pcplugins.FFTPoisson", solves=2)
        ctx = ksp.getPC().getPythonContext()
        assert ctx.device == "gpu" and ctx.graph_note.startswith("on"), ctx.graph_note
        _, indptr, cols, vals = poisson_csr(n, len(n), "interior", 0.0, "boxes", periodic)
        M = scipy.sparse.csr_matrix((vals, cols, indptr))
        rhs, u = b.getArray().copy(), x.getArray().copy()
        assert np.linalg.norm(M @ u - rhs) <= 1e-11 * np.linalg.norm(rhs)
        if all(periodic):                   # the mean-free solution, the pseudo-inverse's
            assert abs(u.mean()) <= 1e-12 * np.linalg.norm(u)
        else:
            ref = scipy.sparse.linalg.spsolve(M.tocsc(), rhs)
            assert np.linalg.norm(u - ref) <= 1e-10 * np.linalg.norm(ref)
        assert any("real FFTs (periodic) along" in line and "cuFFT" in line for line in ctx.describe())
        with pytest.raises(PETSc.Error) as err:
            petsc_solve(da, A, b, None, "cg", pc="pcplugins.GMG")
    assert "runs on the host for now: use -pc_gmg_device cpu" in str(err.value.__cause__)
