"""The one exception type of the public API."""


class Error(ValueError):
    """Raised for any invalid argument; the message names the bad value."""
