"""Reachability of items in a matrix-factorisation recommender (seed 003 Def. 1; DESIGN §4.8).

Pure NumPy, no I/O. The recommender is a biased MF: the predicted rating of
user u for item i is μ + b_u + b_i + p_u·q_i. A user acts by (re)rating the
items of an action set A_u (K items, ratings in [r_min, r_max]); the model
then refits the user's factor and bias by ridge on the user's history plus
the actions, the item side held fixed (Curmei, Dean and Recht, ICML 2021, as
summarised in DESIGN §4.8). The refit is linear in the action ratings a, so
the target items' scores are affine: s_T(a) = B a + c (:func:`affine_scores`).

With the softmax selection rule π(i | a) = exp(β s_i(a)) / Σ_{j∈T} exp(β s_j(a))
the largest probability of recommending target i is ρ*_i = 1/(1 + exp(v*)),
v* = min_{a ∈ box} LSE_{j≠i}(β s_j(a)) − β s_i(a), a smooth convex problem
over a box (:func:`max_reachability`, batched projected Newton over every
target of a user at once, started at the box's corner the gradient points
away from).

* :func:`fit_biased_mf` — the model (alternating ridge least squares).
* :func:`affine_scores` — B and c of one user.
* :func:`softmax_probabilities` — ρ at given actions.
* :func:`max_reachability` — ρ* and the maximising actions, batched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BiasedMF:
    """A biased matrix factorisation: global mean ``mu``, user biases (U,),
    item biases (I,), user factors (U, r), item factors (I, r), and the ridge
    ``lam`` of the user refit."""

    mu: float
    user_bias: np.ndarray
    item_bias: np.ndarray
    user_factors: np.ndarray
    item_factors: np.ndarray
    lam: float

    def predict(self) -> np.ndarray:
        """Predicted ratings μ + b_u + b_i + p_u·q_i (DESIGN §4.8), shape (U, I), rating units."""
        return self.mu + self.user_bias[:, None] + self.item_bias[None, :] + self.user_factors @ self.item_factors.T


def fit_biased_mf(
    users: np.ndarray,
    items: np.ndarray,
    ratings: np.ndarray,
    *,
    n_users: int,
    n_items: int,
    rank: int,
    lam: float,
    iters: int = 30,
    seed: int = 0,
) -> BiasedMF:
    """Biased MF by alternating ridge least squares.

    ``users``, ``items``: (n,) integer indices; ``ratings``: (n,) floats.
    Minimises Σ (r − μ − b_u − b_i − p_u·q_i)² + λ(‖p_u‖² + b_u² + ‖q_i‖² + b_i²)
    with μ the mean rating, alternating exact ridge solves for every user's
    (p_u, b_u) and every item's (q_i, b_i), ending with a user step: each
    user's side is then exactly the refit :func:`affine_scores` applies to
    edited histories. Deterministic in
    ``seed``. Raises ValueError on mismatched lengths, indices out of range
    or ``lam`` ≤ 0.
    """
    users, items = np.asarray(users, dtype=np.int64), np.asarray(items, dtype=np.int64)
    ratings = np.asarray(ratings, dtype=float)
    if not (len(users) == len(items) == len(ratings)):
        raise ValueError("users, items and ratings must have the same length")
    if users.min(initial=0) < 0 or users.max(initial=0) >= n_users or items.min(initial=0) < 0:
        raise ValueError("user index out of range")
    if items.max(initial=0) >= n_items:
        raise ValueError("item index out of range")
    if lam <= 0:
        raise ValueError("lam must be > 0")
    rng = np.random.default_rng(seed)
    mu = float(ratings.mean())
    P = rng.normal(scale=0.1, size=(n_users, rank))
    Q = rng.normal(scale=0.1, size=(n_items, rank))
    bu, bi = np.zeros(n_users), np.zeros(n_items)
    by_user = [np.flatnonzero(users == u) for u in range(n_users)]
    by_item = [np.flatnonzero(items == i) for i in range(n_items)]
    eye = np.eye(rank + 1)

    def solve(rows_of, own, other_f, other_b, out_f, out_b):
        for k, rows in enumerate(rows_of):
            if rows.size == 0:
                out_f[k], out_b[k] = 0.0, 0.0
                continue
            Z = np.hstack([other_f[own[rows]], np.ones((rows.size, 1))])
            y = ratings[rows] - mu - other_b[own[rows]]
            x = np.linalg.solve(Z.T @ Z + lam * eye, Z.T @ y)
            out_f[k], out_b[k] = x[:-1], x[-1]

    for _ in range(iters):
        solve(by_user, items, Q, bi, P, bu)
        solve(by_item, users, P, bu, Q, bi)
    solve(by_user, items, Q, bi, P, bu)  # last: each user's side is exactly the refit of its history
    return BiasedMF(mu, bu, bi, P, Q, lam)


def affine_scores(
    model: BiasedMF,
    history_items: np.ndarray,
    history_ratings: np.ndarray,
    action_items: np.ndarray,
    target_items: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(B, c) with s_T(a) = B a + c: the target items' scores after the user
    rates ``action_items`` with ratings a (K,) and the model refits the
    user's factor and bias by ridge (λ = ``model.lam``) on ``history_items``
    / ``history_ratings`` plus the actions (item side fixed; DESIGN §4.8).

    Shapes: B (|T|, K), c (|T|,). An action item that is also in the history
    is re-rated: its old rating is dropped. Raises ValueError when a target
    is also an action item.
    """
    hist = np.asarray(history_items, dtype=np.int64)
    acts = np.asarray(action_items, dtype=np.int64)
    targ = np.asarray(target_items, dtype=np.int64)
    if np.intersect1d(acts, targ).size:
        raise ValueError("target items must not be action items")
    keep = ~np.isin(hist, acts)
    hist, y_hist = hist[keep], np.asarray(history_ratings, dtype=float)[keep]
    F, b = model.item_factors, model.item_bias

    def Z(ix):
        return np.hstack([F[ix], np.ones((ix.size, 1))])

    Zh, Za, Zt = Z(hist), Z(acts), Z(targ)
    M = Zh.T @ Zh + Za.T @ Za + model.lam * np.eye(Zh.shape[1])
    Minv = np.linalg.inv(M)
    # x(a) = M⁻¹ (Zhᵀ(y_h − μ − b_h) + Zaᵀ(a − μ − b_a))
    x0 = Minv @ (Zh.T @ (y_hist - model.mu - b[hist]) - Za.T @ (model.mu + b[acts]))
    B = Zt @ Minv @ Za.T
    c = model.mu + b[targ] + Zt @ x0
    return B, c


