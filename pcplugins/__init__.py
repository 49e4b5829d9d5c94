"""pcplugins: GPU multigrid preconditioners for PETSc, on CuPy.

Select them from the options database:

    -ksp_type cg -pc_type python -pc_python_type pcplugins.GMG      (or pcplugins.FFTPoisson)
    -ksp_type fcg -pc_type python -pc_python_type pcplugins.AMG      (any AIJ matrix)
    -ksp_type bcgs -ksp_pc_side right -pc_type python -pc_python_type pcplugins.ShiftedLaplace -pc_sl_k K

and a Krylov method PETSc's KSPIDR counts differently: -ksp_type python -ksp_python_type pcplugins.IDRS.

Vertex coordinates for AMG's auxiliary grid: pcplugins.set_coordinates(pc, xyz); a wavenumber field
for ShiftedLaplace: pcplugins.set_wavenumber(pc, k).

The numerical core (grid, stencil, smoothers, transfer, coarse, multigrid, aggregation, kcycle,
slmg) works on NumPy or CuPy arrays and never imports PETSc; the preconditioner classes are loaded
on first use.
"""
__version__ = "0.1.0"


def __getattr__(name):
    if name == "GMG":
        from .gmg import GMG
        return GMG
    if name == "FFTPoisson":
        from .fftpoisson import FFTPoisson
        return FFTPoisson
    if name == "AMG":
        from .amg import AMG
        return AMG
    if name == "ShiftedLaplace":
        from .shiftedlaplace import ShiftedLaplace
        return ShiftedLaplace
    if name == "IDRS":
        from .idrs import IDRS
        return IDRS
    if name == "set_wavenumber":
        from .bridge import compose_wavenumber
        return compose_wavenumber
    if name == "set_coordinates":
        from .bridge import compose_coordinates
        return compose_coordinates
    raise AttributeError(f"module 'pcplugins' has no attribute {name!r}")
