"""Change points in one series of the history, by PELT (ruptures, Killick et al. 2012) on the series scaled by
its own noise, and the policy that makes a change a regression.

Noise: how the value moves from run to run, robustly: 1.4826 x the median absolute deviation of the first
differences, / sqrt 2 (a level shift moves one difference, an outlying run two). Not the rows' own min..max: that
spread is within one run (a decode row's 64 sampled steps span ~26% of their median on the CPU, a step's latency
growing with its position), and as the noise it made a 10% decode step invisible; it stands in (max - min) / 4
only for a series of fewer than MIN_RUNS_FOR_NOISE runs, too short to show its run-to-run spread.
PELT's penalty is PENALTY_PER_LOG_N x log(n) on the normalised series (a BIC-like choice, set from the rates
measured on synthetic series: reports/test_history.py). Two passes: the change points found with that noise give
segments, whose residuals about their medians (1.4826 x their MAD, x sqrt(n / (n - segments))) give the noise of
the second, final pass: robust too, so one outlying run does not hide a later step.
A segment is at least MIN_SIZE runs, and a two-run segment's level is the run nearer its neighbour's, so one
outlying run alone is never a change (PELT may pair it with a normal run).

A change is a regression when it goes the metric's worse way (reports/SCHEMA.md, "Direction") by more than the
floor (default 5%) and by more than NOISE_MULTIPLE x the noise. Counted metrics (method exact, or flops, bytes,
*_bytes) change by construction only when something changed: any difference is flagged at once, by its direction:
"regression (exact)" the worse way, "improvement (exact)" the better, "change (exact)" for a metric of no direction
(the newest run: "change", which `check` reports, exit 0).

The newest run (policy of `check`), judged against the runs before it, both their level and their noise estimated
without it (the level: the runs since the last change that counts): flagged at once when it is worse than that
level by more than the floor and by more than FAR x the noise; "suspected" when worse by more than the floor and NOISE_MULTIPLE x
the noise but not FAR (the next run confirms it: two worse runs form a segment PELT finds).

A drift (a slide too slow for any one step to clear the floor): two or more consecutive change points all the
worse way whose product passes the floor make a regression ("regression (drift)") at the one where it does."""
import fnmatch
import math

import numpy as np

MIN_SIZE = 2
MIN_RUNS_FOR_NOISE = 6
PENALTY_PER_LOG_N = 4.0
NOISE_MULTIPLE = 3.0
FAR = 6.0
# The newest run is a regression at once only with MIN_PRIOR_RUNS runs before it ("suspected" below): the noise
# of 2 to 4 runs is a guess (pure noise of 3%: 12% false regressions at 3 runs, 4.8% at 4, before this rule).
MIN_PRIOR_RUNS = 5
RECENT = 4
# The least relative noise the newest run is judged against: runs that tie (six equal values) have a MAD of 0, and
# a 6% step was 6e7 x "the noise". 1.25% is ~1.75x the median noise of the committed repeated runs (0.71%,
# reports/test_history.py real_noise), and keeps 10% worse at 1% noise past FAR x it.
MIN_REL_NOISE = 0.0125
# Finite-sample consistency factors of the two MAD estimates (their median made equal to the true sigma of
# Gaussian runs), by simulation: 40000 series of n N(0, 1) runs for each n, factor = 1 / median(estimate);
# reports/test_history.py re-simulates them. DIFF: 1.4826 MAD(first differences) / sqrt 2 (0.57 of sigma at 4
# runs uncorrected); RESID: 1.4826 MAD(residuals about the median) x sqrt(n / (n - 1)), one segment. Past 20 runs
# 1 + 0.6 / n (within 1% of the simulation at 20 to 40 runs).
DIFF_MAD_FACTOR = {3: 1.151, 4: 1.65, 5: 1.337, 6: 1.21, 7: 1.165, 8: 1.12, 9: 1.104, 10: 1.083, 11: 1.074,
                   12: 1.061, 13: 1.061, 14: 1.048, 15: 1.045, 16: 1.04, 17: 1.04, 18: 1.039, 19: 1.033, 20: 1.027}