def softmax_probabilities(B: np.ndarray, c: np.ndarray, a: np.ndarray, beta: float) -> np.ndarray:
    """π(· | a) = softmax(β (B a + c)) over the targets (the selection rule of
    DESIGN §4.8) for actions ``a`` (K,) or (n, K) in rating units; ``B``
    (|T|, K), ``c`` (|T|,). Returns shape (|T|,) or (n, |T|). Raises
    ValueError (NumPy's) when the shapes do not match."""
    s = beta * (np.asarray(a, dtype=float) @ B.T + c)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def _objective(B: np.ndarray, c: np.ndarray, beta: float, a: np.ndarray, idx: np.ndarray, value_only: bool = False):
    """f_i(a) = −log π(i | a) (accurate as π_i → 1), π (m, T) and the gradient
    β Bᵀ(π − e_i) (m, K); only (f, None, None) with ``value_only``."""
    # in place: one (m, T) array becomes s, z, exp(z − max) and π in turn (the same numbers as
    # fresh arrays, without allocating and page-faulting four of them per call)
    z = a @ B.T
    z += c
    z *= beta  # s = β (B a + c)
    rows = np.arange(a.shape[0])
    z -= z[rows, idx][:, None]  # z_i = 0
    m = z.max(axis=1)
    z -= m[:, None]
    np.exp(z, out=z)  # exactly 1 at the largest z
    total = z.sum(axis=1)
    # f = log Σ_j exp(z_j) = m + log(1 + Σ_{j≠top} exp(z_j − m)), with log1p for accuracy when i is on top
    f = m + np.log1p(total - 1.0)
    if value_only:
        return f, None, None
    z /= total[:, None]  # π
    p = z.copy()
    p[rows, idx] -= 1.0
    grad = beta * (p @ B)
    return f, z, grad


