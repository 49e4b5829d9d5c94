"""The fine operator of a DMDA with periodic axes (DM_BOUNDARY_PERIODIC), and its names in
-ksp_view: the couplings across the wrap are neighbours, the halo wraps."""
import numpy

from .. import backend
from ..core import stencil
from .dmda import axis_names, check_positive_diagonal, negative_everywhere, sample_laplacian, stencil_from_aij
from .errors import error
from .mat import is_aij


def periodic_names(box):
    return axis_names(box, box.periodic)


def periodic_boundary(box):
    """-ksp_view's boundary of a grid with periodic axes."""
    other = "" if all(box.periodic) else "; Dirichlet values eliminated across the other axes"
    return f"periodic along {periodic_names(box)} (the halo wraps){other}"


def periodic_operator(operator, M, box, dm, xp, dtype, mpi, who="pcplugins.GMG", prefix="pc_gmg_",
                      constant_on_gpu=False):
    """(the fine StencilOperator, its description, negated) of a grid with periodic axes (at least
    3 points along each), by the PC's ``-{prefix}operator``: declared (the Laplacian's weights from
    the matrix's central row) or read from the matrix, its couplings across the wrap as neighbours
    (matrix-free where its coefficients are constant, else stored). Across any other axis the rows
    are taken as they are: Dirichlet values eliminated, or kept as rows of the grid. ``negated``:
    the diagonal is negative at every unknown (a negated Laplacian, div(k grad u) = -f), and the
    operator is -A's (dmdapc.NEGATED). On the host; with ``constant_on_gpu`` (a PC that needs only
    a constant stencil's weights: FFTPoisson) also on the GPU, the matrix read on the host and the
    constant stencil made on the device."""
    where = periodic_names(box)
    if backend.is_gpu(xp):
        if not constant_on_gpu:
            raise error(f"{who}: a DMDA periodic along {where} runs on the host for now: use -{prefix}device cpu, "
                        "or pcplugins.AMG on the GPU")
        op, kind, negated = periodic_operator(operator, M, box, dm, numpy, dtype, mpi, who, prefix)
        if op.constant:
            op = stencil.StencilOperator(op.box, op.offsets, op.coefs, xp, dtype)
        return op, kind, negated
    short = [f"{'xyz'[box.dim - 1 - a]} has {m}" for a, (m, p) in enumerate(zip(box.global_shape, box.periodic))
             if p and m < 3]
    if short:
        raise error(f"{who}: a periodic axis needs at least 3 points; {', '.join(short)}")
    if operator == "laplacian":
        w, _, _ = sample_laplacian(M if is_aij(M) else None, box, dm, mpi)
        negated = all(c > 0 for c in w)               # the couplings of A
        return (stencil.laplacian(box, [-c for c in w] if negated else w, xp, dtype),
                f"declared constant-coefficient Laplacian, periodic along {where}", negated)
    offsets, coefs, _ = stencil_from_aij(M, box, dm, xp, dtype, mpi, who)
    centre = offsets.index((0,) * box.dim)
    negated = negative_everywhere(coefs[centre], mpi)
    coefs = [-c for c in coefs] if negated else coefs
    check_positive_diagonal(coefs[centre], box, 0, mpi, who)
    op = stencil.compress(box, offsets, coefs, xp, dtype, tol=None if operator == "assembled" else 0.0, comm=mpi)
    kind = ("constant-coefficient stencil detected from the matrix (matrix-free)" if op.constant else
            f"assembled {op.nnz_per_row}-point stencil (stored coefficients, Galerkin coarse operators)")
    return op, f"{kind}, periodic along {where}", negated
