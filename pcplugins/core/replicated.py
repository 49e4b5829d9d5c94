"""The coarse levels of a distributed aggregation hierarchy (kcycle.AggregationMG on several ranks):
from the first level of at most ``gather_size`` unknowns on, the level's matrix is gathered onto
every rank (coarse.GatheredRowsSolve), where a serial hierarchy continues it (the aux grid over the
gathered unknowns' centroids, else pairwise or smoothed aggregation) and each rank runs the same
coarse correction, captured as a CUDA graph on the GPU. Coarse levels cost a few exchanges each
per visit, and the K-cycle visits level k 2^k times: one allgather replaces all of those below."""
import dataclasses

import numpy

from .. import backend
from . import auxgrid, coarse


def gathered(mats, aggs, sizes, coords, order, method, opts, comm, coarsest, system, xp, hierarchy):
    """The coarse solve of a distributed hierarchy whose last level ``mats[-1]`` is gathered:
    ``aggs`` and ``sizes`` (the coarse sizes) the aggregates above it, ``coords`` this rank's
    vertices in the finest level's order (``order``: the cycle's order of them, or None),
    ``method`` and ``opts`` the distributed levels' aggregation and kcycle.Options, ``coarsest`` the
    gathered level's (block size, near null space on this rank's nodes), ``system`` whether the
    finest level is a system (block size or near null space), ``hierarchy`` the serial hierarchy's
    class (kcycle.AggregationMG)."""
    whole = len(mats) == 1            # a small problem, gathered whole: the serial AMG, coordinates too
    xyz = None
    if method == "auxgrid" and (whole or not system):
        # the aux grid goes on over the gathered level (a system's coarse levels have no nodes:
        # pairwise there): its unknowns at their vertices' centroids, in rank order as
        # GatheredRowsSolve gathers the rows
        xyz = coords if order is None else coords[order]
        for agg, nc in zip(aggs, sizes):
            xyz = auxgrid.centroids(xyz, agg, nc, xp)
        xyz = xp.asarray(numpy.concatenate(comm.allgather(backend.to_host(xyz))))
    # a cycle captured whole (comm.capturable) holds the gathered levels' part too (smoothed
    # aggregation goes on with its own aggregates)
    rest = dataclasses.replace(opts, aggregation="auxgrid" if xyz is not None else
                               "mis" if opts.nsmooths else "pairwise",
                               max_levels=max(2, opts.max_levels - len(mats) + 1),
                               aggressive=max(0, opts.aggressive - len(mats) + 1),
                               graph=opts.graph and not comm.capturable)
    # a system's gathered levels keep its nodes and its (coarse) near null space
    bs, B = coarsest
    if B is not None:
        B = xp.asarray(numpy.concatenate(comm.allgather(backend.to_host(B))))
    return coarse.GatheredRowsSolve(
        mats[-1], xp, lambda M: Replicated(hierarchy(M, xp, rest, xyz, block_size=bs, near_null=B), whole))


class Replicated:
    """What solves a gathered level on each rank: the serial hierarchy ``mg`` of the gathered
    matrix, its coarse correction (``whole``: the gathered level is the finest, a small problem:
    one whole cycle), into a buffer of its own; on the GPU replayed as a CUDA graph where its
    options ask for one (not where the distributed cycle around it is captured whole)."""

    def __init__(self, mg, whole, transpose=False):
        self.mg, self.whole, self.transpose = mg, whole, transpose
        xp, n = mg.xp, mg.levels[0].n
        dt = mg.levels[0].A.dtype                  # complex for a complex matrix: never a real buffer
        self.run = self._run
        self.out = xp.zeros(n, dt)
        if backend.is_gpu(xp) and mg.opts.graph and mg.coarse.capturable:
            self.run = backend.CycleGraphs.on_buffers(self._run, n, dt)

    @property
    def capturable(self):
        return self.mg.coarse.capturable

    def free(self):
        if isinstance(self.run, backend.CycleGraphs):
            self.run.free()
        self.run = None
        self.mg.free()

    def _run(self, f, out):
        if self.transpose:
            out[...] = self.mg.cycle_transpose(f) if self.whole else self.mg.correction_transpose(f)
        else:
            out[...] = self.mg.cycle(f) if self.whole else self.mg.correction(f)

    def transposed(self, matrix):
        """The transposed solve (cycle.Cycle.transposed): the serial hierarchy's transposed cycle,
        the same on every rank (``matrix`` unused: the hierarchy has its levels), built before its
        graph captures it."""
        self.mg.transposed_cycle()
        return Replicated(self.mg, self.whole, transpose=True)

    def solve(self, f):
        self.run(f, self.out)
        return self.out

    def describe(self):
        sizes = " -> ".join(str(lev.n) for lev in self.mg.levels)
        graph = ", CUDA graph" if isinstance(self.run, backend.CycleGraphs) else ""
        return f"replicated serial hierarchy ({self.mg.method}, {sizes} unknowns{graph})"
