"""The one base of every pcplugins PC: the PCPYTHON lifecycle (setFromOptions, setUp, apply,
applyTranspose, view, reset, destroy), the one rule for the device, per-instance log events, and
failure reasons and -ksp_view output as PETSc has them.

A PC names its ``TITLE`` (pcplugins.GMG), ``PREFIX`` (pc_gmg_), ``EVENT`` (the log events' prefix)
and ``OPTIONS`` (an options table), and implements ``_setup(pc)`` (build ``self.mg`` from
``self.values``), ``_apply(pc, x, y)``, ``describe()`` and, where it has them, ``_release()``
(more to free than the hierarchy and its graphs), ``not_symmetric(pc)``, and ``no_transpose(pc,
why)`` with ``_apply_transpose(pc, x, y)`` (PCApplyTranspose of a preconditioner that is not
symmetric).
"""
import contextlib
import os

import numpy
from petsc4py import PETSc

from .. import backend
from . import blas, errors, gpu, log, mat, options

# KSPs whose reported residual stays the answer's around a preconditioner that is not one fixed
# linear operator (PythonPC.inexact): they keep the preconditioned vectors and update answer and
# residual from them, so PythonPC.postSolve has nothing to check after them
CONSISTENT_KSPS = ("cg", "fcg", "pipefcg", "fgmres", "pipefgmres", "gcr", "pipegcr", "richardson", "chebyshev",
                   "preonly")
# inexact()'s reason for a preconditioner that is another operator at every application
NONLINEAR = "which it takes for one fixed operator, and {} is a different one at every application"


