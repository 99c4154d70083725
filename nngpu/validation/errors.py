class ValidationError(Exception):
    """A model or request broke a spec rule; str() is the logged reason naming the index."""
