"""Small standard architectures, written with torch.nn only, as users write them: the models of the
model-conformance tests (tests/test_models.py) and of the training-step benchmark
(benchmarks/bench_models.py).

Each entry of MODELS builds a model, its training batches and its loss. The models use no dropout,
and their attention and normalisation layers have no bias: the key bias of an attention layer has a
gradient of exactly zero in exact arithmetic, which Adam turns into steps of size lr in the
direction of the rounding noise, different on any two correct implementations.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- decoder-only transformer: RMSNorm, rotary positions, grouped-query attention, tied embeddings


def rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding of x (batch, heads, sequence, head dim) at `positions`."""
    half = x.shape[-1] // 2
    frequencies = base ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angles = positions.to(torch.float32)[:, None] * frequencies[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.q = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.out = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor, cache: dict | None = None) -> torch.Tensor:
        batch, length, _ = x.shape
        start = 0 if cache is None or "k" not in cache else cache["k"].shape[2]
        positions = torch.arange(start, start + length, device=x.device)
        q = rotate(self.q(x).view(batch, length, self.heads, self.head_dim).transpose(1, 2), positions)
        k = rotate(self.k(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2), positions)
        v = self.v(x).view(batch, length, self.kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None:
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        # A prompt attends causally; a generated token (with the cache) attends to everything before it.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=start == 0, enable_gqa=True)
        return self.out(y.transpose(1, 2).reshape(batch, length, -1))


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class DecoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int):
        super().__init__()
        self.attention_norm = nn.RMSNorm(dim, eps=1e-6)
        self.attention = GroupedQueryAttention(dim, heads, kv_heads)
        self.mlp_norm = nn.RMSNorm(dim, eps=1e-6)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x, cache=None):
        x = x + self.attention(self.attention_norm(x), cache)
        return x + self.mlp(self.mlp_norm(x))


