"""Helpers the operation families share, one module per topic; they register no operation.

Families import from here, `registry` and `node` only, never from another family."""
