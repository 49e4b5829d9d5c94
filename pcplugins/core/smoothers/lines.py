"""Line smoothers for anisotropic problems: zebra line Gauss-Seidel along one axis, and ADI
(alternating the axes), with batched tridiagonal solves (Goddeke and Strzodka, "Cyclic reduction
tridiagonal solvers on GPUs applied to mixed precision multigrid").

A line along axis a holds the points that differ only in their a-th index; the stencil couplings
along the line (offsets 0 and +-e_a) form a tridiagonal system, every other coupling goes to the
right-hand side. Lines are coloured by the parity of their other indices (2 colours for star
stencils in 2D and 3D, all parity combinations for box stencils), so lines of one colour never
couple and are solved together (where a colour is every other line along each other axis, only
its lines are solved); the colours alternate as in red-black. The batched solves
(tridiag.py) are a partition method with cyclic reduction on the GPU, one thread block per line,
and the Thomas algorithm on the host. In 2D on the GPU a colour is one kernel
(tridiag.relax_lines): the right-hand sides are made inside the solve for the colour's lines
only, and the unknowns relaxed in place; elsewhere the right-hand sides come from the residual
kernel and the solve reads and writes the lines through strided views. One rank: a line that
crosses ranks would need a distributed tridiagonal solve.
"""
import itertools

import numpy

from ... import backend
from .. import grid, kernels, tridiag


class LineGS:
    """Zebra line Gauss-Seidel along ``axes`` in turn (one axis: line smoother; all: ADI). One
    sweep relaxes every line of every axis once (for ADI, the paper counts it as two)."""

    def __init__(self, op, axes, omega=1.0):
        box = op.box
        if box.shape != box.global_shape:
            raise ValueError("line smoothers run on one rank (lines would cross ranks)")
        self.op, self.axes, self.omega = op, tuple(axes), omega
        xp = op.xp
        self.coefs = op.coef_arrays()
        self._rhs = xp.empty(box.shape, op.dtype)
        star = all(sum(abs(v) for v in o) <= 1 for o in op.offsets)
        self._plans = []
        for a in self.axes:
            kd = op.offsets.index((0,) * box.dim)
            on = [k for k, o in enumerate(op.offsets) if all(v == 0 for b, v in enumerate(o) if b != a)]
            lo = next((k for k in on if op.offsets[k][a] == -1), None)
            up = next((k for k in on if op.offsets[k][a] == 1), None)
            off = [k for k in range(len(op.offsets)) if k not in on]
            zero = xp.zeros(box.shape, op.dtype)
            tri = [xp.ascontiguousarray(xp.moveaxis(c, a, -1)) for c in (self.coefs[lo] if lo is not None else zero,
                                                    self.coefs[kd],
                                                    self.coefs[up] if up is not None else zero)]
            others = [b for b in range(box.dim) if b != a]
            if star and len(others) == 2:
                # 3D star stencils: lines coloured by the parity of the sum of the other two
                # indices (a checkerboard of lines): solve all lines, keep one colour by a mask
                idx = [numpy.arange(box.shape[b]).reshape([-1 if c == b else 1 for c in range(box.dim)])
                       for b in others]
                colours = [xp.asarray(numpy.broadcast_to(sum(idx) % 2 == p, box.shape)) for p in (0, 1)]
                self._plans.append((a, off, tri, colours))
                continue
            # otherwise one colour is every other line along each other axis (one parity each;
            # star stencils in 2D need only the one other axis): solve just those lines, on
            # contiguous copies of their coefficients
            parities = itertools.product((0, 1), repeat=len(others))
            colours = []
            for par in parities:
                sel = tuple(slice(p, None, 2) for p in par) + (slice(None),)
                colours.append((sel, [xp.ascontiguousarray(t[sel]) for t in tri]))
            self._plans.append((a, off, None, colours))
        self._stencil_rhs = self._stencil_rhs_args() if backend.is_gpu(xp) else None

    def _stencil_rhs_args(self):
        """Per axis, for tridiag.relax_lines (one kernel a colour: the right-hand sides made for
        the colour's lines only, no copies): the device addresses of the off-line coefficient
        arrays and the shifts of their neighbours in the padded u, in elements. None where the
        lines are too long for the kernel, and in 3D (a colour's lines there are a 2D lattice, not
        one stride)."""
        op, xp = self.op, self.op.xp
        shape = op.box.padded_shape
        if op.box.dim != 2 or not all(tridiag.fits(op.box.shape[a], op.dtype) for a, _, _, _ in self._plans):
            return None
        if not all(c.flags.c_contiguous for c in self.coefs):
            return None
        strides = [int(numpy.prod(shape[d + 1:])) for d in range(len(shape))]
        out = {}
        for a, off, _, _ in self._plans:
            ptrs = xp.asarray([self.coefs[k].data.ptr for k in off], dtype=numpy.uint64)
            shifts = xp.asarray([sum(o * st for o, st in zip(op.offsets[k], strides)) for k in off],
                                dtype=numpy.int64)
            out[a] = (ptrs, shifts)
        return out

    def smooth(self, u, f, sweeps, exchange=lambda u: u, reverse=False, zero_guess=False):
        if zero_guess:
            u[...] = 0
        op, xp = self.op, self.op.xp
        plans = self._plans[::-1] if reverse else self._plans
        ui = grid.interior(u)
        full = grid.full_lattice(op.box)
        fused = self._stencil_rhs if (u.flags.c_contiguous and u.shape == op.box.padded_shape
                                      and u.dtype == f.dtype == op.dtype) else None
        for _ in range(sweeps):
            for a, off, tri, colours in plans:
                for colour in (colours[::-1] if reverse else colours):
                    if fused is not None:                     # one kernel a colour
                        sel, (lo, dg, up) = colour
                        ptrs, shifts = fused[a]
                        lines = lambda x: xp.moveaxis(x, a, -1)[sel]  # noqa: E731
                        first = self.coefs[off[0]] if off else f
                        tridiag.relax_lines(lo, dg, up, lines(f), (ptrs, first, lines(first)), shifts,
                                            lines(ui), self.omega)
                        exchange(u)
                        continue
                    rhs = self._rhs                           # f minus the couplings off the line
                    kernels.residual(rhs, f, [self.coefs[k] for k in off],
                                     [grid.view(u, full, op.offsets[k], padded=True) for k in off])
                    if tri is None:                           # the colour's lines only, solved
                        sel, (lo, dg, up) = colour            # from and into views: no copies
                        tridiag.solve(lo, dg, up, xp.moveaxis(rhs, a, -1)[sel], xp,
                                      out=xp.moveaxis(ui, a, -1)[sel], omega=self.omega)
                    else:                                     # every line, one colour kept
                        x = xp.moveaxis(tridiag.solve(*tri, xp.moveaxis(rhs, a, -1), xp), -1, a)
                        if self.omega != 1.0:
                            x = ui + self.omega * (x - ui)
                        ui[...] = xp.where(colour, x, ui)
                    exchange(u)
        return u

    def describe(self):
        names = {1: "x", 2: "y", 3: "z"}
        d = self.op.box.dim
        lines = "/".join(names[d - a] for a in self.axes)
        kind = "ADI (alternating line" if len(self.axes) > 1 else "line"
        solver = "cyclic-reduction" if backend.is_gpu(self.op.xp) else "Thomas"
        return f"zebra {kind} Gauss-Seidel along {lines}{')' if len(self.axes) > 1 else ''}, {solver} solves"
