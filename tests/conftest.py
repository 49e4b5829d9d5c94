import contextlib
import itertools
import os
import sys

import pytest

HERE = os.path.dirname(__file__)
ROOT = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def pcplugins_env(**extra):
    """os.environ for a subprocess that imports pcplugins from this checkout (and ``extra``)."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]), **extra)


def petsc_dir():
    import petsc
    return petsc.get_petsc_dir()


def petsc_tutorials(work, paths):
    """{name: executable} of PETSc's tutorials at ``paths`` in its source tree (as
    'src/ksp/ksp/tutorials/ex45.c'), taken from the installed PETSc's source distribution (``pip
    download``; pip's cache serves it again) and built against it in the folder ``work``; nothing
    of them is kept in this repository."""
    import shutil
    import subprocess
    import tarfile
    from importlib.metadata import version
    v = version("petsc")
    res = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                          f"petsc=={v}", "-d", str(work)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"cannot fetch PETSc {v}'s sources for its tutorials:\n{res.stderr}"
    pd = petsc_dir()
    exes = {}
    with tarfile.open(next(work.glob("petsc-*.tar.gz"))) as tar:
        for path in paths:
            name = os.path.splitext(os.path.basename(path))[0]
            src = work / f"{name}.c"
            src.write_bytes(tar.extractfile(tar.getmember(f"petsc-{v}/{path}")).read())
            exe = str(work / name)
            subprocess.run([shutil.which("mpicc"), "-O1", "-o", exe, str(src), f"-I{pd}/include", f"-L{pd}/lib",
                            "-lpetsc", "-lm", f"-Wl,-rpath,{pd}/lib"], check=True)
            exes[name] = exe
    return exes


def run_tutorial(exe, ranks, *options, timeout=300):
    """A tutorial on ``ranks`` ranks with pcplugins importable (its CompletedProcess)."""
    import shutil
    import subprocess
    env = pcplugins_env(PETSC_DIR=petsc_dir())
    cmd = [exe, "-python", sys.executable, *options]
    if ranks > 1:
        cmd = [shutil.which("mpiexec"), "-n", str(ranks)] + cmd
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def _gpu():
    from pcplugins import backend
    return backend.gpu_available()


def complex_scalars():
    """Whether petsc4py's PETSc has complex scalars (False without petsc4py: the array-core tests,
    tests/core/test_multigrid.py, test_lines.py and test_layers.py, run without PETSc)."""
    try:
        from petsc4py import PETSc
    except ImportError:
        return False
    import numpy
    return numpy.dtype(PETSc.ScalarType).kind == "c"


GPU_REASON = "needs CuPy and a CUDA GPU"
gpu = pytest.mark.skipif(not _gpu(), reason=GPU_REASON)
LAYERS = ("core", "petsc", "mpi", "gpu")


def pytest_collection_modifyitems(config, items):
    """Each test carries its folder's marker (pyproject.toml registers them), and a test that needs
    a GPU the ``gpu`` marker wherever it lives, so that ``-m`` selects a layer."""
    for item in items:
        layer = item.path.parent.name
        if layer in LAYERS:
            item.add_marker(layer)
        if any(m.name == "skipif" and m.kwargs.get("reason") == GPU_REASON for m in item.iter_markers()):
            item.add_marker("gpu")
# GMG and FFTPoisson refuse a PETSc built with complex scalars (tested in test_shifted_laplace)
real_scalars = pytest.mark.skipif(complex_scalars(), reason="needs a PETSc with real scalars")


@contextlib.contextmanager
def petsc_options(options, prefix=""):
    """``options`` in PETSc's database (under ``prefix``) for the block, removed afterwards even when
    it raises, so no test leaks options into the next."""
    from petsc4py import PETSc
    opts = PETSc.Options()
    for k, v in options.items():
        opts[prefix + k] = v
    try:
        yield
    finally:
        for k in options:
            opts.delValue(prefix + k)


def petsc_solve(da, A, b, options=None, ksp_type="cg", pc=None, prefix="", rtol=None, max_it=None,
                norm_type=None, solves=1):
    """Solve A x = b with a KSP on ``da`` (kept inactive: A is the user's matrix) configured from
    ``options`` (see petsc_options) and, if given, the Python PC type ``pc``. Returns (ksp, x)."""
    from petsc4py import PETSc
    with petsc_options(options or {}, prefix):
        ksp = PETSc.KSP().create()
        if prefix:
            ksp.setOptionsPrefix(prefix)
        ksp.setDM(da)
        ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
        ksp.setOperators(A)
        ksp.setType(ksp_type)
        if pc:
            ksp.getPC().setType("python")
            ksp.getPC().setPythonType(pc)
        ksp.setTolerances(rtol=rtol, max_it=max_it)
        if norm_type is not None:
            ksp.setNormType(norm_type)
        ksp.setFromOptions()
        x = b.duplicate()
        for _ in range(solves):
            ksp.solve(b, x)
    return ksp, x


def true_relative_residual(A, b, x):
    """||b - A x|| / ||b||: what decides whether an answer is right (never the KSP's own norm)."""
    r = b.duplicate()
    A.mult(x, r)
    r.aypx(-1.0, b)
    return r.norm() / b.norm()


def pc_solve(M, pc_type, ksp_type, options, rtol, rhs, xy=None, max_it=200):
    """Solve M x = rhs with ``pc_type`` (a Python PC's name, pcplugins.*, or a PETSc PC type)
    under ``ksp_type`` to ``rtol`` on the true residual (unpreconditioned norm), ``options`` in the
    database, the vertex coordinates ``xy`` on the PC where given: (iterations, true relative
    residual, ksp)."""
    from petsc4py import PETSc

    import pcplugins
    with petsc_options(options):
        if pc_type.startswith("pcplugins."):
            ksp = python_pc_ksp(M, pc_type, ksp_type=ksp_type)
        else:
            ksp = PETSc.KSP().create(comm=M.getComm())
            ksp.setOperators(M)
            ksp.setType(ksp_type)
            ksp.getPC().setType(pc_type)
        if xy is not None:
            pcplugins.set_coordinates(ksp.getPC(), xy)
        ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
        ksp.setTolerances(rtol=rtol, max_it=max_it)
        ksp.setFromOptions()
        b, x = M.createVecs()
        b.setArray(rhs)
        ksp.solve(b, x)
    return ksp.getIterationNumber(), true_relative_residual(M, b, x), ksp


def amg_solve(A, xy=None, options=None, ksp_type="fcg", rtol=1e-6, mat_type="aij", rhs=None, cycle="k"):
    """Solve the SciPy matrix A (as a PETSc ``mat_type`` matrix, no DM) with pcplugins.AMG, the
    coordinates ``xy`` attached if given, to ``rtol`` on the true residual (unpreconditioned norm).
    ``cycle``: the paper's K-cycle under fcg by default (the PC's own default is the W-cycle).
    Returns (iterations, true relative residual, ksp)."""
    import numpy

    import meshes
    M = meshes.petsc_matrix(A, mat_type)
    rhs = numpy.random.default_rng(3).random(A.shape[0]) if rhs is None else rhs
    return pc_solve(M, "pcplugins.AMG", ksp_type, dict({"pc_amg_cycle": cycle} if cycle else {}, **(options or {})),
                    rtol, rhs, xy)


def elasticity_solve(ne, dim, ksp_type, options, near_null=True, coords=False, pc="pcplugins.AMG", mat_type="aij"):
    """examples/elasticity.py's system (Q1, ne^dim elements) as a ``mat_type`` matrix of block size
    dim, with its rigid body modes as the near null space (``near_null``) and the nodes'
    coordinates on the PC (``coords``), solved by ``ksp_type`` + ``pc`` (a Python PC or gamg) to
    rtol 1e-8 on the true residual: (iterations, true relative residual, ksp)."""
    from elasticity import q1_elasticity, set_rigid_body_modes

    import meshes
    A, xy, f = q1_elasticity(ne, dim)
    M = meshes.petsc_matrix(A, mat_type, block_size=dim)
    if near_null:
        set_rigid_body_modes(M, xy)
    return pc_solve(M, pc, ksp_type, options, 1e-8, f, xy if coords else None, max_it=300)     # xy: a row a node


def pc_matrices(pc):
    """(B, T): the dense matrices of the set-up ``pc``'s PCApply and PCApplyTranspose, column by
    column (small matrices: a reference for the transpose); on several ranks this rank's rows."""
    import numpy
    from petsc4py import PETSc
    x, y = pc.getOperators()[0].createVecs()
    n, (lo, hi) = x.getSize(), x.getOwnershipRange()
    B, T = numpy.empty((hi - lo, n), PETSc.ScalarType), numpy.empty((hi - lo, n), PETSc.ScalarType)
    for j in range(n):
        x.set(0.0)
        if lo <= j < hi:
            x.setValue(j, 1.0)
        x.assemble()
        pc.apply(x, y)
        B[:, j] = y.getArray()
        pc.applyTranspose(x, y)
        T[:, j] = y.getArray()
    return B, T


def python_pc_ksp(A, pc_type, da=None, ksp_type=None):
    """A KSP on the matrix A with the Python PC ``pc_type``, and the DMDA ``da`` attached (inactive:
    A is the user's matrix) where given."""
    from petsc4py import PETSc
    ksp = PETSc.KSP().create(comm=A.getComm())
    if da is not None:
        ksp.setDM(da)
        ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    if ksp_type is not None:
        ksp.setType(ksp_type)
    ksp.getPC().setType("python")
    ksp.getPC().setPythonType(pc_type)
    return ksp


def grid_amg_ksp(M, options, shape, coords, ksp_type):
    """A set-up KSP of ``ksp_type`` with pcplugins.AMG on M, a grid matrix of ``shape`` points,
    ``options`` over a coarse size of 12, and where ``coords`` the grid points' coordinates on the
    PC (x fastest, as the matrix numbers them)."""
    import numpy

    import pcplugins
    with petsc_options(dict({"pc_amg_coarse_size": "12"}, **options)):
        ksp = python_pc_ksp(M, "pcplugins.AMG", ksp_type=ksp_type)
        if coords:
            pcplugins.set_coordinates(ksp.getPC(), numpy.indices(shape).reshape(len(shape), -1)[::-1].T * 1.0)
        ksp.setFromOptions()
        ksp.setUp()
    return ksp


def setup_error_on(da, A, pc_type, options=None):
    """The message of the PETSc error that setting up the Python PC ``pc_type`` on A (the DMDA
    ``da`` attached) with ``options`` raises."""
    from petsc4py import PETSc
    with petsc_options(options or {}):
        ksp = python_pc_ksp(A, pc_type, da=da)
        ksp.setFromOptions()
        with pytest.raises(PETSc.Error) as err:
            ksp.setUp()
    return str(err.value.__cause__)


def amg_galerkin_error(mg):
    """The largest relative difference between a coarse matrix of a kcycle.AggregationMG and P^T A P
    formed here from the whole finer matrix and the whole aggregate map (gathered from every rank
    of a distributed hierarchy; tests/mpi/mpi_solve.py, tests/petsc/test_amg.py)."""
    import numpy
    import scipy.sparse

    from pcplugins import backend
    from pcplugins.core import distributed, sparse
    comm = mg.comm
    worst = 0.0
    for fine, nxt in zip(mg.levels[:-1], mg.levels[1:]):
        sign = numpy.ones(fine.n) if fine.sign is None else backend.to_host(fine.sign)
        if isinstance(fine.P, distributed.Transfer):     # a smoothed prolongation across ranks
            P, R = (scipy.sparse.vstack(comm.allgather(T.global_rows())).tocsr() for T in (fine.P, fine.R))
            A, Ac = sparse.to_host(fine.rows.gathered()), sparse.to_host(nxt.rows.gathered())
            worst = max(worst, abs(R - P.T).max() / abs(P).max() if (R - P.T).nnz else 0.0)
            D = (P.T @ A @ P - Ac).tocsr()
            worst = max(worst, abs(D).max() / abs(Ac).max() if D.nnz else 0.0)
            continue
        if fine.P is not None:                       # a system's tentative prolongation (nullspace.py)
            P, A, Ac = (sparse.to_host(M) for M in (fine.P, fine.A, nxt.A))
            if fine.rows is not None:                # local to the ranks: block diagonal
                A, Ac = sparse.to_host(fine.rows.gathered()), sparse.to_host(nxt.rows.gathered())
                P = scipy.sparse.block_diag(comm.allgather(P)).tocsr()
            D = (P.T @ A @ P - Ac).tocsr()
            empty = numpy.asarray(abs(P).sum(axis=0)).ravel() == 0      # identity rows of A_c
            D = D + scipy.sparse.diags(empty.astype(float))
            worst = max(worst, abs(D).max() / abs(Ac).max() if D.nnz else 0.0)
            continue
        if fine.rows is None:                        # one rank: the serial hierarchy
            A, Ac, agg = fine.A, nxt.A, fine.agg
        else:
            A, Ac = fine.rows.gathered(), nxt.rows.gathered()
            agg = numpy.concatenate(comm.allgather(backend.to_host(fine.agg) + nxt.rows.starts[comm.rank]))
            sign = numpy.concatenate(comm.allgather(sign))
        A, Ac, agg = sparse.to_host(A), sparse.to_host(Ac), backend.to_host(agg)
        P = scipy.sparse.csr_matrix((sign, (numpy.arange(len(agg)), agg)))
        D = (P.T @ A @ P - Ac).tocsr()
        worst = max(worst, abs(D).max() / abs(Ac).max() if D.nnz else 0.0)
    return worst


def laplacian(shape):
    """The 5/7-point Laplacian (Dirichlet) on a box of ``shape`` points."""
    import scipy.sparse
    ops = [scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (m, m)) for m in shape]
    A = None
    for a, T in enumerate(ops):
        term = T
        for b, m in enumerate(shape):
            if b != a:
                eye = scipy.sparse.identity(m)
                term = scipy.sparse.kron(term, eye) if b > a else scipy.sparse.kron(eye, term)
        A = term if A is None else A + term
    return A.tocsr()


def colour_graphs():
    """Matrices for colouring.colour_graph: 2D grids (5-point, 9-point), a random nonsymmetric
    pattern, and a clique of 70 (more than the 64 colours a mask holds)."""
    import numpy
    import scipy.sparse
    T = scipy.sparse.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (63, 63))
    five = (scipy.sparse.kron(scipy.sparse.identity(63), T) + scipy.sparse.kron(T, scipy.sparse.identity(63))).tocsr()
    nine = (five[:1600, :1600] @ five[:1600, :1600]).tocsr()
    R = scipy.sparse.random(300, 300, density=0.03, format="csr", random_state=9) + scipy.sparse.identity(300)
    clique = numpy.random.default_rng(8).random((70, 70)) + 70 * numpy.eye(70)
    return {"5-point": five, "9-point": nine, "random": R.tocsr(), "clique": scipy.sparse.csr_matrix(clique)}


