"""Mixed-precision iterative refinement of a multigrid cycle (defect correction).

Goddeke and Strzodka, "Cyclic reduction tridiagonal solvers on GPUs applied to mixed precision
multigrid", section 2.5: the residual f - A u and the update u += B (f - A u) in double, the
preconditioner B (a multigrid cycle) in single, where the bandwidth is. Each step gains the
digits of one single-precision cycle until double precision's accuracy limits them.
"""
from . import grid


def correct(cycle, op, f, u, r, r32, exchange, norm, cycles, digits, max_cycles):
    """u (padded, double, ghosts refreshed by ``exchange``) approximates op^-1 f after ``cycles``
    steps u += B (f - op u), ``cycle`` (a padded array of B r32) in single; with ``digits`` they stop
    once ``norm`` (a global 2-norm) of the residual fell by that many digits, at most ``cycles``
    (0: ``max_cycles``) steps. ``r`` (double) and ``r32`` (single) are work arrays over the box.
    Returns (steps taken, whether the digits were gained: always true without ``digits``)."""
    ui = grid.interior(u)
    u[...] = 0
    r[...] = f
    target = 10.0 ** -digits * norm(f) if digits else None
    steps = cycles or max_cycles
    for c in range(steps):
        r32[...] = r
        ui += grid.interior(cycle(r32))
        exchange(u)
        op.residual(r, f, u)
        if target is not None and norm(r) <= target:
            return c + 1, True
    return steps, target is None
