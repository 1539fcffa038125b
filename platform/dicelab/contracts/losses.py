"""The contract every registered loss passes, a plugin's included (Optuna-style reusable suite).

A subclass names the loss (`name`), the parameter sets to check (`configs`) and the parameters of the training
check (`train_params`); `LossContract.of(name)` makes one for any registered loss, from the loss class's own
`contract_configs` / `contract_train_params` when it declares them. Each `test_*` method is one check:
pytest runs them on the built-ins (tests/losses), `dicelab plugins check` on a plugin's losses.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import torch
from torch import Tensor

from dicelab.contracts._running import raises
from dicelab.losses import LOSSES, Loss, build_loss, validate_loss_params

LAYOUTS = ("binary", "binary_column", "softmax")
NUM_CLASSES = 4
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def make_batch(
    layout: str, n: int = 12, scale: float = 2.0, seed: int = 0, dtype: torch.dtype = torch.float64
) -> tuple[Tensor, Tensor]:
    """Logits and targets in one of the accepted layouts; every class occurs."""
    generator = torch.Generator().manual_seed(seed)
    classes = 2 if layout.startswith("binary") else NUM_CLASSES
    target = torch.arange(n) % classes
    target = target[torch.randperm(n, generator=generator)]
    shape = {"binary": (n,), "binary_column": (n, 1), "softmax": (n, NUM_CLASSES)}[layout]
    logits = scale * torch.randn(shape, generator=generator, dtype=torch.float64)
    return logits.to(dtype), target


def loss_and_gradient(loss_fn, logits: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    logits = logits.detach().clone().requires_grad_(True)
    value = loss_fn(logits, target)
    (gradient,) = torch.autograd.grad(value, logits)
    return value.detach(), gradient


class LossContract:
    name: ClassVar[str]
    configs: ClassVar[list[dict[str, Any]]] = [{}]
    train_params: ClassVar[dict[str, Any]] = {}

    @classmethod
    def of(cls, name: str) -> LossContract:
        """The contract of the registered loss `name`, with the configs its class declares."""
        loss_class = LOSSES.get(name)
        attributes = {
            "name": name,
            "configs": list(getattr(loss_class, "contract_configs", [{}])),
            "train_params": dict(getattr(loss_class, "contract_train_params", {})),
        }
        return type(f"{loss_class.__name__}Contract", (cls,), attributes)()

    def params(self, config: dict[str, Any], num_classes: int) -> dict[str, Any]:
        """The parameters for a problem with `num_classes` classes (wce adds its class counts)."""
        return dict(config)

    def build(self, config: dict[str, Any], layout: str) -> Loss:
        return build_loss(self.name, **self.params(config, 2 if layout.startswith("binary") else NUM_CLASSES))

    def highest_pushed_down_logit(self, config: dict[str, Any]) -> float:
        """The all-negative check covers logits from -6 to this value."""
        return 6.0

    def cases(self):
        return itertools.product(self.configs, LAYOUTS)

    def test_is_registered(self) -> None:
        assert self.name in LOSSES
        assert isinstance(self.build(self.configs[0], "softmax"), Loss)

    def test_sequence_batches_equal_their_flattened_positions(self) -> None:
        for config in self.configs:
            logits, target = make_batch("softmax", n=24, seed=3)
            target[5] = -100
            loss = self.build(config, "softmax")
            flat = loss_and_gradient(loss, logits, target)
            sequence = loss_and_gradient(loss, logits.view(4, 6, NUM_CLASSES), target.view(4, 6))
            torch.testing.assert_close(sequence[0], flat[0])
            torch.testing.assert_close(sequence[1].view(24, NUM_CLASSES), flat[1])

    def test_non_contiguous_logits(self) -> None:
        for config in self.configs:
            logits, target = make_batch("softmax")
            loss = self.build(config, "softmax")
            strided = logits.t().contiguous().t()  # same values, column-major
            assert not strided.is_contiguous()
            torch.testing.assert_close(
                loss_and_gradient(loss, strided, target), loss_and_gradient(loss, logits, target)
            )

    def test_ignored_positions_change_nothing(self) -> None:
        for config, layout in self.cases():
            loss = self.build(config, layout)
            logits, target = make_batch(layout, n=8)
            noise, _ = make_batch(layout, n=5, scale=50.0, seed=9)
            padded_logits = torch.cat([logits[:3], noise, logits[3:]])
            padded_target = torch.cat([target[:3], torch.full((5,), -100), target[3:]])
            value, gradient = loss_and_gradient(loss, logits, target)
            padded_value, padded_gradient = loss_and_gradient(loss, padded_logits, padded_target)
            torch.testing.assert_close(padded_value, value)
            assert torch.count_nonzero(padded_gradient[3:8]) == 0
            torch.testing.assert_close(torch.cat([padded_gradient[:3], padded_gradient[8:]]), gradient)

    def test_custom_ignore_index_and_all_ignored_batches(self) -> None:
        for config, layout in self.cases():
            logits, target = make_batch(layout, n=6)
            loss = build_loss(
                self.name, **self.params(config, NUM_CLASSES if layout == "softmax" else 2), ignore_index=7
            )
            value, gradient = loss_and_gradient(loss, logits, torch.full_like(target, 7))
            assert value.item() == 0.0 and torch.count_nonzero(gradient) == 0
            expected = loss_and_gradient(self.build(config, layout), logits[1:], target[1:])
            torch.testing.assert_close(loss(logits, torch.cat([torch.tensor([7]), target[1:]])), expected[0])

    def test_an_all_negative_batch_gives_a_finite_loss_that_pushes_p_down(self) -> None:
        # Without smoothing a negative position scores 0 / q^k whatever q is: no signal, hence smooth > 0.
        for config in (c for c in self.configs if c.get("smooth", 1.0) > 0):
            logits = torch.linspace(-6.0, self.highest_pushed_down_logit(config), 9)
            value, gradient = loss_and_gradient(self.build(config, "binary"), logits, torch.zeros(9))
            assert torch.isfinite(value) and value.item() > 0
            assert (gradient > 0).all(), f"{config}: a descent step must lower every logit, got {gradient}"

    def test_gradcheck_in_float64(self) -> None:
        for config, layout in self.cases():
            logits, target = make_batch(layout, n=6, scale=1.5)
            loss = self.build(config, layout)
            inputs = (logits.requires_grad_(),)
            assert torch.autograd.gradcheck(
                lambda x, loss=loss, target=target: loss(x, target), inputs, fast_mode=True
            )

    def test_accepts_any_float_dtype_and_computes_in_at_least_float32(self) -> None:
        for dtype in DTYPES:
            logits, target = make_batch("softmax")
            value = self.build(self.configs[0], "softmax")(logits.to(dtype).requires_grad_(), target)
            assert value.dim() == 0
            assert value.dtype == (torch.float64 if dtype == torch.float64 else torch.float32), dtype
            torch.testing.assert_close(
                value.double(), self.build(self.configs[0], "softmax")(logits, target), atol=2e-2, rtol=2e-2
            )

    def test_values_and_gradients_stay_finite_for_logits_up_to_100(self) -> None:
        for config, layout in self.cases():
            logits, target = make_batch(layout, n=40, scale=1.0, seed=5, dtype=torch.float32)
            logits = 100.0 * torch.sign(logits) * logits.abs().clamp(0.05, 1.0)  # margins of up to 200
            loss = self.build(config, layout)
            value, gradient = loss_and_gradient(loss, logits, target)
            assert torch.isfinite(value) and torch.isfinite(gradient).all(), f"{config} {layout}"
            features = torch.randn(40, 8)
            head = torch.nn.Linear(8, logits.shape[-1] if logits.dim() == 2 else 1)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                scaled = head(features) * 60.0
                output = scaled if logits.dim() == 2 else scaled.squeeze(-1)
                value = loss(output, target)
            value.backward()
            assert value.dtype == torch.float32 and torch.isfinite(value), f"{config} {layout}"
            assert all(torch.isfinite(w.grad).all() for w in head.parameters()), f"{config} {layout}"

    def test_targets_outside_the_label_set_and_bad_shapes_name_the_target(self) -> None:
        """The messages of `dicelab.losses.functional.prepare`, which a plugin's loss can start from."""
        loss = self.build(self.configs[0], "softmax")
        logits, target = make_batch("softmax", n=4)
        for bad in (torch.tensor([0, 1, NUM_CLASSES, 2]), torch.tensor([0, -1, 1, 2])):
            with raises(ValueError, r"^target must be in \[0, 3\]"):
                loss(logits, bad)
        with raises(ValueError, r"^target must be in \{0, 1\}"):
            self.build(self.configs[0], "binary")(logits[:, 0], torch.tensor([0.0, 1.0, 0.5, 1.0]))
        with raises(ValueError, r"^target shape \(3,\) does not match logits shape \(4, 4\)"):
            loss(logits, target[:3])
        with raises(ValueError, r"^target must hold class indices"):
            loss(logits, target.double())

    def test_validates_its_configs_and_rejects_unknown_parameters(self) -> None:
        for config in self.configs:
            validate_loss_params(self.name, self.params(config, NUM_CLASSES))
        with raises(ValueError, r"^gama is not a parameter of loss"):
            validate_loss_params(self.name, {"gama": 1.0})
        with raises(ValueError, r"^gama is not a parameter of loss"):
            build_loss(self.name, gama=1.0)

    def test_trains_a_linear_model_on_an_imbalanced_problem(self) -> None:
        """Binary, about 10% positives, noisy labels: logistic regression reaches dev F1 >= 0.78 (plain cross
        entropy: 0.82) with every loss and its `train_params`."""
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(1)
        direction = torch.randn(6, generator=generator)
        features = torch.randn(3000, 6, generator=generator)
        score = features @ direction / direction.norm() + 0.3 * torch.randn(3000, generator=generator)
        labels = (score > 1.28).long()
        train, dev = slice(0, 2000), slice(2000, 3000)
        params = self.params(self.train_params, 2)
        if "class_counts" in params:  # the trainer's job: counts of the training split
            params["class_counts"] = torch.bincount(labels[train]).tolist()
        model = torch.nn.Linear(6, 1)
        loss = build_loss(self.name, **params)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(150):
            optimizer.zero_grad()
            loss(model(features[train]).squeeze(-1), labels[train]).backward()
            optimizer.step()
        predicted = (model(features[dev]).squeeze(-1) > 0).long()
        true_positive = ((predicted == 1) & (labels[dev] == 1)).sum().item()
        f1 = 2 * true_positive / (predicted.sum().item() + labels[dev].sum().item())
        assert f1 >= 0.78, f"{self.name} {params}: dev F1 {f1:.3f}"
