#!/usr/bin/env python3
"""oracle-forward.py -- an independent forward pass of the decoder
families hearth runs, in NumPy (float64), from the published equations,
with its own GGUF reader: the test oracle for the architectures.

    oracle-forward.py [--tol T] [--n-ctx N] [--mtp MTP.f32] MODEL.gguf LOGITS.f32 TOKEN...
    oracle-forward.py --embed [--pooling mean|cls|last] [--no-normalize] [--min-cos C]
                      MODEL.gguf VECTOR.tsv TOKEN...

reads MODEL (F32 and F16 tensors only), computes the logits of every
position of the token sequence with explicit causal (and sliding-window)
masks and a full score matrix -- none of the engine's blocking, online
softmax or caches -- and compares them with LOGITS (float32, n_tokens x
n_vocab, row-major, as tests/dump-logits writes them).  Exit 0 when every
logit agrees within the tolerance, 1 otherwise, 77 when NumPy is missing.
With --embed, VECTOR.tsv holds hearth embed's vector of the token sequence
(as text), compared by cosine similarity (at least C, default 0.99999)
with the oracle's: the output-normed hidden states pooled as the file's
ARCH.pooling_type (or --pooling) says, scaled to unit length.
With --mtp, MTP.f32 holds the logits of the model's first prediction
("NextN") layer over the same tokens (tests/dump-logits -m), compared
with nextn_logits below.

The equations (DESIGN.md, "Architectures", gives the sources):
  llama/qwen2: x += Wo attn(rope(Wq n), rope(Wk n), Wv n); x += Wd(silu(Wg m) * Wu m)
  bert/nomic-bert (--embed only): forward_encoder, post-norm encoders with
               attention over every position
  qwen3:       as qwen2 without biases, q and k heads RMS-normed before RoPE
  gemma2/3:    x = embd * sqrt(d); post-norms on the attention and FFN outputs;
               GELU (tanh) gate; soft-capped scores (gemma2) and logits;
               sliding-window layers; gemma3: q/k head norms, local RoPE base
  phi3:        fused qkv and gate/up rows; LongRoPE factors and attention factor
  experts:     (llama with ffn_gate_inp: Mixtral; qwen2moe; qwen3moe) in place of
               the feed-forward, p = softmax(W_router m) over all experts, the k
               highest (ties to the lower index) weight their experts' SwiGLU:
               x += sum_e w_e Wd_e(silu(Wg_e m) * Wu_e m), w = p renormalised
               over the k (Mixtral, qwen3moe, qwen35moe, qwen3next; by a sum of at
               least 2^-14) or as it is (qwen2moe), plus for qwen2moe, qwen35moe
               and qwen3next sigmoid(g . m) times the shared expert
  gpt-oss:     forward_gptoss: biased attention with a sink logit per head,
               sliding windows on the even layers, YaRN RoPE; experts chosen by
               the top-k router logits, softmax over those, clamped SwiGLU with
               biases
  qwen35:      a hybrid stack (forward_qwen35): layer i is Gated DeltaNet linear
               attention unless (i + 1) % full_attention_interval == 0 (or as
               attention.recurrent_layers says); every layer is
               x += mixer(rms(x; attn_norm)); x += Wd(silu(Wg f) * Wu f) with
               f = rms(x; post_attention_norm).  Full attention: attn_q gives per
               head [q | gate], q/k head norms, RoPE (NeoX pairs) on the first
               rope.dimension_count dims with the multi-section positions of a
               text token, output * sigmoid(gate).  Linear attention (the gated
               delta rule of Yang, Kautz and Hatamizadeh, "Gated Delta Networks",
               2024, with S transposed): causal depthwise convolution over
               the [q | k | v] projection, SiLU, L2-normed q and k, value head h
               reading key head h mod n_k, beta = sigmoid(W_beta a),
               g = softplus(W_alpha a + dt_bias) * ssm_a, per token
               S = exp(g) S; S += k (beta (v - S^T k))^T; o = S^T q / sqrt(d_k),
               then rms(o; ssm_norm) * silu(W_gate a) and ssm_out
  qwen35moe:   qwen35 with the experts (above) in place of every feed-forward
  deepseek2:   forward_deepseek2: multi-head latent attention in its decompressed
               form (DeepSeek-V2 report, section 2.1): c = rms(W_DKV n), per head
               k_h = [W_UK,h c | rope(W_KR n)], v_h = W_UV,h c, q_h = [q_c | rope(q_r)]
               from W_Q n or W_UQ rms(W_DQ n); scale 1/sqrt(d_c + d_r) times
               (0.1 mscale_all_dim ln(factor) + 1)^2 under YaRN (its ramp's ends
               from yarn_beta_fast and yarn_beta_slow, default 32 and 1); adjacent-pair RoPE;
               the first leading_dense_block_count layers a SwiGLU, then experts:
               softmax or sigmoid scores, the choice by score + exp_probs_b within
               the best groups (a group's best score for softmax, its two best
               summed for sigmoid), the weights the chosen scores, renormalised
               where expert_weights_norm says, times expert_weights_scale, plus the
               shared experts
  glm4moe:     forward_glm4moe (GLM-4.5 report; transformers' Glm4MoeDecoderLayer):
               x += Wo attn(q, k, v) with q, k, v = W n + b (the biases the file
               has), q and k heads RMS-normed where attn_q_norm is there, NeoX
               RoPE on the first rope.dimension_count dims of each head, scale
               1/sqrt(head_dim); f = rms(x; post_attention_norm); the first
               leading_dense_block_count layers x += Wd(silu(Wg f) * Wu f), the
               others DeepSeek's experts (above; sigmoid scores where the file
               does not say) plus the shared experts
  NextN:       nextn_logits: the first prediction layer (index block_count -
               nextn_predict_layers), row i fed W_eh [rms(e_i; enorm) |
               rms(h_{i-1}; hnorm)] with e_i token i's embedding and h_{i-1} the
               trunk's output-normed hidden state of row i - 1 (zeros for row
               0), the layer over the rows as one sequence, then rms(.;
               shared_head_norm or output_norm) times shared_head_head or the
               output layer (glm4moe, and the Qwen3.5 families)
  qwen3next:   qwen35moe with value head h reading key head h / (n_v / n_k)
               (grouped order), beta's and alpha's inputs from one ssm_ba
               matrix (per key head, its r = n_v / n_k betas, then its r
               alphas), and plain NeoX RoPE on the first rope.dimension_count
               dims (no sections)
"""
import math
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.stderr.write("oracle-forward: NumPy is not installed\n")
    sys.exit(77)

