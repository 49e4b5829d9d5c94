"""GPU paths against their NumPy twins (skipped where CuPy or a GPU is missing)."""
import numpy as np
import pytest

from conftest import gpu
from pcplugins import backend, grid, kernels, multigrid, stencil

pytestmark = gpu


def both(a):
    return a, backend.cupy.asarray(a)


def test_kernels_match_numpy():
    cp = backend.cupy
    rng = np.random.default_rng(0)
    u = rng.standard_normal((3, 12, 13))
    c = rng.standard_normal((12, 13))
    f = rng.standard_normal((12, 13))
    for xp in (np, cp):
        uu, cc, ff = (xp.asarray(a) for a in (u, c, f))
        out = xp.zeros((12, 13))
        kernels.lincomb(out, [2.0, cc], [uu[0], uu[1]])
        kernels.lincomb(out, [0.5], [uu[2]], add=True)
        r = xp.zeros((12, 13))
        kernels.residual(r, ff, [cc, -1.0], [uu[0], uu[1]])
        x = uu[2].copy()
        kernels.relax(x[::2, 1::2], ff[::2, 1::2], 0.25, 0.9, 4.0, [cc[::2, 1::2]], [uu[0][::2, 1::2]])
        res = [backend.to_host(a) for a in (out, r, x)]
        if xp is np:
            ref = res
    for a, b in zip(ref, res):
        assert np.allclose(a, b, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dim,n", [(2, 63), (3, 31), (3, 20)])
@pytest.mark.parametrize("smoother", ["redblack", "multicolor", "jacobi", "chebyshev"])
@pytest.mark.parametrize("variable", [False, True])
def test_cycles_numpy_and_cupy_agree(dim, n, smoother, variable):
    rng = np.random.default_rng(1)
    box = grid.Box((n,) * dim)
    f = rng.standard_normal(box.shape)
    outs = []
    for xp in (np, backend.cupy):
        if variable:
            offs = stencil.star_offsets(dim)
            k = np.exp(np.random.default_rng(2).uniform(-2, 2, box.shape))
            coefs = [(-k if any(o) else 2 * dim * k + 0.1) * stencil.inside_mask(box, o, np) for o in offs]
            op = stencil.StencilOperator(box, offs, [xp.asarray(c) for c in coefs], xp)
        else:
            op = stencil.laplacian(box, [-1.0] * dim, xp)
        mg = multigrid.Multigrid(op, multigrid.Options(smoother=smoother, cycle="w"))
        u = xp.zeros(box.padded_shape)
        for _ in range(3):
            mg.cycle(xp.asarray(f), u)
        outs.append(backend.to_host(grid.interior(u)))
    assert np.linalg.norm(outs[0] - outs[1]) <= 1e-12 * np.linalg.norm(outs[0])


def _petsc_solve(n, extra):
    from petsc4py import PETSc
    from problems import poisson_system
    opts = PETSc.Options()
    for k, v in extra.items():
        opts[k] = v
    da, A, b = poisson_system(n, 3, "petsc", jump=1.0)
    ksp = PETSc.KSP().create()
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    ksp.setType("cg")
    ksp.getPC().setType("python")
    ksp.getPC().setPythonType("pcplugins.GMG")
    ksp.setTolerances(max_it=6)
    ksp.setNormType(PETSc.KSP.NormType.NONE)
    ksp.setFromOptions()
    x = b.duplicate()
    ksp.solve(b, x)
    out = x.getArray().copy()
    ctx = ksp.getPC().getPythonContext()
    for k in extra:
        opts.delValue(k)
    return out, ctx


@pytest.mark.parametrize("variant", [{"mat_type": "aijcusparse"}, {"mat_type": "aijcusparse", "pc_gmg_graph": "0"},
                                     {"pc_gmg_device": "gpu"}])
def test_petsc_cuda_vectors_match_host(variant):
    host, hctx = _petsc_solve(33, {})
    dev, dctx = _petsc_solve(33, variant)
    assert hctx.device == "cpu" and dctx.device == "gpu"
    assert np.linalg.norm(host - dev) <= 1e-10 * np.linalg.norm(host)
