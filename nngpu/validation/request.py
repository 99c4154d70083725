"""Request rules (placeholder being completed)."""
from __future__ import annotations

from ..hal.types import Model_1_3, Request
from .errors import ValidationError


def validate_request(request: Request, model: Model_1_3) -> None:
    if len(request.inputs) != len(model.main.inputIndexes):
        raise ValidationError("request input count differs from the model's")
    if len(request.outputs) != len(model.main.outputIndexes):
        raise ValidationError("request output count differs from the model's")
