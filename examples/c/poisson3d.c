static char help[] = "A C PETSc application: the 3D Laplacian on a DMDA, assembled by the KSP through\n"
                     "KSPSetComputeOperators (boundary points kept as scaled identity rows), solved with\n"
                     "whatever -ksp_type and -pc_type the command line asks for. With pcplugins:\n"
                     "  -python <venv>/bin/python -pc_type python -pc_python_type pcplugins.GMG\n";

#include <petscdmda.h>
#include <petscksp.h>

/* Grid spacings of the unit cube sampled by the DMDA's m x n x p points. */
static PetscErrorCode Spacings(DM da, PetscReal h[3], PetscInt size[3])
{
  PetscFunctionBeginUser;
  PetscCall(DMDAGetInfo(da, NULL, &size[0], &size[1], &size[2], NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
  for (int a = 0; a < 3; a++) h[a] = 1.0 / (PetscReal)(size[a] - 1);
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* b = h^3 in the interior (f = 1 scaled like the matrix rows), 0 on the boundary. */
static PetscErrorCode FormRHS(KSP ksp, Vec b, void *ctx)
{
  DM            da;
  PetscReal     h[3];
  PetscInt      N[3], xs, ys, zs, xm, ym, zm;
  PetscScalar ***bb;

  PetscFunctionBeginUser;
  PetscCall(KSPGetDM(ksp, &da));
  PetscCall(Spacings(da, h, N));
  PetscCall(DMDAGetCorners(da, &xs, &ys, &zs, &xm, &ym, &zm));
  PetscCall(DMDAVecGetArray(da, b, &bb));
  for (PetscInt k = zs; k < zs + zm; k++)
    for (PetscInt j = ys; j < ys + ym; j++)
      for (PetscInt i = xs; i < xs + xm; i++) {
        PetscBool edge = (PetscBool)(i == 0 || j == 0 || k == 0 || i == N[0] - 1 || j == N[1] - 1 || k == N[2] - 1);
        bb[k][j][i]    = edge ? 0.0 : h[0] * h[1] * h[2];
      }
  PetscCall(DMDAVecRestoreArray(da, b, &bb));
  PetscFunctionReturn(PETSC_SUCCESS);
}

/* The 7-point -Laplacian times h^3: couplings -h_b h_c / h_a; boundary rows hold only the diagonal. */
static PetscErrorCode FormOperator(KSP ksp, Mat A, Mat P, void *ctx)
{
  DM          da;
  PetscReal   h[3];
  PetscInt    N[3], xs, ys, zs, xm, ym, zm;
  PetscScalar w[3], diag;

  PetscFunctionBeginUser;
  PetscCall(KSPGetDM(ksp, &da));
  PetscCall(Spacings(da, h, N));
  w[0] = h[1] * h[2] / h[0];
  w[1] = h[0] * h[2] / h[1];
  w[2] = h[0] * h[1] / h[2];
  diag = 2.0 * (w[0] + w[1] + w[2]);
  PetscCall(DMDAGetCorners(da, &xs, &ys, &zs, &xm, &ym, &zm));
  for (PetscInt k = zs; k < zs + zm; k++)
    for (PetscInt j = ys; j < ys + ym; j++)
      for (PetscInt i = xs; i < xs + xm; i++) {
        MatStencil  row = {.k = k, .j = j, .i = i}, col[7];
        PetscScalar v[7];
        if (i == 0 || j == 0 || k == 0 || i == N[0] - 1 || j == N[1] - 1 || k == N[2] - 1) {
          PetscCall(MatSetValuesStencil(P, 1, &row, 1, &row, &diag, INSERT_VALUES));
          continue;
        }
        for (int s = 0; s < 7; s++) col[s] = row;
        col[0].k--; v[0] = -w[2];
        col[1].j--; v[1] = -w[1];
        col[2].i--; v[2] = -w[0];
        v[3] = diag;
        col[4].i++; v[4] = -w[0];
        col[5].j++; v[5] = -w[1];
        col[6].k++; v[6] = -w[2];
        PetscCall(MatSetValuesStencil(P, 1, &row, 7, col, v, INSERT_VALUES));
      }
  PetscCall(MatAssemblyBegin(P, MAT_FINAL_ASSEMBLY));
  PetscCall(MatAssemblyEnd(P, MAT_FINAL_ASSEMBLY));
  PetscFunctionReturn(PETSC_SUCCESS);
}

int main(int argc, char **argv)
{
  DM        da;
  KSP       ksp;
  Vec       x, b, r;
  Mat       A;
  PetscInt  its;
  PetscReal rnorm, bnorm;

  PetscFunctionBeginUser;
  PetscCall(PetscInitialize(&argc, &argv, NULL, help));
  PetscCall(DMDACreate3d(PETSC_COMM_WORLD, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DM_BOUNDARY_NONE, DMDA_STENCIL_STAR, 33, 33, 33,
                         PETSC_DECIDE, PETSC_DECIDE, PETSC_DECIDE, 1, 1, NULL, NULL, NULL, &da));
  PetscCall(DMSetFromOptions(da));
  PetscCall(DMSetUp(da));
  PetscCall(KSPCreate(PETSC_COMM_WORLD, &ksp));
  PetscCall(KSPSetDM(ksp, da));
  PetscCall(KSPSetComputeRHS(ksp, FormRHS, NULL));
  PetscCall(KSPSetComputeOperators(ksp, FormOperator, NULL));
  PetscCall(KSPSetFromOptions(ksp));
  PetscCall(KSPSolve(ksp, NULL, NULL));
  PetscCall(KSPGetIterationNumber(ksp, &its));
  PetscCall(KSPGetSolution(ksp, &x));
  PetscCall(KSPGetRhs(ksp, &b));
  PetscCall(KSPGetOperators(ksp, &A, NULL));
  PetscCall(VecDuplicate(b, &r));
  PetscCall(MatResidual(A, b, x, r));
  PetscCall(VecNorm(r, NORM_2, &rnorm));
  PetscCall(VecNorm(b, NORM_2, &bnorm));
  PetscCall(PetscPrintf(PETSC_COMM_WORLD, "iterations %" PetscInt_FMT " relative residual %g\n", its, (double)(rnorm / bnorm)));
  PetscCall(VecDestroy(&r));
  PetscCall(KSPDestroy(&ksp));
  PetscCall(DMDestroy(&da));
  PetscCall(PetscFinalize());
  return 0;
}
