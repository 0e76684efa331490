"""Assertions shared by the spec tests."""
import pytest

import gen


def raises_gen(fn, *names):
    """fn() must raise gen.Error (a ValueError) whose message names one of names."""
    with pytest.raises(gen.Error) as ei:
        fn()
    err = ei.value
    assert isinstance(err, ValueError)
    msg = str(err)
    assert msg.strip(), "empty error message"
    if names:
        flat = msg.replace(" ", "")
        assert any(str(n) in msg or str(n).replace(" ", "") in flat for n in names), (
            "message %r does not name any of %r" % (msg, names)
        )
    return msg
