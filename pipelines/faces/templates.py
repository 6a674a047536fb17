"""Commented starter configs for ``fairmon init`` (one per input format).

Each template is a complete, valid config (``load_config`` accepts it as
written) whose comments say what every key means and which files it expects;
every template keeps the documented defaults (docs "Input formats") and
names no column after a reserved word of ``fairmon sql`` (DuckDB). The tiktok
template reads a folder written by ``fairmon simulate``; its pools span
several days, so a backfill of such a folder sets ``pool_policy = "overlap"``.
"""

from __future__ import annotations

FORMATS = ("tiktok", "contract", "coat")

_COMMON_TAIL = """
[estimation]
confidence_level = 0.95            # of every interval
ci_method = "delta"                # delta | delta_paper | bootstrap_percentile | bootstrap_normal | bootstrap_bca
min_expected_positives = 30        # fewer positives in a group: small group, verdict inconclusive at best
cluster_by = "auto"                # rows sharing this id are one cluster: request_id | user_id | none
                                   # (auto = request_id when the files have it)
# [ab]                             # A/B tests of fairness between arms (seed 001 §4.4)
# control = "control"              # compare every other arm with this one
# methods = ["delta", "partition", "bootstrap"]

[schedule]                         # fairmon serve
cron = "0 6 * * *"
timezone = "UTC"
lag_days = 1                       # compute yesterday
"""

_TEMPLATES = {
    "tiktok": """# fairmon config: TikTok-format logs (seed 001 §4.2), written by `fairmon init`.
# Paths are relative to this file's folder. Check one day: fairmon run --date YYYY-MM-DD
warehouse = "warehouse"            # output tables, Parquet partitioned by ds
duckdb = "fairmon.duckdb"          # staging, run history, views over the outputs

[impressions]
format = "tiktok"
path = "default/{ds}.csv"          # default traffic: one file per day ({ds} = YYYY-MM-DD)
random_path = "random/random_{start}_{end}.csv"   # random traffic pooled over start..end
signals = ["like_video", "share", "follow", "finish", "download", "long_view"]
label_rule = "any"                 # Y = 1 when any signal is true ("all": every signal)
attributes = ["young_adult"]       # each column is one grouping of the items or users
random_window_days = 7             # a day uses random traffic from its trailing window
pool_policy = "contained"          # the default: only pools whose start..end lies inside the window,
                                   # so no random row can come from after the day (a day with none is
                                   # quarantined). "overlap": every pool meeting the window, to backfill
                                   # a published or simulated data set whose pools span several days;
                                   # the reo row then says look_ahead = true when a pool reaches past ds.
""",
    "contract": """# fairmon config: logs in fairmon's contract layout (DESIGN §2), written by `fairmon init`.
# One file per day with columns ds, traffic (default | random), arm, the signals and the
# attributes; optional request_id, item_id, user_id. CSV or Parquet.
# Paths are relative to this file's folder. Check one day: fairmon run --date YYYY-MM-DD
warehouse = "warehouse"            # output tables, Parquet partitioned by ds
duckdb = "fairmon.duckdb"          # staging, run history, views over the outputs

[impressions]
format = "contract"
path = "logs/{ds}.csv"             # default and random rows of day {ds} (YYYY-MM-DD): CSV or Parquet
signals = ["click"]                # boolean columns; Y = 1 by label_rule
label_rule = "any"
attributes = ["creator_group"]     # each column is one grouping of the items or users
random_window_days = 7             # a day uses random rows dated within its trailing window
""",
    "coat": """# fairmon config: the Coat data set (Schnabel et al., ICML 2016), written by `fairmon init`.
# train.ascii = self-selected ratings (default traffic), test.ascii = random ratings.
# Paths are relative to this file's folder. Coat has no dates: its one day is `ds`.
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[impressions]
format = "coat"
path = "coat"                      # the folder holding train.ascii, test.ascii, user_item_features/
ds = 2016-06-19
min_rating = 4                     # liked = rating >= 4
signals = ["liked"]
attributes = ["gender", "jackettype"]
random_window_days = 1
""",
}


def config_template(fmt: str) -> str:
    """The commented starter config for input format ``fmt`` (one of
    :data:`FORMATS`) as TOML text. Raises ValueError for another format."""
    if fmt not in _TEMPLATES:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return _TEMPLATES[fmt] + _COMMON_TAIL
