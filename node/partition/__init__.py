"""Partition tables: a logical table over sub-tables placed by the deployment (see tables.py)."""
