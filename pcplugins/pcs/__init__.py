"""The preconditioners PETSc selects (PCPYTHON): GMG and FFTPoisson on a DMDA (their shared
machinery in dmdapc), AMG, ShiftedLaplace, and the IDR(s) Krylov method (KSPPYTHON). Each stands
on petsc/ and core/; none imports another."""
