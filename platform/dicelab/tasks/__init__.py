"""Tasks: pair classification, token tagging, NER as reading comprehension (mrc_ner), span extraction
(features, model head, loss wiring, metrics).

    task = TASKS.get(config.task.name)()  # a Task (dicelab.tasks.base): stateless, built without arguments

Adding a task is one module whose class implements `Task` and is decorated with `@TASKS.register(name)`,
plus its import here. Backbones (tokenizer and encoder) live in `dicelab.tasks.backbones`, what each
architecture needs (summary token, segment ids, padding) in the registry `dicelab.tasks.families`, metrics in
`dicelab.tasks.metrics`.
"""

from dicelab.tasks._mrc_ner import MrcNer
from dicelab.tasks._pair_classification import PairClassification
from dicelab.tasks._registry import TASKS
from dicelab.tasks._span_extraction import SpanExtraction
from dicelab.tasks._token_tagging import TokenTagging
from dicelab.tasks.base import EvalResult, Task

__all__ = ["TASKS", "EvalResult", "MrcNer", "PairClassification", "SpanExtraction", "Task", "TokenTagging"]
