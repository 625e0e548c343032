"""The pieces of Hugging Face transformers' Llama decoder layer that the reference scripts here
re-implement (transformers is not a Debian package): LlamaRMSNorm, rotate_half,
apply_rotary_pos_emb and repeat_kv, op for op as src/transformers/models/llama/modeling_llama.py
writes them (transformers@5dd4a6354885). Shared by eager_layer_ops.py (the kernels a layer
launches) and measure_saved_activations.py (the tensors it saves), so both count the same ops.
torchtitan's RMSNorm runs the same ops (x.float() ... type_as(x) * weight).
"""

import torch
import torch.nn as nn


class RMSNorm(nn.Module):  # LlamaRMSNorm (eps only scales the variance: no op depends on it)
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)
