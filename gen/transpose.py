"""The register networks of the tile and interleave kernels, built and checked by simulation.

A W x W tile of E-byte elements sits in W vector registers of W*E bytes (one row each).
Where the ISA can load two half-registers at once, the lane-crossing stage is folded into the
loads (they go to the load ports instead of the shuffle port). Stage s interleaves rows i and i + 2^s at chunk size E * 2^s with the ISA's lo/hi ops
(which may work within lanes). After log2(W) stages every register holds one column of the
tile; which column is found by simulating the ops on labelled bytes, and the generated code
stores each register to its column's row. Nothing is trusted: the simulation asserts that
every register ends up a whole column in order.
"""
from __future__ import annotations


def _interleave(a, b, chunk, lane, high):
    out = []
    for base in range(0, len(a), lane):
        half = lane // 2
        lo = base + (half if high else 0)
        for c in range(0, half, chunk):
            out += a[lo + c:lo + c + chunk] + b[lo + c:lo + c + chunk]
    return out


def _load(vector, addr, row, count=None, esize=0):
    """Row `row` of the tile, or zeros when the row is past `valid` (destination padding);
    with `count` (a C expression), only that many `esize`-byte elements of it are read."""
    read = (vector.maskload[esize].format(p=addr, n=count) if count
            else f"{vector.load}((const {vector.ctype} *)({addr}))")
    return f"({row} < valid ? {read} : {vector.zero})"


