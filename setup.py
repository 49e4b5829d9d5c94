"""pcplugins: GPU multigrid preconditioners for PETSc, on CuPy.

petsc4py is deliberately *not* in install_requires: users with their own PETSc
(conda, a source build) must never have pip rebuild PETSc underneath them.
``pip install .[petsc]`` asks pip for petsc4py explicitly; ``.[gpu]`` adds CuPy.
"""
from setuptools import setup, find_packages

setup(
    name="pcplugins",
    version="0.1.0",
    description="GPU multigrid preconditioners (GMG, AMG, shifted Laplace) for PETSc via petsc4py and CuPy",
    packages=find_packages(include=["pcplugins", "pcplugins.*"]),
    package_data={"pcplugins.kernels": ["*.cu"]},     # the CUDA sources, compiled at run time
    python_requires=">=3.9",
    install_requires=["numpy", "scipy"],
    extras_require={
        "petsc": ["petsc4py"],
        "mpi": ["mpi4py"],
        "gpu": ["cupy"],
        "test": ["pytest"],
        "plot": ["matplotlib"],        # benchmarks/plot.py: the figures of docs/performance.md
        "compare": ["pyamg"],          # tests/petsc/test_amg.py compares with pyamg when it is installed
    },
)
