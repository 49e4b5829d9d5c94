"""pcplugins.FFTPoisson's exact solve (core/fft.py) on the GPU with its sine transforms as FFTs of
the odd extension (cuFFT) or as products with the DST-I's matrix (cuBLAS), by grid size and
precision: the measurement behind fft.DENSE_DST.

    python benchmarks/fft_dst.py [-sizes3 63,127,255] [-sizes2 1023,2047] [-out benchmarks/results/x.json]

One solve is the forward transforms, the division by the eigenvalues and the inverse transforms,
from the right-hand side to the padded solution, as the preconditioner applies it. Times are
device times of the solve captured ten times in one CUDA graph (the median of 15 replays over ten),
as the PC replays it; the error is the relative 2-norm difference to the double FFT solve. The
floors beside: the bytes of reading the right-hand side and writing the solution once at the
device's copy rate, and for the dense products 4 m operations a point per Dirichlet axis at the
rate of one large matrix product of the same precision.
"""
import sys

import cupy as cp
import numpy

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from tridiag import device_time, write  # noqa: E402

from pcplugins.core import fft, grid, stencil  # noqa: E402


def rates(dtype):
    """The device's copy rate (bytes read + written a second) and one large matrix product's
    operations a second in ``dtype``."""
    src = cp.random.default_rng(1).standard_normal(1 << 27, dtype=numpy.float64).astype(dtype)
    dst = cp.empty_like(src)
    t_copy = device_time(lambda: cp.copyto(dst, src))
    a = cp.random.default_rng(2).standard_normal((8192, 8192), dtype=numpy.float64).astype(dtype)
    t_mm = device_time(lambda: a @ a, calls=3, reps=5, graph=False)
    return 2 * src.nbytes / t_copy, 2 * 8192 ** 3 / t_mm


def main():
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    shapes = ([(n,) * 3 for n in map(int, args.get("-sizes3", "63,127,200,255,256,257,300,320,400,511").split(","))]
              + [(n,) * 2 for n in map(int, args.get("-sizes2", "1023,2047,2048,3000").split(","))])
    results = []
    for dtype in (numpy.float64, numpy.float32):
        copy_rate, mm_rate = rates(dtype)
        print(f"{numpy.dtype(dtype).name}: copy {copy_rate / 1e9:.0f} GB/s, matrix product {mm_rate / 1e12:.1f} "
              "Tflop/s", flush=True)
        for shape in shapes:
            box = grid.Box(shape)
            w = [-1.0] * len(shape)
            op = stencil.laplacian(box, w, cp, dtype)
            f = cp.random.default_rng(0).standard_normal(shape, dtype=numpy.float64).astype(dtype)
            points = f.size
            floor_bytes = 2 * f.nbytes / copy_rate
            ref = grid.interior(fft.LaplacianFFT(stencil.laplacian(box, w, cp), w, dense=0).cycle(f)).copy()
            rows = []
            for how, dense in (("cuFFT", 0), ("cuBLAS", max(shape))):
                solver = fft.LaplacianFFT(op, w, dense=dense)
                u = grid.interior(solver.cycle(f))
                err = float(cp.linalg.norm(u - ref) / cp.linalg.norm(ref))
                t = device_time(lambda s=solver, f=f: s.cycle(f))
                flops = 4 * points * sum(shape) if dense else 0
                rows.append({"dtype": numpy.dtype(dtype).name, "shape": list(shape), "transform": how, "seconds": t,
                             "ns_per_point": t / points * 1e9, "rel_error_to_double_fft": err,
                             "floor_bytes_s": floor_bytes, "floor_flops_s": flops / mm_rate, "copy_Bps": copy_rate,
                             "matmul_flops": mm_rate})
                del solver, u
            results += rows
            a, b = rows
            print(f"{numpy.dtype(dtype).name:8s} {'x'.join(map(str, shape)):>12s}: cuFFT {a['seconds'] * 1e3:7.3f} ms "
                  f"({a['ns_per_point']:.3f} ns/pt, error {a['rel_error_to_double_fft']:.0e})  cuBLAS "
                  f"{b['seconds'] * 1e3:7.3f} ms ({b['ns_per_point']:.3f} ns/pt, error "
                  f"{b['rel_error_to_double_fft']:.0e}, flop floor {b['floor_flops_s'] * 1e3:.3f} ms)  "
                  f"bytes floor {floor_bytes * 1e3:.3f} ms", flush=True)
            del f, op, ref
            cp.get_default_memory_pool().free_all_blocks()
    if "-out" in args:
        write(args["-out"], results)


if __name__ == "__main__":
    main()
