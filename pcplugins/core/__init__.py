"""The numerical core: arrays only (NumPy or CuPy), never PETSc.

Grids and stencil operators (grid, stencil), smoothers (smoothers, lines, tridiag), transfers
(transfer), coarse solves (coarse), the hierarchies and their cycles (multigrid: geometric;
kcycle, aggregation, sparse, distributed: aggregation AMG; slmg, helmholtz: shifted Laplace;
homg; fft), and the CUDA kernels with their NumPy twins (fused, kernels). Ghost updates and global
sums come through a communicator object (comm.Comm), so everything
here is tested without PETSc.
"""