RESID_MAD_FACTOR = {3: 1.514, 4: 1.287, 5: 1.198, 6: 1.157, 7: 1.126, 8: 1.101, 9: 1.085, 10: 1.074, 11: 1.068,
                    12: 1.059, 13: 1.058, 14: 1.044, 15: 1.044, 16: 1.04, 17: 1.042, 18: 1.041, 19: 1.035, 20: 1.034}


def mad_factor(table, n):
    return table.get(n, 1.0 + 0.6 / n if n > 20 else 1.0)

LOWER = ("*_latency_s", "*_bytes", "*_bytes_per_token", "kernel_time_s", "roofline_time_s", "gpu_time_s",
         "cupti_overhead_fraction", "flops", "bytes", "*_host_enqueue_s")
HIGHER = ("throughput_tokens_per_s", "max_batch", "achieved_*", "fraction_*", "*_reduction", "*_speedup", "*_gain",
          "gemm_peak_tflops", "copy_bw_gbs", "gpu_busy_fraction", "within_tolerance")
COUNTED = ("flops", "bytes", "*_bytes", "*_bytes_per_token", "max_batch")


def direction(metric):
    """+1 when higher is better, -1 when lower is, 0 when the schema gives no direction."""
    if any(fnmatch.fnmatchcase(metric, g) for g in HIGHER):
        return 1
    if any(fnmatch.fnmatchcase(metric, g) for g in LOWER):
        return -1
    return 0


def is_counted(metric, methods):
    return any(m == "exact" for m in methods) or any(fnmatch.fnmatchcase(metric, g) for g in COUNTED) and \
        all(m in ("exact", "analytic") for m in methods)


def _row_spread_noise(values, spreads):
    """(max - min) / 4 of the rows, the median over rows that have one: a stand-in for the noise of a series too
    short to show its run-to-run variation. Only that: a row's extremes are within one run (64 decode steps span
    ~26% of their median on the CPU, a step's latency growing with its position), not how the value moves from run
    to run, and as the noise of a long series they made a 3x threshold of ~80%, so that a 10% step went unseen."""
    sp = [s for s in spreads if s is not None and s > 0]
    return float(np.median(sp)) / 4 if sp else 0.0


def _tiny(values):
    return 1e-9 * max(float(np.median(np.abs(values))) if len(values) else 0.0, 1e-30)


def noise(values, spreads=()):
    """The run-to-run noise of a series: 1.4826 x the MAD of its first differences, / sqrt 2 (robust: a level shift
    moves one difference, an outlying run two); the rows' own spread only while the series has fewer than
    MIN_RUNS_FOR_NOISE runs."""
    v = np.asarray(values, dtype=float)
    sigma_runs = 0.0
    if len(v) >= 3:
        d = np.diff(v)
        sigma_runs = 1.4826 * float(np.median(np.abs(d - np.median(d)))) / math.sqrt(2) * mad_factor(DIFF_MAD_FACTOR,
                                                                                                        len(v))
    if len(v) < MIN_RUNS_FOR_NOISE:
        sigma_runs = max(sigma_runs, _row_spread_noise(v, spreads))
    return max(sigma_runs, _tiny(v))


def change_points(values, sigma, penalty=None):
    """Indices k (0 < k < n) where a new level starts."""
    import ruptures as rpt
    n = len(values)
    if n < 2 * MIN_SIZE:
        return []
    x = (np.asarray(values, dtype=float) / sigma).reshape(-1, 1)
    pen = PENALTY_PER_LOG_N * math.log(n) if penalty is None else penalty
    # The linear kernel's cost is the L2 cost (n x the segment's variance), its PELT exact and in C: the same
    # change points as Pelt(model="l2", jump=1) (equal on 2,000 synthetic series of 4 to 40 runs), ~80x faster,
    # which the 400-series simulations of reports/test_history.py and a history of thousands of series need.
    bkps = rpt.KernelCPD(kernel="linear", min_size=MIN_SIZE).fit(x).predict(pen=pen)
    return [b for b in bkps if 0 < b < n]


