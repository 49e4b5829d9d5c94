"""A C PETSc application (examples/c/poisson3d.c: KSPSetComputeOperators on a DMDA) selects
pcplugins.GMG from its command line, serially and under mpiexec."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, pcplugins_env, real_scalars

# GMG refuses a PETSc built with complex scalars (tested in test_shifted_laplace)
pytestmark = real_scalars

SRC = os.path.join(ROOT, "examples", "c", "poisson3d.c")


def petsc_dir():
    try:
        import petsc
        return petsc.get_petsc_dir()
    except ImportError:
        return os.environ.get("PETSC_DIR")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    pd, cc = petsc_dir(), shutil.which("mpicc")
    if not pd or not cc or not os.path.exists(os.path.join(pd, "include", "petsc.h")):
        pytest.skip("no mpicc or no PETSc headers")
    exe = str(tmp_path_factory.mktemp("c") / "poisson3d")
    subprocess.run([cc, "-O1", "-o", exe, SRC, f"-I{pd}/include", f"-L{pd}/lib", "-lpetsc",
                    f"-Wl,-rpath,{pd}/lib"], check=True)
    return exe, pd


def run(app, ranks, *options):
    exe, pd = app
    env = pcplugins_env(PETSC_DIR=pd)
    cmd = [exe, "-python", sys.executable, *options]
    if ranks > 1:
        cmd = [shutil.which("mpiexec"), "-n", str(ranks)] + cmd
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def iterations(out):
    line = [ln for ln in out.splitlines() if ln.startswith("iterations")][0]
    return int(line.split()[1]), float(line.split()[-1])


@pytest.mark.parametrize("ranks", [1, 2])
def test_c_application_selects_gmg(app, ranks):
    out = run(app, ranks, "-ksp_type", "cg", "-pc_type", "python", "-pc_python_type", "pcplugins.GMG",
              "-ksp_rtol", "1e-10", "-ksp_view")
    its, rel = iterations(out)
    assert "pcplugins.GMG: geometric multigrid on the DMDA grid 33x33x33" in out
    assert its <= 12 and rel < 1e-8
    ref, _ = iterations(run(app, 1, "-ksp_type", "cg", "-pc_type", "python", "-pc_python_type",
                            "pcplugins.GMG", "-ksp_rtol", "1e-10"))
    assert abs(its - ref) <= 1
