"""The layers hold: read from the source (every import, those inside functions too), not from what
happens to be imported at run time.

- ``backend/`` imports nothing of ours (but its own modules) and neither petsc4py nor mpi4py;
- ``kernels/`` imports only ``backend``; the CUDA sources are its ``.cu`` files, none in Python strings;
- ``core/`` never imports petsc4py, mpi4py, ``petsc/`` or ``pcs/``;
- ``petsc/`` never imports ``pcs/``;
- a PC module never imports another PC module (``dmdapc``, the DMDA PCs' shared base, excepted).
"""
import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "pcplugins"
PCS = {"gmg", "fftpoisson", "amg", "shiftedlaplace", "idrs"}


def imports(path, root=PKG):
    """Absolute names of what ``path`` (inside the package ``root``) imports ('pcplugins.core.grid',
    'petsc4py', ...)."""
    rel = path.relative_to(root.parent).with_suffix("")
    package = list(rel.parts[:-1])      # a module's package; an __init__'s is its own folder
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def modules(sub=""):
    return sorted((PKG / sub).rglob("*.py"))


def names(path, root=PKG):
    return {n for n in imports(path, root) if n.startswith("pcplugins") or n.split(".")[0] in ("petsc4py", "mpi4py")}


def test_the_layers_exist():
    assert all(modules(s) for s in ("backend", "kernels", "core", "petsc", "pcs"))


@pytest.mark.parametrize("path", modules("backend"), ids=lambda p: p.name)
def test_backend_imports_nothing_of_ours_nor_petsc(path):
    assert {n for n in names(path) if not n.startswith("pcplugins.backend")} == set()


@pytest.mark.parametrize("path", modules("kernels"), ids=lambda p: p.name)
def test_kernels_import_only_the_backend(path):
    assert names(path) <= {"pcplugins", "pcplugins.backend"}, names(path)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_no_cuda_source_in_python(path):
    """CUDA sources live in kernels/*.cu, where the loader adds #line information."""
    text = path.read_text()
    assert "__global__" not in text and 'extern "C"' not in text


@pytest.mark.parametrize("cu", sorted((PKG / "kernels").glob("*.cu")), ids=lambda p: p.name)
def test_every_cuda_source_is_loaded(cu):
    """Each .cu file is compiled by some module through kernels.module or kernels.kernel."""
    calls = [f'module("{cu.stem}"', f'kernel("{cu.stem}"']
    assert any(c in m.read_text() for m in modules() for c in calls), cu.name


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_core_never_touches_petsc(path):
    bad = {n for n in names(path) if n.split(".")[0] in ("petsc4py", "mpi4py")
           or n.startswith(("pcplugins.petsc", "pcplugins.pcs"))}
    assert not bad, bad


@pytest.mark.parametrize("path", modules("petsc"), ids=lambda p: p.name)
def test_petsc_layer_never_imports_a_pc(path):
    bad = {n for n in names(path) if n.startswith("pcplugins.pcs")}
    assert not bad, bad


@pytest.mark.parametrize("path", modules("pcs"), ids=lambda p: p.name)
def test_pcs_never_import_each_other(path):
    own = path.stem
    bad = {n for n in names(path) if n.startswith("pcplugins.pcs.")
           and n.split(".")[2] in PCS and n.split(".")[2] != own}
    assert not bad, bad


def test_contract_catches_a_violation(tmp_path):
    """The reader sees a lazy import inside a function, relative or absolute."""
    assert "pcplugins.petsc.mat" not in imports(PKG / "core" / "grid.py")
    probe = tmp_path / "pcplugins" / "core" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f():\n    from ..petsc import mat\n    import petsc4py\n")
    assert {"pcplugins.petsc.mat", "petsc4py"} <= names(probe, tmp_path / "pcplugins")


@pytest.mark.parametrize("path", [p for p in modules() if "kernels" not in p.parts],
                         ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_over_400_lines(path):
    """A module a reader can hold in mind; the CUDA sources (kernels/*.cu) are not counted."""
    assert len(path.read_text().splitlines()) <= 400
