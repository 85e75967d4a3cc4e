"""Backend strings: the grammar, the parser, the parallel strategy, legacy translation,
every layout and Megatron's rank groups.
"""
