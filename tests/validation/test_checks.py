"""validation/checks.py's integer test: what a HIDL integer field accepts (ints, numpy integers,
IntEnum members) and refuses (bools, floats, anything else), plain ints taking the fast path."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.validation.checks import UINT32_MAX, is_int, uint32
from nngpu.validation.errors import ValidationError


@pytest.mark.parametrize("x", [0, -3, 1 << 40, np.int32(5), np.uint64(7), ErrorStatus.NONE])
def test_integers(x):
    assert is_int(x)


@pytest.mark.parametrize("x", [True, False, np.bool_(True), 1.0, "1", None, b"\x01", [1]])
def test_not_integers(x):
    assert not is_int(x)


@pytest.mark.parametrize("x", [True, -1, UINT32_MAX + 1, 2.0])
def test_uint32_refuses(x):
    with pytest.raises(ValidationError, match="must be a uint32"):
        uint32(x, "field")
