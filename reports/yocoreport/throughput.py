"""Throughput and decode figures: throughput vs length (paper Fig. 10) and decode step latency vs context (not
in the paper), drawn by lines.line_figure from LINE_SPECS here."""

LINE_SPECS = {
    "throughput_vs_length": dict(phase="throughput", metric="throughput_tokens_per_s", scale=1.0,
                                 title="Throughput vs length",
                                 ylabel="throughput (tokens/s)",
                                 what="Throughput = batch × generated tokens / (prefill + decode steps)"),
    "decode_vs_length": dict(phase="decode", metric="decode_step_latency_s", scale=None,
                             title="Decode step latency vs context length",
                             ylabel="decode step latency",
                             what="Latency of one decode step (whole batch) at the given context"),
}