def segment(values, spreads=()):
    """(change points, noise) by the two passes above."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    sigma = noise(v, spreads)
    cps = change_points(v, sigma)
    if n - (len(cps) + 1) >= 2:
        b = [0] + cps + [n]
        res = np.concatenate([v[b[i]:b[i + 1]] - np.median(v[b[i]:b[i + 1]]) for i in range(len(b) - 1)])
        # Robust too: one outlying run (a hiccup 30% slow) inflated the residuals' standard deviation tenfold,
        # and hid a 10% step later on. sqrt(n / (n - segments)): the residuals are about fitted levels.
        pooled = 1.4826 * float(np.median(np.abs(res))) * math.sqrt(n / (n - (len(b) - 1))) * \
            mad_factor(RESID_MAD_FACTOR, n)
        sigma = max(pooled, _row_spread_noise(v, spreads) if n < MIN_RUNS_FOR_NOISE else 0.0, _tiny(v))
        cps = change_points(v, sigma)
    return cps, sigma


def _level(seg, toward):
    """A segment's level: its median; for a segment of MIN_SIZE (two) runs, whose median is the mean, the run
    nearer `toward` (the neighbouring segment's median), so that one outlying run that PELT pairs with a normal
    one does not make a change: a two-run segment moves only when both runs moved."""
    if len(seg) == 2:
        return float(min(seg, key=lambda v: abs(v - toward)))
    return float(np.median(seg))


def _changes(points, sign, floor, k_noise):
    """(changes [(index, commit, before, after, relative size, confidence, kind, detail)], noise) of a timed
    series; kind "regression (drift)" has its detail ("drift since COMMIT: +6.4% in all"), the others none."""
    vals = [p[2] for p in points]
    cps, sigma = segment(vals, [p[3] for p in points])
    changes = []
    bounds = [0] + cps + [len(vals)]
    from scipy import stats
    for j in range(1, len(bounds) - 1):
        a, b = vals[bounds[j - 1]:bounds[j]], vals[bounds[j]:bounds[j + 1]]
        before, after = _level(a, float(np.median(b))), _level(b, float(np.median(a)))
        rel = (after - before) / abs(before) if before else math.inf
        try:
            p = stats.mannwhitneyu(a, b, alternative="two-sided").pvalue if len(a) > 1 and len(b) > 1 else 1.0
        except ValueError:
            p = 1.0
        worse = sign != 0 and (after - before) * sign < 0
        big = abs(rel) >= floor and abs(after - before) >= k_noise * sigma
        kind = ("regression" if worse else "improvement" if sign != 0 else "change") if big else "shift (below the floor)"
        changes.append((bounds[j], points[bounds[j]][0], before, after, rel, 1.0 - p, kind, ""))
    # A drift: two or more consecutive shifts each below the floor (or the noise), all the worse way, that add up
    # past the floor. One shift alone is not a drift: past the floor but not the noise, it was a "drift since" its
    # own commit.
    chain_start, total = None, 1.0
    for idx, c in enumerate(changes):
        worse = sign != 0 and (c[3] - c[2]) * sign < 0
        if worse and c[6] == "shift (below the floor)":
            chain_start = idx if chain_start is None else chain_start
            total *= (1 + c[4])
            if idx > chain_start and abs(total - 1) >= floor:
                first = changes[chain_start]
                changes[idx] = c[:6] + ("regression (drift)", "drift since %s: %+.1f%% in all" % (first[1],
                                                                                            100 * (total - 1)))
                chain_start, total = None, 1.0
        else:
            chain_start, total = None, 1.0
    return changes, sigma


def analyse(points, metric, floor=0.05, far=None, noise_multiple=None):
    """points: [(commit, timestamp, value, spread_or_None, method)] in history order. Returns a dict: noise,
    changes [(index, commit, before, after, relative size, confidence, kind, detail)], newest verdict."""
    far = FAR if far is None else far
    k_noise = NOISE_MULTIPLE if noise_multiple is None else noise_multiple
    vals = [p[2] for p in points]
    methods = set(p[4] for p in points)
    out = {"noise": 0.0, "changes": [], "newest": "ok", "newest_detail": ""}
    if not vals:
        return out
    sign = direction(metric)
    if is_counted(metric, methods):
        # Any difference is real, but only the worse way is a regression: bytes that fell, a larger max_batch are
        # improvements; a metric of no direction (param_*) changed, which is said and fails nothing.
        def kind(before, after):
            return "change" if sign == 0 else "regression" if (after - before) * sign < 0 else "improvement"
        for i in range(1, len(vals)):
            if vals[i] != vals[i - 1]:
                rel = (vals[i] - vals[i - 1]) / abs(vals[i - 1]) if vals[i - 1] else math.inf
                out["changes"].append((i, points[i][0], vals[i - 1], vals[i], rel, 1.0,
                                       kind(vals[i - 1], vals[i]) + " (exact)", ""))
        if len(vals) >= 2 and vals[-1] != vals[-2]:
            k = kind(vals[-2], vals[-1])
            out["newest"] = "ok" if k == "improvement" else k
            out["newest_detail"] = "a counted metric changed: %r -> %r" % (vals[-2], vals[-1])
        return out
    out["changes"], out["noise"] = _changes(points, sign, floor, k_noise)
    # The newest run against the history before it: the level and the noise of the runs before it, the run judged
    # left out of both (in the noise, its own jump made 11 flat runs at 1% noise then +10% a noise of ~3%: then
    # "suspected", never a regression at once). The level: the runs since the last change that counts (past the
    # floor and the noise, or a drift's); segments split by a shift below the floor are one level, so that two low
    # runs of noise PELT split off are not a level that the next, normal run is 5% worse than.
    if len(vals) >= 3 and sign != 0:
        prev, prev_sigma = _changes(points[:-1], sign, floor, k_noise)
        counted = [c[0] for c in prev if c[6] != "shift (below the floor)"]
        level = float(np.median(vals[counted[-1] if counted else 0:-1]))
        prev_sigma = max(prev_sigma, MIN_REL_NOISE * abs(level))
        delta = vals[-1] - level
        worse = delta * sign < 0
        rel = abs(delta) / abs(level) if level else math.inf
        if worse and rel >= floor and abs(delta) >= far * prev_sigma:
            out["newest"] = "regression"
        elif worse and rel >= floor and abs(delta) >= k_noise * prev_sigma:
            out["newest"] = "suspected"
        out["newest_detail"] = "%+.2f%% vs the level %.6g (noise %.3g)" % (100 * delta / abs(level) if level else 0,
                                                                          level, prev_sigma)
        # A regression (a drift's included) that the series without the newest run did not have: this run newly
        # confirms it. A drift of 2%/run at 1% noise showed in `changes` while `check` passed every run (2 of 10
        # seeds over 40 runs). The same regression found one run earlier or later (+-2 runs) is not new.
        had = [c[0] for c in prev if c[6].startswith("regression")]
        # Only a regression whose new level is recent (starts within the last RECENT runs): a change point further
        # back that one more run moved is PELT re-segmenting noise (3% noise, 8 runs: 1.2% false alarms).
        new = [c for c in out["changes"] if c[6].startswith("regression") and c[0] >= len(vals) - RECENT
               and not any(abs(c[0] - h) <= 2 for h in had)]
        if new and out["newest"] != "regression":
            c = new[-1]
            out["newest"] = "regression"
            out["newest_detail"] = "confirms a %s since %s: %+.2f%%%s" % (c[6], c[1], 100 * c[4],
                                                                        " (%s)" % c[7] if c[7] else "")
    if out["changes"] and out["changes"][-1][0] >= len(vals) - MIN_SIZE and out["changes"][-1][6].startswith("regression"):
        out["newest"] = "regression"
        c = out["changes"][-1]
        out["newest_detail"] = "a new level since %s: %+.2f%%" % (c[1], 100 * c[4])
    if out["newest"] == "regression" and len(vals) - 1 < MIN_PRIOR_RUNS:
        out["newest"] = "suspected"
        out["newest_detail"] += " (only %d run(s) before it: a regression needs %d)" % (len(vals) - 1, MIN_PRIOR_RUNS)
    return out
