"""Grid transfers: every prolongation and restriction of the geometric hierarchies in one place.

- ``linear``: the stencil levels' linear (and Feng et al.'s) transfers, the gathered and moved
  wrappers of MPI and the hybrid cycle, and FMG's cubic interpolation;
- ``dezeeuw``: de Zeeuw's matrix-dependent prolongation, on stencil levels and as a CSR matrix;
- ``csr``: the 1D linear interpolation of the CSR levels.

(Aggregation AMG's piecewise-constant transfers are sparse.members and sparse.prolong_add.)
"""
from .csr import prolongation_1d
from .dezeeuw import MatrixDependent, dezeeuw_prolongation, dezeeuw_weights
from .linear import Gathered, Moved, Transfer, cubic_upsample, weights

__all__ = ["Gathered", "MatrixDependent", "Moved", "Transfer", "cubic_upsample", "dezeeuw_prolongation",
           "dezeeuw_weights", "prolongation_1d", "weights"]
