"""The exception type of the public API, and read-only attributes."""


class Error(ValueError):
    """Raised for any invalid argument; the message names the bad value."""


class ReadOnlyError(Error, AttributeError):
    """An attribute of an immutable object (MemoryDesc, Memory) was set or deleted: a gen.Error
    that is also the AttributeError Python raises for read-only attributes."""


def read_only(obj, name, value=None):
    """__setattr__ and __delattr__ of an immutable object."""
    raise ReadOnlyError(f"{type(obj).__name__}.{name} is read-only; make a new "
                        f"{type(obj).__name__} instead")


class SetOnce:
    """A primitive: its public attributes (descs, axis, alg, ...) are set once, in __init__,
    as its plan was made for them; later assignments raise ReadOnlyError."""

    def __setattr__(self, name, value):
        if not name.startswith("_") and hasattr(self, name):
            read_only(self, name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        read_only(self, name)
