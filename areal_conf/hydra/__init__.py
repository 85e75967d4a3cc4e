"""Hydra-facing core: structured configs, resolvers, schema, composition and Hydra's errors."""
