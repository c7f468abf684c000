"""Parameter identity and tied weights: module.to("foo"), .to_empty(), load_state_dict(assign=True) and
`.data` assignment behave as they do for CUDA, so weights shared between modules stay shared and an
optimizer created before .to() trains the model (aten/ShallowCopy.cpp)."""

import copy

import pytest
import torch
import torch.nn as nn
from torch.testing import assert_close

DEVICE = torch.device("foo", 0)


def tied_pair() -> nn.ModuleDict:
    """The issue's example: a linear layer that shares its weight with an embedding."""
    torch.manual_seed(0)
    lin = nn.Linear(2, 2)
    emb = nn.Embedding(3, 2)
    lin.weight = emb.weight
    return nn.ModuleDict(dict(a=lin, b=emb))


class TinyLanguageModel(nn.Module):
    """Input embedding and output projection share one weight, as in most language models."""

    def __init__(self, vocab: int = 11, width: int = 8):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab, bias=False)
        self.out.weight = self.embed.weight

    def forward(self, tokens):
        return self.out(self.norm(torch.tanh(self.mix(self.embed(tokens)))))


def relations(module: nn.Module, before: list) -> tuple:
    """What a user checks after a conversion: is each parameter the same object as before, and
    which parameters are one object (tied)."""
    after = [p for _, p in module.named_parameters(remove_duplicate=False)]
    same_objects = tuple(a is b for a, b in zip(after, before, strict=True))
    tied = tuple(tuple(a is b for b in after) for a in after)
    return same_objects, tied


def convert(make, conversion):
    module = make()
    before = [p for _, p in module.named_parameters(remove_duplicate=False)]
    conversion(module)
    return module, relations(module, before)


def test_tied_weights_stay_tied_after_to_device():
    m = tied_pair().to(DEVICE)
    assert m.a.weight is m.b.weight
    assert m.a.weight.device == DEVICE and m.a.bias.device == DEVICE


def test_to_device_and_back_keeps_every_parameter_object():
    m = tied_pair()
    before = list(m.parameters())
    m.to(DEVICE)
    assert all(p is q for p, q in zip(m.parameters(), before, strict=True))
    m.to("cpu")
    assert all(p is q for p, q in zip(m.parameters(), before, strict=True))
    assert m.a.weight is m.b.weight and m.a.weight.device.type == "cpu"


FUTURE_FLAGS = {
    "default": {},
    "overwrite_module_params_on_conversion": {"overwrite": True},
    "swap_module_params_on_conversion": {"swap": True},
}


@pytest.fixture(params=list(FUTURE_FLAGS), ids=list(FUTURE_FLAGS))
def future_flags(request):
    """torch.__future__'s conversion flags, as a user may set them; restored afterwards."""
    flags = FUTURE_FLAGS[request.param]
    overwrite = torch.__future__.get_overwrite_module_params_on_conversion()
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_overwrite_module_params_on_conversion(flags.get("overwrite", False))
    torch.__future__.set_swap_module_params_on_conversion(flags.get("swap", False))
    yield request.param
    torch.__future__.set_overwrite_module_params_on_conversion(overwrite)
    torch.__future__.set_swap_module_params_on_conversion(swap)


@pytest.mark.parametrize(
    "conversion",
    [
        lambda m: m.to(DEVICE),
        lambda m: m.to(device=DEVICE, dtype=torch.float64),
        lambda m: m.foo(),
        lambda m: m.to_empty(device=DEVICE),
    ],
    ids=["to", "to_with_dtype", "module_method", "to_empty"],
)
def test_conversion_to_device_treats_parameters_as_a_compatible_conversion_does(future_flags, conversion):
    """CPU -> CUDA is a conversion between compatible tensor types, like float32 -> float64 on the
    CPU: under every torch.__future__ setting, moving to the device keeps (or replaces) parameter
    objects and ties exactly as that conversion does."""
    _, expected = convert(TinyLanguageModel, lambda m: m.to(torch.float64))
    module, got = convert(TinyLanguageModel, conversion)
    assert got == expected
    assert all(p.device == DEVICE for p in module.parameters())


def test_gradients_move_with_their_parameters():
    m = tied_pair()
    (m.b(torch.tensor([0, 2])).sum() + m.a.bias.sum()).backward()
    grad = m.a.weight.grad
    m.to(DEVICE)
    assert m.a.weight.grad is grad and grad.device == DEVICE
    assert m.b.weight.grad is grad


