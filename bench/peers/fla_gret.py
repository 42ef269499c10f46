"""flash-linear-attention (fla) as the gated-retention peer.

gRet is fla's simple_gla: a scalar log-decay per head and token, the state
S[k][v]; our k already carries D^-1/2, so fla runs with scale 1. Times
chunk_simple_gla (prefill, fp32 final state) and fused_recurrent_simple_gla
(one decode step from a state) at the shapes of bench_cuda_kernels
(gret_chunk, gret_decode). fla is not committed: carry its wheels (see the
README's GPU section); without it every row is `failed: fla not importable`.

  python3 bench/peers/fla_gret.py [--out FILE.csv] [--quick]
"""
import argparse
import sys

from peer_timing import Rows, Timer


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    timer, rows = Timer(torch), Rows(torch)
    shapes = [(1, 32768, 24, 128), (1, 131072, 24, 128), (1, 524288, 24, 128), (2, 16384, 16, 128),
              (1, 32768, 16, 256)]
    if args.quick:
        shapes = [(1, 32768, 24, 128), (2, 16384, 16, 128)]
    try:
        from fla.ops.simple_gla import chunk_simple_gla, fused_recurrent_simple_gla
    except Exception as e:  # noqa: BLE001
        for b, n, h, d in shapes:
            rows.add_failure("yoco-3b", n, b, "gret_chunk_fla", f"fla not importable: {e}")
        rows.save(args.out)
        return 0
    torch.manual_seed(0)
    for b, n, h, d in shapes:
        # The names bench_gret_chunk gives the same shapes, so the report pairs them.
        model = {(24, 128): "yoco-3b", (16, 128): "kernels-anchor"}.get((h, d), f"H{h} D{d}")
        phase = f"gret_chunk_fla:D{d}"
        try:
            q = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
            k = (torch.randn(b, n, h, d, device="cuda") * d ** -0.5).to(torch.bfloat16)
            v = torch.randn(b, n, h, d, device="cuda", dtype=torch.bfloat16)
            g = F.logsigmoid(torch.randn(b, n, h, device="cuda", dtype=torch.float32)) / 16
            s0 = torch.randn(b, h, d, d, device="cuda", dtype=torch.float32) * 0.1
            fn = lambda: chunk_simple_gla(q, k, v, g, scale=1.0, initial_state=s0, output_final_state=True)  # noqa: E731
            t = timer.time(fn, repeats=10)
            bytes_ = b * n * h * (3 * d * 2 + 4 + d * 2)
            flops = b * n * h * (4 * 64 * d + 4 * d * d)
            rows.add_timing(model, n, b, phase, t, bytes_, flops, "chunk 64, full blocks counted; scale 1")
            del q, k, v, g, s0
        except Exception as e:  # noqa: BLE001
            rows.add_failure(model, n, b, phase, e)
        torch.cuda.empty_cache()
    # One decode step: T = 1 from a state, for batch 1 and 8.
    for b, h, d in [(1, 24, 128), (8, 24, 128), (1, 16, 256), (8, 16, 256)]:
        phase = f"gret_decode_fla:D{d}"
        try:
            q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
            k = (torch.randn(b, 1, h, d, device="cuda") * d ** -0.5).to(torch.bfloat16)
            v = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
            g = F.logsigmoid(torch.randn(b, 1, h, device="cuda")) / 16
            s0 = torch.randn(b, h, d, d, device="cuda", dtype=torch.float32)
            fn = lambda: fused_recurrent_simple_gla(q, k, v, g, scale=1.0, initial_state=s0, output_final_state=True)  # noqa: E731
            model = "yoco-3b" if d == 128 else f"H{h} D{d}"
            t = timer.time(fn, repeats=50)
            rows.add_timing(model, 0, b, phase + " eager", t, b * h * 2 * d * d * 4, 0,
                            "eager launch from Python; fp32 state read + written counted")
            # The same step captured in a CUDA graph: the kernel without Python's launch overhead.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            t = timer.time(graph.replay, repeats=50)
            rows.add_timing(model, 0, b, phase + " graph", t, b * h * 2 * d * d * 4, 0,
                            "one step replayed from a CUDA graph; fp32 state read + written counted")
        except Exception as e:  # noqa: BLE001
            rows.add_failure("yoco-3b" if d == 128 else f"H{h} D{d}", 0, b, phase, e)
    rows.save(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
