"""The HTML report: what it reads of the warehouse, its words, figures and template."""
