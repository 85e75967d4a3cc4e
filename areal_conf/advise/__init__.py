"""Advice on a config: which layouts to sweep, the fastest layouts and split, plots."""
