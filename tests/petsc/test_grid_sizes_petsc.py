"""pcplugins.GMG on even and box grids through PETSc: the user's DMDA matrix, both conventions,
every KSP of the design card, at the iteration counts of the nearest 2^k - 1 grid."""
import pytest

from conftest import petsc_solve, real_scalars, true_relative_residual
from problems import poisson_system

# GMG refuses a PETSc built with complex scalars (tested in test_shifted_laplace)
pytestmark = real_scalars


def nearest_uniform(m):
    """The 2^k - 1 nearest m."""
    return min((2 ** k - 1 for k in range(2, 14)), key=lambda u: abs(u - m))


PETSC_CASES = [(34, 3, "petsc"), (32, 3, "interior"), (100, 2, "interior"), (66, 2, "petsc"),
               ((40, 26, 18), 3, "interior"), ((67, 130), 2, "petsc")]


def gmg_its(n, dim, convention, ksp_type):
    da, A, b = poisson_system(n, dim, convention)
    # right preconditioning: GMRES, FGMRES and BiCGStab stop on the true residual's norm, as CG does here
    side = None if ksp_type == "cg" else {"ksp_pc_side": "right"}
    ksp, x = petsc_solve(da, A, b, side, ksp_type, pc="pcplugins.GMG", rtol=1e-8, max_it=100)
    assert ksp.getConvergedReason() > 0
    assert true_relative_residual(A, b, x) <= 1e-7
    return ksp.getIterationNumber(), ksp.getPC().getPythonContext().describe()


@pytest.mark.parametrize("ksp_type", ["cg", "gmres", "bcgs", "fgmres"])
@pytest.mark.parametrize("n,dim,convention", PETSC_CASES, ids=lambda c: str(c).replace(" ", ""))
def test_petsc_even_grids_at_the_odd_counts(n, dim, convention, ksp_type):
    its, view = gmg_its(n, dim, convention, ksp_type)
    assert any("constant but for the last cell" in line for line in view), view
    pad = 2 if convention == "petsc" else 0       # the DMDA's points: the interior and its boundary
    odd = tuple(nearest_uniform(m - pad) + pad for m in (n if isinstance(n, tuple) else (n,) * dim))
    ref, ref_view = gmg_its(odd, dim, convention, ksp_type)
    assert not any("constant but for the last cell" in line for line in ref_view)
    assert its <= ref + 1, (its, ref)
