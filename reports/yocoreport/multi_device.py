"""The prefill on R devices (reports/model/multi-device.csv, written by scripts/multi-device-projection.sh from
`yoco model --devices`): latency against the device count, bytes each device receives, memory per device, and the
paper's multi-GPU claim beside the projection. Analytic: a roofline of each device's share plus the link, not a run."""
import csv
import os
from collections import defaultdict

from .data import REPORTS_DIR
from .style import _save, plt

MODEL_DIR = os.path.join(REPORTS_DIR, "model")
PATH = os.path.join(MODEL_DIR, "multi-device.csv")
# The paper's introduction: "using four H100 GPUs, the 7B language model (augmented with Flash-Decoding and kernel
# fusion) requires about 110 seconds to prefill 450K tokens, and 380 seconds for 1M length".
PAPER_7B = [(450 * 1024, 110.0), (1024 * 1024, 380.0)]


def _len(n):
    n = int(n)
    return "%dM" % (n >> 20) if n >= 1 << 20 and n % (1 << 20) == 0 else "%dK" % (n >> 10)


def _name(model):
    base = os.path.basename(model)
    return base[:-5] if base.endswith(".json") else base


def load(path=PATH):
    """{(model, seq_len, devices): {metric: value}} and the link's name."""
    out, link = defaultdict(dict), ""
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            devices = int(r["device"][len("analytic-x"):])
            key = (_name(r["model"]), int(r["seq_len"]), devices)
            out[key][r["metric"]] = float(r["value"])
            if r["metric"] == "prefill_latency_s" and "link " in r["notes"]:
                out[key]["link_s"] = float(r["notes"].split("link ", 1)[1].split(" ", 1)[0])
            link = r["device_name"].split(" over ", 1)[-1]
    return out, link


def figure(points, out_dir):
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for model, style in (("yoco-3b", "-"), ("transformer-3b", "--")):
        for n, color in ((1 << 20, "C0"), (4 << 20, "C3")):
            xs = sorted(d for (m, l, d) in points if m == model and l == n)
            if xs:
                ax.plot(xs, [points[(model, n, d)]["prefill_latency_s"] for d in xs], style, color=color, marker="o",
                        label="%s, %s" % (model, _len(n)))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("devices (sequence sharded)")
    ax.set_ylabel("prefill latency, s (analytic)")
    ax.legend(fontsize=8)
    ax.set_title("Prefill on R H100s over NVLink (roofline of each device's share + link)", fontsize=10)
    return _save(fig, out_dir, "multi_device_prefill")


def multi_device_section(table, readme_dir, out_dir):
    if not os.path.isfile(PATH):
        return []
    points, link = load()
    rel = lambda p: os.path.relpath(p, readme_dir).replace(os.sep, "/")  # noqa: E731
    lines = ["## Beyond one GPU (projection)", "",
             "The prefill with the sequence sharded over R devices, as `dist/` runs it (YOCO: chunk-parallel, one "
             "fixed-size state collective per self-decoder layer; the Transformer: context parallelism, a ring of "
             "keys and values in every layer), by the analytic model on the H100 datasheet over %s: each device's "
             "share at the roofline plus the link (YOCO waits for its collectives; the Transformer's ring overlaps "
             "each layer's compute). Analytic, from [%s](%s) (`scripts/multi-device-projection.sh`); the CPU "
             "reference runs the same sharding on MPI ranks and is tested equal to one process." %
             (link, rel(PATH), rel(PATH)), ""]
    body = []
    for model in ("yoco-3b", "transformer-3b", "yoco-65b", "transformer-65b"):
        for n in sorted(set(l for (m, l, d) in points if m == model)):
            if n not in (1 << 20, 4 << 20):
                continue
            row = [model, _len(n)]
            for d in (1, 2, 4, 8):
                p = points.get((model, n, d))
                row.append("%.3g s / %.3g GB" % (p["prefill_latency_s"], p["mem_per_device_bytes"] / 1e9) if p else "—")
            p4 = points.get((model, n, 4))
            row.append("%.3g GB" % (p4["comm_bytes_received"] / 1e9) if p4 else "—")
            body.append(row)
    lines += [table(["model", "N", "1 device", "2", "4", "8", "received / device at 4"], body), "",
              "Each cell: prefill latency / memory per device (weights replicated, caches split). A device's memory "
              "above 80 GB does not fit an H100.", ""]
    try:
        lines += ["![prefill against devices](%s)" % rel(figure(points, out_dir)[0]), ""]
    except Exception as exc:  # a figure never takes the report down
        lines += ["(figure not drawn: %s)" % exc, ""]
    body, ratios, no_fit, link_s = [], [], [], 0.0
    for model, kv in (("transformer-7b", "multi-head KV (Llama-2-7B)"), ("transformer-7b-gqa", "8 KV heads")):
        for n, paper in PAPER_7B:
            p = points.get((model, n, 4))
            if not p:
                continue
            ratios.append(p["prefill_latency_s"] / paper)
            link_s = max(link_s, p.get("link_s", 0.0))
            fits = p["mem_per_device_bytes"] <= 80e9
            if not fits:
                no_fit.append("%s at %s (%.0f GB a card)" % (kv, _len(n), p["mem_per_device_bytes"] / 1e9))
            body.append(["7B, " + kv, _len(n), "%.0f s" % paper, "%.1f s" % p["prefill_latency_s"],
                         "%.0f%%" % (100 * p["prefill_latency_s"] / paper),
                         "%.0f GB%s" % (p["mem_per_device_bytes"] / 1e9, "" if fits else " (does not fit 80 GB)")])
    if body:
        lines += ["The paper's claim (introduction): four H100s prefill 450K tokens in about 110 s and 1M in about "
                  "380 s with a 7B Transformer. Beside it the projection for a Llama-2-7B shape (the paper names no "
                  "shape) with full and with grouped-query KV; *roofline / paper* is the fraction of the four "
                  "cards' rate the paper's time implies.", "",
                  table(["model", "N", "paper, 4 x H100", "projection, 4 x H100", "roofline / paper",
                         "memory / device"], body), "",
                  "What it implies: the paper's times sit at %.0f-%.0f%% of the sharded prefill's roofline, i.e. "
                  "its four cards ran at that fraction of their tensor-core rate (the link is not the limit: the "
                  "ring's bytes take at most %.2g s of link time, overlapped)%s." % (
                      100 * min(ratios), 100 * max(ratios), link_s,
                      "; and " + ", ".join(no_fit) + " does not fit four 80 GB cards at all, so the paper's 7B either "
                      "used grouped-query KV or kept the cache elsewhere" if no_fit else ""), ""]
    return lines
