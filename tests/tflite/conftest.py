from __future__ import annotations

import sys
from pathlib import Path

# tflbuild / util are plain modules beside the tests (tests/ has no packages).
sys.path.insert(0, str(Path(__file__).resolve().parent))