def test_data_assignment_works_in_both_directions(device):
    host = torch.zeros(3)
    on_device = torch.arange(3.0, device=device)
    host_object = host
    host.data = on_device
    assert host is host_object and host.device == device
    assert_close(host.cpu(), torch.arange(3.0))

    back = torch.ones(2, 2).t()
    target = torch.zeros(5, device=device)
    target.data = back
    assert target.device.type == "cpu" and target.shape == (2, 2) and target.stride() == back.stride()


def test_data_assignment_between_devices():
    if torch.foo.device_count() < 2:
        pytest.skip("needs two foo devices")
    x = torch.zeros(2, device="foo:0")
    x.data = torch.ones(2, device="foo:1")
    assert x.device == torch.device("foo:1") and x.sum().item() == 2.0


def test_parameter_data_assignment_keeps_training():
    p = nn.Parameter(torch.ones(3))
    p.data = p.data.to(DEVICE)
    (p * torch.arange(3.0, device=DEVICE)).sum().backward()
    assert p.grad.device == DEVICE
    assert_close(p.grad.cpu(), torch.arange(3.0))


def test_incompatible_data_assignment_is_a_clear_error():
    sparse = torch.eye(2).to_sparse().to(DEVICE)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        torch.zeros(2, 2).data = sparse


def test_load_state_dict_assign_uses_the_checkpoints_tensors():
    source = TinyLanguageModel().to(DEVICE)
    state = source.state_dict()
    with torch.device("meta"):
        target = TinyLanguageModel()
    target.load_state_dict(state, assign=True)
    for name, p in target.named_parameters(remove_duplicate=False):
        assert isinstance(p, nn.Parameter) and p.requires_grad and p.device == DEVICE
        assert p.data_ptr() == state[name].data_ptr(), name
    # Tied weights point at one storage, as the checkpoint does.
    assert target.out.weight.data_ptr() == target.embed.weight.data_ptr()
    tokens = torch.tensor([[1, 2, 3]], device=DEVICE)
    assert_close(target(tokens), source(tokens))


@pytest.mark.parametrize("target_device", ["meta", "cpu"])
def test_load_state_dict_assign_relations_match_cpu(future_flags, target_device):
    """Identity and ties after load_state_dict(assign=True) of a device checkpoint are what the same
    code gives with a CPU checkpoint, under every torch.__future__ setting."""

    def load(device):
        state = TinyLanguageModel().to(device).state_dict()
        with torch.device(target_device):
            target = TinyLanguageModel()
        before = [p for _, p in target.named_parameters(remove_duplicate=False)]
        target.load_state_dict(state, assign=True)
        assert all(p.device.type == torch.device(device).type for p in target.parameters())
        return relations(target, before)

    assert load(DEVICE) == load("cpu")


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_optimizer_created_before_to_trains_like_cpu(optimizer):
    """The common pattern: build the model and its optimizer, then move the model. The optimizer
    must step the parameters the model uses, on the device exactly as on the CPU."""
    torch.manual_seed(0)
    reference = TinyLanguageModel()
    model = copy.deepcopy(reference)

    def make_optimizer(params):
        if optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9)
        return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)

    opt_ref = make_optimizer(reference.parameters())
    opt = make_optimizer(model.parameters())
    model.to(DEVICE)
    assert model.out.weight is model.embed.weight

    g = torch.Generator().manual_seed(1)
    for _ in range(4):
        tokens = torch.randint(0, 11, (3, 5), generator=g)
        targets = torch.randint(0, 11, (3, 5), generator=g)
        losses = []
        for m, o, device in ((reference, opt_ref, "cpu"), (model, opt, DEVICE)):
            o.zero_grad()
            logits = m(tokens.to(device))
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), targets.to(device).flatten())
            loss.backward()
            o.step()
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5, abs=1e-6)
    for (name, p_ref), p in zip(reference.named_parameters(), model.parameters(), strict=True):
        assert_close(p.cpu(), p_ref, rtol=1e-5, atol=1e-6, msg=name)
    # The optimizer's state is on the device: it holds the model's own parameters.
    assert all(
        state["momentum_buffer" if optimizer == "sgd" else "exp_avg"].device == DEVICE for state in opt.state.values()
    )
