"""Prefill figures: prefill latency (time to first token) vs prompt length (paper Fig. 9), drawn by
lines.line_figure from LINE_SPECS here."""

LINE_SPECS = {
    "prefill_vs_length": dict(phase="prefill", metric="prefill_latency_s", scale=1.0,
                              title="Prefill latency (time to first token) vs prompt length",
                              ylabel="prefill latency (s)",
                              what="Prefill latency (time to first token)"),
}
