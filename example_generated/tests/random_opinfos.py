"""The entries of PyTorch's OpInfo database (name[.variant]) whose results are random numbers, or
whose sample inputs draw some (dropout, sampling). The device's generator is not the CPU's
(tests/test_random.py checks that these operators draw from it), so their values cannot be compared
with the CPU's: tests/test_opinfo.py skips them, tests/fallback_sweep.py compares only their structure."""

RANDOM_OPINFOS = (
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "normal",
    "normal.in_place",
    "normal.number_mean",
    "uniform",
    "rand_like",
    "randint_like",
    "randn_like",
    "nn.functional.alpha_dropout",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "nn.functional.rrelu",
    "nn.functional.multi_head_attention_forward",
    "svd_lowrank",
    "pca_lowrank",
)
