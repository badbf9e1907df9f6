"""An independent MiniLM reference: BERT in numpy (float64), mean pooling, L2 normalisation.

Run with numpy, safetensors and tokenizers installed (no PyTorch):
    python minilm_numpy.py MODEL_DIR TEXT...
It prints each text's token ids and the first 8 values of its embedding; the values pinned in
`tests/model.rs` came from this script. The tokenizer here is the `tokenizers` Python wheel with
its default (onig) build, so the ids also check the crate's pure-Rust build.
"""
import json
import math
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

d = sys.argv[1]
cfg = json.load(open(f"{d}/config.json"))
w = {k: v.astype(np.float64) for k, v in load_file(f"{d}/model.safetensors").items() if v.dtype == np.float32}
tok = Tokenizer.from_file(f"{d}/tokenizer.json")
tok.no_padding()
tok.enable_truncation(512)
H, NH, EPS = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
erf = np.vectorize(math.erf)


def ln(x, p):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + EPS) * w[p + ".weight"] + w[p + ".bias"]


def lin(x, p):
    return x @ w[p + ".weight"].T + w[p + ".bias"]


for text in sys.argv[2:]:
    ids = tok.encode(text).ids
    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, "embeddings.LayerNorm")
    hd = H // NH
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (lin(x, f"{p}.attention.self.{n_}").reshape(n, NH, hd).transpose(1, 0, 2) for n_ in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, H)
        a = ln(lin(ctx, f"{p}.attention.output.dense") + x, f"{p}.attention.output.LayerNorm")
        h = lin(a, f"{p}.intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = ln(lin(h, f"{p}.output.dense") + a, f"{p}.output.LayerNorm")
    e = x.mean(0)
    e /= np.linalg.norm(e)
    print(json.dumps({"text": text, "ids": ids, "head": [round(float(v), 7) for v in e[:8]]}))
