"""The methods torch generates for the backend: Tensor, Module, PackedSequence and Storage."""

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence


@pytest.mark.two_devices
def test_tensor_methods():
    x = torch.arange(3.0)
    assert not x.is_foo
    y = x.foo()
    assert y.is_foo and y.device == torch.device("foo:0")
    assert x.foo(1).device == torch.device("foo:1")
    assert x.foo("foo:1").device.index == 1
    assert y.tolist() == [0.0, 1.0, 2.0]


@pytest.mark.two_devices
def test_module_method():
    model = torch.nn.Linear(3, 2).foo()
    assert all(p.is_foo for p in model.parameters())
    model.foo(1)
    assert {p.device for p in model.parameters()} == {torch.device("foo:1")}


def test_a_submodule_named_as_the_backend_is_not_hidden_by_the_method():
    """A model may name a submodule as the backend is named (GPT-2's blocks have `self.mlp`): the
    submodule wins over the method torch generates, as it would if the class had no such method, and
    the method still moves every other module."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.foo = torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.foo(x).relu()

    block, x = Block(), torch.randn(2, 3)
    expected = block(x)
    assert isinstance(block.foo, torch.nn.Linear)
    torch.testing.assert_close(block.to("foo")(x.to("foo")).cpu(), expected)
    assert dict(block.named_children()) == {"foo": block.foo}
    plain = torch.nn.Sequential(torch.nn.Linear(3, 2))
    assert plain.foo() is plain and plain[0].weight.is_foo


def test_packed_sequence_methods():
    packed = pack_padded_sequence(torch.randn(4, 2, 3), torch.tensor([4, 2]))
    assert not packed.is_foo
    moved = packed.foo()
    assert moved.is_foo and moved.data.is_foo


@pytest.mark.two_devices
def test_storage_methods():
    storage = torch.arange(4, dtype=torch.uint8).untyped_storage()
    assert not storage.is_foo
    on_device = storage.foo()
    assert on_device.is_foo and on_device.device.type == "foo"
    assert list(on_device.cpu()) == [0, 1, 2, 3]
    assert on_device.foo(1).device.index == 1
