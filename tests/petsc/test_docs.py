"""The documentation that is generated from the code is current."""
import pathlib

from conftest import real_scalars

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


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


def _report():
    import importlib.util
    spec = importlib.util.spec_from_file_location("report", DOCS.parent / "benchmarks" / "report.py")
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    return report


def test_benchmark_figures_are_generated_from_the_results():
    report = _report()
    assert (DOCS.parent / "benchmarks" / "README.md").read_text() == report.benchmarks_readme(), \
        "benchmarks/README.md is stale: python benchmarks/report.py"
    assert (DOCS / "performance.md").read_text() == report.performance_page(), \
        "docs/performance.md is stale: python benchmarks/report.py"


def test_results_are_the_current_ones_and_figures_exist():
    """results/ holds what the report cites and nothing else; the figures it shows exist."""
    report = _report()
    cited = {name for names in report.BENCHMARKS.values() for name in names}
    held = {p.name for p in (DOCS.parent / "benchmarks" / "results").iterdir()}
    assert held == cited, (held - cited, cited - held)
    for png, _ in report.FIGURES:
        assert (DOCS / "figures" / png).exists(), png


def test_no_history_in_the_docs():
    """Documentation states what is, in the present tense: no dated diary, no sessions."""
    for page in [DOCS.parent / "README.md", DOCS.parent / "benchmarks" / "README.md", *DOCS.glob("*.md")]:
        assert "session" not in page.read_text().lower(), page.name
