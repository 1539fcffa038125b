"""Typed experiment config. Every section forbids unknown keys, so a typo is an error, not a silent default.

Names used by registries (data source, task, loss, backbone) are plain strings here and are checked against
their registries by `dicelab.experiment`, so adding a loss or task never touches this file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator


class Section(BaseModel):
    # Numbers are finite: YAML's .inf would pass `gt=0` (a learning rate of inf), and .nan fails every bound
    # with a message about the bound instead of the number.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class SyntheticConfig(Section):
    """Options of the synthetic generators (pairs, tagging, spans)."""

    n_train: int = Field(2000, ge=1)
    n_dev: int = Field(500, ge=1)
    positive_rate: float = Field(0.2, gt=0.0, lt=1.0)  # pairs: share of duplicates
    unrelated_rate: float = Field(0.0, ge=0.0, le=1.0)  # pairs: share of negatives pairing unrelated events
    ambiguous_rate: float = Field(0.0, ge=0.0, lt=1.0)  # pairs: share restating an event vaguely
    ambiguous_positive_rate: float = Field(0.4, ge=0.0, le=1.0)  # pairs: share of those labelled 1
    entity_density: float = Field(0.15, gt=0.0, lt=1.0)  # tagging: share of tokens inside an entity
    unanswerable_rate: float = Field(0.0, ge=0.0, lt=1.0)  # spans: SQuAD 2.0-style questions without answer
    seed: int = 0


class VariantOptions(Section):
    """Overrides of a resampling preset's targets (see `dicelab resample`)."""

    size: int | None = Field(None, ge=1)
    positive_rate: float | None = Field(None, gt=0.0, lt=1.0)
    seed: int = 0


def _label(value: Any) -> Any:
    """A label as the data files hold it, text: `positive_label: 1` is "1". A boolean is how YAML reads a bare
    yes / no / on / off / true / false, a word it no longer holds."""
    if isinstance(value, bool):
        raise ValueError(f"YAML reads a bare yes, no, on, off, true or false as {value}: quote the label")
    if isinstance(value, int):
        return str(value)
    return value


Label = Annotated[str, BeforeValidator(_label)]


class CarvedSplit(Section):
    """A split carved from another one: a seeded random `fraction` of split `carve_from` (stratified by label
    for pairs data), which that split then no longer holds. For datasets whose labelled files are only train
    and dev (GLUE: the test files carry no labels): carve dev from train, and the labelled dev file is the
    test."""

    carve_from: Literal["train", "dev", "test"] = "train"
    fraction: float = Field(..., gt=0.0, lt=1.0)
    seed: int = 0


# A split is read (a file or hub split name) or carved: told apart by type, so an error names one of them.
SplitSource = Annotated[
    Annotated[str, Tag("read")] | Annotated[CarvedSplit, Tag("carved")],
    Discriminator(lambda value: "read" if isinstance(value, str) else "carved"),
]


class DataConfig(Section):
    source: str = "synthetic_pairs"  # registry name: hub | local | synthetic_pairs | synthetic_tagging | ...
    name: str | None = None  # hub dataset, e.g. "glue/mrpc" (source: hub)
    path: str | None = None  # local directory or file (source: local); relative to the working directory
    format: Literal["auto", "tsv", "csv", "jsonl", "parquet", "conll", "squad", "mrc_ner"] = "auto"
    # canonical split -> the source's split (a file name, a hub split) or a split carved from another one.
    # train and dev are required; test is optional: every finished trial is scored on it once, at its end.
    splits: dict[Literal["train", "dev", "test"], SplitSource] = Field(
        default_factory=lambda: {"train": "train", "dev": "dev"}
    )
    # canonical name -> column name in the source, or a 0-based column index (CoNLL, header-less TSV/CSV)
    columns: dict[str, str | int] = Field(default_factory=dict)
    labels: list[Label] | None = None  # the label set; inferred from the training split when omitted
    positive_label: Label | None = None  # binary tasks: which label is "positive" (default: "1")
    max_train_examples: int | None = Field(None, ge=1)
    max_dev_examples: int | None = Field(None, ge=1)
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)
    variant: str = "original"  # Table 8 resampling preset applied to the training split
    variant_options: VariantOptions = Field(default_factory=VariantOptions)
    max_length: int = Field(128, ge=8, le=4096)
    cache_dir: str = ".dicelab/cache"

    @model_validator(mode="after")
    def _carved_splits(self) -> DataConfig:
        for name, split in self.splits.items():
            if not isinstance(split, CarvedSplit):
                continue
            source = self.splits.get(split.carve_from)
            if split.carve_from == name or source is None or isinstance(source, CarvedSplit):
                raise ValueError(
                    f"splits.{name}.carve_from: {split.carve_from!r} is not a split read from the source "
                    f"(read: {', '.join(k for k, v in self.splits.items() if isinstance(v, str)) or 'none'})"
                )
        return self

    @property
    def read_splits(self) -> dict[str, str]:
        """The splits read from the source (canonical name -> the source's name), carved ones left out."""
        return {name: split for name, split in self.splits.items() if isinstance(split, str)}


