"""Forward error bounds for float32 arithmetic, evaluated on a float64 reference's own values.

A numeric test that compares a float32 computation with a float64 reference needs a tolerance
that holds on every CPU, whatever order its kernels sum in, and that is no looser than the
arithmetic allows (a loose one lets real bugs through). The bound here is the first-order
forward error bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 2002,
chapter 3), evaluated on the float64 reference's own values: every op of the reference records
the rounding error float32 may make in computing it from exact inputs (its `local` bound), and
    |float32 output - exact output| <= sum over ops i of |d output / d op_i| . local_i
(first order; products of two errors, ~1e-10 here, are dropped). The derivatives are the
reference's own, signs included, taken in reverse mode (first_order_bound); a cruder rule that
carried |W| through every layer overestimates by 10^5 at depth 2.

The local bounds rest on one rule (Higham, Lemma 3.1 and eq. (3.5)): a dot product of length K
summed in float32 in ANY order (sequential, pairwise, blocked, with or without FMA: whatever the
CPU's kernels do) satisfies
    |fl(x . y) - x . y| <= gamma_K |x| . |y|,     gamma_K = K u / (1 - K u),   u = 2^-24 ~ 6e-8,
so a matmul's error grows linearly with its reduction length K and with the magnitudes |x|.|y|
(not with |x.y|, which cancellation can make small). Elementwise +, -, *, / round by at most u
relative. exp, rsqrt, sin, cos, erf and sigmoid of the CPU's vectorised float32 kernels are
allowed ELEMENTARY = 8 u relative (Eigen's are within ~1-3 ulp; a generous constant costs little
next to the gamma_K terms). Summed over the ops, the bound grows with depth (blocks), width (each
K) and magnitude (each |x|.|y|, and the derivatives of what follows) as the float32 error itself
does. It is a worst case: observed errors are typically 100-1000x below it (rounding errors of
random sign partly cancel, ~sqrt(K) rather than K), the price of holding on every CPU.

The float64 reference itself errs by ~1e-16 relative: nothing next to u.
"""

from __future__ import annotations

import itertools

import numpy as np

U = 2.0 ** -24                     # float32 unit roundoff
ELEMENTARY = 8 * U                 # exp, rsqrt, sin, cos, sigmoid: relative error allowed
_order = itertools.count()


def gamma(k: int, u: float = U) -> float:
    """Higham's gamma_k = k u / (1 - k u): the relative error bound of a length-k sum or dot."""
    assert k * u < 1
    return k * u / (1 - k * u)


class Bounded:
    """One float64 array of the reference: `value`, `local` (a bound on the rounding error that
    float32 makes in computing this array from its exact inputs; None: exact, e.g. float32 weights)
    and its parents with each one's vector-Jacobian product (for first_order_bound)."""

    def __init__(self, value, local=None, parents=()):
        self.value = np.asarray(value, np.float64)
        self.local = None if local is None else np.asarray(local, np.float64)
        self.parents = list(parents)                 # [(Bounded, vjp: adjoint -> adjoint)]
        self.order = next(_order)                    # creation order: parents come first

    @property
    def shape(self):
        return self.value.shape

    @property
    def T(self):
        return Bounded(self.value.T, None, [(self, lambda a: np.swapaxes(a, -1, -2))])

    def __getitem__(self, index):
        shape = self.shape

        def vjp(a):
            out = np.zeros(a.shape[:1] + shape)
            out[(slice(None),) + (index if isinstance(index, tuple) else (index,))] = a
            return out
        return Bounded(self.value[index], None, [(self, vjp)])

    def __matmul__(self, other):
        """Any summation order: |fl(x . y) - x . y| <= gamma_K |x| . |y| (Higham (3.5))."""
        other = as_bounded(other)
        x, y = self.value, other.value
        local = gamma(x.shape[-1]) * (np.abs(x) @ np.abs(y))
        return Bounded(x @ y, local, [(self, lambda a: a @ y.T), (other, lambda a: x.T @ a)])

    def __add__(self, other):
        other = as_bounded(other)
        value = self.value + other.value
        return Bounded(value, U * np.abs(value), [(self, _reduce_to(self.shape)),
                                                  (other, _reduce_to(other.shape))])

    def __mul__(self, other):
        other = as_bounded(other)
        x, y = self.value, other.value
        value = x * y
        return Bounded(value, U * np.abs(value), [(self, lambda a: _reduce_to(x.shape)(a * y)),
                                                  (other, lambda a: _reduce_to(y.shape)(a * x))])

    def scaled(self, c: float):
        """x times a constant that float32 holds rounded (u) and multiplies (u)."""
        value = self.value * c
        return Bounded(value, 2 * U * np.abs(value), [(self, lambda a: a * c)])

    def negated(self):
        return Bounded(-self.value, None, [(self, lambda a: -a)])


