"""The multigrid hierarchy and its cycles (V, W, F), on arrays only.

Levels are numbered from 0 (finest). Each level holds its stencil operator, its smoother, the
transfer to the next coarser level and preallocated work arrays (padded u and r, unpadded f), so
a cycle allocates nothing. Coarse operators are rediscretized (the constant-coefficient Laplacian:
the stencil weights scale by 1/4 per coarsened axis, which is what R A P gives with full weighting;
on the non-uniform last cell an even axis leaves, stencil.AxisLaplacian) or Galerkin products
R A P (any other operator), formed stencil-wise by probing.

Ghost values come through ``comm.exchange(level, u)`` and global sums through ``comm.allsum``
(comm.Comm: on one rank the wrap of periodic halos; petsc/mpi.py: DMDA ghost updates under MPI);
the linear prolongation adds the correction to the ghosts too, so it needs no update after it.
"""
import contextlib
import dataclasses

import numpy

from .. import backend
from . import coarse, fused, fused_stored, galerkin, grid, smoothers, stencil, transfer
from .comm import Comm, wrap
from .cycle import second_visit


@dataclasses.dataclass
class Options:
    levels: int = None            # None: by the coarsening rule (grid.py)
    coarse_size: int = grid.COARSE_SIZE   # stop coarsening at this many unknowns
    cycle: str = "v"              # v, w, f
    cycles: int = 1               # cycles per call of cycle() (PETSc's -pc_mg_multiplicative_cycles)
    pre: int = 1
    post: int = 1
    smoother: str = "redblack"    # redblack, multicolor, jacobi, chebyshev
    omega: float = None           # None: 1 for GS, 2/3 for Jacobi
    transfer: str = "auto"        # auto (Galerkin coarse levels: blackbox, else linear), transfer.NAMES
    coarse_operator: str = "auto"  # auto (rediscretize the Laplacian, else Galerkin), galerkin
    coarse_solve: str = "direct"   # direct; smooth: pre+post sweeps (Feng et al., Remark 3.1);
    coarse_degree: int = 16        # polynomial (complex levels): a GMRES polynomial of this degree
    fused: bool = True            # on the GPU, fused kernels where they apply (fused.py)
    coefficients: str = None      # the fused stored levels' coefficient type (fused_stored.Stored)
    gpu_levels: int = None        # hybrid cycle: levels from this index on live on the host (NumPy)
    fmg_interpolation: str = "cubic"  # FMG's solution transfer: cubic (where it applies) or linear


SMOOTHERS = ("redblack", "multicolor", "jacobi", "chebyshev", "line_x", "line_y", "line_z", "adi")
CYCLES = ("v", "w", "f", "fmg")
COARSE_GRAPH_SIZE = 2 ** 18   # replay_coarse_levels: from the first level of at most this many unknowns


class Level:
    def __init__(self, index, op):
        self.index, self.op, self.box = index, op, op.box
        # u, r and f are views of one zeroed allocation; the finest level's right-hand side is
        # the caller's array (Multigrid.cycle)
        shapes = [self.box.padded_shape] * 2 + ([self.box.shape] if index else [])
        self.u, self.r, *f = backend.zeros_carved(op.xp, op.dtype, shapes)
        self.f = f[0] if f else None
        self.smoother = self.transfer = self.coarse_solve = None   # transfer: to the next coarser level
        self.fused = None      # fused.Laplacian or fused_stored.Stored when the fast path applies
        self.replicated = False  # under MPI: every rank holds the whole level
        self.fills_halo = False  # the prolongation to this level leaves its ghosts current

    def residual(self):
        """r = f - A u on this level's work arrays."""
        if self.fused is not None:
            self.fused.residual(self.r, self.f, self.u)
        else:
            self.op.residual(grid.interior(self.r), self.f, self.u)


