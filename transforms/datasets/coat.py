"""The Coat data set (Schnabel et al., ICML 2016) as impressions (pure, no I/O).

``train`` (self-selected ratings) plays default traffic and ``test`` (16
uniformly random items per user) plays random traffic; one row per nonzero
rating. Label: signal ``liked`` = rating >= ``min_rating``. Item feature
families (``gender``, ``jackettype``, ``color``, ``onfrontpage``) become
attribute columns of the same name; user feature families become
``user_<family>`` (e.g. ``user_gender``, ``user_age``).
"""

from __future__ import annotations

import numpy as np
import polars as pl


def one_hot_families(features: np.ndarray, names: list[str], prefix: str = "") -> dict[str, list[str | None]]:
    """Decode one-hot feature matrices into one categorical column per family.

    ``features``: shape (n, F) of 0/1; ``names``: F strings ``family:value``.
    Returns {prefix+family: n values} (None where no column of the family is set).
    Raises ValueError when the shapes disagree or a row sets two values of a family.
    """
    if features.shape[1] != len(names):
        raise ValueError(f"{features.shape[1]} feature columns but {len(names)} names")
    families: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        fam = name.split(":", 1)[0]
        families.setdefault(fam, []).append(j)
    out: dict[str, list[str | None]] = {}
    for fam, idx in families.items():
        block = features[:, idx]
        if (block.sum(axis=1) > 1).any():
            raise ValueError(f"feature family {fam!r} is not one-hot")
        values = [names[j].split(":", 1)[1] for j in idx]
        out[prefix + fam] = [values[int(r.argmax())] if r.any() else None for r in block]
    return out


def coat_impressions(
    train: np.ndarray,
    test: np.ndarray,
    item_features: np.ndarray,
    item_feature_names: list[str],
    user_features: np.ndarray | None = None,
    user_feature_names: list[str] | None = None,
    *,
    min_rating: int = 4,
) -> pl.DataFrame:
    """Coat ratings as a raw impressions frame (before the contract check).

    Inputs: rating matrices of shape (users, items), 0 = not rated, 1–5
    otherwise; item features (items, F). Returns columns traffic
    (default/random), request_id (user), item_id, rating, liked (bool) and one
    column per feature family. Raises ValueError on mismatched shapes.
    """
    if train.shape != test.shape:
        raise ValueError(f"train {train.shape} and test {test.shape} differ in shape")
    n_users, n_items = train.shape
    if item_features.shape[0] != n_items:
        raise ValueError(f"{item_features.shape[0]} item feature rows for {n_items} items")
    items = one_hot_families(item_features, item_feature_names)
    users = (
        one_hot_families(user_features, user_feature_names, prefix="user_")
        if user_features is not None and user_feature_names is not None
        else {}
    )
    frames = []
    for traffic, mat in (("default", train), ("random", test)):
        u, i = np.nonzero(mat)
        rating = mat[u, i].astype(np.int64)
        cols: dict[str, object] = {
            "traffic": [traffic] * len(u),
            "request_id": [f"u{x}" for x in u],
            "item_id": [f"i{x}" for x in i],
            "rating": rating,
            "liked": rating >= min_rating,
        }
        for fam, vals in items.items():
            cols[fam] = [vals[x] for x in i]
        for fam, vals in users.items():
            cols[fam] = [vals[x] for x in u]
        frames.append(pl.DataFrame(cols))
    return pl.concat(frames)
