"""The one communicator protocol of the core: what a hierarchy asks of the ranks it runs on.

The core never calls MPI. Every hierarchy takes a communicator object and calls only these
methods; ``Comm`` is the serial one (one rank: local sums are global, and the only ghost update is
the wrap of a periodic grid's halo), and
petsc/mpi.py supplies the MPI ones (``DMDAComm`` for the structured levels of GMG and
ShiftedLaplace, ``CSRComm`` for AMG's distributed rows). Every rank must make the same sequence
of the collective calls.

- ``size``, ``rank``; ``capturable``: whether exchanges and gathers may be captured in a CUDA
  graph (they never wait for the host);
- global reductions of host values: ``allsum``, ``allmin``, ``allmax``, ``allgather`` (a list, one
  entry per rank); ``alltoall(parts)``: part r of the list goes to rank r, which gets the list of
  what every rank sent it; ``allgatherv(x, counts=None)``: every rank's 1-D host array joined in rank
  order (a buffer exchange, for large arrays; ``counts`` every rank's length where known);
- structured levels (multigrid.Multigrid): ``distribute(level, box)`` whether a level with this
  rank's ``box`` stays distributed (every rank owns points of it), ``exchange(level, u)`` the
  ghost update of a distributed level's padded array, ``gather(level, part, part_box, out)`` a
  replicated coarse level assembled from every rank's part, announced once at setup by
  ``expect_gather(level, part_box)`` (collective: the communicator may prepare buffers for it);
- rows (distributed.Rows): ``halo(ghosts, starts, xp)``, a callable giving the values of the global
  unknowns ``ghosts`` from every rank's owned values (``starts``: each rank's first row and the
  total); ``gather_rows(starts, xp)``, a callable giving the whole vector on every rank from each
  rank's rows; ``allsum_array(x)``, the global sums of a small array's values as an array (on the
  device where ``capturable``);
- ``prepare()``: open now what the exchanges need (collective, after the hierarchy is built, so
  a cycle captured later opens nothing); ``check()``: raise on every rank if an exchange failed;
- ``free()``: release what the exchanges hold (collective under MPI).
"""


class Comm:
    """One rank; ``periodic``: per axis of the structured levels, whether the grid is periodic
    along it (grid.Box.periodic)."""
    size, rank = 1, 0
    capturable = True

    def __init__(self, periodic=()):
        self.periodic = tuple(bool(p) for p in periodic)

    def allsum(self, x):
        return x

    allmin = allmax = allsum

    def allgather(self, x):
        return [x]

    def alltoall(self, parts):
        return list(parts)

    def allgatherv(self, x, counts=None):
        return x

    def distribute(self, level, box):
        return True

    def exchange(self, level, u):
        return wrap(u, self.periodic)

    def expect_gather(self, level, part_box):
        pass

    def gather(self, level, part, part_box, out):
        out[...] = part
        return out

    def halo(self, ghosts, starts, xp):
        return lambda x: x[:0]              # one rank owns every column

    def gather_rows(self, starts, xp):
        return lambda part: part

    def allsum_array(self, x):
        return x

    def prepare(self):
        pass

    check = prepare

    def free(self):
        """Release what the exchanges hold (collective under MPI: Multigrid.free calls it)."""


def wrap(u, periodic):
    """The halo of the padded array ``u`` (a batch of them: leading axes) along the axes of its
    last len(``periodic``) axes that are periodic: each side takes the grid's other end. One axis
    after the other, each over the whole padded extent of the others, so the corners of box
    stencils wrap too."""
    for a in (a for a, p in enumerate(periodic) if p):
        lead = (slice(None),) * (u.ndim - len(periodic) + a)
        u[lead + (0,)] = u[lead + (-2,)]
        u[lead + (-1,)] = u[lead + (1,)]
    return u
