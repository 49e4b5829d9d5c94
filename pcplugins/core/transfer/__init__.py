"""Grid transfers: every prolongation and restriction of the geometric hierarchies in one place.

- ``linear``: the stencil levels' linear (and Feng et al.'s) transfers, the gathered and moved
  wrappers of MPI and the hybrid cycle, and FMG's cubic interpolation;
- ``blackbox``: the operator-dependent prolongation of black box multigrid (collapsed stencils),
  any dimension, with R = P^T / 2^c;
- ``dezeeuw``: de Zeeuw's matrix-dependent prolongation, on stencil levels and as a CSR matrix;
- ``csr``: the 1D linear interpolation of the CSR levels.

(Aggregation AMG's piecewise-constant transfers are sparse.members and products.prolong_add.)
"""
from .blackbox import BlackBox
from .csr import prolongation_1d
from .dezeeuw import MatrixDependent, dezeeuw_prolongation, dezeeuw_weights
from .linear import Gathered, Moved, Transfer, cubic_upsample, weights

NAMES = {"linear": "linear", "paper": "Feng et al.'s (eqs. 4.6/4.10)",
         "blackbox": "operator-dependent (black box multigrid's collapsed stencils, R = P^T)",
         "dezeeuw": "de Zeeuw's (2D, grids that keep their ends)"}

__all__ = ["NAMES", "BlackBox", "Gathered", "MatrixDependent", "Moved", "Transfer", "cubic_upsample",
           "dezeeuw_prolongation", "dezeeuw_weights", "prolongation_1d", "weights"]
