"""pcplugins: GPU multigrid preconditioners for PETSc, on CuPy.

Select them from the options database:

    -ksp_type cg -pc_type python -pc_python_type pcplugins.GMG      (or pcplugins.FFTPoisson)
    -ksp_type fgmres -pc_type python -pc_python_type pcplugins.AMG   (any AIJ matrix; or fcg on the host)
    -ksp_type bcgs -ksp_pc_side right -pc_type python -pc_python_type pcplugins.ShiftedLaplace -pc_sl_k K

and a Krylov method PETSc's KSPIDR counts differently: -ksp_type python -ksp_python_type pcplugins.IDRS.

Vertex coordinates for AMG's auxiliary grid: pcplugins.set_coordinates(pc, xyz); a wavenumber field
for ShiftedLaplace: pcplugins.set_wavenumber(pc, k).

The layers: ``backend`` (NumPy or CuPy, CUDA graphs), ``core/`` (arrays only: grids, stencils,
smoothers, transfers, coarse solves, hierarchies and cycles), ``petsc/`` (everything that touches
petsc4py) and ``pcs/`` (the preconditioners, loaded on first use). tests/core/test_layers.py holds them
to it.
"""
import importlib

__version__ = "0.1.0"


# public name -> (module, attribute), imported on first use
_EXPORTS = {"GMG": ("pcs.gmg", "GMG"), "FFTPoisson": ("pcs.fftpoisson", "FFTPoisson"), "AMG": ("pcs.amg", "AMG"),
            "ShiftedLaplace": ("pcs.shiftedlaplace", "ShiftedLaplace"), "IDRS": ("pcs.idrs", "IDRS"),
            "set_wavenumber": ("petsc.compose", "compose_wavenumber"),
            "set_coordinates": ("petsc.compose", "compose_coordinates"),
            "PCPluginError": ("petsc.errors", "PCPluginError")}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pcplugins' has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    return getattr(importlib.import_module(f".{module}", __name__), attr)
