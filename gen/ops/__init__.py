"""One module per op: validation and planning in Python, the work in generated kernels."""
