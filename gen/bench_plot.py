"""`python cli.py bench --plot FILE.png`: GB/s per case, gen and each peer, against the copy
ceiling of that case. One panel per thread count, a row of bars per case; matplotlib is the
optional extra `plot` (pip install '.[plot]')."""


def check():
    """Raise ValueError (a one-line message) when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install matplotlib (gen's extra "
                         "`plot`)") from None


def plot(rows, threads, columns, path, title):
    """Write the chart of the bench rows (the `gbps`, `copy_gbps` and `PEER_gbps` keys) to
    path; `columns` are the peers to draw."""
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    series = [("gbps", "gen")] + [(p + "_gbps", p) for p in columns]
    cases = list(dict.fromkeys(r["case"] for r in rows if "gbps" in r))
    height = 0.8 / len(series)
    fig, axes = plt.subplots(1, len(threads), sharey=True, squeeze=False,
                             figsize=(6 * len(threads), 2 + 0.1 * len(cases) * (len(series) + 1)))
    for ax, n in zip(axes[0], threads):
        by_case = {r["case"]: r for r in rows if r["threads"] == n and "gbps" in r}
        y = [i for i, c in enumerate(cases) if c in by_case]
        for j, (key, label) in enumerate(series):
            ax.barh([i + (j - (len(series) - 1) / 2) * height for i in y],
                    [by_case[cases[i]].get(key, 0) for i in y], height, label=label)
        ax.vlines([by_case[cases[i]]["copy_gbps"] for i in y], [i - 0.45 for i in y],
                  [i + 0.45 for i in y], color="black", label="copy ceiling", zorder=3)
        ax.set_title("%d thread%s" % (n, "" if n == 1 else "s"))
        ax.set_xlabel("GB/s (bytes read + written / time)")
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(range(len(cases)))
    axes[0][0].set_yticklabels(cases, fontsize=7)
    axes[0][0].invert_yaxis()
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