def as_bounded(x) -> Bounded:
    return x if isinstance(x, Bounded) else Bounded(x)


def _reduce_to(shape):
    """vjp of a broadcast: sum the adjoint (O, *broadcast shape) back to (O, *shape)."""
    def vjp(a):
        extra = a.ndim - 1 - len(shape)
        a = a.sum(axis=tuple(range(1, 1 + extra))) if extra else a
        axes = tuple(i + 1 for i, n in enumerate(shape) if n == 1 and a.shape[i + 1] != 1)
        return a.sum(axis=axes, keepdims=True) if axes else a
    return vjp


def concatenate(parts, axis=-1) -> Bounded:
    assert axis == -1
    edges = np.cumsum([0] + [p.shape[-1] for p in parts])
    return Bounded(np.concatenate([p.value for p in parts], axis=-1), None,
                   [(p, (lambda lo, hi: lambda a: a[..., lo:hi])(lo, hi))
                    for p, lo, hi in zip(parts, edges[:-1], edges[1:])])


def rms_norm(x: Bounded, weight, eps: float) -> Bounded:
    """y = x rsqrt(mean(x^2) + eps) weight over the last axis (weight: exact float32 values).
    Rounding: mean(x^2) errs by (gamma_C + 2u) mean(x^2) (squares u, length-C sum gamma_C, the
    division u), + eps by u; rsqrt ELEMENTARY plus half its argument's relative error; the two
    multiplies 2u. Jacobian: dy_i/dx_j = w_i r (delta_ij - x_i x_j r^2 / C), r = rsqrt(.)."""
    v, width = x.value, x.shape[-1]
    mean_square = np.mean(v * v, axis=-1, keepdims=True)
    argument = mean_square + eps
    r = 1.0 / np.sqrt(argument)
    value = v * r * weight
    relative = ((gamma(width) + 2 * U) * mean_square + U * argument) / (2 * argument) + ELEMENTARY
    local = np.abs(value) * (relative + 2 * U)

    def vjp(a):
        aw = a * weight
        return r * aw - r ** 3 / width * v * np.sum(aw * v, axis=-1, keepdims=True)
    return Bounded(value, local, [(x, vjp)])


def rotate_half(x: Bounded, positions, theta: float) -> Bounded:
    """Rotary embedding, HF convention (dimension i pairs with i + D/2, angle p theta^(-2i/D)),
    as x cos + rotate_half(x) sin. cos and sin of float32 angles: the angle errs by
    (ELEMENTARY + 2u) |angle| (pow, reciprocal, product), cos/sin by that plus ELEMENTARY."""
    half = x.shape[-1] // 2
    frequency = theta ** (-2.0 * np.arange(half) / x.shape[-1])
    angle = np.asarray(positions, np.float64)[:, None] * frequency[None]
    angle = np.concatenate([angle, angle], axis=-1)
    trig_error = (ELEMENTARY + 2 * U) * np.abs(angle) + ELEMENTARY
    cos, sin = Bounded(np.cos(angle), trig_error), Bounded(np.sin(angle), trig_error)
    rotated = concatenate([x[:, half:].negated(), x[:, :half]])
    return x * cos + rotated * sin


def softmax(scores: Bounded, allowed) -> Bounded:
    """Row softmax over the allowed entries (the others weigh exactly 0: exp(-1e9 - max)).
    Rounding, relative to p_i: the shift s - max (u |s - max| in the exponent) and exp
    (ELEMENTARY) of entry i and, through the row sum, of every entry (weighted by p_j); the sum
    of the row's K columns (gamma_K) and the division (u). Jacobian: dp = p (ds - sum_j p_j ds_j)."""
    s = np.where(allowed, scores.value, -np.inf)
    shifted = s - s.max(-1, keepdims=True)
    p = np.exp(shifted)
    p = p / p.sum(-1, keepdims=True)
    own = np.where(allowed, U * np.abs(np.where(allowed, shifted, 0.0)), 0.0) + ELEMENTARY
    relative = own + np.sum(p * own, -1, keepdims=True) + gamma(s.shape[-1]) + U

    def vjp(a):
        return p * (a - np.sum(a * p, axis=-1, keepdims=True))
    return Bounded(p, p * relative, [(scores, vjp)])


