"""Real training loops on the device give the CPU's losses, gradients and weights: an MLP, a CNN with
BatchNorm and pooling, a Transformer encoder layer, an Elman RNN, an LSTM and a GRU, each with
SGD, Adam and AdamW. Also the operators that reach PrivateUse1 through special paths (convolution,
fused RNN cells, scaled dot product attention, the
Transformer inference fast path)."""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close

DEVICE = torch.device("foo", 0)
# A few steps of Adam amplify rounding differences between two correct implementations.
TOL = {"rtol": 1e-4, "atol": 1e-5}


class LastStep(nn.Module):
    """A recurrent network read out at the last time step."""

    def __init__(self, rnn: nn.Module, hidden: int, out: int):
        super().__init__()
        self.rnn = rnn
        self.head = nn.Linear(hidden, out)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


def make_data(input_shape, classes=None, target_shape=None, steps=3):
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(steps):
        x = torch.randn(*input_shape, generator=g)
        t = (
            torch.randint(0, classes, (input_shape[0],), generator=g)
            if classes
            else torch.randn(*target_shape, generator=g)
        )
        batches.append((x, t))
    return batches


MODELS = {
    "mlp": (
        lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 4)),
        lambda: make_data((8, 16), classes=4),
        F.cross_entropy,
    ),
    "cnn": (
        # No bias before a batch norm, as such models are written: the norm subtracts the mean, so
        # that bias's gradient is rounding noise, which Adam scales up to a full step whose sign can
        # differ between device and CPU (docs/device/performance.md, "Rounding").
        lambda: nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 8, 3, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(8, 10),
        ),
        lambda: make_data((4, 3, 8, 8), classes=10),
        F.cross_entropy,
    ),
    "transformer": (
        lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
        lambda: make_data((2, 5, 16), target_shape=(2, 5, 16)),
        F.mse_loss,
    ),
    # nn.RNN has no fused cell: its steps are matrix products and tanh, native or on the CPU fallback.
    "rnn": (
        lambda: LastStep(nn.RNN(8, 16, num_layers=2, batch_first=True), 16, 4),
        lambda: make_data((3, 6, 8), target_shape=(3, 4)),
        F.mse_loss,
    ),
    "lstm": (
        lambda: LastStep(nn.LSTM(8, 16, num_layers=2, batch_first=True), 16, 4),
        lambda: make_data((3, 6, 8), target_shape=(3, 4)),
        F.mse_loss,
    ),
    "gru": (
        lambda: LastStep(nn.GRU(8, 16, batch_first=True), 16, 4),
        lambda: make_data((3, 6, 8), target_shape=(3, 4)),
        F.mse_loss,
    ),
}

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1),
}


def train(model, make_optimizer, batches, loss_fn, device):
    model = copy.deepcopy(model).to(device)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for x, target in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x.to(device)), target.to(device))
        loss.backward()
        optimizer.step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), model


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
@pytest.mark.parametrize("model_name", MODELS)
def test_training_matches_cpu(model_name, optimizer):
    build, data, loss_fn = MODELS[model_name]
    torch.manual_seed(0)
    model = build()
    batches = data()
    cpu_rng = torch.get_rng_state()
    losses, trained = train(model, OPTIMIZERS[optimizer], batches, loss_fn, DEVICE)
    assert torch.equal(torch.get_rng_state(), cpu_rng)
    expected_losses, expected = train(model, OPTIMIZERS[optimizer], batches, loss_fn, "cpu")
    assert_close(losses, expected_losses, **TOL)
    if model_name == "transformer":
        # The key bias has a gradient of exactly zero in exact arithmetic (softmax ignores a shift
        # shared by all scores); Adam normalises the rounding noise left in its place to steps of
        # size lr, in a direction that differs between any two implementations. Not compared.
        with torch.no_grad():
            for m in (trained, expected):
                m.self_attn.in_proj_bias[16:32] = 0
    for (name, p), q in zip(trained.named_parameters(), expected.parameters(), strict=True):
        assert p.device == DEVICE, name
        assert_close(p.grad.cpu(), q.grad, **TOL, msg=f"gradient of {name}")
        assert_close(p.detach().cpu(), q.detach(), **TOL, msg=name)
    for (name, b), c in zip(trained.named_buffers(), expected.buffers(), strict=True):
        assert_close(b.cpu(), c, **TOL, msg=name)  # BatchNorm running statistics


def test_training_on_the_second_device():
    if torch.foo.device_count() < 2:
        pytest.skip("needs two foo devices")
    build, data, loss_fn = MODELS["cnn"]
    torch.manual_seed(0)
    model = build()
    losses, trained = train(model, OPTIMIZERS["adam"], data(), loss_fn, torch.device("foo:1"))
    expected_losses, _ = train(model, OPTIMIZERS["adam"], data(), loss_fn, "cpu")
    assert all(p.device.index == 1 for p in trained.parameters())
    assert_close(losses, expected_losses, **TOL)


def test_fused_and_foreach_optimizers_match_the_loop_version():
    build, data, loss_fn = MODELS["mlp"]
    torch.manual_seed(0)
    model = build()
    reference, _ = train(model, lambda p: torch.optim.Adam(p, lr=0.01, foreach=False), data(), loss_fn, DEVICE)
    for flags in ({"foreach": True}, {"fused": True}):
        losses, _ = train(
            model, lambda p, f=flags: torch.optim.AdamW(p, lr=0.01, weight_decay=0.0, **f), data(), loss_fn, DEVICE
        )
        assert_close(losses, reference, **TOL, msg=str(flags))


