"""Red-black Gauss-Seidel on the fused kernels of a constant star stencil (kernels/fused.cu,
launched by core/fused.py): a kernel per colour, both colours in one relax_pair pass, and on a
level distributed over ranks relax_face on the faces between them first, so the pass needs no
ghost update between its colours. NumPy twin: ``ColourGS(op, 'redblack')`` (smoothers/stencil.py;
tests/gpu/test_kernels.py compares them, the distributed sweep on thread ranks)."""

from .. import fused, grid


class RedBlack:
    """Red-black Gauss-Seidel (SOR for omega != 1) on a constant star stencil.

    With a ``scratch`` array (3D) on a level of at least fused.PAIR_MIN_SIZE points a sweep is one
    relax_pair pass from u into scratch or back, so ``scratch`` (u's padded shape, zero halo) must
    be free whenever the smoother runs: the level's r. Elsewhere, one relax_colour kernel per
    colour, in place. ``faces``: on a level distributed over ranks, the faces of this rank's box
    that border other ranks' (bit 2a: the first index along axis a, bit 2a + 1: the last)."""

    def __init__(self, lap, omega=1.0, scratch=None, faces=0):
        self.lap, self.omega = lap, omega
        box = lap.box
        base = sum(s + 1 for s in box.start)     # colour = parity of the grid indices' sum (grid.py)
        self._parity = [(c - base) % 2 for c in (0, 1)]
        # the TAIL kernels divide omega by the diagonal at each point
        self._scale = lap.dtype.type(omega if lap.tail else omega / lap.op.diag)
        n0, n1, n2 = grid.dims3(box.shape)
        # each parity's launch shape and trailing arguments, worked out once
        self._first = {p: ((n0, n1, n2), [*fused.i32(n0, n1, n2, p), self._scale, *lap.weights, *lap.tail])
                       for p in (0, 1)}
        self._colour = {p: ((n0, n1, (n2 + 1) // 2),
                            [*fused.i32(n0, n1, n2, p), *lap.coefs, self._scale, *lap.tail]) for p in (0, 1)}
        # relax_pair has no TAIL form: an AxisLaplacian level sweeps a colour a kernel (the
        # levels after an even axis's first coarsening are small enough that the colour kernels
        # are as fast)
        self.scratch = scratch if lap.dim == 3 and not lap.tail and box.size >= fused.PAIR_MIN_SIZE else None
        self._faces = []
        if self.scratch is not None:
            fused.contiguous(scratch)
            if scratch.shape != box.padded_shape or scratch.dtype != lap.dtype:
                raise ValueError(f"RedBlack scratch: {box.padded_shape} {lap.dtype} wanted, got "
                                 f"{scratch.shape} {scratch.dtype}")
            planes, grid3, self._width = fused.pair_planes((n0, n1, n2), lap.dtype)
            self._pair = {p: (grid3, [*fused.i32(n0, n1, n2, p, planes, faces), *lap.coefs, self._scale])
                          for p in (0, 1)}
            n = (n0, n1, n2)
            # relax_face's launches, one a face (a box one point thick along an axis has one): its
            # shape and arguments after u and f, per (parity, zero guess)
            self._faces = [(a, s * (n[a] - 1), (1,) + tuple(n[b] for b in range(3) if b != a))
                           for a in range(3) for s in (0, 1) if faces >> (2 * a + s) & 1
                           and not (s and n[a] == 1 and faces >> 2 * a & 1)]
            self._face_args = {(p, z): [(shape3, [*fused.i32(n0, n1, n2, p, a, index, faces, z), *lap.coefs,
                                                  self._scale]) for a, index, shape3 in self._faces]
                               for p in (0, 1) for z in (0, 1)}

    def smooth(self, u, f, sweeps, exchange=lambda u: u, reverse=False, zero_guess=False):
        fused.contiguous(u, f)
        parities = self._parity[::-1] if reverse else self._parity
        if sweeps == 0:
            if zero_guess:
                u[...] = 0
            return u
        if self.scratch is not None and self._faces:
            return self._smooth_pairs_across(u, f, sweeps, parities, zero_guess, exchange)
        if self.scratch is not None:
            return self._smooth_pairs(u, f, sweeps, parities[0], zero_guess)
        for sweep in range(sweeps):
            self._sweep(u, f, parities, zero_guess and sweep == 0, exchange)
        return u

    def _sweep(self, u, f, parities, zero_guess, exchange):
        """One sweep in place, a kernel per colour."""
        lap = self.lap
        for k, par in enumerate(parities):
            if zero_guess and k == 0:
                shape3, args = self._first[par]
                fused.launch(lap.dim, lap.dtype, "relax_first", shape3, [u, f, *args], bool(lap.tail))
            else:
                shape3, args = self._colour[par]
                fused.launch(lap.dim, lap.dtype, "relax_colour", shape3, [u, f, *args], bool(lap.tail))
            exchange(u)

    def _smooth_pairs(self, u, f, sweeps, parity, zero_guess):
        """Sweeps by relax_pair, alternating between u and scratch so the last lands in u: a
        sweep from zero reads only u's halo and may write anywhere; an odd count of the others
        leaves one in-place sweep of two colour kernels. Scratch's halo (zero) stands for u's:
        one rank or a replicated level, whose halo is the zero Dirichlet layer."""
        lap, bufs = self.lap, (u, self.scratch)
        at, flips = 0, sweeps - sweeps % 2
        grid3, tail = self._pair[parity]
        if zero_guess:
            at, flips = (sweeps - 1) % 2, sweeps - 1
            fused.launch(lap.dim, lap.dtype, "relax_pair_zero", grid3, [bufs[at], u, f, *tail], width=self._width)
        for _ in range(flips):
            fused.launch(lap.dim, lap.dtype, "relax_pair", grid3, [bufs[1 - at], bufs[at], f, *tail], width=self._width)
            at = 1 - at
        if sweeps - zero_guess - flips:
            self._sweep(u, f, (parity, 1 - parity), False, lambda u: u)
        return u

    def _smooth_pairs_across(self, u, f, sweeps, parities, zero_guess, exchange):
        """Sweeps by relax_pair on a level distributed over ranks, from u into scratch or back.
        Each first updates the first colour on the faces that border other ranks (relax_face) and
        updates the ghosts, so the halo holds the neighbours' new first colour; relax_pair then
        sweeps the rest, and the ghosts of its output are updated. As many ghost updates as a
        kernel per colour (two a sweep), half the passes over the grid. An odd count sweeps once
        by colour kernels (the first sweep, from a zero guess), so the last pair lands in u."""
        lap, bufs, parity, at = self.lap, (u, self.scratch), parities[0], 0
        if sweeps % 2:
            sweeps -= 1
            if zero_guess:
                self._sweep(u, f, parities, True, exchange)
                zero_guess = False
            else:
                at = -1             # the odd sweep last
        grid3, tail = self._pair[parity]
        for k in range(sweeps):
            src = bufs[k % 2]
            zero = zero_guess and k == 0
            for shape3, args in self._face_args[parity, int(zero)]:
                fused.launch(lap.dim, lap.dtype, "relax_face", shape3, [src, f, *args])
            exchange(src)
            fused.launch(lap.dim, lap.dtype, "relax_pair_zero" if zero else "relax_pair", grid3,
                         [bufs[1 - k % 2], src, f, *tail], width=self._width)
            exchange(bufs[1 - k % 2])
        if at < 0:
            self._sweep(u, f, parities, False, exchange)
        return u

    def describe(self):
        w = "" if self.omega == 1.0 else f", omega {self.omega:g}"
        how = "one fused kernel per sweep" if self.scratch is not None else "fused kernel per colour"
        if self._faces:
            how += ", the faces between the ranks first"
        return f"red-black Gauss-Seidel{w} ({how})"
