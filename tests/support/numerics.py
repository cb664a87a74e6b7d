"""Comparing weights and tensors across two trainings."""

import numpy as np


def max_difference(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a.model.get_weights(), b.model.get_weights()))
