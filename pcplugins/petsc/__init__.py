"""Everything that touches petsc4py: errors (errors), options tables (options), log events (log),
the DMDA and its stencil operators (dmda), the PC's matrix (mat), Vec views (vec), MPI
collectives and communicators (mpi), face-by-face ghost updates of DMDA levels (halo), BLAS
threads shared among the ranks of a node (blas), the GPU PETSc chose (gpu), objects composed on the PC
(compose) and what every PC shares with PETSc (pcbase). The numerical core never sees these."""