def test_training_with_dropout_is_reproducible_and_leaves_the_cpu_generator_alone():
    def run():
        torch.foo.manual_seed_all(5)
        losses, trained = train(initial, OPTIMIZERS["adam"], batches, F.cross_entropy, DEVICE)
        return losses, [p.detach().cpu() for p in trained.parameters()]

    torch.manual_seed(0)
    initial = nn.Sequential(nn.Linear(16, 32), nn.Dropout(0.3), nn.ReLU(), nn.Linear(32, 4))
    batches = make_data((8, 16), classes=4)
    cpu_rng = torch.get_rng_state()
    first, second = run(), run()
    assert torch.get_rng_state().equal(cpu_rng)
    assert torch.equal(first[0], second[0])
    for a, b in zip(first[1], second[1], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "conv3d", "conv_transpose2d", "grouped_strided_dilated"])
def test_convolutions_forward_and_backward_match_cpu(kind):
    torch.manual_seed(1)
    layers = {
        "conv1d": (nn.Conv1d(3, 4, 3), (2, 3, 9)),
        "conv2d": (nn.Conv2d(3, 4, 3, padding=1, bias=False), (2, 3, 7, 7)),
        "conv3d": (nn.Conv3d(2, 3, 2), (1, 2, 4, 4, 4)),
        "conv_transpose2d": (nn.ConvTranspose2d(3, 2, 3, stride=2, output_padding=1), (2, 3, 4, 4)),
        "grouped_strided_dilated": (nn.Conv2d(4, 6, 3, stride=2, dilation=2, groups=2), (2, 4, 9, 9)),
    }
    layer, shape = layers[kind]
    x = torch.randn(*shape, requires_grad=True)
    x_dev = x.detach().to(DEVICE).requires_grad_()
    layer_dev = copy.deepcopy(layer).to(DEVICE)
    out, out_dev = layer(x), layer_dev(x_dev)
    assert_close(out_dev.cpu(), out, **TOL)
    grad = torch.randn_like(out)
    out.backward(grad)
    out_dev.backward(grad.to(DEVICE))
    assert_close(x_dev.grad.cpu(), x.grad, **TOL)
    for p, q in zip(layer_dev.parameters(), layer.parameters(), strict=True):
        assert_close(p.grad.cpu(), q.grad, **TOL)


def test_channels_last_convolution_keeps_the_memory_format():
    conv = nn.Conv2d(3, 4, 3).to(DEVICE).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 6, 6, device=DEVICE).to(memory_format=torch.channels_last)
    out = conv(x)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert_close(out.cpu(), F.conv2d(x.cpu(), conv.weight.cpu(), conv.bias.cpu()), **TOL)


@pytest.mark.parametrize("cell", [nn.LSTMCell, nn.GRUCell])
def test_fused_rnn_cells_gradcheck(cell):
    torch.manual_seed(2)
    layer = cell(3, 4).double().to(DEVICE)
    x = torch.randn(2, 3, dtype=torch.double, device=DEVICE, requires_grad=True)
    h = torch.randn(2, 4, dtype=torch.double, device=DEVICE, requires_grad=True)
    state = (h, torch.randn(2, 4, dtype=torch.double, device=DEVICE)) if cell is nn.LSTMCell else h

    def f(x, h):
        out = layer(x, (h, state[1]) if cell is nn.LSTMCell else h)
        return out if cell is nn.GRUCell else out[0] + out[1]

    assert torch.autograd.gradcheck(f, (x, h))


def test_rnn_cell_shape_errors_are_clear():
    with pytest.raises(RuntimeError, match="state must have size"):
        torch.ops.aten._thnn_fused_lstm_cell(
            torch.randn(2, 8, device=DEVICE), torch.randn(2, 8, device=DEVICE), torch.randn(2, 3, device=DEVICE)
        )
    with pytest.raises(RuntimeError, match="same size"):
        torch.ops.aten._thnn_fused_gru_cell(
            torch.randn(2, 6, device=DEVICE), torch.randn(3, 6, device=DEVICE), torch.randn(2, 2, device=DEVICE)
        )


@pytest.mark.parametrize("variant", ["plain", "causal", "mask"])
def test_scaled_dot_product_attention_matches_cpu(variant):
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, 5, 8, generator=g, requires_grad=True) for _ in range(3))
    kwargs = {"is_causal": True} if variant == "causal" else {}
    if variant == "mask":
        kwargs["attn_mask"] = torch.randn(5, 5, generator=g)
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    dev = [t.detach().to(DEVICE).requires_grad_() for t in (q, k, v)]
    dev_kwargs = {key: (val.to(DEVICE) if isinstance(val, torch.Tensor) else val) for key, val in kwargs.items()}
    out_dev = F.scaled_dot_product_attention(*dev, **dev_kwargs)
    assert_close(out_dev.cpu(), out, **TOL)
    out.sum().backward()
    out_dev.sum().backward()
    for t, t_dev in zip((q, k, v), dev, strict=True):
        assert_close(t_dev.grad.cpu(), t.grad, **TOL)


def test_transformer_inference_fast_path_matches_cpu():
    torch.manual_seed(4)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        expected = layer(x)
        result = copy.deepcopy(layer).to(DEVICE)(x.to(DEVICE))
    assert_close(result.cpu(), expected, **TOL)


def test_embedding_and_sparse_updates():
    torch.manual_seed(5)
    emb = nn.Embedding(10, 4)
    emb_dev = copy.deepcopy(emb).to(DEVICE)
    idx = torch.tensor([[1, 2, 1], [9, 0, 2]])
    emb(idx).pow(2).sum().backward()
    emb_dev(idx.to(DEVICE)).pow(2).sum().backward()
    assert_close(emb_dev.weight.grad.cpu(), emb.weight.grad)