class TaskConfig(Section):
    name: str = "pair_classification"  # pair_classification | token_tagging | span_extraction | mrc_ner
    doc_stride: int = Field(64, ge=1)  # span extraction: overlap of context windows
    max_query_length: int = Field(32, ge=1)
    max_answer_length: int = Field(30, ge=1)
    version_2_with_negative: bool = False  # span extraction: SQuAD 2.0 style unanswerable questions
    # mrc_ner: the query per entity type: "auto", a named set (conll03 | ontonotes5 | msra | ontonotes4) or
    # {TYPE: query}; max_answer_length is then the longest entity in tokens.
    queries: str | dict[str, str] = "auto"
    match_loss_weight: float = Field(0.1, ge=0.0)  # mrc_ner: span-match loss weight (start and end weigh 1)


class TinyBertConfig(Section):
    """The randomly initialised BERT behind `backbone: tiny-bert` (fast tests and demos)."""

    hidden_size: int = Field(64, ge=8)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(2, ge=1)
    intermediate_size: int = Field(128, ge=8)
    vocab_size: int = Field(2000, ge=100)


class ModelConfig(Section):
    backbone: str = "tiny-bert"  # tiny-bert | minilm | any hub id or local path (docs/backbones.md)
    # A hub id's branch, tag or commit (None: the default branch); the commit it resolves to is recorded on
    # the run. Not for tiny-bert or a local directory.
    revision: str | None = Field(None, min_length=1)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    tiny_bert: TinyBertConfig = Field(default_factory=TinyBertConfig)


class LossConfig(BaseModel):
    """`name` plus the loss's own keyword parameters (checked by `dicelab.losses.build_loss`)."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    name: str = "ce"

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class TrainConfig(Section):
    epochs: int = Field(3, ge=1)
    max_steps: int | None = Field(None, ge=1)  # stop after this many optimizer steps (overrides epochs)
    batch_size: int = Field(32, ge=1)
    eval_batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(2e-5, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    warmup_ratio: float = Field(0.1, ge=0.0, le=1.0)
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    grad_accum_steps: int = Field(1, ge=1)
    # Training batches: "length" groups examples of similar length (seeded mega-batches sorted by length, the
    # batches then shuffled): far less padding; "random" is a plain shuffle. Evaluation always runs in length
    # order (results in example order).
    batching: Literal["length", "random"] = "length"
    seed: int = 42
    eval_every_steps: int | None = Field(None, ge=1)  # None: evaluate at the end of every epoch
    early_stopping_patience: int | None = Field(None, ge=1)  # evaluations without improvement
    metric: str = "auto"  # dev metric to select on; "auto" = the task's primary metric
    # Whether the best evaluation is the metric's highest value (a score: f1, accuracy) or its lowest (a
    # loss: log_loss). None: max. A sweep's `search.mode` sets it in every trial.
    mode: Literal["max", "min"] | None = None
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # auto: bf16 autocast on CUDA with native bf16, fp16 with a gradient scaler on older GPUs, fp32 on CPU
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    num_threads: int | None = Field(None, ge=1)  # torch intra-op threads; None: leave torch's default
    # torch.compile the model (encoder and head) for training and evaluation: fewer, larger kernels, at a
    # compile per trial; off until measured faster on a GPU (docs/gpus.md)
    compile: bool = False
    # TF32 matmuls on CUDA GPUs that have them (compute capability 8.0+); no effect elsewhere
    tf32: bool = True
    log_every_steps: int = Field(10, ge=1)
    # The weights kept as an MLflow model on the trial's run: "best" (at the best dev evaluation, the one the
    # best_dev_* metrics report), "last" (at the end of training) or "none" (dicelab.models).
    save_model: Literal["best", "last", "none"] = "best"


class TrackingConfig(Section):
    enabled: bool = True
    uri: str | None = None  # None: sqlite:///<cwd>/.dicelab/mlflow.db; http(s):// for a server
    experiment: str | None = None  # None: the config's name
    run_name: str | None = None
    log_predictions: bool = True


class ExperimentConfig(Section):
    name: str = Field(..., min_length=1)
    description: str = ""
    # Plugin modules to load first: module names, .py files or package directories (docs: plugins).
    plugins: list[str] = Field(default_factory=list)
    data: DataConfig = Field(default_factory=DataConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    # The paper's reported numbers for side-by-side reporting, e.g. {"metric": "f1", "results": {...}}.
    paper: dict[str, Any] | None = None
    # A sweep's search section; its schema is owned by `dicelab.sweeps` and checked there.
    search: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _experiment_name(self) -> ExperimentConfig:
        if self.tracking.experiment is None:
            self.tracking.experiment = self.name
        return self
