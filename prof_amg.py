import sys; sys.path.insert(0,'examples'); sys.path.insert(0,'benchmarks')
import petsc4py; petsc4py.init([])
from petsc4py import PETSc
import amg_poisson, time, meshes, pcplugins, cupy
A, xy = amg_poisson.laplacian(2048, 2)
conf = amg_poisson.CONFIGS["pcplugins.AMG (auxgrid, K-cycle)"]
amg_poisson.run("a", conf, A, xy, True)
for graph in (1, 0):  # last: graph off
    M = meshes.petsc_matrix(A, "aijcusparse")
    b, x = M.createVecs(); b.set(1.0); M.mult(b, x)
    PETSc.Options()["pc_amg_graph"] = graph
    pc = PETSc.PC().create(comm=PETSc.COMM_SELF); pc.setOperators(M); pc.setType("python"); pc.setPythonType("pcplugins.AMG")
    pcplugins.set_coordinates(pc, xy); pc.setFromOptions()
    cupy.cuda.runtime.deviceSynchronize(); t = time.perf_counter(); pc.setUp(); cupy.cuda.runtime.deviceSynchronize()
    ts = [time.perf_counter() - t]
    ys = [b.duplicate() for _ in range(4)]
    for i in range(8):
        t = time.perf_counter(); pc.apply(b, ys[i % 4]); cupy.cuda.runtime.deviceSynchronize(); ts.append(time.perf_counter() - t)
    print("graph", graph, "setup, then applies (ms):", [round(1e3 * v, 1) for v in ts], flush=True)
from pcplugins import sparse
ctx = pc.getPythonContext(); mg = ctx.mg
def tm(fn, reps=20):
    fn(); cupy.cuda.runtime.deviceSynchronize(); t = time.perf_counter()
    for _ in range(reps): fn()
    cupy.cuda.runtime.deviceSynchronize(); return round((time.perf_counter() - t) / reps * 1e3, 3)
for k, lev in enumerate(mg.levels[:-1]):
    f = cupy.random.random(lev.n); u = cupy.zeros(lev.n)
    print(k, lev.n, "sweep", tm(lambda: lev.smoother.smooth(u, f, 1)), "residual", tm(lambda: sparse.residual(lev.A, f, u, cupy)),
          "restrict", tm(lambda: sparse.spmv(lev.R, f, cupy)), "prolong", tm(lambda: sparse.prolong_add(u, cupy.zeros(mg.levels[k+1].n), lev.agg)),
          "mg(k)", tm(lambda: mg._mg(k, f), 5), "colours", [p[0].size for p in lev.smoother.parts], lev.smoother.proper, flush=True)
