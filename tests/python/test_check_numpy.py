"""`yoco check` judged by a second, independent implementation.

The check's own tests compute their expected outputs with the suite's C++ reference, the same code
the check compares against: a convention both got wrong (the causal offset, the GQA head map, where
the decay applies) would pass them. Here numpy writes the inputs and computes the outputs from the
conventions as `yoco check KIND --help` states them; the right outputs must pass (exit 0), and each
plausible mistake of a kernel must fail (exit 1). YOCO_BIN names the yoco binary (ctest sets it).
"""
import os
import subprocess
import tempfile
import unittest

import numpy as np

YOCO = os.environ.get("YOCO_BIN", "yoco")


def save_folder(folder, tensors):
    os.makedirs(folder, exist_ok=True)
    for name, a in tensors.items():
        np.save(os.path.join(folder, name + ".npy"), np.ascontiguousarray(a))


def check(kind, inputs, outputs, *options):
    r = subprocess.run([YOCO, "check", kind, inputs, outputs, *options], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def attention(q, k, v, causal=True, offset=None, window=None, scale=None, group_of=None):
    """Softmax attention over [B, S, H, D] tensors, fp64: the conventions of `yoco check attention`."""
    B, Sq, Hq, D = q.shape
    Sk, Hkv = k.shape[1], k.shape[2]
    offset = Sk - Sq if offset is None else offset
    scale = D ** -0.5 if scale is None else scale
    group_of = group_of or (lambda h: h // (Hq // Hkv))
    o = np.zeros(q.shape)
    i = np.arange(Sq)[:, None] + offset
    j = np.arange(Sk)[None, :]
    seen = j <= i if causal else np.ones((Sq, Sk), bool)
    if window:
        seen &= j > i - window
    for b in range(B):
        for h in range(Hq):
            kh = group_of(h)
            s = np.where(seen, (q[b, :, h] @ k[b, :, kh].T) * scale, -np.inf)
            p = np.exp(s - s.max(1, keepdims=True))
            o[b, :, h] = (p / p.sum(1, keepdims=True)) @ v[b, :, kh]
    return o


def gret(q, k, v, g, s0, decay_after=False, scale=None, transposed=False):
    """Gated retention over [B, T, H, D] tensors, states [K, V], fp64, one token at a time."""
    B, T, H, D = q.shape
    scale = D ** -0.5 if scale is None else scale
    o, final = np.zeros(q.shape), np.zeros(s0.shape)
    for b in range(B):
        for h in range(H):
            S = s0[b, h].astype(np.float64)
            for t in range(T):
                kv = np.outer(k[b, t, h], v[b, t, h])
                S = np.exp(g[b, t, h]) * (S + kv) if decay_after else np.exp(g[b, t, h]) * S + kv
                o[b, t, h] = scale * (q[b, t, h] @ (S.T if transposed else S))
            final[b, h] = S
    return o, final


class CheckAgainstNumpy(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.rng = np.random.default_rng(7)
        self.said = ""

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def judge(self, kind, tensors, outputs, *options):
        """Exit status of the check of each output set: {name: status}. What the check printed is kept
        for the failure message (self.said)."""
        save_folder(self.path("in"), tensors)
        status = {}
        for name, out in outputs.items():
            save_folder(self.path(name), out)
            code, text = check(kind, self.path("in"), self.path(name), *options)
            self.assertIn(code, (0, 1), name + ": " + text)
            status[name] = code
            self.said += "\n--- " + name + " (exit %d)\n" % code + text
        return status

    def assertStatus(self, status, expected):
        self.assertEqual(status, expected, self.said)

    def test_attention_right_passes_and_each_mistake_fails(self):
        f32 = np.float32
        q = self.rng.standard_normal((2, 48, 8, 32)).astype(f32)
        k = self.rng.standard_normal((2, 160, 2, 32)).astype(f32)
        v = self.rng.standard_normal((2, 160, 2, 32)).astype(f32)
        x = {"q": q, "k": k, "v": v}
        args = [a.astype(np.float64) for a in (q, k, v)]
        one = lambda **kw: {"o": attention(*args, **kw).astype(f32)}
        status = self.judge("attention", x, {
            "right": one(),
            "no causal mask": one(causal=False),
            "causal offset off by one": one(offset=160 - 48 - 1),
            "GQA heads interleaved": one(group_of=lambda h: h % 2),
            "scale 1% off": one(scale=1.01 * 32 ** -0.5),
        })
        self.assertStatus(status, {"right": 0, "no causal mask": 1, "causal offset off by one": 1,
                                  "GQA heads interleaved": 1, "scale 1% off": 1})
        status = self.judge("attention", x, {"window 16": one(window=16), "window 17": one(window=17)},
                            "--window", "16")
        self.assertStatus(status, {"window 16": 0, "window 17": 1})

    def test_attention_in_sdpa_layout_without_a_mask(self):
        f32 = np.float32
        q = self.rng.standard_normal((1, 20, 4, 16)).astype(f32)
        k = self.rng.standard_normal((1, 50, 4, 16)).astype(f32)
        v = self.rng.standard_normal((1, 50, 4, 16)).astype(f32)
        o = attention(*(a.astype(np.float64) for a in (q, k, v)), causal=False).astype(f32)
        to_bhsd = lambda a: a.transpose(0, 2, 1, 3)
        status = self.judge("attention", {"q": to_bhsd(q), "k": to_bhsd(k), "v": to_bhsd(v)},
                            {"right": {"o": to_bhsd(o)}, "left in bshd": {"o": o.reshape(1, 4, 20, 16)}},
                            "--layout", "bhsd", "--mask", "none")
        self.assertStatus(status, {"right": 0, "left in bshd": 1})

    def test_gret_right_passes_and_each_mistake_fails(self):
        f32 = np.float32
        B, T, H, D = 2, 150, 3, 16
        q, k, v = (self.rng.standard_normal((B, T, H, D)).astype(f32) for _ in range(3))
        g = (np.log(1 / (1 + np.exp(-self.rng.standard_normal((B, T, H))))) / 16).astype(f32)  # logsigmoid / 16
        s0 = self.rng.standard_normal((B, H, D, D)).astype(f32)
        x = {"q": q, "k": k, "v": v, "g": g, "initial_state": s0}
        args = [a.astype(np.float64) for a in (q, k, v, g, s0)]

        def one(**kw):
            o, final = gret(*args, **kw)
            return {"o": o.astype(f32), "final_state": final.astype(f32)}

        status = self.judge("gret", x, {
            "right": one(),
            "decay after the update": one(decay_after=True),
            "q not scaled": one(scale=1.0),
            "state read as [V, K]": one(transposed=True),
        })
        self.assertStatus(status, {"right": 0, "decay after the update": 1, "q not scaled": 1,
                                  "state read as [V, K]": 1})


if __name__ == "__main__":
    unittest.main()