def _hessian(B: np.ndarray, outer: np.ndarray, pi: np.ndarray, beta: float) -> np.ndarray:
    """H = β² Bᵀ(diag π − ππᵀ)B of f_i at each of m points (m, K, K), ``outer`` (T, K²) the rows' B_t B_tᵀ.

    Why this form: Bᵀ diag(π) B is then one matrix product π · outer for all m points at once,
    where the centred sum Σ_t π_t (B_t − B̄)(B_t − B̄)ᵀ (B̄ = Bᵀπ) needs an (m, T, K) array and
    m small products. The expanded form subtracts two nearly equal matrices when π is nearly
    one-hot (H → 0, the rounding stays): those points take the centred sum, which is positive
    semidefinite as computed. Either is the Hessian of seed 003's convex form (DESIGN §4.8).
    """
    m, K = pi.shape[0], B.shape[1]
    mean = pi @ B  # (m, K)
    H = (pi @ outer).reshape(m, K, K) - mean[:, :, None] * mean[:, None, :]
    sharp = np.flatnonzero(pi.max(axis=1) > 1.0 - 1e-4)
    if sharp.size:
        C = B[None, :, :] - mean[sharp][:, None, :]  # (s, T, K)
        H[sharp] = (C * pi[sharp][:, :, None]).transpose(0, 2, 1) @ C
    return beta**2 * H


def _start(B, c, beta, lower, upper, idx, x0, steps: int = 2) -> np.ndarray:
    """Starting actions (n, K): ``x0`` clipped to the box if given; else, from the box's centre,
    ``steps`` times the corner the gradient points away from (the centre itself when β = 0 or K = 0).

    Why the corner: f_i is convex on a box, so a corner is optimal exactly when the gradient there points
    out of the box in every coordinate (the KKT conditions of a box: ∂f/∂a_k ≥ 0 at the lower
    end, ≤ 0 at the upper end). A corner that is its own next corner is therefore optimal, and
    the Newton loop, which starts by testing the projected gradient, stops there at once; for
    the others it is a start like any other (the optimum does not depend on it).
    """
    if x0 is not None:
        return np.clip(np.array(x0, dtype=float), lower, upper)
    a = np.full((idx.size, B.shape[1]), (lower + upper) / 2)
    for _ in range(steps if beta > 0 and B.shape[1] > 0 else 0):
        g = _objective(B, c, beta, a, idx)[2]
        a = np.where(g > 0, float(lower), float(upper))
    return a


def _projected_search(B, c, beta, lower, upper, x, f0, g, d, idx, tries: int = 48, batch: int = 4):
    """Armijo search along the projection arc x(t) = clip(x + t d), t = 1, 1/2, …, per problem:
    t = 1 first, then the next ``batch`` halvings evaluated at once for the problems still
    searching, up to ``tries`` halvings.

    Returns (new points, their f, indices of problems with no accepted step)."""
    m, K = x.shape
    x_new, f_new = x.copy(), f0.copy()
    trial = np.clip(x + d, lower, upper)
    f_t = _objective(B, c, beta, trial, idx, value_only=True)[0]
    ok = f_t <= f0 + 1e-4 * (g * (trial - x)).sum(axis=1)
    x_new[ok], f_new[ok] = trial[ok], f_t[ok]
    todo = np.flatnonzero(~ok)
    for first in range(1, tries + 1, batch):
        if todo.size == 0:
            break
        steps = 0.5 ** np.arange(first, first + batch)  # (S,)
        S = steps.size
        trial = np.clip(x[todo, None, :] + steps[None, :, None] * d[todo, None, :], lower, upper)  # (n, S, K)
        f_t = _objective(B, c, beta, trial.reshape(-1, K), np.repeat(idx[todo], S), value_only=True)[0]
        f_t = f_t.reshape(-1, S)
        ok = f_t <= f0[todo, None] + 1e-4 * (g[todo, None, :] * (trial - x[todo, None, :])).sum(axis=2)
        hit = ok.any(axis=1)
        k = ok.argmax(axis=1)  # the largest accepted step
        rows = np.flatnonzero(hit)
        x_new[todo[rows]] = trial[rows, k[rows]]
        f_new[todo[rows]] = f_t[rows, k[rows]]
        todo = todo[~hit]
    return x_new, f_new, todo


