"""Matrix products that a CUDA graph capture may record: cuBLAS's strided batched GEMM, called
through ctypes (CuPy refuses every cuBLAS call while a stream captures)."""
import ctypes
import ctypes.util

import numpy

from . import array_module, cupy, device_id


def matmul(a, b, out):
    """out = a @ b for C-contiguous real arrays: (M, K) or a batch (n, M, K) times (K, N) or a
    batch (n, K, N), one operand possibly unbatched (used for every matrix of the other). On the
    GPU one cuBLAS strided batched GEMM (see _Cublas), which a CUDA graph capture may record."""
    if array_module(out) is numpy:
        return numpy.matmul(a, b, out=out)
    return _cublas().gemm(a, b, out)


class _Cublas:
    """cuBLAS's ?gemmStridedBatched on a handle of our own, called through ctypes. CuPy refuses
    every cuBLAS call while a stream captures (cuBLAS supports capture: its CUDA Graphs section
    asks for a workspace set by the caller, so that no allocation happens in a capture), so the
    products that a captured cycle makes come here. Row-major C = A B is column-major
    C^T = B^T A^T: cuBLAS gets B as its first operand."""
    WORKSPACE = 32 << 20                    # cuBLAS's recommendation for Hopper

    def __init__(self):
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (CuPy's own load of libcublas)
        path = next((line.split()[-1] for line in open("/proc/self/maps")
                     if "/libcublas.so" in line), None) or ctypes.util.find_library("cublas")
        self.lib = ctypes.CDLL(path)
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        self.workspace = cupy.empty(self.WORKSPACE, numpy.uint8)
        self.stream = None
        self.funcs = {numpy.dtype(numpy.float64): (self.lib.cublasDgemmStridedBatched, ctypes.c_double),
                      numpy.dtype(numpy.float32): (self.lib.cublasSgemmStridedBatched, ctypes.c_float)}

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed: cuBLAS status {status}")

    def _use_stream(self):
        stream = cupy.cuda.get_current_stream().ptr
        if stream != self.stream:           # setting the stream resets the workspace
            self._check(self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream)), "cublasSetStream")
            self._check(self.lib.cublasSetWorkspace_v2(self.handle, ctypes.c_void_p(self.workspace.data.ptr),
                                                       ctypes.c_size_t(self.WORKSPACE)), "cublasSetWorkspace")
            self.stream = stream

    def gemm(self, a, b, out):
        if not (a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous):
            raise ValueError("matmul needs C-contiguous arrays")
        if a.dtype != b.dtype or a.dtype != out.dtype or a.dtype not in self.funcs:
            raise ValueError(f"matmul needs one real dtype, got {a.dtype}, {b.dtype}, {out.dtype}")
        M, K = a.shape[-2:]
        N = b.shape[-1]
        if out.size == 0:
            return out
        batch = out.size // (M * N)
        if b.shape[-2] != K or out.shape[-2:] != (M, N) or any(x.ndim == 3 and x.shape[0] != batch for x in (a, b)):
            raise ValueError(f"matmul shapes {a.shape} @ {b.shape} -> {out.shape}")
        func, scalar = self.funcs[a.dtype]
        one, zero = scalar(1.0), scalar(0.0)
        self._use_stream()
        status = func(self.handle, 0, 0, N, M, K, ctypes.byref(one),
                      ctypes.c_void_p(b.data.ptr), N, ctypes.c_longlong(K * N if b.ndim == 3 else 0),
                      ctypes.c_void_p(a.data.ptr), K, ctypes.c_longlong(M * K if a.ndim == 3 else 0),
                      ctypes.byref(zero), ctypes.c_void_p(out.data.ptr), N, ctypes.c_longlong(M * N), batch)
        self._check(status, "cublas?gemmStridedBatched")
        return out


_CUBLAS = {}


def _cublas():
    dev = device_id(cupy)
    if dev not in _CUBLAS:
        _CUBLAS[dev] = _Cublas()
    return _CUBLAS[dev]
