"""The model code MLflow runs to load a dicelab model ("models from code": nothing is unpickled).

MLflow copies this file into every saved model and executes it on `mlflow.pyfunc.load_model`; it is not
imported by dicelab itself.
"""

import mlflow.models

from dicelab.models.pyfunc import DicelabPyfuncModel

mlflow.models.set_model(DicelabPyfuncModel())
