-- The evidence of the exceeds / back_within alerts (DESIGN §4.9): REO of every published day.
SELECT ds, arm, attribute, reo, reo_threshold, verdict_80pct, n_small_groups, alert_level, alert_low, alert_high
FROM reo_published
ORDER BY ds, arm, attribute
