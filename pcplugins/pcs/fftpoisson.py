"""pcplugins.FFTPoisson: the exact inverse of the constant-coefficient Laplacian on a DMDA, Dirichlet
or periodic along each axis, by fast sine and Fourier transforms (fft.py), as a preconditioner or,
with -ksp_type preonly, a direct solver; the baseline Feng, Shu, Xu, Zhang compare full multigrid
with.

    -ksp_type preonly -pc_type python -pc_python_type pcplugins.FFTPoisson [-pc_fft_* options]

The operator comes from the matrix (it must be the 5/7-point Laplacian with constant axis weights,
in either boundary convention) or is declared with -pc_fft_operator laplacian; one MPI rank.
"""
from ..core import fft, stencil
from ..petsc import errors, options
from .dmdapc import DMDAPC

OPTIONS = [
    options.Option("pc_fft_operator", "str", "auto",
           "Operator: detect the Laplacian from the matrix, or declare it (matrix-free)", ("auto", "laplacian")),
    options.Option("pc_fft_device", "str", "auto",
           "Where the transforms run (auto: the GPU when PETSc's vectors or matrix live there: CUDA Vecs, "
           "aijcusparse)", ("auto", "cpu", "gpu")),
    options.Option("pc_fft_precision", "str", "double", "Precision of the transforms", ("double", "single")),
]


class FFTPoisson(DMDAPC):
    TITLE, PREFIX, EVENT, OPTIONS = "pcplugins.FFTPoisson", "pc_fft_", "FFTPoisson", OPTIONS
    WHAT = "fast Poisson solver"
    PERIODIC = PERIODIC_ON_GPU = True

    def _build(self, op, v):
        if self.mpi.size > 1:
            raise errors.error(f"pcplugins.FFTPoisson runs on one MPI rank, this PC has {self.mpi.size}: "
                               "use pcplugins.GMG under MPI")
        w = stencil.laplacian_weights(op)
        if w is None:
            raise errors.error("pcplugins.FFTPoisson needs the constant-coefficient Dirichlet (or periodic) "
                               f"Laplacian (5/7-point star, zero row sum); the operator is: {self.operator_kind}")
        return fft.LaplacianFFT(op, w)
