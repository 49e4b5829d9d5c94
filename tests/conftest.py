import os
import sys

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def _gpu():
    from pcplugins import backend
    return backend.gpu_available()


gpu = pytest.mark.skipif(not _gpu(), reason="needs CuPy and a CUDA GPU")
