"""The decoder-only transformer language model of Chi et al. (ACL 2023), Section 2.

R layers of pre-LayerNorm blocks (causal self-attention, then a GELU MLP of width 4d), a
final LayerNorm and a linear LM head, optionally tied to the token embeddings; no dropout
(GPT-NeoX-like defaults, as in the KERPLE code base the paper builds on). The positional
scheme (rflens.model.positional) enters in one of three places: added to the input embeddings
(sinusoidal), as a rotation of q and k (rotary), or as an additive bias on the attention
logits (ALiBi, windowed attention, Sandwich, smoothed, KERPLE, T5), computed once per
forward pass and shared by every layer (rflens.model.attention).

``forward(..., last_only=True)`` gives the logits of the last position only, cheaply: the
last layer computes attention and MLP for the last query alone (its keys and values still
come from every position) and the LM head runs once. This is all the last-token
perplexity protocol (Section 2 and footnote 2) and the receptive-field analysis need.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from rflens.errors import UserError
from rflens.model import attention, positional
from rflens.setup.config import ModelConfig


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.c_attn = nn.Linear(cfg.d_model, 3 * cfg.d_model)  # q, k, v in one matmul
        self.c_proj = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor, plan: attention.Plan, scheme: positional.Scheme, last_only: bool = False) -> Tensor:
        B, L, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(B, L, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, L, hd)
        if scheme.kind == "rotary":
            q, k = scheme.rotate(q, k, torch.arange(L, device=x.device))
        if last_only:  # keys and values from every position, the query from the last one
            q = q[:, :, -1:]  # (B, H, 1, hd)
        y = attention.attend(q, k, v, plan)  # (B, H, Lq, hd)
        y = y.transpose(1, 2).reshape(B, q.shape[2], d)  # (B, Lq, d)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.c_proj = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-LN block: x + attn(LN(x)), then + mlp(LN(.))."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor, plan, scheme, last_only: bool = False) -> Tensor:
        a = self.attn(self.ln_1(x), plan, scheme, last_only)  # (B, Lq, d)
        x = (x[:, -1:] if last_only else x) + a
        return x + self.mlp(self.ln_2(x))


class TransformerLM(nn.Module):
    """Decoder-only LM with R layers, H heads, width d, vocabulary v and a positional scheme."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = positional.build(cfg)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_weights:
            self.lm_head.weight = self.wte.weight
        # GPT-2 initialisation: N(0, 0.02), the residual output projections scaled by
        # 1/sqrt(2R) so the residual stream does not grow with depth
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def embed(self, idx: Tensor) -> Tensor:
        """Token embeddings only, (B, L) -> (B, L, d): the input embeddings e_m of Section 4
        (absolute positions are added inside forward, so gradients w.r.t. these are the
        paper's)."""
        return self.wte(idx)

    def forward(self, idx: Tensor | None = None, *, embeds: Tensor | None = None,
                last_only: bool = False, kernel: str = "auto") -> Tensor:
        """Logits (B, L, v), or (B, 1, v) for the last position when ``last_only``.

        Give token ids ``idx`` (B, L) or input embeddings ``embeds`` (B, L, d) from
        :meth:`embed` (to take gradients w.r.t. the inputs). ``kernel``: "auto", "sdpa",
        "flex" or "chunked" (rflens.model.attention); all give the same logits.
        """
        x = self._trunk(idx, embeds=embeds, last_only=last_only, kernel=kernel)
        logits = self.lm_head(self.ln_f(x))  # (B, Lq, v)
        # half-precision (bf16 autocast) logits are returned as fp32 for the softmax / loss
        return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits

    def _trunk(self, idx: Tensor | None = None, kernel: str = "auto", *, embeds: Tensor | None = None,
               last_only: bool = False) -> Tensor:
        """The residual stream after the last block (before the final LayerNorm)."""
        if (idx is None) == (embeds is None):
            raise UserError("give exactly one of idx (token ids) or embeds (input embeddings)")
        if self.cfg.first_token is not None and idx is not None:  # a fixed first token at position 0
            idx = torch.cat([torch.full_like(idx[:, :1], self.cfg.first_token), idx[:, 1:]], 1)
        x = self.embed(idx) if embeds is None else embeds  # (B, L, d)
        if x.dim() != 3 or x.shape[-1] != self.cfg.d_model:
            raise UserError(f"expected inputs of shape (B, L) or (B, L, {self.cfg.d_model}), got {tuple(x.shape)}")
        if self.cfg.first_token is not None and embeds is not None:
            first = self.wte.weight[self.cfg.first_token].to(x.dtype).expand(x.shape[0], 1, -1)
            x = torch.cat([first, x[:, 1:]], 1)
        L = x.shape[1]
        if self.pos.kind == "absolute":
            # Token embeddings start at N(0, 0.02) per coordinate while a sinusoidal vector has
            # entries of size ~1: added as they are, positions would swamp the tokens for most
            # of a short training run. With scale_embeddings (as in Vaswani et al., 2017) the
            # token embeddings are scaled by sqrt(d) first; the paper's code (GPT-NeoX) does not.
            pe = self.pos.embed(torch.arange(L, device=x.device)).to(x.dtype)  # (L, d) broadcast over B
            x = (x * math.sqrt(self.cfg.d_model) if self.cfg.scale_embeddings else x) + pe
        plan = attention.make_plan(self.pos, self.cfg.window, L, x.device, kernel)  # bias built once, all layers
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, plan, self.pos, last_only=last_only and i == last)
        return x

    def loss(self, idx: Tensor, targets: Tensor, kernel: str = "auto") -> Tensor:
        """Mean next-token cross-entropy over all B x L positions.

        On the CPU in fp32 the LM head and the loss run fused, in blocks of rows
        (:func:`linear_cross_entropy`): the (B L, v) logits are never held at once. Under
        autocast or on a GPU they are computed whole, as the logits of :meth:`forward`.
        """
        x = self.ln_f(self._trunk(idx, kernel))
        w = self.lm_head.weight
        if x.device.type == "cpu" and x.dtype == torch.float32 and not torch.is_autocast_enabled("cpu"):
            return linear_cross_entropy(x.reshape(-1, x.shape[-1]), w, targets.reshape(-1))
        logits = self.lm_head(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))

    def num_params(self, non_embedding: bool = True) -> int:
        """Number of parameters; ``non_embedding`` leaves out the token embedding (and the
        LM head when it is not tied, since it has the same size), as is usual for scaling."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.wte.weight.numel()
            if not self.cfg.tie_weights:
                n -= self.lm_head.weight.numel()
        return n

    def flops_per_token(self, length: int) -> float:
        """Training (forward + backward) FLOPs per token at sequence length ``length``:
        6 N for the weight matmuls (N = non-embedding parameters plus the LM head) plus
        the attention scores and weighted sums (see rflens.model.attention.attention_flops)."""
        cfg = self.cfg
        n = self.num_params(non_embedding=True) + cfg.vocab_size * cfg.d_model  # the LM head matmul counts
        return 6.0 * n + attention.attention_flops(cfg.n_layer, cfg.d_model, length, cfg.window)


LOSS_ROWS = 512  # rows of logits a block of linear_cross_entropy holds at once


def linear_cross_entropy(x: Tensor, weight: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of the logits x W^T (N, v) against ``targets`` (N,), fused.

    Equal to ``F.cross_entropy(x @ weight.T, targets)`` up to float rounding, in blocks of
    :data:`LOSS_ROWS` rows whose logits stay in the cache. With gradients enabled, the
    forward pass computes them too (softmax minus the one-hot target is the gradient of the
    logits) and the backward pass only scales them: one pass over the logits instead of the
    four of a softmax, its backward and the zeros of the loss's gradient.
    """
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _LinearCrossEntropy.apply(x, weight, targets)
    with torch.no_grad():
        return _linear_cross_entropy(x, weight, targets, grads=False)[0]


