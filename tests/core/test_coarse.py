"""The coarsest level's dense inverse (coarse.dense_inverse) on the host: each matrix kind takes its
path (LU, the pseudo-inverse of a singular one; the SPD one's Cholesky path is the GPU's,
tests/gpu) and gets the inverse NumPy's LAPACK gives."""
import numpy as np
import pytest

from pcplugins.core import coarse

from conftest import coarse_matrices


@pytest.mark.parametrize("n", [64, 90])
@pytest.mark.parametrize("kind", ["spd", "upwind", "indefinite", "neumann"])
@pytest.mark.parametrize("queued", [False, True])
def test_dense_inverse_takes_each_path(kind, n, queued, monkeypatch):
    d, path = coarse_matrices(n)[kind]
    path = "lu" if path == "cholesky" else path          # on the host an SPD matrix takes LU too
    calls = []
    checked = coarse._checked_inverse
    monkeypatch.setattr(coarse, "_checked_inverse", lambda *a, **k: calls.append(k) or checked(*a, **k))
    inv = coarse.dense_inverse_queued(d, np)() if queued else coarse.dense_inverse(d, np)
    ref = np.linalg.pinv(d, rcond=1e-10) if path == "pseudo-inverse" else np.linalg.inv(d)
    assert np.abs(inv - ref).max() <= 1e-9 * np.abs(ref).max()
    # Cholesky alone; LU once; the pseudo-inverse after a failed LU, by one more LU with a shift
    assert [("shift" in k) for k in calls] == {"cholesky": [], "lu": [False], "pseudo-inverse": [False, True]}[path]
