"""Envy-freeness: group envy (Def. B.1) and the OCEF/AUDIT certificates of user envy (seed 004)."""
