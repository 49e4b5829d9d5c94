"""Knibbe, Oosterlee and Vuik's Helmholtz model problems, solved by a Krylov method preconditioned
by pcplugins.ShiftedLaplace: MP1, a point source in the centre of the unit square with absorbing
boundaries and constant k; MP2, the three-layer wedge (k(x, y) = 2 pi f l / c(x, y), the source at
the middle of one edge).

    python examples/helmholtz_solve.py -problem mp1|mp2 -N 128 [-ksp_type bcgs] [-png u.png] [-dim 3]

Bi-CGSTAB preconditioned on the right by pcplugins.ShiftedLaplace unless -ksp_type/-pc_type say
otherwise; add -mat_type aijcusparse for the GPU (the DMDA's vectors follow the matrix). Runs under
mpiexec too (each rank assembles its rows; the PC then works on the distributed DMDA).

MP1: k = 0.625 N (the paper's k h = 0.625) unless -k is given, passed as -pc_sl_k; -dim 3 solves it
on the unit cube (our extension). MP2: f = 30 Hz (-f), the wavenumber field passed with
pcplugins.set_wavenumber. Prints the iterations and the true relative residual; -png writes the
real part of the solution as a grayscale PNG (zlib, no imaging library needed; in 3D the slice
through the source).
"""
import os
import struct
import sys
import zlib

import petsc4py

petsc4py.init(sys.argv)
import numpy  # noqa: E402
from petsc4py import PETSc  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
import pcplugins  # noqa: E402

from problems import helmholtz_system, natural_array, timed_solve, wedge_wavenumber  # noqa: E402


def write_png(path, image):
    """``image`` (2D float array) scaled to 0-255 as an 8-bit grayscale PNG."""
    lo, hi = float(image.min()), float(image.max())
    g = numpy.uint8(255 * (image - lo) / (hi - lo if hi > lo else 1.0))
    raw = b"".join(b"\x00" + row.tobytes() for row in g[::-1])     # y up

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", g.shape[1], g.shape[0], 8, 0, 0, 0, 0)
    with open(path, "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
                 + chunk(b"IEND", b""))


def main():
    opts = PETSc.Options()
    problem = opts.getString("problem", "mp1")
    N = opts.getInt("N", 64)
    dim = opts.getInt("dim", 2)
    if dim not in (2, 3) or (dim == 3 and problem != "mp1"):
        raise SystemExit("-dim: 2, or 3 with -problem mp1")
    if problem == "mp2":
        k = wedge_wavenumber(N + 1, opts.getReal("f", 30.0))
        da, A, b = helmholtz_system(N, k, source="edge")
    else:
        k = opts.getReal("k", 0.625 * N)
        if not opts.hasName("pc_sl_k"):
            opts["pc_sl_k"] = k
        da, A, b = helmholtz_system(N, k, dim=dim)
    ksp = PETSc.KSP().create(comm=A.getComm())
    ksp.setDM(da)
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.setOperators(A)
    ksp.setType("bcgs")
    ksp.setPCSide(PETSc.PC.Side.RIGHT)
    ksp.setTolerances(rtol=1e-3)
    if not opts.hasName("pc_type"):
        ksp.getPC().setType("python")
        ksp.getPC().setPythonType("pcplugins.ShiftedLaplace")
    ksp.setFromOptions()
    if problem == "mp2" and ksp.getPC().getType() == "python":
        pcplugins.set_wavenumber(ksp.getPC(), k.ravel())
    x = b.duplicate()
    setup, solve, residual = timed_solve(ksp, A, b, x)
    kinfo = f"k={k:g}" if problem == "mp1" else f"max k h={k.max() / N:.3g}"
    where = " in 3D" if dim == 3 else ""
    PETSc.Sys.Print(f"{problem.upper()}{where} N={N} {kinfo}: {ksp.getType()} {ksp.getIterationNumber()} iterations, "
                    f"reason {ksp.getConvergedReason()}, true relative residual {residual:.2e}, "
                    f"setup {setup:.2f} s, solve {solve:.2f} s")
    png = opts.getString("png", "")
    a = natural_array(da, x) if png else None        # collective
    if png and A.getComm().getRank() == 0:
        u = a if numpy.iscomplexobj(a) else a[0::2]          # real parts (real-equivalent form)
        u = numpy.real(u).reshape((N + 1,) * dim)
        write_png(png, u[N // 2] if dim == 3 else u)           # 3D: the slice through the source
        PETSc.Sys.Print(f"real part written to {png}")


if __name__ == "__main__":
    main()