class Multigrid:
    def __init__(self, op, options=None, comm=None, event=None):
        """``event(name)`` returns a context manager around each phase ('smooth', 'residual',
        'restrict', 'prolong', 'coarse'): PETSc log events (petsc/log.py), nothing by default."""
        self.options = opt = options or Options()
        self.event = event or (lambda name: contextlib.nullcontext())
        if opt.cycle not in CYCLES:
            raise ValueError(f"unknown cycle {opt.cycle!r}; expected one of {', '.join(CYCLES)}")
        if opt.cycles < 1:
            raise ValueError(f"cycles per application must be >= 1, got {opt.cycles}")
        if opt.smoother not in SMOOTHERS:
            raise ValueError(f"unknown smoother {opt.smoother!r}; expected one of {', '.join(SMOOTHERS)}")
        self.comm = comm or Comm()
        self.xp, self.dtype = op.xp, op.dtype
        boxes, axes = grid.hierarchy_boxes(op.box, opt.levels, opt.coarse_size)
        self.levels = [Level(0, op)]
        weights = stencil.laplacian_weights(op) if opt.coarse_operator == "auto" else None
        # auto: linear where the coarse levels rediscretize the Laplacian, operator-dependent
        # where they are Galerkin products (variable coefficients, convection, box stencils)
        self.transfer_kind = opt.transfer
        if opt.transfer == "auto":
            self.transfer_kind = "linear" if weights is not None else "blackbox"
        ratios = [1.0] * op.box.dim     # the last cell along each axis, in grid spacings
        for l, (cbox, ax) in enumerate(zip(boxes[1:], axes), start=1):
            fine = self.levels[-1]
            # the Laplacian rediscretized (stencil.AxisLaplacian) where the axes it coarsens are
            # Dirichlet axes and the transfer is linear: else Galerkin from here on
            if weights is not None and (self.transfer_kind != "linear" or any(
                    a and k and not p for a, k, p in zip(ax, fine.box.keep_ends, fine.box.periodic))):
                weights = None
            omegas = None
            if weights is not None:
                omegas = [r / (1 + r) if a and m % 2 and r < 1 else None
                          for a, m, r in zip(ax, fine.box.global_shape, ratios)]
                ratios = [stencil.coarse_ratio(m, r) if a and not p else r      # periodic: uniform
                          for a, m, r, p in zip(ax, fine.box.global_shape, ratios, fine.box.periodic)]
            replicated = fine.replicated or (self.comm.size > 1 and (
                l == len(boxes) - 1 or not self.comm.distribute(l, cbox)))
            if fine.replicated:           # the whole grid on every rank: so is the coarse one
                cbox = cbox.whole()
            fine.transfer = self._transfer(fine, cbox, ax, omegas)
            fine.fills_halo = getattr(fine.transfer, "fills_halo", False)
            if replicated and not fine.replicated:
                fine.transfer = transfer.Gathered(fine.transfer, cbox, self.comm, l, fine.op.xp, self.dtype)
                cbox = cbox.whole()
            cxp = numpy if opt.gpu_levels is not None and l >= opt.gpu_levels else fine.op.xp
            if cxp is not fine.op.xp:
                fine.transfer = transfer.Moved(fine.transfer, cbox.shape, fine.op.xp, self.dtype)
            if weights is not None:
                weights = [w / 4.0 if a else w for w, a in zip(weights, ax)]
                if all(r == 1 for r in ratios):
                    cop = stencil.laplacian(cbox, weights, cxp, self.dtype)
                else:
                    cop = stencil.AxisLaplacian(cbox, weights, ratios, cxp, self.dtype)
            else:
                weights = None
                cop = self._galerkin(fine, cbox, cxp)
            self.levels.append(Level(l, cop))
            self.levels[-1].replicated = replicated
        self.host_levels = sum(lev.op.xp is numpy for lev in self.levels) if backend.is_gpu(self.xp) else 0
        self.coarse_graph = None     # replay_coarse_levels: the first level replayed
        self._coarse_graphs = {}     # (kind, zero): backend.CycleGraphs
        if opt.fused and fused.supported(self.xp, self.dtype):
            self._use_fused_kernels()
        if opt.coarse_solve not in ("direct", "smooth", "polynomial"):
            raise ValueError(f"unknown coarse solve {opt.coarse_solve!r}; expected direct, smooth or polynomial")
        for lev in self.levels[:-1]:
            lev.smoother = self._smoother(lev)
        last = self.levels[-1]
        self.exact_coarse = opt.coarse_solve == "direct"
        make = None
        if opt.coarse_solve == "direct":
            make = coarse.DirectSolve
        elif opt.coarse_solve == "polynomial":
            make = lambda op: coarse.PolynomialSolve(op, opt.coarse_degree)    # noqa: E731
        else:
            last.smoother = self._smoother(last)
        if make is not None and self.comm.size > 1 and not last.replicated:
            last.coarse_solve = coarse.GatheredStencilSolve(last.op, self.comm, last.index, make)
        elif make is not None:
            last.coarse_solve = make(last.op)

    def free(self):
        """Release the levels and the coarse levels' graphs now: their closures refer back to
        this object, a reference cycle that would hold the (GPU) arrays until Python's cyclic
        garbage collector runs."""
        for g in self._coarse_graphs.values():
            g.free()
        self._coarse_graphs = {}
        self.levels = []
        self.event = None
        self.comm.free()

    # -- setup -------------------------------------------------------------------------------------
    def _exchange(self, lev):
        if lev.replicated:         # whole on every rank: only a periodic halo to wrap
            return lambda u: wrap(u, lev.box.periodic)
        return lambda u: self.comm.exchange(lev.index, u)

    def _transfer(self, fine, cbox, ax, omegas=None):
        """``omegas``: transfer.Transfer's weights on a non-uniform last cell."""
        if self.transfer_kind == "dezeeuw":
            return transfer.MatrixDependent(fine.box, cbox, ax, fine.op, self._exchange(fine))
        if self.transfer_kind == "blackbox":
            return transfer.BlackBox(fine.box, cbox, ax, fine.op, self._exchange(fine))
        return transfer.Transfer(fine.box, cbox, ax, self.transfer_kind, omegas,   # periodic: wrap
                                 fill_halo=not any(fine.box.periodic))

    def _galerkin(self, fine, cbox, cxp):
        # a coarse level gathered onto every rank wraps its own periodic halo
        ex_coarse = lambda u: wrap(u, cbox.periodic)  # noqa: E731
        if not isinstance(fine.transfer, transfer.Gathered) and not fine.replicated:
            ex_coarse = lambda u: self.comm.exchange(fine.index + 1, u)  # noqa: E731
        cop = galerkin.coarse_operator(fine.op, fine.transfer, cbox, cxp, self.dtype, self._exchange(fine),
                                       ex_coarse, None if fine.replicated else self.comm)
        if isinstance(_plain(fine.transfer), transfer.BlackBox):
            _plain(fine.transfer).release_weights()
        return cop

    def _use_fused_kernels(self):
        coefficients = self.options.coefficients
        for lev in self.levels:
            if lev.op.xp is numpy or any(lev.box.periodic):   # the kernels take zero halos
                continue
            w = lev.op.weights if isinstance(lev.op, stencil.AxisLaplacian) else stencil.laplacian_weights(lev.op)
            if w is not None and lev.op.nnz_per_row == 2 * lev.box.dim + 1:
                lev.fused = fused.Laplacian(lev.op, w)
            elif not lev.op.constant and not isinstance(lev.op, stencil.AxisLaplacian):
                lev.fused = fused_stored.Stored(lev.op, coefficients)
            outer, attr, T = lev, "transfer", lev.transfer      # the plain transfer inside Moved / Gathered
            while isinstance(T, (transfer.Moved, transfer.Gathered)):
                outer, attr, T = T, "inner", T.inner
            kind = getattr(T, "kind", None)
            if kind in ("linear", "blackbox"):
                setattr(outer, attr, fused.LinearTransfer(T, self.dtype) if kind == "linear"
                        else fused_stored.BlackBoxTransfer(T, len(lev.op.offsets), self.dtype, coefficients))

    def _smoother(self, lev):
        opt = self.options
        allsum = (lambda x: x) if lev.replicated else self.comm.allsum
        allmax = (lambda x: x) if lev.replicated else self.comm.allmax
        # fused red-black takes both colours in one pass, with r as its scratch (the residual is
        # formed after the smoother runs); on a distributed level the faces between the ranks first
        return smoothers.make(opt.smoother, lev.op, opt.omega, fused_level=lev.fused, scratch=lev.r,
                              faces=0 if lev.replicated else lev.box.rank_faces(), exchange=self._exchange(lev),
                              dot=lambda a, b: allsum(float(lev.op.xp.vdot(a, b))), allsum=allsum, allmax=allmax)

    # -- cycles ------------------------------------------------------------------------------------
    def cycle(self, f, u=None, kind=None):
        """``options.cycles`` cycles for A u = f on the finest level; ``u`` (padded) is the initial
        guess (zero when None) and is returned updated. Full multigrid ('fmg') always starts from
        zero, and the cycles after it are V-cycles. k symmetric cycles are a symmetric
        preconditioner (error propagation E^k), so CG may trade iterations for cycles."""
        top = self.levels[0]
        top.f = f
        if u is not None:
            top.u = u
        kind = kind or self.options.cycle
        for c in range(self.options.cycles):
            if kind == "fmg" and c == 0:
                self._fmg()
            else:
                self._cycle(0, "v" if kind == "fmg" else kind, zero=u is None and c == 0)
        return top.u

    def _fmg(self):
        """Full multigrid (Feng, Shu, Xu, Zhang, Algorithm 2; Trottenberg et al. 2.6): restrict
        the right-hand side to every level, solve on the coarsest, then on each finer level start
        from the interpolated coarse solution and do one V(pre, post) cycle."""
        ev, last = self.event, len(self.levels) - 1
        with ev("restrict"):
            for lev, nxt in zip(self.levels[:-1], self.levels[1:]):
                grid.interior(lev.r)[...] = lev.f
                self._exchange(lev)(lev.r)
                lev.transfer.restrict(nxt.f, lev.r)
        self._cycle(last, "v", zero=True)
        for l in range(last - 1, -1, -1):
            lev, nxt = self.levels[l], self.levels[l + 1]
            with ev("prolong"):
                if self._cubic_fmg(lev, nxt):
                    if lev.fused is not None:
                        fused.cubic_upsample(lev.u, nxt.u)
                    else:
                        lev.u[...] = transfer.cubic_upsample(nxt.u, lev.op.xp)
                else:
                    lev.u[...] = 0
                    lev.transfer.prolong_add(lev.u, nxt.u)
                self._exchange(lev)(lev.u)
            self._cycle(l, "v", zero=False)

    def _cubic_fmg(self, lev, nxt):
        """Cubic FMG interpolation where it applies: one rank, every axis coarsened by the
        uniform rule (fine = 2 coarse + 1), at least 2 coarse points per axis, one device."""
        return (self.options.fmg_interpolation == "cubic" and self.comm.size == 1
                and nxt.op.xp is lev.op.xp
                and all(m == 2 * c + 1 and c >= 2 for m, c in zip(lev.box.shape, nxt.box.shape)))

    def replay_coarse_levels(self, max_unknowns=COARSE_GRAPH_SIZE):
        """Replay each visit of the coarse levels, from the first level of at most
        ``max_unknowns`` unknowns down, as one CUDA graph (one per kind of visit) captured at its
        first use on the levels' own arrays. For when the whole cycle is not captured: those kernels
        are latency-bound and the host's launches would set their pace. On the GPU, every level on
        the device, exchanges capturable (comm.Comm); returns the first level replayed, or None."""
        if not backend.is_gpu(self.xp) or not self.comm.capturable or self.host_levels:
            return None
        last = len(self.levels) - 1
        self.coarse_graph = next((l for l in range(1, last) if self.levels[l].box.size <= max_unknowns), None)
        return self.coarse_graph

    @property
    def coarse_graph_note(self):
        return "; ".join(sorted({g.note for g in self._coarse_graphs.values() if not g.on})) or "captured"

    def _cycle(self, l, kind, zero, replay=True):
        """``zero``: the level's u is to start from zero (its smoother zeroes it). ``replay``: the
        coarse levels' graph may stand for this visit (replay_coarse_levels)."""
        lev, opt, ev = self.levels[l], self.options, self.event
        if replay and l == self.coarse_graph:
            graph = self._coarse_graphs.get((kind, zero))
            if graph is None:   # CuPy's default pool, as the whole-cycle graph (dmdapc)
                graph = self._coarse_graphs[kind, zero] = backend.CycleGraphs(
                    lambda f, u: self._cycle(l, kind, zero, replay=False))
            return graph(lev.f, lev.u)
        ex = self._exchange(lev)
        if l == len(self.levels) - 1:
            with ev("coarse"):
                if lev.coarse_solve is not None and (zero or self.exact_coarse):
                    lev.coarse_solve.solve(lev.u, lev.f)
                    ex(lev.u)
                elif lev.coarse_solve is not None:   # an inexact solve improves the guess: u += p(A)(f - A u)
                    u0 = grid.interior(lev.u).copy()
                    lev.residual()
                    lev.coarse_solve.solve(lev.u, grid.interior(lev.r))
                    grid.interior(lev.u)[...] += u0
                    ex(lev.u)
                else:
                    lev.smoother.smooth(lev.u, lev.f, opt.pre, ex, zero_guess=zero)
                    lev.smoother.smooth(lev.u, lev.f, opt.post, ex, reverse=True)
            return
        with ev("smooth"):
            lev.smoother.smooth(lev.u, lev.f, opt.pre, ex, zero_guess=zero)
        nxt = self.levels[l + 1]
        with ev("restrict"):
            lev.residual()
            ex(lev.r)
            lev.transfer.restrict(nxt.f, lev.r)
        # the second visit of a W/F-cycle: on the coarsest level only when its solve is inexact
        inner = l + 1 < len(self.levels) - 1 or not self.exact_coarse
        self._cycle(l + 1, kind, True)
        again = second_visit(kind)
        if again and inner:
            self._cycle(l + 1, again, False)
        with ev("prolong"):
            lev.transfer.prolong_add(lev.u, nxt.u)
            if not lev.fills_halo:
                ex(lev.u)
        with ev("smooth"):
            lev.smoother.smooth(lev.u, lev.f, opt.post, ex, reverse=True)

    fine_box = property(lambda self: self.levels[0].box)

    @property
    def coarsest_rhs(self):
        """NaN/Inf anywhere in the input reaches it (every fine point has a restriction weight)."""
        return self.levels[-1].f

    # -- reporting ---------------------------------------------------------------------------------
    def residual_norm(self, f, u):
        lev = self.levels[0]
        lev.op.residual(r := grid.interior(lev.r), f, u)
        return self.comm.allsum(float(self.xp.vdot(r, r).real)) ** 0.5

    def solve(self, f, rtol=1e-6, maxit=100):
        """Cycles as a stand-alone solver from a zero guess: (u, iterations, residual history)."""
        top = self.levels[0]
        u = self.xp.zeros(top.box.padded_shape, self.dtype)
        hist = [r0 := self.residual_norm(f, u)]
        for it in range(1, maxit + 1):
            self.cycle(f, u)
            hist.append(self.residual_norm(f, u))
            if hist[-1] <= rtol * r0:
                return u, it, hist
        return u, maxit, hist

    def memory_values(self):
        """Values stored by the hierarchy (work arrays and operator coefficients)."""
        parts = lambda lev: (_plain(lev.transfer), lev.smoother, lev.fused)  # noqa: E731
        total = sum(lev.u.size + lev.r.size + (lev.f.size if lev.index else 0) + lev.op.stored_values()
                    + sum(getattr(o, "stored_values", lambda: 0)() for o in parts(lev))
                    + sum(getattr(lev.smoother, name).size for name in ("r", "d") if hasattr(lev.smoother, name))
                    for lev in self.levels)
        cs = self.levels[-1].coarse_solve
        return total + (cs.inv.size if cs is not None and cs.inv is not None else 0)

    def operator_complexity(self):
        nnz = [lev.op.nnz_per_row * lev.box.global_size for lev in self.levels]
        return sum(nnz) / nnz[0]

    def describe(self):
        """Lines for -ksp_view."""
        o = self.options
        kind = f"{o.cycles} {o.cycle.upper()}-cycles" if o.cycles > 1 else f"{o.cycle.upper()}-cycle"
        auto = o.transfer == "auto" and self.transfer_kind == "blackbox"
        chosen = " (auto: Galerkin coarse operators)" if auto else ""
        lines = [f"{kind} per application, {len(self.levels)} levels, pre/post smoothing {o.pre}/{o.post}, "
                 f"transfer {transfer.NAMES[self.transfer_kind]}{chosen}"]
        for lev in self.levels:
            if lev.op.constant:
                kind = "matrix-free constant stencil"
            elif isinstance(lev.op, stencil.AxisLaplacian):
                kind = "star stencil, constant but for the last cell along " + "/".join(
                    "zyx"[3 - lev.box.dim + a] for a, r in enumerate(lev.op.ratios) if r != 1)
            else:
                kind = "stored stencil"
            kind += " (fused kernels)" if lev.fused is not None else ""
            what = lev.coarse_solve.describe() if lev.coarse_solve else lev.smoother.describe()
            if lev.index == len(self.levels) - 1 and lev.coarse_solve is None:
                what = "coarse solve by smoothing: " + what
            gs = grid.shape_name(lev.box)
            where = (", gathered onto every rank" if lev.replicated else "") + (
                ", on the host" if self.host_levels and lev.op.xp is numpy else "")
            lines.append(f"level {lev.index}: grid {gs}{where}, {lev.op.nnz_per_row}-point {kind}; {what}")
        return lines


def _plain(T):
    """The transfer inside the moved and gathered wrappers."""
    while isinstance(T, (transfer.Moved, transfer.Gathered)):
        T = T.inner
    return T
