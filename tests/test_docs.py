"""The documentation that is generated from the code is current."""
import pathlib

from conftest import real_scalars

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


@real_scalars
def test_options_reference_is_current():
    from pcplugins.petsc import options
    assert (DOCS / "options.md").read_text() == options.reference(), \
        "docs/options.md is stale: python -m pcplugins.petsc.options > docs/options.md"


def test_readme_is_a_user_document():
    """README.md stays short and without history: the methods are in docs/, history in git."""
    text = (DOCS.parent / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    assert "session" not in text.lower()
    for page in ("gmg.md", "fftpoisson.md", "amg.md", "shiftedlaplace.md", "options.md", "krylov.md"):
        assert f"docs/{page}" in text and (DOCS / page).exists(), page


def test_benchmark_figures_are_generated_from_the_results():
    import importlib.util
    path = DOCS.parent / "benchmarks" / "report.py"
    spec = importlib.util.spec_from_file_location("report", path)
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    assert (DOCS.parent / "benchmarks" / "README.md").read_text() == report.report(), \
        "benchmarks/README.md is stale: python benchmarks/report.py"
