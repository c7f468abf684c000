"""Hugging Face Trainer on foo devices: a tiny GPT-2 built from a config (no download) trained
for a few steps on synthetic tokens. Needs `pip install transformers accelerate`.

    ACCELERATE_TORCH_DEVICE=foo python examples/hf_trainer.py            # on the device
    ACCELERATE_TORCH_DEVICE=foo ACCELERATE_MIXED_PRECISION=bf16 python examples/hf_trainer.py
    python examples/hf_trainer.py --cpu                                   # the same on the CPU

TrainingArguments knows devices by name and takes any other from ACCELERATE_TORCH_DEVICE; bf16=True
is refused for devices it does not list, while ACCELERATE_MIXED_PRECISION=bf16 reaches accelerate,
which autocasts on the device. The template's guide says why ("Using the device with training libraries"). The last line
prints the loss of every step, to compare runs.
"""

import argparse
import json
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import torch_foo  # noqa: F401  registers the device (autoload does it too once installed)


class SyntheticTokens(torch.utils.data.Dataset):
    """Fixed random token sequences; each is its own language-modelling target."""

    def __init__(self, count: int = 32, length: int = 16, vocab_size: int = 64):
        self.tokens = torch.randint(0, vocab_size, (count, length), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.tokens[i], "labels": self.tokens[i]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true", help="train on the CPU (TrainingArguments(use_cpu=True))")
    parser.add_argument("--steps", type=int, default=6)
    options = parser.parse_args()
    torch.manual_seed(0)
    # No dropout: the runs on the device and on the CPU then see the same computation.
    config = GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0
    )
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as output:
        arguments = TrainingArguments(
            output_dir=output,
            max_steps=options.steps,
            per_device_train_batch_size=4,
            learning_rate=1e-3,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            use_cpu=options.cpu,
            seed=0,
        )
        trainer = Trainer(model=model, args=arguments, train_dataset=SyntheticTokens())
        trainer.train()
    device = next(trainer.model.parameters()).device
    print(f"trained on {device}, mixed precision: {trainer.accelerator.mixed_precision}")
    print("losses " + json.dumps([entry["loss"] for entry in trainer.state.log_history if "loss" in entry]))


if __name__ == "__main__":
    main()
