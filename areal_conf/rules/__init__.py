"""AReaL's rules: the errors it raises at start-up, found at config time, the silent
misallocations it would run, and the warnings about what it would do.

Each rule is one function over the :class:`~areal_conf.rules.context.Context` of a validation;
:data:`areal_conf.rules.registry.RULES` lists them, each with its unique id, the AReaL
versions it holds for and AReaL's code that makes it, in the order AReaL meets them: the
scheduler, what AReaL's loader checks, PPOTrainer's checks, each engine's workers and
colocation, AWEX's GPU sharing, then the scheduler's GPUs, the model, memory. Every message names
the config key, says why, and gives the fix; each warning is one ``warning:`` line of the
plan. The rules read the config as :mod:`areal_conf.config.reading` read it, never the raw config.

Terms: a *GPU run* has ``cluster.n_gpus_per_node > 0``; ``n`` is the GPUs per node as the
scheduler in use counts them (on the local scheduler the machine's, see
:mod:`areal_conf.areal.local_gpus`); the *RL rules* are
PPOTrainer's and apply when a config has both an ``actor`` and a ``rollout``; *v1 AWEX* is
``actor._version: v1`` with ``actor.weight_update_mode: awex``, where actor and rollout
time-share the actor's GPUs.

The rules are in one module per topic, which the registry names for each rule
(:mod:`~areal_conf.rules.teacher`, :mod:`~areal_conf.rules.loading`,
:mod:`~areal_conf.rules.backends`, :mod:`~areal_conf.rules.weights`,
:mod:`~areal_conf.rules.awex`, :mod:`~areal_conf.rules.workers`,
:mod:`~areal_conf.rules.colocation`, :mod:`~areal_conf.rules.scheduling`,
:mod:`~areal_conf.rules.capacity`, :mod:`~areal_conf.rules.model`,
:mod:`~areal_conf.rules.memory`, :mod:`~areal_conf.rules.speed`); what they share is in
:mod:`~areal_conf.rules.context` and :mod:`~areal_conf.rules.common`.
"""
