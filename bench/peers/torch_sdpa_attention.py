"""PyTorch's scaled_dot_product_attention backends as the attention peers.

Times causal GQA prefill (one-shot and a chunk at an offset, bottom-right
aligned), sliding-window prefill through FlexAttention, and one-query decode
over a long cache, at the shapes of bench_cuda_kernels (flash_prefill,
flash_decode), for each SDPA backend that accepts the shape (flash, cuDNN,
memory-efficient). A backend that refuses a shape is a `failed` row naming why.

  python3 bench/peers/torch_sdpa_attention.py [--out FILE.csv] [--quick]
"""
import argparse
import sys

from peer_timing import Rows, Timer


def pairs(q0, sq, window=0):
    """Visible (query, key) pairs of a causal chunk [q0, q0+sq), optionally windowed."""
    total = 0
    if window == 0:
        return sq * q0 + sq * (sq + 1) // 2
    for i in range(q0, q0 + sq):
        total += min(i + 1, window)
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="")
    ap.add_argument("--quick", action="store_true", help="fewer shapes")
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001
        print(f"torch_sdpa_attention: PyTorch is not importable here: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("torch_sdpa_attention: no CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    timer, rows = Timer(torch), Rows(torch)
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    try:
        from torch.nn.attention.bias import causal_lower_right
    except Exception:  # noqa: BLE001
        causal_lower_right = None

    # Prefill: [B, S, H, D] storage as our kernels, viewed as [B, H, S, D].
    prefill = [(4096, 0, 128), (8192, 0, 128), (16384, 0, 128), (32768, 0, 128), (65536, 0, 128),
               (131072, 0, 128), (32768, 98304, 128), (16384, 0, 64), (16384, 0, 256)]
    if args.quick:
        prefill = [(8192, 0, 128), (32768, 0, 128)]
    H, Hkv, B = 24, 8, 1
    for sq, q0, D in prefill:
        sk = q0 + sq
        q = torch.randn(B, sq, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(B, sk, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.randn(B, sk, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        flops = 4.0 * B * H * D * pairs(q0, sq)
        bytes_ = 2.0 * B * D * (2 * sq * H + 2 * sk * Hkv)
        variant = f"D{D}" + (f" q0={q0}" if q0 else "")
        for name, be in backends:
            phase = f"attn_prefill_torch_{name}:{variant}"
            try:
                # The memory-efficient backend has no GQA path: it gets K/V repeated to H heads.
                repeat = name == "efficient"
                if q0 == 0 and not repeat:
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: E731
                elif q0 == 0:
                    kk, vv = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
                    fn = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True)  # noqa: E731
                else:
                    if causal_lower_right is None:
                        raise RuntimeError("causal_lower_right is not available in this PyTorch")
                    bias = causal_lower_right(sq, sk)
                    kk, vv = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
                    fn = lambda: F.scaled_dot_product_attention(q, kk, vv, attn_mask=bias)  # noqa: E731
                with sdpa_kernel([be]):
                    t = timer.time(fn, repeats=10)
                rows.add_timing("transformer-3b", sk, B, phase, t, bytes_, flops,
                                "GQA 24/8" + (", K/V repeated to 24 heads" if (q0 or repeat) else "")
                                + (", bottom-right causal bias" if q0 else ""))
            except Exception as e:  # noqa: BLE001
                rows.add_failure("transformer-3b", sk, B, phase, e)
            kk = vv = fn = None  # noqa: F841  (free the repeated K/V before the next backend)
            torch.cuda.empty_cache()
        del q, k, v

    # Sliding-window prefill (yoco-swa self-decoder: 24 heads, no GQA, W 1024) through FlexAttention.
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        W, S, D = 1024, 32768, 128
        q = torch.randn(1, 24, S, D, device="cuda", dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        mask = create_block_mask(lambda b, h, qi, ki: (ki <= qi) & (ki > qi - W), None, None, S, S)
        flex = torch.compile(flex_attention)
        t = timer.time(lambda: flex(q, k, v, block_mask=mask), repeats=10)
        rows.add_timing("yoco-swa-3b", S, 1, "attn_prefill_torch_flex:D128 W1024", t,
                        2.0 * D * 4 * S * 24, 4.0 * 24 * D * pairs(0, S, W), "torch.compile(flex_attention)")
        del q, k, v
    except Exception as e:  # noqa: BLE001
        rows.add_failure("yoco-swa-3b", 32768, 1, "attn_prefill_torch_flex:D128 W1024", e)

    # Decode: one query per sequence over N keys.
    decode = [(32768, 1), (131072, 1), (524288, 1), (1048576, 1), (131072, 8)]
    if args.quick:
        decode = [(131072, 1)]
    D = 128
    for n, b in decode:
        q = torch.randn(b, 1, H, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(b, n, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        v = torch.randn(b, n, Hkv, D, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
        bytes_ = 2.0 * b * n * 2 * Hkv * D
        flops = 4.0 * b * H * n * D
        for name, be in backends:
            phase = f"attn_decode_torch_{name}:D{D}"
            try:
                if name == "efficient":  # no GQA path: K/V repeated to H heads (more bytes than counted)
                    kk, vv = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)
                    fn = lambda: F.scaled_dot_product_attention(q, kk, vv)  # noqa: E731
                else:
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # noqa: E731
                with sdpa_kernel([be]):
                    t = timer.time(fn, repeats=20)
                rows.add_timing("transformer-3b", n, b, phase, t, bytes_, flops,
                                "GQA 24/8, one query" + (", K/V repeated to 24 heads" if name == "efficient" else ""))
            except Exception as e:  # noqa: BLE001
                rows.add_failure("transformer-3b", n, b, phase, e)
            kk = vv = fn = None  # noqa: F841
        del q, k, v
        torch.cuda.empty_cache()
    rows.save(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
