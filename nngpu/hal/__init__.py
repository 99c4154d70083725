"""nngpu.hal: the NNAPI HAL vocabulary (types.hal 1.0-1.3, I*.hal) and nothing else.

Convention for every HAL method in nngpu: a method that `generates (status, x, y)` in the .hal
files returns the tuple `(status, x, y)`; one that generates only a status returns that
ErrorStatus; `oneway` methods return None. HAL methods never raise on bad input.
"""
from .interfaces import *  # noqa: F401,F403
from .types import *  # noqa: F401,F403
