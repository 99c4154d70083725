"""Model and request validation per the HAL spec: every failed rule is INVALID_ARGUMENT.

`validate_model` returns the lowest HAL version whose rules the model satisfies (so a 1.0 entry
point can reject a model that needs 1.2); failures raise ValidationError naming the index."""
from .errors import ValidationError
from .model import validate_model, validate_execution_preference, validate_priority
from .request import validate_request

__all__ = ["ValidationError", "validate_model", "validate_request", "validate_execution_preference",
           "validate_priority"]