GGML_F32, GGML_F16 = 0, 1


class Gguf:
    """The metadata and the F32/F16 tensors of a GGUF file (version 2 or 3)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.data = f.read()
        self.pos = 0
        if self.data[:4] != b"GGUF":
            raise ValueError(path + ": not a GGUF file")
        self.pos = 4
        version = self.u32()
        if version not in (2, 3):
            raise ValueError("GGUF version %d" % version)
        n_tensors, n_kv = self.u64(), self.u64()
        self.kv = {}
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.value(self.u32())
        infos = []
        for _ in range(n_tensors):
            name = self.string()
            n_dims = self.u32()
            ne = [self.u64() for _ in range(n_dims)]
            ttype = self.u32()
            offset = self.u64()
            infos.append((name, ne, ttype, offset))
        align = self.kv.get("general.alignment", 32)
        start = (self.pos + align - 1) // align * align
        self.tensors = {}
        for name, ne, ttype, offset in infos:
            count = 1
            for n in ne:
                count *= n
            if ttype == GGML_F32:
                arr = np.frombuffer(self.data, np.float32, count, start + offset)
            elif ttype == GGML_F16:
                arr = np.frombuffer(self.data, np.float16, count, start + offset)
            else:
                arr = None  # quantized: not read by the oracle
            if arr is not None:
                # ne[0] is the fastest-varying dimension: rows of ne[0]
                arr = arr.astype(np.float64).reshape(list(reversed(ne)) if len(ne) > 1 else [ne[0]])
            self.tensors[name] = arr

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize("<" + fmt)
        return v

    def u32(self):
        return self.take("I")

    def u64(self):
        return self.take("Q")

    def string(self):
        n = self.u64()
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def value(self, t):
        fmts = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in fmts:
            return self.take(fmts[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.u32(), self.u64()
            return [self.value(et) for _ in range(n)]
        raise ValueError("GGUF value type %d" % t)

    def tensor(self, name):
        if name not in self.tensors:
            raise KeyError("tensor %s is missing" % name)
        t = self.tensors[name]
        if t is None:
            raise ValueError("tensor %s is quantized; the oracle reads F32 and F16" % name)
        return t


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate(x, c, s, n_dims, neox):
    """x with its first n_dims elements of each head turned by the angles
    whose cosines and sines (times any magnitude) are c and s: the halves
    paired (neox) or neighbouring elements."""
    half = n_dims // 2
    y = x.copy()
    if neox:
        a, b = x[..., :half], x[..., half:n_dims]
        y[..., :half] = a * c - b * s
        y[..., half:n_dims] = a * s + b * c
    else:
        a, b = x[..., 0:n_dims:2], x[..., 1:n_dims:2]
        y[..., 0:n_dims:2] = a * c - b * s
        y[..., 1:n_dims:2] = a * s + b * c
    return y


def rope(x, pos, n_dims, base, scale, neox, factors=None, mscale=1.0, pair_pos=None):
    """x: tokens x heads x head_dim, rotated by RoPE (RoFormer eq. 34);
    pair_pos: per rotated pair, the multiple of the position it turns by
    (multi-section RoPE's streams; None: 1 for every pair)."""
    half = n_dims // 2
    i = np.arange(half, dtype=np.float64)
    inv = base ** (-2.0 * i / n_dims)
    if pair_pos is not None:
        inv = inv * pair_pos
    theta = np.outer(pos * scale, inv)  # tokens x half
    if factors is not None:
        theta = theta / factors
    c, s = np.cos(theta)[:, None, :] * mscale, np.sin(theta)[:, None, :] * mscale
    return rotate(x, c, s, n_dims, neox)


def attention(q, k, v, scale, window, softcap):
    """Full-matrix causal attention: q and k tokens x heads x hd, v tokens x
    kv_heads x hv (values may be narrower or wider than keys); key j is
    visible to query i when j <= i and (no window or i - j < window)."""
    n, n_head, hd = q.shape
    group = n_head // k.shape[1]
    i = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    visible = j <= i
    if window:
        visible &= (i - j) < window
    out = np.empty((n, n_head, v.shape[2]))
    for h in range(n_head):
        s = (q[:, h, :] @ k[:, h // group, :].T) * scale
        if softcap:
            s = softcap * np.tanh(s / softcap)
        s = np.where(visible, s, -np.inf)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        out[:, h, :] = p @ v[:, h // group, :]
    return out


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def arch_keys(g):
    """The architecture's name and a reader of its metadata keys."""
    arch = g.kv["general.architecture"]

    def key(suffix, default=None):
        v = g.kv.get(arch + "." + suffix, default)
        if v is None:
            raise KeyError("metadata %s.%s is missing" % (arch, suffix))
        return v
    return arch, key


def output_logits(g, x, eps):
    """The logits of the last layer's output rows x: the final norm, then
    output.weight or, when there is none, the tied embeddings."""
    x = rmsnorm(x, g.tensor("output_norm.weight"), eps)
    out = g.tensors.get("output.weight")
    if out is None:
        out = g.tensor("token_embd.weight")
    return x @ out.T


def layer_readers(g, il):
    """Readers of layer il's tensors by their names after "blk.IL.": the
    tensor, and whether the file has it."""
    def t(name):
        return g.tensor("blk.%d.%s" % (il, name))

    def has(name):
        return ("blk.%d.%s" % (il, name)) in g.tensors
    return t, has


def qkv_heads(t, has, h, n_head, n_head_kv, hd, eps):
    """The query, key and value heads (tokens x heads x hd) of the rows h:
    from one fused attn_qkv (q, k, v rows in that order) or attn_q/k/v,
    plus the biases the layer has, the query and key heads RMS-normed
    where it has attn_q_norm and attn_k_norm."""
    n = h.shape[0]
    if has("attn_qkv.weight"):
        qkv = h @ t("attn_qkv.weight").T
        q = qkv[:, :n_head * hd]
        k = qkv[:, n_head * hd:(n_head + n_head_kv) * hd]
        v = qkv[:, (n_head + n_head_kv) * hd:]
    else:
        q, k, v = h @ t("attn_q.weight").T, h @ t("attn_k.weight").T, h @ t("attn_v.weight").T
    if has("attn_q.bias"):
        q = q + t("attn_q.bias")
    if has("attn_k.bias"):
        k = k + t("attn_k.bias")
    if has("attn_v.bias"):
        v = v + t("attn_v.bias")
    q = q.reshape(n, n_head, hd)
    k = k.reshape(n, n_head_kv, hd)
    v = v.reshape(n, n_head_kv, hd)
    if has("attn_q_norm.weight"):
        q = rmsnorm(q, t("attn_q_norm.weight"), eps)
        k = rmsnorm(k, t("attn_k_norm.weight"), eps)
    return q, k, v


def forward(g, tokens):
    """The logits of every position, and those of the first prediction
    layer where the family has one and the file holds it (else None)."""
    arch, _ = arch_keys(g)
    if arch in ("qwen35", "qwen35moe", "qwen3next"):
        return forward_qwen35(g, tokens)
    if arch == "glm4moe":
        return forward_glm4moe(g, tokens)
    if arch == "gpt-oss":
        return forward_gptoss(g, tokens), None
    if arch == "deepseek2":
        return forward_deepseek2(g, tokens), None
    return forward_plain(g, tokens), None


def forward_plain(g, tokens, hidden=False):
    """llama, qwen2, qwen3, gemma2/3, phi3 and the first mixtures: the
    logits of every position, or with hidden their output-normed hidden
    states (the output layer's input)."""
    arch, key = arch_keys(g)
    n_embd = key("embedding_length")
    n_layer = key("block_count")
    n_head = key("attention.head_count")
    n_head_kv = key("attention.head_count_kv", n_head)
    hd = key("attention.key_length", n_embd // n_head)
    eps = key("attention.layer_norm_rms_epsilon", 1e-5)
    n_rot = key("rope.dimension_count", hd)
    base = key("rope.freq_base", 10000.0)
    scale = 1.0
    if g.kv.get(arch + ".rope.scaling.type", "none") == "linear":
        scale = 1.0 / key("rope.scaling.factor", 1.0)
    neox = arch != "llama"
    gemma = arch in ("gemma2", "gemma3")
    n_ctx_train = key("context_length")
    window = g.kv.get(arch + ".attention.sliding_window", 0)
    if arch == "gemma2":
        window = window or 4096
        period = g.kv.get(arch + ".attention.sliding_window_pattern", 2)
    elif arch == "gemma3":
        period = g.kv.get(arch + ".attention.sliding_window_pattern", 6)
    else:
        period = 1  # phi3: every layer
    attn_cap = key("attn_logit_softcapping", 50.0) if arch == "gemma2" else 0.0
    final_cap = g.kv.get(arch + ".final_logit_softcapping", 30.0 if arch == "gemma2" else 0.0)
    base_swa = g.kv.get(arch + ".rope.freq_base_swa", 10000.0 if arch == "gemma3" else base)
    q_scale = 1.0 / math.sqrt(hd)
    if gemma and ((arch == "gemma2" and n_layer == 46) or (arch == "gemma3" and n_layer == 62)):
        q_scale = 1.0 / math.sqrt(n_embd / n_head)  # the 27B models' query_pre_attn_scalar
    factors, mscale = None, 1.0
    if arch == "phi3" and "rope_factors_long.weight" in g.tensors:
        n_ctx_orig = key("rope.scaling.original_context_length", n_ctx_train)
        use_long = N_CTX > n_ctx_orig
        factors = g.tensor("rope_factors_long.weight" if use_long else "rope_factors_short.weight")
        mscale = key("rope.scaling.attn_factor", 1.0)

    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = g.tensor("token_embd.weight")[tokens].copy()
    if gemma:
        x *= math.sqrt(n_embd)
    for il in range(n_layer):
        t, has = layer_readers(g, il)
        is_swa = window > 0 and (period <= 1 or il % period < period - 1)
        h = rmsnorm(x, t("attn_norm.weight"), eps)
        q, k, v = qkv_heads(t, has, h, n_head, n_head_kv, hd, eps)
        b, sc = base, scale
        if gemma and is_swa:
            b, sc = base_swa, (1.0 if arch == "gemma3" else scale)
        q = rope(q, pos, n_rot, b, sc, neox, factors, mscale)
        k = rope(k, pos, n_rot, b, sc, neox, factors, mscale)
        a = attention(q, k, v, q_scale, window if is_swa else 0, attn_cap).reshape(n, n_head * hd)
        a = a @ t("attn_output.weight").T
        if has("post_attention_norm.weight"):
            a = rmsnorm(a, t("post_attention_norm.weight"), eps)
        x = x + a
        m = rmsnorm(x, t("ffn_norm.weight"), eps)
        if has("ffn_gate_inp.weight"):
            x = x + experts(g, arch, il, m)
            continue
        if has("ffn_gate.weight"):
            gate, up = m @ t("ffn_gate.weight").T, m @ t("ffn_up.weight").T
        else:
            gu = m @ t("ffn_up.weight").T
            gate, up = gu[:, :gu.shape[1] // 2], gu[:, gu.shape[1] // 2:]
        f = (gelu_tanh(gate) if gemma else silu(gate)) * up
        f = f @ t("ffn_down.weight").T
        if has("post_ffw_norm.weight"):
            f = rmsnorm(f, t("post_ffw_norm.weight"), eps)
        x = x + f
    if hidden:
        return rmsnorm(x, g.tensor("output_norm.weight"), eps)
    logits = output_logits(g, x, eps)
    if final_cap:
        logits = final_cap * np.tanh(logits / final_cap)
    return logits


def mix_experts(m, route, expert):
    """The rows of m through a mixture of experts: route[r, e] is row r's
    weight for expert e (zero where e was not chosen) and expert(e, rows)
    that expert's output for a block of rows."""
    out = np.zeros_like(m)
    for e in np.nonzero(route.any(axis=0))[0]:
        rows = np.nonzero(route[:, e])[0]
        out[rows] += route[rows, e][:, None] * expert(e, m[rows])
    return out


def swiglu_experts(t):
    """expert(e, rows) for the SwiGLU experts of a layer's tensors t."""
    gate, up, down = t("ffn_gate_exps.weight"), t("ffn_up_exps.weight"), t("ffn_down_exps.weight")
    return lambda e, rows: (silu(rows @ gate[e].T) * (rows @ up[e].T)) @ down[e].T


def experts(g, arch, il, m):
    """The mixture-of-experts feed-forward of layer il for the rows of m."""
    t, _ = layer_readers(g, il)
    k = g.kv[arch + ".expert_used_count"]
    norm = g.kv.get(arch + ".expert_weights_norm", arch != "qwen2moe")
    logits = m @ t("ffn_gate_inp.weight").T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    route = np.zeros_like(p)
    for r in range(m.shape[0]):
        chosen = np.argsort(-p[r], kind="stable")[:k]
        w = p[r, chosen]
        if norm:
            w = w / max(w.sum(), 2.0 ** -14)
        route[r, chosen] = w
    out = mix_experts(m, route, swiglu_experts(t))
    if ("blk.%d.ffn_gate_inp_shexp.weight" % il) in g.tensors:
        sh = silu(m @ t("ffn_gate_shexp.weight").T) * (m @ t("ffn_up_shexp.weight").T)
        sh = sh @ t("ffn_down_shexp.weight").T
        out += sigmoid(m @ t("ffn_gate_inp_shexp.weight"))[:, None] * sh
    return out


def yarn_rope(x, pos, n_dims, base, factor, n_orig, beta_fast=32.0, beta_slow=1.0, neox=True, mag=None):
    """RoPE (NeoX halves, or adjacent pairs) with YaRN (Peng et al. 2023,
    section 3.2 and eq. 21): pair i turns at base^(-2i/d) / factor below the
    correction dimension of beta_slow rotations over the original context,
    at base^(-2i/d) above that of beta_fast, mixed linearly between (the
    ends floored and ceiled); cos and sin scaled by mag, by default
    0.1 ln(factor) + 1."""
    def corr_dim(rot):
        return n_dims * math.log(n_orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    low = max(0.0, math.floor(corr_dim(beta_fast)))
    high = min(n_dims - 1.0, math.ceil(corr_dim(beta_slow)))
    half = n_dims // 2
    i = np.arange(half, dtype=np.float64)
    orig = base ** (-2.0 * i / n_dims)
    ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)  # 1: keep the original
    inv = orig / factor * (1.0 - ramp) + orig * ramp
    theta = np.outer(pos, inv)
    if mag is None:
        mag = 0.1 * math.log(factor) + 1.0
    c, s = np.cos(theta)[:, None, :] * mag, np.sin(theta)[:, None, :] * mag
    return rotate(x, c, s, n_dims, neox)


def forward_gptoss(g, tokens):
    """gpt-oss: pre-norm layers; attention with q/k/v and output biases,
    a learned sink logit per head joining each softmax's denominator (with
    no value), every other layer (the even ones) a sliding window; then
    experts: the k highest router logits (W_r m + b_r), softmax over those
    k, each expert's SwiGLU variant min(g, 7) sigmoid(1.702 min(g, 7))
    (clamp(u, -7, 7) + 1) with biases on gate, up and down."""
    arch, key = arch_keys(g)
    n_layer = key("block_count")
    n_head = key("attention.head_count")
    n_head_kv = key("attention.head_count_kv")
    hd = key("attention.key_length")
    eps = key("attention.layer_norm_rms_epsilon")
    base = key("rope.freq_base")
    window = key("attention.sliding_window")
    period = g.kv.get(arch + ".attention.sliding_window_pattern", 2)
    k_used = key("expert_used_count")
    factor, n_orig = 1.0, key("context_length")
    if g.kv.get(arch + ".rope.scaling.type", "none") == "yarn":
        factor = key("rope.scaling.factor")
        n_orig = key("rope.scaling.original_context_length")
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = g.tensor("token_embd.weight")[tokens].copy()
    i_idx = np.arange(n)[:, None]
    j_idx = np.arange(n)[None, :]
    for il in range(n_layer):
        t, _ = layer_readers(g, il)
        h = rmsnorm(x, t("attn_norm.weight"), eps)
        q = (h @ t("attn_q.weight").T + t("attn_q.bias")).reshape(n, n_head, hd)
        k = (h @ t("attn_k.weight").T + t("attn_k.bias")).reshape(n, n_head_kv, hd)
        v = (h @ t("attn_v.weight").T + t("attn_v.bias")).reshape(n, n_head_kv, hd)
        if factor > 1.0:
            q, k = yarn_rope(q, pos, hd, base, factor, n_orig), yarn_rope(k, pos, hd, base, factor, n_orig)
        else:
            q, k = rope(q, pos, hd, base, 1.0, True), rope(k, pos, hd, base, 1.0, True)
        visible = j_idx <= i_idx
        if il % period < period - 1:
            visible &= (i_idx - j_idx) < window
        sinks = t("attn_sinks.weight")
        group = n_head // n_head_kv
        a = np.empty_like(q)
        for hh in range(n_head):
            s = (q[:, hh, :] @ k[:, hh // group, :].T) / math.sqrt(hd)
            s = np.where(visible, s, -np.inf)
            s = np.concatenate([s, np.full((n, 1), sinks[hh])], axis=1)
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            a[:, hh, :] = p[:, :n] @ v[:, hh // group, :]
        x = x + a.reshape(n, n_head * hd) @ t("attn_output.weight").T + t("attn_output.bias")
        m = rmsnorm(x, t("post_attention_norm.weight"), eps)
        logits = m @ t("ffn_gate_inp.weight").T + t("ffn_gate_inp.bias")
        gate, up, down = t("ffn_gate_exps.weight"), t("ffn_up_exps.weight"), t("ffn_down_exps.weight")
        bg, bu, bd = t("ffn_gate_exps.bias"), t("ffn_up_exps.bias"), t("ffn_down_exps.bias")
        route = np.zeros_like(logits)
        for r in range(n):
            chosen = np.argsort(-logits[r], kind="stable")[:k_used]
            w = np.exp(logits[r, chosen] - logits[r, chosen].max())
            route[r, chosen] = w / w.sum()

        def expert(e, rows):
            gg = np.minimum(rows @ gate[e].T + bg[e], 7.0)
            uu = np.clip(rows @ up[e].T + bu[e], -7.0, 7.0)
            return (gg * sigmoid(1.702 * gg) * (uu + 1.0)) @ down[e].T + bd[e]

        x = x + mix_experts(m, route, expert)
    return output_logits(g, x, eps)


def deepseek_experts(g, arch, il, m, gating_default=1):
    """DeepSeek's routed and shared experts of layer il for the rows of m
    (scores by expert_gating_func, 1 softmax, 2 sigmoid, gating_default
    where the file does not say)."""
    t, _ = layer_readers(g, il)
    k = g.kv[arch + ".expert_used_count"]
    sigmoid_gating = g.kv.get(arch + ".expert_gating_func", gating_default) == 2
    norm = g.kv.get(arch + ".expert_weights_norm", False)
    scale = g.kv.get(arch + ".expert_weights_scale", 0.0) or 1.0
    n_groups = g.kv.get(arch + ".expert_group_count", 0)
    n_groups_used = g.kv.get(arch + ".expert_group_used_count", 0)
    bias = g.tensors.get("blk.%d.exp_probs_b.bias" % il)
    logits = m @ t("ffn_gate_inp.weight").T
    if sigmoid_gating:
        p = sigmoid(logits)
    else:
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
    sel = p + bias if bias is not None else p.copy()
    n_expert = p.shape[1]
    route = np.zeros_like(p)
    for r in range(m.shape[0]):
        s = sel[r].copy()
        if n_groups > 1:
            per = n_expert // n_groups
            grouped = s.reshape(n_groups, per)
            if sigmoid_gating:
                score = np.sort(grouped, axis=1)[:, ::-1][:, :2].sum(axis=1)
            else:
                score = grouped.max(axis=1)
            best = np.argsort(-score, kind="stable")[:n_groups_used]
            keep = np.zeros(n_groups, dtype=bool)
            keep[best] = True
            s = np.where(np.repeat(keep, per), s, -np.inf)
        chosen = np.argsort(-s, kind="stable")[:k]
        w = p[r, chosen]
        if norm:
            w = w / max(w.sum(), 2.0 ** -14)
        route[r, chosen] = w * scale
    out = mix_experts(m, route, swiglu_experts(t))
    if ("blk.%d.ffn_gate_shexp.weight" % il) in g.tensors:
        sh = silu(m @ t("ffn_gate_shexp.weight").T) * (m @ t("ffn_up_shexp.weight").T)
        out += sh @ t("ffn_down_shexp.weight").T
    return out


def forward_deepseek2(g, tokens):
    """deepseek2: latent attention decompressed into ordinary multi-head
    attention (the keys and values of every head built from the latent),
    then a SwiGLU or DeepSeek's experts."""
    arch, key = arch_keys(g)
    n_layer = key("block_count")
    n_head = key("attention.head_count")
    eps = key("attention.layer_norm_rms_epsilon")
    lat = key("attention.kv_lora_rank")
    q_lora = g.kv.get(arch + ".attention.q_lora_rank", 0)
    d_qk = key("attention.key_length_mla")
    d_v = key("attention.value_length_mla")
    n_rot = key("rope.dimension_count")
    d_c = d_qk - n_rot
    base = key("rope.freq_base", 10000.0)
    n_dense = g.kv.get(arch + ".leading_dense_block_count", 0)
    scale = 1.0 / math.sqrt(d_qk)
    yarn = g.kv.get(arch + ".rope.scaling.type", "none") == "yarn"
    if yarn:
        factor = key("rope.scaling.factor")
        n_orig = key("rope.scaling.original_context_length")
        # the ramp's ends where the file gives them (Kimi-K2: 1 and 1)
        beta_fast = g.kv.get(arch + ".rope.scaling.yarn_beta_fast", 32.0)
        beta_slow = g.kv.get(arch + ".rope.scaling.yarn_beta_slow", 1.0)
        # the files store 0.1 mscale_all_dim; transformers' DeepseekV2/V3:
        # softmax scale times yarn_get_mscale(factor, mscale_all_dim)^2, cos and sin
        # times yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim)
        # with mscale = mscale_all_dim (1 without it)
        all_dim = g.kv.get(arch + ".rope.scaling.yarn_log_multiplier", 0.0) / 0.1
        if all_dim:
            scale *= (0.1 * all_dim * math.log(factor) + 1.0) ** 2
        mag = 1.0 if all_dim else 0.1 * math.log(factor) + 1.0

    def rotate(x):
        if yarn:
            return yarn_rope(x, pos, n_rot, base, factor, n_orig, beta_fast, beta_slow, neox=False, mag=mag)
        return rope(x, pos, n_rot, base, 1.0, False)

    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)
    x = g.tensor("token_embd.weight")[tokens].copy()
    for il in range(n_layer):
        t, _ = layer_readers(g, il)
        h = rmsnorm(x, t("attn_norm.weight"), eps)
        if q_lora:
            q = rmsnorm(h @ t("attn_q_a.weight").T, t("attn_q_a_norm.weight"), eps) @ t("attn_q_b.weight").T
        else:
            q = h @ t("attn_q.weight").T
        q = q.reshape(n, n_head, d_qk)
        kv = h @ t("attn_kv_a_mqa.weight").T
        c = rmsnorm(kv[:, :lat], t("attn_kv_a_norm.weight"), eps)
        k_r = rotate(kv[:, None, lat:])[:, 0, :]
        q_r = rotate(q[:, :, d_c:])
        # every head's keys and values, decompressed from the latent
        w_uk_t = t("attn_k_b.weight")  # n_head x lat x d_c: per head W_UK^T
        w_uv = t("attn_v_b.weight")    # n_head x d_v x lat
        k = np.concatenate([np.einsum("nl,hlc->nhc", c, w_uk_t), np.repeat(k_r[:, None, :], n_head, axis=1)], axis=2)
        v = np.einsum("nl,hvl->nhv", c, w_uv)
        q = np.concatenate([q[:, :, :d_c], q_r], axis=2)
        a = attention(q, k, v, scale, 0, 0.0)
        x = x + a.reshape(n, n_head * d_v) @ t("attn_output.weight").T
        m = rmsnorm(x, t("ffn_norm.weight"), eps)
        if il < n_dense:
            x = x + (silu(m @ t("ffn_gate.weight").T) * (m @ t("ffn_up.weight").T)) @ t("ffn_down.weight").T
        else:
            x = x + deepseek_experts(g, arch, il, m)
    return output_logits(g, x, eps)


def nextn_logits(g, arch, il, tokens, hidden, layer, eps):
    """The prediction layer il over the tokens (the docstring's NextN):
    hidden holds the trunk's output-normed hidden states, layer(x, il) runs
    a layer of the family over rows x at positions 0 .. n - 1."""
    t, _ = layer_readers(g, il)
    emb = g.tensors.get("blk.%d.nextn.embed_tokens.weight" % il)
    if emb is None:
        emb = g.tensor("token_embd.weight")
    e = rmsnorm(emb[tokens], t("nextn.enorm.weight"), eps)
    before = np.vstack([np.zeros((1, hidden.shape[1])), hidden[:-1]])
    h = rmsnorm(before, t("nextn.hnorm.weight"), eps)
    x = np.concatenate([e, h], axis=1) @ t("nextn.eh_proj.weight").T
    x = layer(x, il)
    norm = g.tensors.get("blk.%d.nextn.shared_head_norm.weight" % il)
    head = g.tensors.get("blk.%d.nextn.shared_head_head.weight" % il)
    if norm is None:
        norm = g.tensor("output_norm.weight")
    if head is None:
        head = g.tensors.get("output.weight")
        if head is None:
            head = g.tensor("token_embd.weight")
    return rmsnorm(x, norm, eps) @ head.T


def trunk_and_nextn(g, arch, tokens, x, n_layer, layer, eps):
    """Run the trunk's layers over the embeddings x, then the logits of
    every row and those of the first prediction layer where the file has
    one (else None)."""
    for il in range(n_layer):
        x = layer(x, il)
    logits = output_logits(g, x, eps)
    if g.kv.get(arch + ".nextn_predict_layers", 0) == 0 or \
            ("blk.%d.nextn.eh_proj.weight" % n_layer) not in g.tensors:
        return logits, None
    hidden = rmsnorm(x, g.tensor("output_norm.weight"), eps)
    return logits, nextn_logits(g, arch, n_layer, tokens, hidden, layer, eps)


def forward_glm4moe(g, tokens):
    """glm4moe (the docstring's entry)."""
    arch, key = arch_keys(g)
    n_layer = key("block_count") - g.kv.get(arch + ".nextn_predict_layers", 0)
    n_head = key("attention.head_count")
    n_head_kv = key("attention.head_count_kv", n_head)
    hd = key("attention.key_length", key("embedding_length") // n_head)
    eps = key("attention.layer_norm_rms_epsilon")
    n_rot = key("rope.dimension_count", hd)
    base = key("rope.freq_base", 10000.0)
    n_dense = g.kv.get(arch + ".leading_dense_block_count", 0)
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)

    def layer(x, il):
        t, has = layer_readers(g, il)
        q, k, v = qkv_heads(t, has, rmsnorm(x, t("attn_norm.weight"), eps), n_head, n_head_kv, hd, eps)
        q = rope(q, pos, n_rot, base, 1.0, True)
        k = rope(k, pos, n_rot, base, 1.0, True)
        o = attention(q, k, v, 1.0 / math.sqrt(hd), 0, 0.0)
        x = x + o.reshape(n, n_head * hd) @ t("attn_output.weight").T
        f = rmsnorm(x, t("post_attention_norm.weight"), eps)
        if il < n_dense:
            return x + (silu(f @ t("ffn_gate.weight").T) * (f @ t("ffn_up.weight").T)) @ t("ffn_down.weight").T
        return x + deepseek_experts(g, arch, il, f, gating_default=2)

    x = g.tensor("token_embd.weight")[tokens].copy()
    return trunk_and_nextn(g, arch, tokens, x, n_layer, layer, eps)


def l2norm(x, eps):
    return x / np.maximum(np.sqrt(np.sum(x * x, axis=-1, keepdims=True)), eps)


def imrope_pair_positions(sections, n_rot):
    """Interleaved multi-section RoPE (Qwen3-VL): rotated pair i belongs to
    sector i mod sum(sections); sectors 0, 3, 6, ... follow the temporal
    position while below 3 * sections[0], 1, 4, ... the height below
    3 * sections[1], 2, 5, ... the width below 3 * sections[2], and the
    rest the fourth stream.  A text token's first three positions are its
    index and the fourth is 0: each pair turns by 1 or 0 times the index."""
    total = sum(sections)
    out = np.zeros(n_rot // 2)
    for i in range(n_rot // 2):
        sector = i % total
        for stream in range(3):
            if sector % 3 == stream and sector < 3 * sections[stream]:
                out[i] = 1.0
    return out


def gated_deltanet(t, has, a, eps, n_conv, d, n_k, n_v, grouped):
    """The Gated DeltaNet mixer of one layer for the rows of a (tokens x
    embedding), from a zero state, token by token; grouped: value head h
    reads key head h / (n_v / n_k), else h mod n_k."""
    n = a.shape[0]
    key_dim = n_k * d
    r = n_v // n_k
    x = a @ t("attn_qkv.weight").T  # tokens x (2 key_dim + n_v d)
    z = (a @ t("attn_gate.weight").T).reshape(n, n_v, d)
    if has("ssm_ba.weight"):
        # per key head j: the inputs of beta, then of alpha, for value heads j r .. j r + r - 1
        ba = (a @ t("ssm_ba.weight").T).reshape(n, n_k, 2 * r)
        b_in, a_in = ba[:, :, :r].reshape(n, n_v), ba[:, :, r:].reshape(n, n_v)
    else:
        b_in, a_in = a @ t("ssm_beta.weight").T, a @ t("ssm_alpha.weight").T
    beta = sigmoid(b_in)  # tokens x n_v
    decay = np.logaddexp(0.0, a_in + t("ssm_dt.bias")) * t("ssm_a")
    # causal depthwise convolution: the last tap multiplies the current
    # token, the earlier ones the tokens before it (zeros before the first)
    w = t("ssm_conv1d.weight")  # channels x taps
    xp = np.vstack([np.zeros((n_conv - 1, x.shape[1])), x])
    c = np.zeros_like(x)
    for tap in range(n_conv):
        c += xp[tap:tap + n] * w[:, tap]
    c = silu(c)
    q = l2norm(c[:, :key_dim].reshape(n, n_k, d), eps)
    k = l2norm(c[:, key_dim:2 * key_dim].reshape(n, n_k, d), eps)
    v = c[:, 2 * key_dim:].reshape(n, n_v, d)
    o = np.zeros((n, n_v, d))
    for h in range(n_v):
        j = h // r if grouped else h % n_k
        S = np.zeros((d, d))  # S[key index, value index]
        for i in range(n):
            S *= math.exp(decay[i, h])
            delta = beta[i, h] * (v[i, h] - S.T @ k[i, j])
            S += np.outer(k[i, j], delta)
            o[i, h] = S.T @ q[i, j] / math.sqrt(d)
    y = rmsnorm(o, t("ssm_norm.weight"), eps) * silu(z)
    return y.reshape(n, n_v * d) @ t("ssm_out.weight").T


def forward_qwen35(g, tokens):
    """Qwen3.5's hybrid stack (the docstring's qwen35, qwen35moe and
    qwen3next entries)."""
    arch, key = arch_keys(g)
    n_embd = key("embedding_length")
    n_layer = key("block_count") - g.kv.get(arch + ".nextn_predict_layers", 0)
    n_head = key("attention.head_count")
    n_head_kv = key("attention.head_count_kv", n_head)
    hd = key("attention.key_length", n_embd // n_head)
    eps = key("attention.layer_norm_rms_epsilon")
    n_rot = key("rope.dimension_count", hd)
    base = key("rope.freq_base", 10000.0)
    qwen3next = arch == "qwen3next"  # value heads in grouped order, RoPE without sections
    pair_pos = None if qwen3next else imrope_pair_positions(key("rope.dimension_sections"), n_rot)
    q_scale = g.kv.get(arch + ".attention.scale", 0.0) or 1.0 / math.sqrt(hd)
    n_conv, d = key("ssm.conv_kernel"), key("ssm.state_size")
    n_k, n_v = key("ssm.group_count"), key("ssm.time_step_rank")
    if n_v % n_k or key("ssm.inner_size") != n_v * d:
        raise ValueError("%d value heads of %d on %d key heads" % (n_v, d, n_k))
    recurrent = g.kv.get(arch + ".attention.recurrent_layers")
    if recurrent is None:
        interval = key("full_attention_interval", 4)
        recurrent = [(il + 1) % interval != 0 for il in range(n_layer)]

    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)

    def layer(x, il):
        t, has = layer_readers(g, il)
        a = rmsnorm(x, t("attn_norm.weight"), eps)
        if il < n_layer and recurrent[il]:  # the prediction layer attends
            x = x + gated_deltanet(t, has, a, eps, n_conv, d, n_k, n_v, qwen3next)
        else:
            qg = (a @ t("attn_q.weight").T).reshape(n, n_head, 2 * hd)
            q, gate = qg[..., :hd], qg[..., hd:]
            k = (a @ t("attn_k.weight").T).reshape(n, n_head_kv, hd)
            v = (a @ t("attn_v.weight").T).reshape(n, n_head_kv, hd)
            q = rope(rmsnorm(q, t("attn_q_norm.weight"), eps), pos, n_rot, base, 1.0, True, pair_pos=pair_pos)
            k = rope(rmsnorm(k, t("attn_k_norm.weight"), eps), pos, n_rot, base, 1.0, True, pair_pos=pair_pos)
            o = attention(q, k, v, q_scale, 0, 0.0) * sigmoid(gate)
            x = x + o.reshape(n, n_head * hd) @ t("attn_output.weight").T
        f = rmsnorm(x, t("post_attention_norm.weight"), eps)
        if has("ffn_gate_inp.weight"):
            return x + experts(g, arch, il, f)
        return x + (silu(f @ t("ffn_gate.weight").T) * (f @ t("ffn_up.weight").T)) @ t("ffn_down.weight").T

    x = g.tensor("token_embd.weight")[tokens].copy()
    return trunk_and_nextn(g, arch, tokens, x, n_layer, layer, eps)


N_CTX = 0

def layernorm(x, w, b, eps):
    m = x.mean(axis=-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=-1, keepdims=True) + eps) * w + b


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def forward_encoder(g, tokens):
    """bert and nomic-bert (BERT, Devlin et al. 2019; Nomic Embed, Nussbaum
    et al. 2024): the last layer's hidden states of every position.  The
    input layernorm(E_tok + E_type[0] (+ E_pos: bert)); per layer, post-norm:
    h = LN(x + Wo attn(q, k, v) + bo), x = LN(h + ffn(h)), attention over
    every position (no mask), nomic-bert's queries and keys rotated (NeoX
    pairs), ffn = Wd gelu(Wu h + bu) + bd (bert, exact GELU) or
    Wd (silu(Wg h) * Wu h) (nomic-bert)."""
    arch, key = arch_keys(g)
    n_embd = key("embedding_length")
    n_layer = key("block_count")
    n_head = key("attention.head_count")
    hd = n_embd // n_head
    eps = key("attention.layer_norm_epsilon")
    nomic = arch == "nomic-bert"
    n = len(tokens)
    pos = np.arange(n, dtype=np.float64)

    def bias(name):
        return g.tensor(name) if name in g.tensors else 0.0
    x = g.tensor("token_embd.weight")[tokens]
    if "token_types.weight" in g.tensors:
        x = x + g.tensor("token_types.weight")[0]
    if not nomic:
        x = x + g.tensor("position_embd.weight")[np.arange(n)]
    x = layernorm(x, g.tensor("token_embd_norm.weight"), g.tensor("token_embd_norm.bias"), eps)
    for il in range(n_layer):
        t, has = layer_readers(g, il)
        q, k, v = qkv_heads(t, has, x, n_head, n_head, hd, eps)
        if has("attn_qkv.bias"):
            b = t("attn_qkv.bias")
            q = q + b[:n_embd].reshape(n_head, hd)
            k = k + b[n_embd:2 * n_embd].reshape(n_head, hd)
            v = v + b[2 * n_embd:].reshape(n_head, hd)
        if nomic:
            base = key("rope.freq_base", 10000.0)
            q = rope(q, pos, hd, base, 1.0, True)
            k = rope(k, pos, hd, base, 1.0, True)
        a = np.empty((n, n_head, hd))
        for h in range(n_head):
            s = (q[:, h, :] @ k[:, h, :].T) / math.sqrt(hd)
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            a[:, h, :] = p @ v[:, h, :]
        o = a.reshape(n, n_embd) @ t("attn_output.weight").T + bias("blk.%d.attn_output.bias" % il)
        x = layernorm(x + o, t("attn_output_norm.weight"), t("attn_output_norm.bias"), eps)
        if nomic:
            f = silu(x @ t("ffn_gate.weight").T) * (x @ t("ffn_up.weight").T)
        else:
            f = gelu_erf(x @ t("ffn_up.weight").T + bias("blk.%d.ffn_up.bias" % il))
        f = f @ t("ffn_down.weight").T + bias("blk.%d.ffn_down.bias" % il)
        x = layernorm(x + f, t("layer_output_norm.weight"), t("layer_output_norm.bias"), eps)
    return x


POOLINGS = {"mean": 1, "cls": 2, "last": 3}


def embedding(g, tokens, pooling, normalize):
    """The embedding of the tokens: the output-normed hidden states of
    every position (causal attention) pooled by their mean, the first's
    or the last's, then scaled to unit length."""
    arch = g.kv["general.architecture"]
    if arch in ("bert", "nomic-bert"):
        h = forward_encoder(g, tokens)
    elif arch in ("llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"):
        h = forward_plain(g, tokens, hidden=True)
    else:
        raise ValueError("no embedding oracle for %s" % arch)
    if pooling is None:
        pooling = g.kv.get(arch + ".pooling_type", 0)
    if pooling == 1:
        v = h.mean(axis=0)
    elif pooling == 2:
        v = h[0]
    elif pooling == 3:
        v = h[-1]
    else:
        raise ValueError("pooling %r: the model declares none; give --pooling" % pooling)
    if normalize:
        v = v / np.linalg.norm(v)
    return v


def compare_embedding(what, path, want, min_cos):
    """Compare the vector in path (text: its components separated by
    white space, as hearth embed --format tsv writes one input's) with
    want: their cosine similarity at least min_cos."""
    with open(path) as f:
        got = np.array([float(t) for t in f.read().split()], dtype=np.float64)
    if got.size != want.size:
        sys.stderr.write("oracle-forward: %s: %d components, expected %d\n" % (what, got.size, want.size))
        return False
    cos = float(got @ want / (np.linalg.norm(got) * np.linalg.norm(want)))
    err = float(np.abs(got - want).max())
    print("oracle-forward: %s, embedding of %d components: cosine %.9f (1 - cos = %.3g), max abs error %.3g"
          % (what, want.size, cos, 1.0 - cos, err))
    return cos >= min_cos


def compare(what, path, want, tol):
    """Compare the float32 logits in path with want; a line of the worst
    error; whether it is within tol."""
    got = np.fromfile(path, dtype=np.float32).astype(np.float64)
    if got.size != want.size:
        sys.stderr.write("oracle-forward: %s: %d logits, expected %d x %d\n" % (what, got.size, *want.shape))
        return False
    got = got.reshape(want.shape)
    # relative to each row's spread of logits
    spread = np.maximum(np.abs(want).max(axis=1, keepdims=True), 1e-6)
    err = np.abs(got - want) / spread
    worst = np.unravel_index(np.argmax(err), err.shape)
    print("oracle-forward: %s, %d positions: max relative error %.3g at position %d, token %d (%.6g vs %.6g)"
          % (what, want.shape[0], err.max(), worst[0], worst[1], got[worst], want[worst]))
    return err.max() <= tol


def main(argv):
    global N_CTX
    args = argv[1:]
    tol = 2e-3
    mtp_path = None
    embed, pooling, normalize, min_cos = False, None, True, 0.99999
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--tol":
            tol = float(args.pop(0))
        elif opt == "--n-ctx":
            N_CTX = int(args.pop(0))
        elif opt == "--mtp":
            mtp_path = args.pop(0)
        elif opt == "--embed":
            embed = True
        elif opt == "--pooling":
            pooling = POOLINGS[args.pop(0)]
        elif opt == "--no-normalize":
            normalize = False
        elif opt == "--min-cos":
            min_cos = float(args.pop(0))
        else:
            sys.stderr.write("oracle-forward: unknown option %s\n" % opt)
            return 2
    if len(args) < 3:
        sys.stderr.write(__doc__)
        return 2
    g = Gguf(args[0])
    tokens = [int(t) for t in args[2:]]
    if embed:
        name = "%s (%s)" % (args[0].split("/")[-1], g.kv["general.architecture"])
        want = embedding(g, tokens, pooling, normalize)
        return 0 if compare_embedding(name, args[1], want, min_cos) else 1
    want, want_mtp = forward(g, tokens)
    name = "%s (%s)" % (args[0].split("/")[-1], g.kv["general.architecture"])
    ok = compare(name, args[1], want, tol)
    if mtp_path is not None:
        if want_mtp is None:
            sys.stderr.write("oracle-forward: %s: no prediction layer to compare\n" % name)
            return 1
        ok = compare(name + ", prediction layer", mtp_path, want_mtp, tol) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