def silu(g: Bounded) -> Bounded:
    """g sigmoid(g): sigmoid ELEMENTARY, the product u; derivative sigmoid (1 + g (1 - sigmoid))."""
    sigmoid = 1.0 / (1.0 + np.exp(-g.value))
    value = g.value * sigmoid
    slope = sigmoid * (1 + g.value * (1 - sigmoid))
    return Bounded(value, (ELEMENTARY + U) * np.abs(value), [(g, lambda a: a * slope)])


def first_order_bound(output: Bounded, chunk: int = 1024) -> np.ndarray:
    """Per element of `output`: sum over every rounding site i of |d output / d site_i| x the
    site's local bound, the first-order forward error bound of the whole computation (the worst
    case over all rounding errors within their bounds, whatever their signs). Reverse mode,
    `chunk` outputs at a time: adjoints of shape (chunk, *site shape)."""
    nodes, stack = {}, [output]
    while stack:
        node = stack.pop()
        if id(node) not in nodes:
            nodes[id(node)] = node
            stack.extend(parent for parent, _ in node.parents)
    order = sorted(nodes.values(), key=lambda n: -n.order)
    size = output.value.size
    total = np.zeros(size)
    for start in range(0, size, chunk):
        rows = np.arange(start, min(start + chunk, size))
        seed = np.zeros((len(rows), size))
        seed[np.arange(len(rows)), rows] = 1.0
        adjoints = {id(output): seed.reshape((len(rows),) + output.shape)}
        for node in order:
            adjoint = adjoints.pop(id(node), None)
            if adjoint is None:
                continue
            if node.local is not None:
                total[rows] += np.abs(adjoint).reshape(len(rows), -1) @ node.local.reshape(-1)
            for parent, vjp in node.parents:
                if parent.parents or parent.local is not None:
                    contribution = vjp(adjoint)
                    previous = adjoints.get(id(parent))
                    adjoints[id(parent)] = contribution if previous is None else previous + contribution
    return total.reshape(output.shape)


def layer_norm(x: Bounded, gamma_, beta, eps: float) -> Bounded:
    """(x - mean) rsqrt(var + eps) gamma + beta over the last axis, bounded for Keras' order of
    operations (var = mean(x^2) - mean^2, which cancels: its error is relative to mean(x^2), not
    to var; out = x (inv gamma) + (beta - mean inv gamma)). Rounding: var errs by
    (gamma_C + 3u) (mean(x^2) + mean^2), rsqrt ELEMENTARY plus half that relative to var + eps;
    the products and sums u each, on the magnitudes |x inv gamma| and |mean inv gamma|.
    Jacobian: dx = r gamma (a - mean(a) - xhat mean(a xhat)), xhat = (x - mean) r."""
    v, width = x.value, x.shape[-1]
    mean = np.mean(v, axis=-1, keepdims=True)
    centered = v - mean
    variance = np.mean(centered ** 2, axis=-1, keepdims=True)
    r = 1.0 / np.sqrt(variance + eps)
    xhat = centered * r
    value = xhat * gamma_ + beta
    second = np.mean(v * v, axis=-1, keepdims=True)
    relative = (gamma(width) + 3 * U) * (second + mean ** 2) / (2 * (variance + eps)) + ELEMENTARY
    scale = np.abs(r * gamma_)
    local = (np.abs(xhat * gamma_) * relative + 2 * U * scale * (np.abs(v) + np.abs(mean))
             + gamma(width) * np.mean(np.abs(v), axis=-1, keepdims=True) * scale
             + U * (np.abs(beta) + np.abs(mean) * scale) + U * np.abs(value))

    def vjp(a):
        ag = a * gamma_
        return r * (ag - np.mean(ag, axis=-1, keepdims=True)
                    - xhat * np.mean(ag * xhat, axis=-1, keepdims=True))
    return Bounded(value, local, [(x, vjp)])


def gelu(x: Bounded) -> Bounded:
    """Exact GELU, x Phi(x) = x (1 + erf(x / sqrt 2)) / 2: erf ELEMENTARY in absolute terms
    (it is <= 1), the scaling, sum and products u each. Derivative Phi(x) + x phi(x)."""
    from scipy.special import erf
    v = x.value
    cdf = 0.5 * (1 + erf(v / np.sqrt(2)))
    value = v * cdf
    local = 0.5 * np.abs(v) * (ELEMENTARY + 4 * U) + 2 * U * np.abs(value)
    slope = cdf + v * np.exp(-0.5 * v * v) / np.sqrt(2 * np.pi)
    return Bounded(value, local, [(x, lambda a: a * slope)])
