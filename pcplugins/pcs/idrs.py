"""pcplugins.IDRS: IDR(s) with biorthogonalisation as a Python KSP (KSPPYTHON).

    -ksp_type python -ksp_python_type pcplugins.IDRS -ksp_idrs_s 4

The preconditioned IDR(s) of van Gijzen and Sonneveld ("Algorithm 913: An elegant IDR(s) variant
that efficiently exploits biorthogonality properties", ACM TOMS 38 (2011)), as Knibbe, Oosterlee
and Vuik print it (their Algorithm 1): preconditioned on the right, so the residual it monitors and
tests is the true one, b - A x. One iteration is s + 1 matrix-vector products and s + 1
preconditioner applications (the paper's counting; PETSc's own KSPIDR counts every product as an
iteration). The s shadow vectors are fixed pseudo-random vectors, orthonormalised. Only PETSc Vec
operations touch the vectors, so it runs wherever PETSc's vectors live (host or CUDA); the s x s
systems are solved on the host. PETSc's monitors, tolerances and converged reasons apply.
"""
import numpy
from petsc4py import PETSc

from ..petsc import errors, options, pcbase

OPTIONS = [options.Option("ksp_idrs_s", "int", 4, "Dimension s of the shadow space (IDR(s))", lo=1)]
TITLE = "pcplugins.IDRS"


class IDRS:
    def __init__(self):
        self.s, self.vecs, self.products = 4, None, 0

    # -- KSPPYTHON protocol ----------------------------------------------------------------------------
    @errors.user_errors
    def setFromOptions(self, ksp):
        s = options.read_options(ksp, OPTIONS, TITLE)["s"]
        if s != self.s:
            self.reset(ksp)
        self.s = s

    @errors.user_errors
    def setUp(self, ksp):
        if self.vecs is None:
            s = self.s
            work = ksp.getWorkVecs(right=3 * s + 3, left=None)
            self.vecs = {"r": work[0], "v": work[1], "t": work[2], "G": work[3:3 + s],
                         "U": work[3 + s:3 + 2 * s], "Q": work[3 + 2 * s:]}
            self._shadow_space(ksp)

    def reset(self, ksp):
        if self.vecs is not None:
            for v in [self.vecs[k] for k in ("r", "v", "t")] + self.vecs["G"] + self.vecs["U"] + self.vecs["Q"]:
                v.destroy()
        self.vecs = None

    def view(self, ksp, viewer=None):
        pcbase.view_lines(viewer, [f"{TITLE}: IDR(s) with biorthogonalisation, s = {self.s}, right "
                                   f"preconditioning; an iteration is {self.s + 1} products "
                                   f"({self.products} in the last solve)"])

    @errors.user_errors
    def solve(self, ksp, b, x):
        A, _ = ksp.getOperators()
        pc = ksp.getPC()
        s, V = self.s, self.vecs
        r, v, t, G, U, Q = V["r"], V["v"], V["t"], V["G"], V["U"], V["Q"]
        dtype = numpy.dtype(PETSc.ScalarType)
        if ksp.getInitialGuessNonzero():
            A.mult(x, r)
            r.aypx(-1.0, b)
        else:
            x.set(0.0)
            b.copy(r)
        self.products = 0
        for g, u in zip(G, U):
            g.set(0.0)
            u.set(0.0)
        M = numpy.eye(s, dtype=dtype)
        omega = 1.0
        ksp.setIterationNumber(0)
        while not self._converged(ksp, r):
            f = numpy.array([r.dot(q) for q in Q], dtype=dtype)      # Q^H r (VecDot(x, y) = y^H x)
            for k in range(s):
                c = numpy.linalg.solve(M[k:, k:], f[k:])            # lower triangular s - k system
                r.copy(v)
                v.maxpy([-ci for ci in c], G[k:])
                pc.apply(v, t)                                        # t = P^-1 v
                t.scale(omega)
                t.maxpy(list(c), U[k:])
                t.copy(U[k])
                A.mult(U[k], G[k])
                self.products += 1
                for i in range(k):
                    alpha = G[k].dot(Q[i]) / M[i, i]
                    G[k].axpy(-alpha, G[i])
                    U[k].axpy(-alpha, U[i])
                for i in range(k, s):
                    M[i, k] = G[k].dot(Q[i])
                if M[k, k] == 0:
                    return self._breakdown(ksp)
                beta = f[k] / M[k, k]
                r.axpy(-beta, G[k])
                x.axpy(beta, U[k])
                if k + 1 < s:
                    f[:k + 1] = 0.0
                    f[k + 1:] -= beta * M[k + 1:, k]
            pc.apply(r, v)
            A.mult(v, t)
            self.products += 1
            tt = t.norm() ** 2
            if tt == 0:
                return self._breakdown(ksp)
            omega = r.dot(t) / tt                                     # t^H r / t^H t
            r.axpy(-omega, t)
            x.axpy(omega, v)
            ksp.setIterationNumber(ksp.getIterationNumber() + 1)

    # -- helpers ---------------------------------------------------------------------------------------
    def _converged(self, ksp, r):
        its, rnorm = ksp.getIterationNumber(), r.norm()
        ksp.setResidualNorm(rnorm)
        ksp.logConvergenceHistory(rnorm)
        ksp.monitor(its, rnorm)
        reason = ksp.callConvergenceTest(its, rnorm)
        if not reason and its >= ksp.getTolerances()[3]:          # PETSc's test leaves max_it to the KSP
            reason = PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT
        if reason:
            ksp.setConvergedReason(reason)
        return reason

    @staticmethod
    def _breakdown(ksp):
        ksp.setConvergedReason(PETSc.KSP.ConvergedReason.DIVERGED_BREAKDOWN)

    def _shadow_space(self, ksp):
        """s orthonormal pseudo-random shadow vectors, each a fixed function of the unknowns' index
        (the natural grid index when the KSP has a DMDA), so the iterates do not depend on the
        number of ranks."""
        Q = self.vecs["Q"]
        dtype = numpy.dtype(PETSc.ScalarType)
        dm = ksp.getPC().getDM()           # (KSPGetDM would attach an empty DMShell)
        natural = dm.createNaturalVec() if dm is not None and dm.handle and dm.getType() == "da" else None
        for i, q in enumerate(Q):
            v = natural if natural is not None else q
            lo, hi = v.getOwnershipRange()
            z = _hash(numpy.arange(lo, hi), 2 * i)
            if dtype.kind == "c":
                z = z + 1j * _hash(numpy.arange(lo, hi), 2 * i + 1)
            v.setArray(z.astype(dtype))
            if natural is not None:
                dm.naturalToGlobal(natural, q)
            for p in Q[:i]:                                            # modified Gram-Schmidt
                q.axpy(-q.dot(p), p)
            q.scale(1.0 / q.norm())


def _hash(index, k):
    """A fixed pseudo-random function of the index (splitmix64) with values in [-0.5, 0.5), one
    per ``k``."""
    with numpy.errstate(over="ignore"):
        z = index.astype(numpy.uint64) + numpy.uint64(k << 40) + numpy.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> numpy.uint64(30))) * numpy.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> numpy.uint64(27))) * numpy.uint64(0x94D049BB133111EB)
        z ^= z >> numpy.uint64(31)
    return (z >> numpy.uint64(11)) * 2.0 ** -53 - 0.5
