"""Config: validation errors name the key; paths resolve against the file."""

import pytest

from fairmon.pipelines.core.config import ConfigError, load_config

GOOD = """
warehouse = "wh"
duckdb = "db/f.duckdb"
[impressions]
format = "tiktok"
path = "default/{ds}.csv"
random_path = "random/random_{start}_{end}.csv"
signals = ["like_video"]
attributes = ["young_adult"]
"""


def write(tmp_path, text):
    p = tmp_path / "fairmon.toml"
    p.write_text(text)
    return p


def test_good_config_resolves_relative_paths(tmp_path):
    cfg = load_config(write(tmp_path, GOOD))
    assert cfg.warehouse_path == tmp_path / "wh"
    assert cfg.duckdb_path == tmp_path / "db" / "f.duckdb"
    assert cfg.impressions.random_window_days == 7
    assert cfg.estimation.confidence_level == 0.95 and cfg.estimation.ci_method == "delta"


@pytest.mark.parametrize(
    "extra,key",
    [
        ("random_window_days = 0", "impressions.random_window_days"),
        ('label_rule = "most"', "impressions.label_rule"),
        ("colour = 1", "impressions.colour"),
    ],
)
def test_bad_impressions_key_is_named(tmp_path, extra, key):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, GOOD + extra + "\n"))
    assert key in str(e.value) and "fairmon.toml" in str(e.value)


def test_bad_estimation_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"estimation\.confidence_level"):
        load_config(write(tmp_path, GOOD + "[estimation]\nconfidence_level = 1.5\n"))


def test_missing_required_key_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"impressions\.signals"):
        load_config(write(tmp_path, GOOD.replace('signals = ["like_video"]\n', "")))


@pytest.mark.parametrize(
    ("attribute", "said"),
    [
        ("like_video", "'like_video' is also a signal"),  # REO by the signal it measures
        ("traffic", "'traffic' is a contract column fairmon reads itself"),  # published with warnings only before
        ("arm", "'arm' is a contract column fairmon reads itself"),
    ],
)
def test_an_attribute_that_is_a_signal_or_a_contract_column_is_refused(tmp_path, attribute, said):
    with pytest.raises(ConfigError, match=said):
        load_config(write(tmp_path, GOOD.replace('["young_adult"]', f'["young_adult", "{attribute}"]')))


def test_invalid_column_name_and_template(tmp_path):
    with pytest.raises(ConfigError, match=r"impressions\.attributes"):
        load_config(write(tmp_path, GOOD.replace('["young_adult"]', '["young adult"]')))
    with pytest.raises(ConfigError, match=r"impressions.*\{ds\}"):
        load_config(write(tmp_path, GOOD.replace("default/{ds}.csv", "default/day.csv")))


def test_toml_syntax_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "warehouse = \n"))
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")


def test_stage_paths_and_user_attributes(tmp_path):
    cfg = load_config(
        write(tmp_path, GOOD.replace("[impressions]", "[impressions]\nstage_paths = { post_recall = 'pr/{ds}.csv' }"))
    )
    assert cfg.impressions.stages == ["post_recall"]
    for bad, msg in (
        ("stage_paths = { post_recall = 'pr.csv' }", "must contain {ds}"),
        ("stage_paths = { random = 'r/{ds}.csv' }", "not an extra stage"),
        ("stage_paths = { 'post recall' = 'r/{ds}.csv' }", "post recall"),
    ):
        with pytest.raises(ConfigError, match=msg):
            load_config(write(tmp_path, GOOD.replace("[impressions]", "[impressions]\n" + bad)))
    with pytest.raises(ConfigError, match=r"user_attributes: \['user_gender'\] not in impressions.attributes"):
        load_config(write(tmp_path, GOOD + "[estimation]\nuser_attributes = ['user_gender']\n"))


def test_an_unknown_key_is_given_the_closest_key_of_its_section(tmp_path):
    """A typo of a key gets the section's closest key (as a misnamed column gets the file's); a key like none
    gets no guess."""
    text = GOOD.replace("signals =", "signal =") + '\n[estimation]\ncluster_buy = "none"\n[foo]\nx = 1\n'
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    msg = str(e.value)
    assert "impressions.signal: Extra inputs are not permitted (did you mean 'signals'?)" in msg
    assert "estimation.cluster_buy: Extra inputs are not permitted (did you mean 'cluster_by'?)" in msg
    assert "foo: Extra inputs are not permitted\n" in msg + "\n" and "foo: Extra inputs are not permitted (" not in msg
