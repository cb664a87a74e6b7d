"""The language-model metrics over the evaluation sample that the Trainer
and the Evaluator both use (`lm.py`): below both, outside serving."""
