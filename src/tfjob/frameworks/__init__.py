"""The kinds of job tfjob runs, one framework per kind (see framework.py)."""
