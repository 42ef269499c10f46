"""flash-linear-attention's chunk_simple_gla judged by `yoco check gret`.

The fla timing peer (fla_gret.py) says how fast fla is; this says whether it is
right at the lengths where offsets wrap (fla #1080: int32 past 2^31 elements,
near 1M tokens x 24 heads x 128). For each length: seeded inputs on the GPU in
fla's conventions ([B, T, H, D], q scaled by D^-1/2, g = logsigmoid(x) / 16,
bf16 q, k, v, an fp32 initial state), fla's o and final state, both written as
safetensors, and `yoco check gret` over them against the fp64 reference. Result
rows (phase gret_chunk_fla:o / :final_state, metrics rms_error_ratio,
within_tolerance, ...) go beside the timing rows. With --ours, our own chunk
kernel (gret_chunk_on_file) runs on the same inputs and its outputs go through
the same command (phase gret_chunk_ours:...; our kernel applies no scale, so
it is judged with --scale none). The files are removed after each length.

  python3 bench/peers/fla_gret_check.py --yoco build/cuda/bin/yoco [--ours build/cuda/bin/gret_chunk_on_file]
                                        [--lengths 32K,128K,512K,1M] [--workdir DIR] [--out FILE.csv]
"""
import argparse
import csv
import io
import json
import os
import struct
import subprocess
import sys
import time

from peer_timing import Rows

DTYPES = {"torch.bfloat16": "BF16", "torch.float32": "F32", "torch.float16": "F16", "torch.int64": "I64"}


def save_safetensors(tensors, path):
    """The safetensors layout (8-byte header length, JSON header, raw bytes),
    written here so that the step needs torch only; safetensors.torch.save_file
    writes the same bytes where it is installed."""
    try:
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in tensors.items()}, path)
        return
    except ImportError:
        pass
    import torch
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": DTYPES[str(t.dtype)], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def judge(rows, yoco, model, n, phase, check_args, note=""):
    """`yoco check gret CHECK_ARGS --format csv`, its rows re-labelled `phase:tensor`."""
    t0 = time.monotonic()
    res = subprocess.run([yoco, "check", "gret", *check_args, "--format", "csv"], capture_output=True, text=True)
    if res.returncode not in (0, 1):
        raise RuntimeError(f"yoco check exited {res.returncode}: {res.stderr.strip()[:300]}")
    for r in csv.DictReader(io.StringIO(res.stdout)):
        tensor = r["phase"].split(":", 1)[1]
        rows.add(model, n, 1, f"{phase}:{tensor}", r["metric"], float(r["value"]), r["unit"], "exact",
                 notes=f"yoco check gret vs the fp64 reference; {r['notes']}" + (f"; {note}" if note else ""))
    print(f"{phase} T={n}: yoco check exit {res.returncode} ({'PASS' if res.returncode == 0 else 'FAIL'}), "
          f"{time.monotonic() - t0:.0f} s", file=sys.stderr)


def parse_length(s):
    s = s.strip().upper()
    return int(s[:-1]) * (1024 if s.endswith("K") else 1048576) if s[-1] in "KM" else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--yoco", default="build/cuda/bin/yoco")
    ap.add_argument("--ours", default="", help="gret_chunk_on_file: also judge our chunk kernel")
    ap.add_argument("--lengths", default="32K,128K,512K,1M")
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--workdir", default="/tmp/yoco-fla-check")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F
    rows = Rows(torch)
    lengths = [parse_length(x) for x in args.lengths.split(",")]
    h, d = args.heads, args.head_dim
    model = "yoco-3b" if (h, d) == (24, 128) else f"H{h} D{d}"
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except Exception as e:  # noqa: BLE001
        for n in lengths:
            rows.add_failure(model, n, 1, "gret_chunk_fla", f"fla not importable: {e}")
        rows.save(args.out)
        return 0
    os.makedirs(args.workdir, exist_ok=True)
    for n in lengths:
        inp, outp = os.path.join(args.workdir, "in.safetensors"), os.path.join(args.workdir, "out.safetensors")
        t_len = time.monotonic()
        try:
            gen = torch.Generator(device="cuda").manual_seed(n)
            q = torch.randn(1, n, h, d, device="cuda", generator=gen).to(torch.bfloat16)
            k = torch.randn(1, n, h, d, device="cuda", generator=gen).to(torch.bfloat16)
            v = torch.randn(1, n, h, d, device="cuda", generator=gen).to(torch.bfloat16)
            g = F.logsigmoid(torch.randn(1, n, h, device="cuda", generator=gen)) / 16
            s0 = torch.randn(1, h, d, d, device="cuda", generator=gen) * 0.1
            o, st = chunk_simple_gla(q, k, v, g, initial_state=s0, output_final_state=True)
            torch.cuda.synchronize()
            save_safetensors({"q": q, "k": k, "v": v, "g": g, "initial_state": s0}, inp)
            save_safetensors({"o": o, "final_state": st.float()}, outp)
            print(f"gret_chunk_fla T={n}: inputs and outputs written, {time.monotonic() - t_len:.0f} s", file=sys.stderr)
            del q, k, v, g, s0, o, st
            torch.cuda.empty_cache()
            judge(rows, args.yoco, model, n, "gret_chunk_fla", [inp, outp])
            rows.save(args.out)  # each judgement kept at once: a step cut by its timeout loses only the one running
            if args.ours:
                ours = os.path.join(args.workdir, "ours.safetensors")
                try:
                    t0 = time.monotonic()
                    run = subprocess.run([args.ours, inp, ours], capture_output=True, text=True)
                    print(f"gret_chunk_on_file T={n}: exit {run.returncode}, {time.monotonic() - t0:.0f} s",
                          file=sys.stderr)
                    if run.returncode != 0:
                        raise RuntimeError(f"gret_chunk_on_file exited {run.returncode}: {run.stderr.strip()[:300]}")
                    judge(rows, args.yoco, model, n, "gret_chunk_ours", [inp, ours, "--scale", "none"],
                          note=run.stdout.strip())
                except Exception as e:  # noqa: BLE001
                    rows.add_failure(model, n, 1, "gret_chunk_ours:o", e)
                finally:
                    if os.path.exists(ours):
                        os.remove(ours)
                    rows.save(args.out)
        except Exception as e:  # noqa: BLE001
            rows.add_failure(model, n, 1, "gret_chunk_fla:o", e)
        finally:
            for p in (inp, outp):
                if os.path.exists(p):
                    os.remove(p)
            torch.cuda.empty_cache()
    rows.save(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
