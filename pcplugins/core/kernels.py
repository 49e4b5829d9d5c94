"""The two fused elementwise kernels everything else is built from, with their NumPy twins
(and the small reduction a captured cycle needs: ``all_finite``).

``lincomb(out, coefs, arrays)``   out  = sum_k c_k * u_k          (or out += ..., ``add=True``)
``relax(x, f, invd, w, coefs, arrays, cdiag)``
                                  x   += w * invd * (f - sum_k c_k * u_k - cdiag * x)

Coefficients are scalars or arrays; arrays are (strided) views, so a stencil term is a shifted
view of a padded array and a sub-lattice is a stepped view. On the GPU each call is a single
CuPy ElementwiseKernel launch (one pass over memory instead of one per term); on the host the
same expression runs in NumPy with preallocated temporaries. Nothing here allocates on the GPU,
so whole cycles can be captured in a CUDA graph.
"""
import functools

import numpy

from .. import backend


@functools.lru_cache(maxsize=None)
def _lincomb_kernel(n, add):
    cupy = backend.cupy
    params = ", ".join(f"T c{k}, T u{k}" for k in range(n))
    expr = " + ".join(f"c{k} * u{k}" for k in range(n))
    body = f"out = out + ({expr})" if add else f"out = {expr}"
    return cupy.ElementwiseKernel(params, "T out", body, f"pcplugins_lincomb{n}{'_add' if add else ''}")


@functools.lru_cache(maxsize=None)
def _relax_kernel(n):
    cupy = backend.cupy
    params = ", ".join(["T f, T invd, T w, T cd"] + [f"T c{k}, T u{k}" for k in range(n)])
    expr = " + ".join([f"c{k} * u{k}" for k in range(n)] + ["cd * x"])
    return cupy.ElementwiseKernel(params, "T x", f"x = x + w * invd * (f - ({expr}))",
                                  f"pcplugins_relax{n}")


def _typed(c, dtype):
    # Python floats would promote float32 work to float64 in CuPy's type resolution.
    return dtype.type(c) if numpy.isscalar(c) else c


def lincomb(out, coefs, arrays, add=False):
    """out (+)= sum_k coefs[k] * arrays[k]."""
    if backend.array_module(out) is not numpy:
        args = []
        for c, u in zip(coefs, arrays):
            args += [_typed(c, out.dtype), u]
        _lincomb_kernel(len(arrays), add)(*args, out)
        return out
    if not add:
        numpy.multiply(coefs[0], arrays[0], out=out)
        rest = zip(coefs[1:], arrays[1:])
    else:
        rest = zip(coefs, arrays)
    tmp = numpy.empty_like(out)     # one temporary per call: one per term costs its page faults
    for c, u in rest:
        out += numpy.multiply(c, u, out=tmp)
    return out


def relax(x, f, invd, w, cdiag, coefs, arrays):
    """x += w * invd * (f - sum_k coefs[k] * arrays[k] - cdiag * x), pointwise (x not in arrays)."""
    if backend.array_module(x) is not numpy:
        dt = x.dtype
        args = [f, invd, _typed(w, dt), _typed(cdiag, dt)]
        for c, u in zip(coefs, arrays):
            args += [_typed(c, dt), u]
        _relax_kernel(len(arrays))(*args, x)
        return x
    s = f - cdiag * x
    tmp = numpy.empty_like(s)
    for c, u in zip(coefs, arrays):
        s -= numpy.multiply(c, u, out=tmp)
    s *= invd
    s *= w
    x += s
    return x


@functools.lru_cache(maxsize=None)
def _residual_kernel(n):
    cupy = backend.cupy
    params = ", ".join(["T f"] + [f"T c{k}, T u{k}" for k in range(n)])
    expr = " + ".join(f"c{k} * u{k}" for k in range(n))
    return cupy.ElementwiseKernel(params, "T out", f"out = f - ({expr})", f"pcplugins_residual{n}")


def residual(out, f, coefs, arrays):
    """out = f - sum_k coefs[k] * arrays[k]."""
    if backend.array_module(out) is not numpy:
        args = [f]
        for c, u in zip(coefs, arrays):
            args += [_typed(c, out.dtype), u]
        _residual_kernel(len(arrays))(*args, out)
        return out
    numpy.copyto(out, f)
    tmp = numpy.empty_like(out)
    for c, u in zip(coefs, arrays):
        out -= numpy.multiply(c, u, out=tmp)
    return out


@functools.lru_cache(maxsize=None)
def _all_finite_kernel():
    return backend.cupy.ReductionKernel("T x", "bool y", "isfinite(x)", "a && b", "y = a", "true",
                                        "pcplugins_all_finite")


def all_finite(a, out):
    """out (a 0-d bool array) = all entries of ``a`` finite. One kernel on the GPU, which a CUDA
    graph can hold (cupy.isfinite of cupy.sum is several launches at each PC application)."""
    if backend.array_module(a) is not numpy:
        return _all_finite_kernel()(a, out, axis=None)
    out[...] = numpy.isfinite(a).all()      # also a host level's values into a device flag
    return out
