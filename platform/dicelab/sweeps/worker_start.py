"""The first module a private local Ray's prestarted trial workers import (`warm_workers.TRIAL_MODULES`):
the garbage collector's raised first threshold for the worker (`dicelab.garbage`), before the imports
that follow it (torch, transformers, MLflow, Tune), during which Python's default would run full
collections over the growing heap again and again."""

from dicelab import garbage

garbage.for_this_process()
