"""Model conformance: small standard architectures (tests/models.py: a decoder-only language model
with tied embeddings, RMSNorm, rotary positions and grouped-query attention; an encoder-decoder with
shared embeddings; a mixture of experts with top-k routing; a vision transformer; a convolutional
network with batch norm) train on the foo device as on the CPU: moved with model.to("foo"),
a few AdamW steps with gradient clipping give the CPU's losses, parameters and buffers, and greedy
generation with a key/value cache gives the CPU's tokens."""

import copy

import pytest
import torch
from models import MODELS, DecoderLM, train
from torch.testing import assert_close

DEVICE = "foo"
STEPS = 4
# float32 training on two correct implementations: the same operations, rounded in other orders.
TOL = {"rtol": 1e-4, "atol": 1e-5}


def tied_pairs(model):
    """(name, name) of parameters that are one parameter."""
    seen = {}
    pairs = []
    for name, module in model.named_modules():
        for attribute, p in module.named_parameters(recurse=False):
            full = f"{name}.{attribute}" if name else attribute
            if id(p) in seen:
                pairs.append((seen[id(p)], full))
            else:
                seen[id(p)] = full
    return pairs


def parameter(model, name):
    return model.get_parameter(name)


@pytest.mark.parametrize("name", MODELS)
def test_training_matches_cpu(name):
    spec = MODELS[name]
    torch.manual_seed(0)
    model = spec.build()
    batches = spec.batches(STEPS)
    on_cpu = copy.deepcopy(model)
    on_device = copy.deepcopy(model)
    expected = train(on_cpu, spec, batches, "cpu")
    losses = train(on_device, spec, batches, DEVICE)
    assert bool(tied_pairs(model)) == spec.tied
    for first, second in tied_pairs(model):
        assert parameter(on_device, first) is parameter(on_device, second), f"{first} and {second} came apart"
    assert_close(torch.tensor(losses), torch.tensor(expected), **TOL)
    state, expected_state = on_device.state_dict(), on_cpu.state_dict()
    assert state.keys() == expected_state.keys()
    for key, value in expected_state.items():
        assert state[key].device.type == DEVICE, key
        assert_close(state[key].cpu(), value, **TOL, msg=lambda m, k=key: f"{k}: {m}")


def test_greedy_generation_with_kv_cache_matches_cpu():
    torch.manual_seed(0)
    model = DecoderLM().eval()
    prompt = torch.randint(0, 64, (3, 5), generator=torch.Generator().manual_seed(1))
    expected = model.generate(prompt, new_tokens=10)
    on_device = copy.deepcopy(model).to(DEVICE)
    tokens = on_device.generate(prompt.to(DEVICE), new_tokens=10)
    assert torch.equal(tokens.cpu(), expected)
    # The cache changes nothing: recomputing the whole sequence picks the same next tokens.
    sequence = torch.cat([prompt.to(DEVICE), tokens], dim=1)
    with torch.no_grad():
        recomputed = on_device(sequence[:, :-1]).argmax(-1)[:, prompt.shape[1] - 1 :]
    assert torch.equal(recomputed.cpu(), expected)


def test_generation_after_training_matches_cpu():
    spec = MODELS["decoder-lm"]
    torch.manual_seed(0)
    model = spec.build()
    batches = spec.batches(STEPS)
    on_cpu, on_device = copy.deepcopy(model), copy.deepcopy(model)
    train(on_cpu, spec, batches, "cpu")
    train(on_device, spec, batches, DEVICE)
    prompt = batches[0][:, :4]
    expected = on_cpu.eval().generate(prompt, new_tokens=8)
    assert torch.equal(on_device.eval().generate(prompt.to(DEVICE), new_tokens=8).cpu(), expected)