def _linear_cross_entropy(x: Tensor, weight: Tensor, targets: Tensor, grads: bool):
    n = x.shape[0]
    total = x.new_zeros((), dtype=torch.float64)
    dx = torch.empty_like(x) if grads else None
    dw = torch.zeros_like(weight) if grads else None
    for s in range(0, n, LOSS_ROWS):
        xb, tb = x[s:s + LOSS_ROWS], targets[s:s + LOSS_ROWS]
        z = xb @ weight.t()  # (rows, v) logits
        top = z.amax(1, keepdim=True)
        target_logit = z.gather(1, tb[:, None])
        z.sub_(top).exp_()
        norm = z.sum(1, keepdim=True)
        total += (norm.log() + top - target_logit).sum(dtype=torch.float64)
        if grads:
            z.div_(norm)  # softmax
            z[torch.arange(len(tb)), tb] -= 1.0  # minus the one-hot target: d(sum of losses)/d(logits)
            torch.mm(z, weight, out=dx[s:s + LOSS_ROWS])
            dw.addmm_(z.t(), xb)
    return (total / n).to(x.dtype), dx, dw


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, targets):
        loss, dx, dw = _linear_cross_entropy(x, weight, targets, grads=True)
        ctx.save_for_backward(dx, dw)
        return loss

    @staticmethod
    def backward(ctx, grad):
        dx, dw = ctx.saved_tensors
        scale = grad / dx.shape[0]
        return dx * scale, dw * scale, None