def max_reachability(
    B: np.ndarray,
    c: np.ndarray,
    beta: float,
    lower: float,
    upper: float,
    *,
    targets: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
    x0: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """ρ*_i = max_{a ∈ [lower, upper]^K} π(i | a) for every target i at once (DESIGN §4.8).

    ``B`` (|T|, K), ``c`` (|T|,): the affine scores of one user
    (:func:`affine_scores`); ``targets``: indices into T to solve for
    (default all). Minimises the convex f_i(a) = LSE_j(β s_j(a)) − β s_i(a)
    (= −log π(i | a); Curmei, Dean and Recht 2021, the convex form of
    DESIGN §4.8) by a batched projected Newton method (Bertsekas 1982): the
    Hessian β² Bᵀ(diag π − ππᵀ)B on the variables not held at a bound, an
    Armijo search along the projection arc, every target as one batch and
    each problem leaving the batch when its projected gradient is below
    ``tol`` (or no further decrease is representable).
    ``x0`` (n, K): starting actions, e.g. the solution at a nearby β
    (continuation); the optimum does not depend on it. By default the corner
    of the box the gradient points away from (twice over, from the centre):
    most optima at a moderate β are corners, and a corner whose gradient
    satisfies the box's KKT signs leaves the batch before any Newton step.
    Returns (ρ* (n,), maximising actions (n, K)). ρ* ≤ 1 always; with
    β → 0 it tends to 1/|T|.
    Raises ValueError for an empty box or β < 0.
    """
    if upper < lower:
        raise ValueError("empty action box: upper < lower")
    if beta < 0:
        raise ValueError("beta must be >= 0")
    B = np.asarray(B, dtype=float)
    c = np.asarray(c, dtype=float)
    T, K = B.shape
    idx = np.arange(T) if targets is None else np.asarray(targets, dtype=np.int64)
    n = idx.size
    a = _start(B, c, beta, lower, upper, idx, x0)
    if beta == 0 or K == 0:
        return np.full(n, 1.0 / T) if beta == 0 else np.exp(-_objective(B, c, beta, a, idx)[0]), a
    outer = (B[:, :, None] * B[:, None, :]).reshape(T, K * K)  # B_t B_tᵀ of every target, for _hessian
    live = np.arange(n)
    f, pi, g = _objective(B, c, beta, a, idx)
    eye = np.eye(K)
    for _ in range(max_iter):
        x = a[live]
        pg = x - np.clip(x - g, lower, upper)
        going = np.abs(pg).max(axis=1) > tol
        if not going.all():
            live, x, g, pi = live[going], x[going], g[going], pi[going]
        if live.size == 0:
            break
        # ε-active set: at a bound with the gradient pointing out of the box
        eps = np.minimum(np.abs(x - np.clip(x - g, lower, upper)).max(axis=1, keepdims=True), 1e-3 * (upper - lower))
        held = ((x <= lower + eps) & (g > 0)) | ((x >= upper - eps) & (g < 0))
        free = ~held
        H = _hessian(B, outer, pi, beta)
        H = H * (free[:, :, None] & free[:, None, :]) + eye * held[:, :, None]
        damp = 1e-10 * np.abs(H).max(axis=(1, 2)) + 1e-300
        d = -np.linalg.solve(H + damp[:, None, None] * eye, np.where(free, g, 0.0)[:, :, None])[:, :, 0]
        d = np.where(free, d, -g)
        decrement = -(g * d).sum(axis=1)
        uphill = ~(decrement > 0)  # rounding made the step useless: steepest descent instead
        d[uphill] = -g[uphill]
        decrement[uphill] = (g[uphill] ** 2).sum(axis=1)
        # the Newton decrement gᵀH⁻¹g (plus |g|² on held coordinates) is the decrease a full step
        # promises: below ~1e-13 nothing representable is left
        done = decrement < 1e-13
        # where f is nearly linear (π far from i) the Hessian vanishes and the
        # damped Newton step is huge: cap it at twice the box so the search
        # starts at a corner (the steepest-descent limit) and halves from there
        width = 2.0 * (upper - lower)
        d *= np.minimum(1.0, width / np.maximum(np.abs(d).max(axis=1), 1e-300))[:, None]
        if done.any():
            live, x, g, d = live[~done], x[~done], g[~done], d[~done]
            if live.size == 0:
                break
        f0 = f[live]
        x_new, f_new, todo = _projected_search(B, c, beta, lower, upper, x, f0, g, d, idx[live])
        if todo.size:  # no decrease along the Newton arc: fall back to the projected gradient
            gd = -g[todo] * (width / np.maximum(np.abs(g[todo]).max(axis=1), 1e-300))[:, None]
            xs, fs, left = _projected_search(B, c, beta, lower, upper, x[todo], f0[todo], g[todo], gd, idx[live[todo]])
            x_new[todo], f_new[todo] = xs, fs
            todo = todo[left]
        # problems whose search found no representable decrease are done
        stuck = np.zeros(live.size, dtype=bool)
        stuck[todo] = True
        stuck |= f_new >= f0
        a[live], f[live] = x_new, f_new
        live = live[~stuck]
        if live.size == 0:
            break
        f_live, pi, g = _objective(B, c, beta, a[live], idx[live])
        f[live] = f_live
    return np.exp(-f), a


def _top1_certificates(B, c, beta, lower, upper, idx, a=None, x0=None, max_iter=100):
    """(yes, no, iterates) top-1 certificates from the softmax problem at ``beta``,
    ``max_iter`` Newton steps from ``x0`` unless its points ``a`` are given (see :func:`top1_reachable`)."""
    if a is None:
        _, a = max_reachability(B, c, beta, lower, upper, targets=idx, x0=x0, max_iter=max_iter)
    s = a @ B.T + c  # (n, T)
    rows = np.arange(idx.size)
    yes = s[rows, idx] >= s.max(axis=1)
    z = beta * s
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w[rows, idx] = 0.0
    w /= w.sum(axis=1, keepdims=True)
    v = B[idx] - w @ B  # (n, K): Σ_j w_j (B_i − B_j)
    bound = c[idx] - w @ c + np.maximum(lower * v, upper * v).sum(axis=1)
    return yes, bound < 0, a


def _dominated(B: np.ndarray, c: np.ndarray, lower: float, upper: float, idx: np.ndarray) -> np.ndarray:
    """Whether some competitor j beats target i at every action by more than the LP's 1e-12:
    max over the box of s_i(a) − s_j(a) = c_i − c_j + m (Σ_k v_k) + h ‖v‖₁ < −1e-12, with
    v = B_i − B_j, m and h the box's centre and half-width.

    Why: that is the "no" certificate of :func:`top1_reachable` with all the weight on one
    competitor (w = e_j), exact and costing |T| × K per target with no solve; on rating data
    most targets that cannot be put on top are beaten outright by some item the model rates
    far higher. The margin is the LP's tolerance, so rounding cannot turn a "yes" of the LP
    into a "no". Returns (n,) bools.
    """
    from scipy.spatial.distance import cdist

    if idx.size == 0:
        return np.zeros(0, dtype=bool)
    mid, half = (lower + upper) / 2, (upper - lower) / 2
    total = B.sum(axis=1)
    best = c[idx][:, None] - c[None, :] + mid * (total[idx][:, None] - total[None, :])
    best += half * cdist(B[idx], B, "cityblock")
    best[np.arange(idx.size), idx] = np.inf  # i against itself
    return (best < -1e-12).any(axis=1)


def top1_reachable(
    B: np.ndarray,
    c: np.ndarray,
    lower: float,
    upper: float,
    *,
    targets: np.ndarray | None = None,
    beta: float | None = None,
    start: tuple[float, np.ndarray] | None = None,
) -> np.ndarray:
    """Deterministic (top-1) reachability: can some a ∈ [lower, upper]^K put
    target i on top, s_i(a) ≥ s_j(a) for every j (DESIGN §4.8; the β → ∞
    limit of ρ*, a linear feasibility problem)?

    ``B`` (|T|, K), ``c`` (|T|,) as in :func:`max_reachability`. Returns a
    bool array (n,). Exact: each answer carries a certificate. A "yes" is an
    action a that puts i on top; a "no" is a weighting w of the competitors
    (a point of the simplex) with max_a Σ_j w_j (s_i − s_j)(a) < 0, which
    has a closed form over a box. Both come from the softmax problem at a
    large β (``beta``, default 50 / the spread of c); the few problems
    neither certifies go to an LP, max t s.t. (B_i − B_j) a + c_i − c_j ≥ t
    (SciPy HiGHS). ``start`` = (β₀, maximisers (n, K) of :func:`max_reachability`
    at β₀ for the same targets) tries certificates from that solution first,
    for free; any (a, w) certifies, so the answer does not depend on it.
    Before any softmax solve, each target beaten by a single competitor at
    every action (w = e_j, :func:`_dominated`) is a "no".
    Raises ValueError for an empty box.
    """
    from scipy.optimize import linprog

    if upper < lower:
        raise ValueError("empty action box: upper < lower")
    B = np.asarray(B, dtype=float)
    c = np.asarray(c, dtype=float)
    T, K = B.shape
    idx = np.arange(T) if targets is None else np.asarray(targets, dtype=np.int64)
    n = idx.size
    if T == 1:
        return np.ones(n, dtype=bool)
    if K == 0:
        return c[idx] >= c.max()
    if beta is None:
        spread = np.ptp(c) + np.abs(B).sum(axis=1).max() * (upper - lower)
        beta = 50.0 / max(spread, 1e-12)
    out = np.zeros(n, dtype=bool)
    open_ = np.arange(n)
    x = None
    if start is not None:
        yes, no, x = _top1_certificates(B, c, start[0], lower, upper, idx, a=np.asarray(start[1], dtype=float))
        out[yes] = True
        keep = ~yes & ~no
        open_, x = open_[keep], x[keep]
    keep = ~_dominated(B, c, lower, upper, idx[open_])
    open_, x = open_[keep], None if x is None else x[keep]
    # sharper softmax problems, each started where the last ended; the certificates are
    # checked every few Newton steps, so a problem leaves as soon as its iterate certifies
    for scale in (1.0, 10.0, 100.0):
        for _ in range(6):
            if open_.size == 0:
                break
            yes, no, x = _top1_certificates(B, c, beta * scale, lower, upper, idx[open_], x0=x, max_iter=8)
            out[open_[yes]] = True
            keep = ~yes & ~no
            open_, x = open_[keep], x[keep]
    for r in open_:
        i = idx[r]
        others = np.delete(np.arange(T), i)
        # variables (a, t): minimise −t s.t. t − (B_i − B_j) a ≤ c_i − c_j
        A_ub = np.hstack([-(B[i] - B[others]), np.ones((others.size, 1))])
        res = linprog(
            np.r_[np.zeros(K), -1.0],
            A_ub=A_ub,
            b_ub=c[i] - c[others],
            bounds=[(lower, upper)] * K + [(None, None)],
            method="highs",
        )
        if res.status != 0:
            raise RuntimeError(f"top-1 reachability LP failed: {res.message}")
        out[r] = -res.fun >= -1e-12
    return out