class PythonPC:
    TITLE, PREFIX, EVENT, OPTIONS = "", "", "", []

    def __init__(self):
        self.values, self.mg, self._graphs = None, None, None
        self.xp, self.device, self.gpu_id = numpy, "cpu", None
        self.timings = {}
        self._blas = None                     # BLAS threads changed for MPI (blas.share_cores)
        self._symmetric_operator = None       # operator_symmetric's answer, once per setup
        self._used = set()                    # this solve's applications: "B", "B^T" (postSolve)

    # -- the PCPYTHON protocol -----------------------------------------------------------------------
    @errors.user_errors
    def setFromOptions(self, pc):
        self.values = options.read_options(pc, self.OPTIONS, self.TITLE)

    @errors.user_errors
    def setUp(self, pc):
        with self.event("SetUp"):
            if self.values is None:           # setUp without setFromOptions: the defaults and the database
                self.values = options.read_options(pc, self.OPTIONS, self.TITLE)
            self.reset(pc)                    # the previous operator's hierarchy goes first
            if self._blas is None:
                self._blas = blas.share_cores(blas.ranks_on_node(pc.getComm()))
            with blas.one_thread(look=True):
                self._setup(pc)

    def reset(self, pc):
        # the graphs call back into this object, and a hierarchy's closures into the hierarchy:
        # reference cycles broken here, so the (GPU) memory goes now, not at Python's next
        # cyclic garbage collection
        if self._graphs is not None:
            self._graphs.free()
        if self.mg is not None and hasattr(self.mg, "free"):
            self.mg.free()
        self.mg = self._graphs = self._symmetric_operator = None
        self._release()

    def destroy(self, pc):
        self.reset(pc)                        # PCDestroy does not reset a Python PC

    @errors.user_errors
    def apply(self, pc, x, y):
        self._used.add("B")
        with self._applying("Apply"):
            self._apply(pc, x, y)

    @errors.user_errors
    def applyTranspose(self, pc, x, y):
        """PCApplyTranspose: the preconditioner itself where it is symmetric, else its transpose
        where the PC has one (``_apply_transpose``); elsewhere a named error (never the transpose
        of something else)."""
        self._used.add("B^T")
        why = self.not_symmetric(pc)
        if not why:
            with self._applying("Apply"):
                self._apply(pc, x, y)
            return
        why = self.no_transpose(pc, why)
        if why:
            raise errors.error(f"{self.TITLE}: PCApplyTranspose (asked for by KSPSolveTranspose and by -ksp_type "
                               f"bicg, cgne, lsqr, ...) needs a symmetric preconditioner or its transpose, and this "
                               f"one has neither: {why}; for A^T x = b give a KSP of its own the matrix MatTranspose "
                               "makes")
        with self._applying("ApplyTranspose"):
            self._apply_transpose(pc, x, y)

    def preSolve(self, pc, ksp, b, x):
        self._used = set()

    @errors.user_errors
    def postSolve(self, pc, ksp, b, x):
        """PCPostSolve: a preconditioner that is not one fixed linear operator to double's accuracy
        (``inexact``: a single-precision cycle, the double one rounded; a nonlinear one, another
        operator at every application) leaves the KSPs that keep the preconditioned vectors and
        update answer and residual from them (CONSISTENT_KSPS) honest; those that apply it to a
        combination of their vectors at the end (right-preconditioned gmres, bcgs) or judge the
        residual through it (left) can report convergence their answer does not have. Their claim
        is checked against the true residual in the norm the KSP used: ten times the claim is a
        named error, the same on every rank (global norms), never a silent wrong answer."""
        why = self.inexact()
        if (why is None or ksp.getType() in CONSISTENT_KSPS or ksp.getConvergedReason() <= 0
                or len(self._used) != 1):        # both B and B^T (bicg): which system is not told
            return
        A, kind, claimed = pc.getOperators()[0], ksp.getType(), ksp.getResidualNorm()
        transposed = self._used == {"B^T"}       # KSPSolveTranspose: A^T x = b, B^T its preconditioner
        r = _residual(A, b, x, transposed)
        true = _norm(pc.applyTranspose if transposed else pc.apply, r, ksp.getNormType())
        if true <= 10 * claimed + ksp.getTolerances()[1]:
            return
        option, reason, ksps, instead = why
        raise errors.error(f"{self.TITLE}: {option} under KSP {kind}: it reported convergence at a residual norm of "
                           f"{claimed:.3g}, but the true one is {true:.3g}. {kind} builds its answer or judges its "
                           f"residual through the preconditioner, {reason}. Use -ksp_type {ksps}, a looser -ksp_rtol, "
                           f"or {instead}")

    def inexact(self):
        """Why the preconditioner is not one fixed linear operator to double's accuracy, for
        ``postSolve``: (the option, the reason, the KSPs to use, the option to use instead), or
        None. Here a single-precision cycle (-PREFIX_precision single)."""
        if (self.values or {}).get("precision") != "single":
            return None
        return (f"-{self.PREFIX}precision single", "and the single-precision cycle's rounding, amplified by the "
                "matrix's condition number, bounds the accuracy it reaches", "fgmres, fcg or cg (they keep the "
                "preconditioned vectors in double)", f"-{self.PREFIX}precision double")

    @contextlib.contextmanager
    def _applying(self, name):
        """An application: its log event ``name``, one BLAS thread, and NaN/Inf left to the PC's
        failure check (reported as a PC failure, not as NumPy warnings)."""
        with self.event(name), numpy.errstate(all="ignore"), blas.one_thread():
            yield

    @errors.user_errors
    def view(self, pc, viewer=None):
        view_lines(viewer, self.describe() + [
            f"BLAS threads {before} -> {after} (MPI ranks share this node's cores; {os.path.basename(path)})"
            for path, (before, after) in (self._blas or {}).items()])

    # -- for the PCs ---------------------------------------------------------------------------------
    def _release(self):
        pass

    def not_symmetric(self, pc):
        """Why the preconditioner is not symmetric ('' when it is)."""
        return "not known to be symmetric"

    def operator_symmetric(self, pc, declared=False):
        """Whether the PC's operator is symmetric (mat.operator_is_symmetric: collective, the same
        answer on every rank), asked once per setup."""
        if self._symmetric_operator is None:
            self._symmetric_operator = mat.operator_is_symmetric(pc, declared)
        return self._symmetric_operator

    def no_transpose(self, pc, why):
        """Why ``_apply_transpose`` cannot apply the transpose of this (not symmetric, ``why``)
        preconditioner ('' when it can)."""
        return why

    def event(self, name):
        """The log event ``EVENT + name`` (GMGSetUp, AMGApply, ...), synchronised with this PC's
        device when -log_view is on."""
        return log.event(self.EVENT + name, self.xp)

    def select_device(self, M, requested=None):
        """The one device rule: -PREFIX_device auto puts the PC on the GPU when PETSc's vectors or
        matrix live there (CUDA Vecs, an aijcusparse matrix), else on the host. Sets ``xp``,
        ``device`` and ``gpu_id`` (the GPU PETSc chose for this rank). ``requested``: in place of
        the option's value."""
        requested = requested or self.values["device"]
        device = requested
        if device == "auto":
            device = "gpu" if "cuda" in (M.getVecType() or "") or "cusparse" in M.getType() else "cpu"
        try:
            xp = backend.namespace(device)
        except RuntimeError as e:
            why = "" if requested != "auto" else " (auto: PETSc's vectors or matrix are on the GPU)"
            raise errors.error(f"{self.TITLE}: option -{self.PREFIX}device {requested}{why}: {e}") from None
        self.xp, self.device = xp, device
        self.gpu_id = gpu.use_petsc_device(M) if backend.is_gpu(xp) else None
        return xp


def set_failed(pc, failed):
    if failed:
        pc.setFailedReason(PETSc.PC.FailedReason.SUBPC_ERROR)


def view_lines(viewer, lines):
    if viewer is None:
        viewer = PETSc.Viewer.STDOUT()
    if viewer.getType() != "ascii":
        return
    viewer.pushASCIITab()
    for ln in lines:
        viewer.printfASCII(ln + "\n")
    viewer.popASCIITab()


def _residual(A, b, x, transposed):
    """b - A x (``transposed``: b - A^T x) less its part in the null space KSPSolve removes from b
    (A^T's for A x = b, A's for A^T x = b), which the range of the product never has."""
    r = b.duplicate()
    (A.multTranspose if transposed else A.mult)(x, r)
    r.aypx(-1.0, b)
    null = A.getNullSpace() if transposed else A.getTransposeNullSpace()
    if null.handle:
        null.remove(r)
    return r


def _norm(apply, r, norm_type):
    """The KSP's norm ``norm_type`` of the residual r: ||r||, ||B r||, sqrt|(r, B r)| (natural);
    ``apply`` B's application."""
    if norm_type == PETSc.KSP.NormType.UNPRECONDITIONED:
        return r.norm()
    if norm_type == PETSc.KSP.NormType.NONE:
        return 0.0
    z = r.duplicate()
    apply(r, z)
    return z.norm() if norm_type == PETSc.KSP.NormType.PRECONDITIONED else abs(r.dot(z)) ** 0.5