def coarse_matrices(n):
    """Dense coarsest-level matrices of order n for coarse.dense_inverse, by the path each takes:
    Cholesky (a 2D Laplacian: SPD), LU (upwind convection-diffusion: not symmetric; a symmetric
    indefinite one: its Cholesky factor has NaNs) and the pseudo-inverse (a pure Neumann path graph:
    every row sums to zero)."""
    import numpy
    m = int(round(n ** 0.5))
    spd = laplacian((m, n // m)).toarray()
    k = spd.shape[0]
    upwind = spd - 0.4 * numpy.eye(k, k=-1)
    indefinite = spd - 2.05 * numpy.eye(k)
    neumann = 2.0 * numpy.eye(k) - numpy.eye(k, k=1) - numpy.eye(k, k=-1)
    neumann[0, 0] = neumann[-1, -1] = 1.0
    return {"spd": (spd, "cholesky"), "upwind": (upwind, "lu"), "indefinite": (indefinite, "lu"),
            "neumann": (neumann, "pseudo-inverse")}


def random_stencil_matrix(shape, offsets, seed=0, zeros=True):
    """A StencilOperator with random coefficients on ``offsets`` and its CSR, with explicit zeros
    stored for every other box offset (as DMCreateMatrix preallocates). NumPy and SciPy only."""
    import numpy
    import scipy.sparse

    from pcplugins.core import grid, stencil
    rng = numpy.random.default_rng(seed)
    box = grid.Box(shape)
    coefs = [rng.uniform(1, 2, shape) * stencil.inside_mask(box, o, numpy) * (10 if not any(o) else -1)
             for o in offsets]
    op = stencil.StencilOperator(box, offsets, coefs, numpy)
    A = op.to_scipy().tocoo()
    if zeros:
        pattern = stencil.StencilOperator(box, stencil.box_offsets(box.dim),
                                          [numpy.ones(shape)] * 3 ** box.dim, numpy).to_scipy().tocoo()
        rows, cols = numpy.concatenate([A.row, pattern.row]), numpy.concatenate([A.col, pattern.col])
        A = scipy.sparse.coo_matrix((numpy.concatenate([A.data, numpy.zeros(pattern.nnz)]), (rows, cols)),
                                    shape=A.shape).tocsr()        # duplicates summed, zeros kept
        A.sort_indices()
        assert A.nnz == pattern.nnz           # the zeros are stored
    return op, A.tocsr()


def on_threads(size, work, make_comm, timeout=60):
    """work(make_comm(rank, common)) on ``size`` ranks that are threads of this process (named
    rank0, rank1, ...; the tests' stand-in for MPI), their results in rank order. ``common``:
    {"slots": one per rank, "barrier": a threading.Barrier} for the communicator's collectives.
    An exception on one rank breaks the barrier for the others and is raised here."""
    import threading
    common = {"slots": [None] * size, "barrier": threading.Barrier(size, timeout=timeout)}
    out, errors = [None] * size, []

    def run(r):
        try:
            out[r] = work(make_comm(r, common))
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(e)
            common["barrier"].abort()

    threads = [threading.Thread(target=run, args=(r,), name=f"rank{r}") for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


# whole grids and the cuts of their axes into ranks' parts: odd and even sizes, uneven parts,
# parts of one point, boxes whose axes keep their ends (with a virtual last point)
HALO_SPLITS = [((21, 20), [(0, 7, 21), (0, 9, 13, 20)], {}), ((17, 16), [(0, 8, 9, 17), (0, 16)], {}),
               ((19, 18, 16), [(0, 6, 19), (0, 9, 18), (0, 5, 11, 16)], {}),
               ((12, 15, 17), [(0, 12), (0, 7, 8, 15), (0, 3, 17)], {}),
               ((17, 16), [(0, 9, 17), (0, 5, 16)], {"keep_ends": True}),
               ((16, 14), [(0, 7, 16), (0, 6, 14)], {"keep_ends": True, "virtual_end": True})]


def halo_fill_cases(kinds=("linear", "paper")):
    """(whole box, its coarse box, the parts' (box, coarse box), coarsened axes, kind, omegas) for
    transfer.Transfer's fill_halo against the whole grid's prolongation."""
    from pcplugins.core import grid
    for shape, cuts, kw in HALO_SPLITS:
        whole = grid.Box(shape, **kw)
        for kept in range(-1, len(shape)):
            ax = tuple(a != kept for a in range(len(shape)))
            cwhole = whole.coarsen(ax)
            parts = []
            for lo in itertools.product(*(range(len(c) - 1) for c in cuts)):
                start = [c[i] for c, i in zip(cuts, lo)]
                box = grid.Box(shape, start, [c[i + 1] - s for c, i, s in zip(cuts, lo, start)], **kw)
                parts.append((box, box.coarsen(ax)))
            for kind in kinds:
                omegas = [None] * len(shape)
                if kind == "linear" and not kw:    # a non-uniform last cell on odd axes
                    omegas = [0.3 + 0.1 * a if c and m % 2 else None for a, (c, m) in enumerate(zip(ax, shape))]
                yield whole, cwhole, parts, ax, kind, omegas


def cell_levels():
    """Finest aux-grid levels for colour Gauss-Seidel's cell layout: (matrix, colours, cells) of a
    2D 5-point grid of 64 x 48 points, a 3D 7-point box of 16 x 16 x 8, odd grids of 65 x 33 and
    17 x 9 x 11 points (cells of 2 to 6 and 2 to 12 points: cubic cells that do not divide the
    grid), the 5-point grid's graph on points spaced at random (0.4 to 1.6) along each axis (cells
    of 1 to 9 points), and the 2D grid with one long coupling, between two cells of a colour.
    Cells and colours as auxgrid.auxgrid makes them."""
    import numpy
    import scipy.sparse

    from pcplugins.core import auxgrid
    out = {}
    rng = numpy.random.default_rng(5)
    for name, shape, graded in (("2D", (64, 48), False), ("3D", (16, 16, 8), False), ("odd 2D", (65, 33), False),
                                ("odd 3D", (17, 9, 11), False), ("graded", (64, 48), True)):
        ticks = [numpy.cumsum(rng.uniform(0.4, 1.6, m)) if graded else numpy.arange(m, dtype=float) for m in shape]
        coords = numpy.stack([a.ravel() for a in numpy.meshgrid(*ticks, indexing="ij")], 1)   # laplacian()'s numbering
        aggs, _, colours, _ = auxgrid.auxgrid(coords, numpy, coarse_size=4, max_levels=2)
        out[name] = (laplacian(shape), colours[0], aggs[0])
    A, colours, cells = out["2D"]
    i, j = 0, int(numpy.flatnonzero((colours == colours[0]) & (cells != cells[0]))[-1])
    out["long"] = ((A + scipy.sparse.csr_matrix(([-0.5, -0.5], ([i, j], [j, i])), A.shape)).tocsr(), colours, cells)
    return out
