"""The exception type of the public API, arguments that do not fit a signature, and
read-only attributes."""
import copy
import functools
import inspect
import reprlib


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
    as its plan was made for them; later assignments raise ReadOnlyError. A copy or a pickle
    is made again from the arguments it was made with (its plan holds C objects), copied as
    they were then (a caller may change a list of scales afterwards)."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        object.__setattr__(self, "_made_with", copy.deepcopy((args, kwargs)))
        return self

    def __reduce__(self):
        args, kwargs = self._made_with
        return functools.partial(type(self), **kwargs), args

    def __setattr__(self, name, value):
        if not name.startswith("_") and hasattr(self, name):
            read_only(self, name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        read_only(self, name)


def checked(obj):
    """A public function, or a class's __init__, __call__ and public methods: a call whose
    arguments do not fit the signature (an unknown keyword, one positional too many, a missing
    one) raises gen.Error naming them instead of Python's TypeError. Other errors pass as they
    are; a call that fits costs one more frame."""
    if not isinstance(obj, type):
        return _checked_function(obj)
    for name, attr in list(vars(obj).items()):
        if name.startswith("_") and name not in ("__init__", "__call__"):
            continue
        if isinstance(attr, classmethod):
            setattr(obj, name, classmethod(_checked_function(attr.__func__)))
        elif inspect.isfunction(attr):
            setattr(obj, name, _checked_function(attr))
    return obj


def _checked_function(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError:
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except TypeError as bad:
                method = "." in fn.__qualname__  # args[0] is the instance or class
                given = [reprlib.repr(a) for a in args[method:]] + [
                    f"{k}={reprlib.repr(v)}" for k, v in kwargs.items()]
                name = fn.__qualname__.removesuffix(".__init__")
                raise Error(f"{name}: {bad} (given: {', '.join(given) or 'nothing'})") from None
            raise
    return call