def network(vector, esize, row_addr, prefix="", first_row=0, row_step=1, cols=None):
    """(statements, column_of_register): C statements that load a W x W tile and transpose
    it, and for each output register name the tile column it holds. Tile row i is row
    first_row + i * row_step of the caller, at `row_addr.format(row=...)` of that row, or
    zeros when that row is at or past the C variable `valid`. `cols`: the C variable of the
    columns a row has (fewer than W); the loads read those only, the other columns are
    zeros."""
    w = vector.nbytes // esize
    half = vector.nbytes // 2
    labels = [[(r, c, k) for c in range(w) for k in range(esize)] for r in range(w)]
    names = [f"{prefix}r{i}" for i in range(w)]
    stmts, rows, last = [], [], w
    if vector.combine and vector.interleave[half].lane == vector.nbytes:
        # Register i < W/2 holds the first halves of rows i and i + W/2, register i + W/2
        # their second halves: the last (lane-crossing) stage, done by the loads.
        last = w // 2
        for i in range(w):
            r, part = i % last, (i // last) * half
            lo, hi = first_row + r * row_step, first_row + (r + last) * row_step
            left = cols and f"{cols} - {part // esize}"
            lo = _load(vector.half, f"{row_addr.format(row=lo)} + {part}", lo, left, esize)
            hi = _load(vector.half, f"{row_addr.format(row=hi)} + {part}", hi, left, esize)
            stmts.append(f"const {vector.ctype} {names[i]} = "
                         f"{vector.combine.format(lo=lo, hi=hi)};")
            rows.append(labels[r][part:part + half] + labels[r + last][part:part + half])
    else:
        for i in range(w):
            row = first_row + i * row_step
            stmts.append(f"const {vector.ctype} {names[i]} = "
                         f"{_load(vector, row_addr.format(row=row), row, cols, esize)};")
        rows = labels
    stage, step = 0, 1
    while step < last:
        op = vector.interleave[esize * step]
        new_rows, new_names = list(rows), list(names)
        for i in range(w):
            if i & step:
                continue
            j = i + step
            a, b = names[i], names[j]
            lo, hi = f"{prefix}s{stage}_{i}", f"{prefix}s{stage}_{j}"
            stmts.append(f"const {vector.ctype} {lo} = {op.lo.format(a=a, b=b)};")
            stmts.append(f"const {vector.ctype} {hi} = {op.hi.format(a=a, b=b)};")
            new_rows[i] = _interleave(rows[i], rows[j], esize * step, op.lane, False)
            new_rows[j] = _interleave(rows[i], rows[j], esize * step, op.lane, True)
            new_names[i], new_names[j] = lo, hi
        rows, names = new_rows, new_names
        stage, step = stage + 1, step * 2
    columns = {}
    for name, row in zip(names, rows):
        cells = [(r, c) for r, c, _ in row[::esize]]
        col = cells[0][1]
        assert cells == [(r, col) for r in range(w)], f"not a transpose: {cells}"
        columns[name] = col
    return stmts, columns


def interleave(vector, esize, groups, row_addr):
    """(statements, stores): C statements that interleave `groups` rows of W elements (row g
    at `row_addr.format(row=g)`, or zeros when g is at or past the C variable `valid`: the
    destination's padding) into groups * W contiguous elements (element b of row g goes to
    b * groups + g), and the (byte offset, register) pairs that store them."""
    w = vector.nbytes // esize
    stmts = [f"const {vector.ctype} r{g} = {_load(vector, row_addr.format(row=g), g)};"
             for g in range(groups)]
    if w == 1:  # an element per register: the rows' registers stored one after the other
        return stmts, [(g * esize, f"r{g}") for g in range(groups)]
    more, stores = _zip(vector, esize, [f"r{g}" for g in range(groups)], "")
    assert len(stores) * vector.nbytes == groups * w * esize
    return stmts + more, stores


def deinterleave(vector, esize, groups, row_addr, prefix="", first_row=0):
    """(statements, stores): the inverse of `interleave` for groups < W: a source block of
    W * W contiguous elements whose element a * groups + g is row a's element g (W / groups
    rows per register: register i loads row first_row + i * W / groups) split into
    `groups` runs of W * W / groups elements, run g holding element g of every row; stores[g]
    lists run g's (byte offset, register) pairs. The W x W transpose leaves, in the register
    of column j * groups + g, element g of rows j, j + W/groups, ...; interleaving those W /
    groups registers puts run g in order. Checked by simulation like `network`."""
    w = vector.nbytes // esize
    k = w // groups
    assert 1 < k and k * groups == w, (groups, w)
    stmts, columns = network(vector, esize, row_addr, prefix, first_row, row_step=k)
    register = {col: name for name, col in columns.items()}
    stores = []
    for g in range(groups):
        more, run = _zip(vector, esize, [register[j * groups + g] for j in range(k)],
                         f"{prefix}g{g}")
        stmts += more
        stores.append(run)
    return stmts, stores


def _zip(vector, esize, names, prefix):
    """(statements, stores): the registers `names` (rows of W elements) interleaved, element
    b of row g to b * len(names) + g. log2(rows) stages interleave register i with i +
    rows/2; where the ops work within lanes, the stores put the lanes back in order (joining
    two lanes with `vector.lanes`). Checked by simulation like `network`."""
    w = vector.nbytes // esize
    groups = len(names)
    rows = [[(g, b) for b in range(w) for _ in range(esize)] for g in range(groups)]
    stmts = []
    op, half, stage = vector.interleave[esize], groups // 2, 0
    while 1 << stage < groups:
        new_rows, new_names = [], []
        for i in range(half):
            a, b = names[i], names[i + half]
            for high, fmt in ((False, op.lo), (True, op.hi)):
                name = f"{prefix}s{stage}_{len(new_names)}"
                stmts.append(f"const {vector.ctype} {name} = {fmt.format(a=a, b=b)};")
                new_rows.append(_interleave(rows[i], rows[i + half], esize, op.lane, high))
                new_names.append(name)
        rows, names, stage = new_rows, new_names, stage + 1
    # where each lane of each register goes in dst (in elements)
    lane = op.lane
    place = {}
    for name, row in zip(names, rows):
        for k in range(0, vector.nbytes, lane):
            cells = [(g, b) for g, b in row[k:k + lane:esize]]
            start = cells[0][1] * groups + cells[0][0]
            assert [b * groups + g for g, b in cells] == list(range(start, start + len(cells)))
            place[start * esize] = (name, k // lane)
    per = vector.nbytes // lane  # lanes per register
    stores = []
    for out in range(0, groups * w * esize, vector.nbytes):
        parts = [place[out + i * lane] for i in range(per)]
        if parts == [(parts[0][0], i) for i in range(per)]:
            reg = parts[0][0]
        else:
            (ra, la), (rb, lb) = parts  # two lanes: join them
            reg = f"{prefix}o{out // vector.nbytes}"
            stmts.append(f"const {vector.ctype} {reg} = "
                         f"{vector.lanes.format(a=ra, b=rb, imm=la | (2 + lb) << 4)};")
        stores.append((out, reg))
    return stmts, stores
