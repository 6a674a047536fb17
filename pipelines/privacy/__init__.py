"""Private audit releases (seed 000): the ε-DP release, its decision, planning, and the privacy ledger it spends."""