class DecoderLM(nn.Module):
    """A decoder-only language model whose output projection is its input embedding."""

    def __init__(self, vocab=64, dim=32, heads=4, kv_heads=2, hidden=64, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(DecoderBlock(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # tied

    def forward(self, tokens, caches=None):
        x = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.lm_head(self.norm(x))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Greedy decoding with a key/value cache: the prompt once, then one token per step."""
        caches = [{} for _ in self.blocks]
        logits = self(prompt, caches)
        tokens = [logits[:, -1].argmax(-1)]
        for _ in range(new_tokens - 1):
            logits = self(tokens[-1][:, None], caches)
            tokens.append(logits[:, -1].argmax(-1))
        return torch.stack(tokens, dim=1)


def language_model_loss(model, batch):
    tokens = batch
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


# ---- encoder-decoder transformer with embeddings shared by encoder, decoder and output


class Seq2Seq(nn.Module):
    def __init__(self, vocab=48, dim=32, heads=4, layers=2, hidden=64, max_length=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)  # source and target tokens
        self.positions = nn.Embedding(max_length, dim)
        self.transformer = nn.Transformer(
            dim, heads, layers, layers, hidden, dropout=0.0, batch_first=True, norm_first=True, bias=False
        )
        self.generator = nn.Linear(dim, vocab, bias=False)
        self.generator.weight = self.embed.weight  # tied

    def embedded(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.embed(tokens) * math.sqrt(self.embed.embedding_dim) + self.positions(positions)

    def forward(self, source, target):
        mask = nn.Transformer.generate_square_subsequent_mask(target.shape[1], device=target.device)
        y = self.transformer(self.embedded(source), self.embedded(target), tgt_mask=mask, tgt_is_causal=True)
        return self.generator(y)


def seq2seq_loss(model, batch):
    source, target = batch
    logits = model(source, target[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target[:, 1:].reshape(-1))


# ---- mixture of experts with top-k routing


class MixtureOfExperts(nn.Module):
    """Each token goes to its top-k experts (feed-forward networks), weighted by the router."""

    def __init__(self, dim=32, hidden=48, experts=4, top_k=2):
        super().__init__()
        self.top_k = top_k
        self.router = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)) for _ in range(experts)
        )
        self.load_balance = torch.zeros(())

    def forward(self, x):
        tokens = x.reshape(-1, x.shape[-1])
        probabilities = self.router(tokens).softmax(dim=-1)
        weights, chosen = probabilities.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(tokens)
        for e, expert in enumerate(self.experts):
            token_index, slot = torch.where(chosen == e)
            if token_index.numel() > 0:
                out.index_add_(0, token_index, expert(tokens[token_index]) * weights[token_index, slot, None])
        # Switch-style load balancing: the share of routed tokens times the mean router probability.
        experts = len(self.experts)
        counts = torch.histc(chosen.float(), bins=experts, min=0, max=experts - 1)
        self.load_balance = experts * (counts / chosen.numel() * probabilities.mean(dim=0)).sum()
        return out.reshape(x.shape)


class MoEModel(nn.Module):
    def __init__(self, features=16, dim=32, outputs=8):
        super().__init__()
        self.input = nn.Linear(features, dim)
        self.moe = MixtureOfExperts(dim)
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, outputs)

    def forward(self, x):
        h = self.input(x)
        return self.head(self.norm(h + self.moe(h)))


def moe_loss(model, batch):
    x, target = batch
    return F.mse_loss(model(x), target) + 0.01 * model.moe.load_balance


# ---- vision transformer


class VisionTransformer(nn.Module):
    def __init__(self, image=16, patch=4, channels=3, dim=32, heads=4, layers=2, hidden=64, classes=10):
        super().__init__()
        self.patches = nn.Conv2d(channels, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.positions = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(
            dim, heads, hidden, dropout=0.0, activation="gelu", batch_first=True, norm_first=True, bias=False
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, images):
        x = self.patches(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.positions
        return self.head(self.norm(self.encoder(x)[:, 0]))


def classification_loss(model, batch):
    x, labels = batch
    return F.cross_entropy(model(x), labels)


# ---- convolutional network with batch normalisation


def conv_net(classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, classes),
    )


# ---- the catalogue


@dataclass(frozen=True)
class ModelSpec:
    build: Callable[[], nn.Module]
    batches: Callable[[int], list]  # the training batches of a run of n steps (on the CPU)
    loss: Callable[[nn.Module, object], torch.Tensor]
    tied: bool = False  # has parameters shared between modules


def _generator(seed=0):
    return torch.Generator().manual_seed(seed)


def _token_batches(steps, vocab, length, batch=4):
    g = _generator()
    return [torch.randint(0, vocab, (batch, length), generator=g) for _ in range(steps)]


def _pair_batches(steps, vocab, source_length=10, target_length=9, batch=4):
    g = _generator()
    return [
        (
            torch.randint(0, vocab, (batch, source_length), generator=g),
            torch.randint(0, vocab, (batch, target_length), generator=g),
        )
        for _ in range(steps)
    ]


def _regression_batches(steps, features=16, outputs=8, batch=4, length=8):
    g = _generator()
    return [
        (torch.randn(batch, length, features, generator=g), torch.randn(batch, length, outputs, generator=g))
        for _ in range(steps)
    ]


def _image_batches(steps, batch=8, image=16, classes=10):
    g = _generator()
    return [
        (torch.randn(batch, 3, image, image, generator=g), torch.randint(0, classes, (batch,), generator=g))
        for _ in range(steps)
    ]


MODELS = {
    "decoder-lm": ModelSpec(DecoderLM, lambda n: _token_batches(n, 64, 13), language_model_loss, tied=True),
    "seq2seq": ModelSpec(Seq2Seq, lambda n: _pair_batches(n, 48), seq2seq_loss, tied=True),
    "moe": ModelSpec(MoEModel, lambda n: _regression_batches(n), moe_loss),
    "vit": ModelSpec(VisionTransformer, lambda n: _image_batches(n), classification_loss),
    "convnet-bn": ModelSpec(conv_net, lambda n: _image_batches(n), classification_loss),
}


def to_device(batch, device):
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(b, device) for b in batch)
    return batch.to(device)


def train(model: nn.Module, spec: ModelSpec, batches: list, device) -> list[float]:
    """Moves `model` to `device` and trains it on `batches`: AdamW with gradient clipping. Returns the
    losses."""
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    losses = []
    for batch in batches:
        losses.append(training_step(model, spec, optimizer, to_device(batch, device)))
    return losses


def training_step(model, spec, optimizer, batch) -> float:
    optimizer.zero_grad()
    loss = spec.loss(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss.item()
