"""What one training step of a config works on, trainer by trainer: the one place that
turns a config's batch and lengths into the sequences, tokens and optimizer steps that
the plan's ``s/step`` column (:mod:`areal_conf.perf.speed`), ``suggest`` and the
rollout/actor split (:func:`areal_conf.perf.ranking.rl_split`) predict from, and the sentence
that says what was assumed.

The trainer is :attr:`areal_conf.config.run_config.RunConfig.trainer` (read from the keys that only
its config class has, :func:`areal_conf.config.reading.read_trainer`). What a step of each one
trains, in AReaL 2.0:

- **RL** (``PPOConfig``, ``areal/trainer/rl_trainer.py``): the rollout generates
  ``gconfig.n_samples`` responses to each of ``train_dataset.batch_size`` prompts; the
  actor trains on the ``batch_size × n_samples`` sequences, each a prompt (assumed to
  be ``train_dataset.max_length`` tokens, the longest the dataset keeps) and a response
  (its mean length assumed to be half of ``gconfig.max_new_tokens``, unless
  ``--mean-response-tokens`` says otherwise), in ``ppo_n_minibatches`` optimizer steps
  (``areal/trainer/ppo/actor.py:454-464``; the critic's, ``ppo/critic.py:61-66``).
- **SFT** (``SFTConfig``, ``sft_trainer.py:215``, ``sft/lm_engine.py:27-34``): no
  generation; ``batch_size`` sequences, each trained whole (prompt and answer), at most
  ``train_dataset.max_length`` tokens (the dataset drops longer ones, e.g.
  ``areal/dataset/gsm8k.py:24-26``; assumed that long), in one ``train_batch``, so one
  optimizer step (``areal/engine/fsdp_engine.py:774-812``, ``megatron_engine.py``'s
  ``train_batch`` alike).
- **RW** (``RWConfig``, ``rw_trainer.py:54-73``, ``:231``): ``batch_size`` pairs, each a
  chosen and a rejected sequence of at most ``max_length`` tokens
  (``areal/dataset/hhrlhf.py:21-28``): ``2 × batch_size`` sequences, one optimizer step.
- **DPO** (``DPOConfig``, ``dpo_trainer.py:235-250``): the same pairs; before the actor's
  one optimizer step the ref computes their log-probabilities (a forward pass of the ref,
  which has no optimizer and so no ``s/step`` of its own).

Without ``train_dataset`` there is no step to predict (AReaL's ``batch_size`` is 1 when
the section does not give it); SFT, RW and DPO also
need ``train_dataset.max_length`` (without it the sequences' length is the dataset's,
which areal-conf cannot know).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from areal_conf.config.run_config import EngineSection, RunConfig, Trainer, Workload

#: How the plan and ``suggest`` name each trainer.
TRAINER_NAMES: Final[dict[Trainer, str]] = {
    "rl": "RL",
    "sft": "SFT",
    "rw": "RW (reward model)",
    "dpo": "DPO",
}
#: Trainers whose dataset items are pairs: a chosen and a rejected sequence each.
PAIRED: Final = ("rw", "dpo")


@dataclass(frozen=True)
class StepWorkload:
    """The sequences one training step of a config trains on, as assumed. The RL fields
    are 0 (1 sample) for the other trainers."""

    trainer: Trainer
    #: ``train_dataset.batch_size``: prompts (RL), sequences (SFT) or pairs (RW, DPO).
    batch_size: int
    #: The sequences trained: an RL prompt's samples each, a pair's two.
    sequences: int
    #: The assumed (mean) length of a trained sequence, and the longest one can be (one
    #: micro-batch, unless ``mb_spec.max_tokens_per_mb`` says otherwise).
    sequence_tokens: int
    longest_sequence: int
    #: RL: a prompt's tokens, its samples (``gconfig.n_samples``), the most tokens a
    #: response may have (``gconfig.max_new_tokens``) and the mean one assumed.
    prompt_tokens: int = 0
    n_samples: int = 1
    max_new_tokens: int = 0
    mean_response_tokens: int = 0
    #: The mean response length was said (``--mean-response-tokens``), not assumed.
    response_given: bool = False
    #: The length said, when it was more than ``gconfig.max_new_tokens`` (and so cut to it).
    response_cut_from: int = 0
    #: ``train_dataset.max_length`` is absent (RL: prompts of 0 tokens assumed).
    no_max_length: bool = False

    @property
    def tokens(self) -> int:
        """Tokens trained a step."""
        return self.sequences * self.sequence_tokens

    @property
    def generated_tokens(self) -> int:
        """Tokens the rollout generates a step (RL; 0 otherwise)."""
        return self.sequences * self.mean_response_tokens

    @property
    def decode_context(self) -> int:
        """The mean context of a sequence while it is decoded (RL)."""
        return _context(self.prompt_tokens, self.mean_response_tokens)

    def optimizer_steps(self, ppo_n_minibatches: int) -> int:
        """Optimizer steps of a trained batch: ``ppo_n_minibatches`` of the RL engine's
        section (actor or critic), one ``train_batch`` for SFT, RW and DPO."""
        return max(1, ppo_n_minibatches) if self.trainer == "rl" else 1

    def microbatch(self, tokens_per_mb: int | None) -> int:
        """A micro-batch's tokens: ``mb_spec.max_tokens_per_mb``, else one longest
        sequence."""
        return max(1, tokens_per_mb or self.longest_sequence)

    def describe(self) -> str:
        """What was assumed, e.g. ``SFT: 128 sequences of 1,024 tokens (assumed: all of
        train_dataset.max_length)``."""
        name = TRAINER_NAMES[self.trainer]
        if self.trainer != "rl":
            seqs = (
                f"{self.batch_size:,} pairs = {self.sequences:,} sequences (chosen and rejected)"
                if self.trainer in PAIRED
                else f"{self.sequences:,} sequences"
            )
            text = f"{name}: {seqs} of {self.sequence_tokens:,} tokens (assumed: all of "
            text += "train_dataset.max_length)"
            if self.trainer == "dpo":
                text += "; the ref's forward pass over them not counted"
            return text
        prompts = (
            "prompts of 0 tokens (no train_dataset.max_length)"
            if self.no_max_length
            else f"prompts of {self.prompt_tokens:,} tokens (train_dataset.max_length)"
        )
        said = (
            "--mean-response-tokens"
            if self.response_given
            else "assumed: half of gconfig.max_new_tokens; --mean-response-tokens"
        )
        if self.response_cut_from:
            said = (
                f"--mean-response-tokens {self.response_cut_from:,}, cut to "
                "gconfig.max_new_tokens: no response is longer"
            )
        return (
            f"{name}: {self.batch_size:,} prompts × {self.n_samples:,} samples, {prompts}, "
            f"mean response {self.mean_response_tokens:,} tokens ({said})"
        )


@dataclass(frozen=True)
class NoWorkload:
    """Why a config's training step cannot be predicted, and the override that would
    let it be."""

    reason: str
    fix: str


def rl_workload(
    *,
    batch_size: int,
    n_samples: int,
    max_new_tokens: int,
    prompt_tokens: int,
    mean_response_tokens: int | None = None,
    no_max_length: bool = False,
) -> StepWorkload:
    """An RL step: ``batch_size × n_samples`` sequences of ``prompt_tokens`` and a mean
    response of ``mean_response_tokens`` (default: half of ``max_new_tokens``)."""
    response = _response(max_new_tokens, mean_response_tokens)
    return StepWorkload(
        trainer="rl",
        batch_size=batch_size,
        sequences=batch_size * n_samples,
        sequence_tokens=prompt_tokens + response,
        longest_sequence=prompt_tokens + max_new_tokens,
        prompt_tokens=prompt_tokens,
        n_samples=n_samples,
        max_new_tokens=max_new_tokens,
        mean_response_tokens=response,
        response_given=mean_response_tokens is not None,
        response_cut_from=(
            mean_response_tokens
            if mean_response_tokens is not None and mean_response_tokens > response
            else 0
        ),
        no_max_length=no_max_length,
    )


def dataset_workload(trainer: Trainer, *, batch_size: int, max_length: int) -> StepWorkload:
    """An SFT, RW or DPO step: ``batch_size`` items (pairs for RW and DPO) of sequences of
    ``max_length`` tokens, trained whole."""
    sequences = batch_size * (2 if trainer in PAIRED else 1)
    return StepWorkload(
        trainer=trainer,
        batch_size=batch_size,
        sequences=sequences,
        sequence_tokens=max(1, max_length),
        longest_sequence=max(1, max_length),
    )


def step_workload(
    run: RunConfig, mean_response_tokens: int | None = None
) -> StepWorkload | NoWorkload:
    """The workload of one training step of ``run`` (see the module docstring), or why
    there is none. ``mean_response_tokens`` (RL only) replaces the assumed half of
    ``gconfig.max_new_tokens``."""
    keys = run.workload
    what = "prompts" if run.trainer == "rl" else "pairs" if run.trainer in PAIRED else "sequences"
    if keys.batch_size is None:
        return NoWorkload(
            "no train_dataset.batch_size",
            f"the batch with ++train_dataset.batch_size=<{what} a step>",
        )
    if run.trainer == "rl":
        return rl_workload(
            batch_size=keys.batch_size,
            n_samples=keys.n_samples,
            max_new_tokens=keys.max_new_tokens,
            prompt_tokens=keys.prompt_len,
            mean_response_tokens=mean_response_tokens,
            no_max_length=keys.max_length is None,
        )
    if keys.max_length is None:
        name = TRAINER_NAMES[run.trainer]
        return NoWorkload(
            f"no train_dataset.max_length: {name} trains sequences as long as the dataset "
            "makes them",
            "the longest sequence with ++train_dataset.max_length=<tokens> (AReaL then drops "
            "longer ones)",
        )
    return dataset_workload(run.trainer, batch_size=keys.batch_size, max_length=keys.max_length)


def decode_context(run: RunConfig, mean_response_tokens: int | None = None) -> int:
    """The mean context of a sequence of ``run``'s rollout while it is decoded (with or
    without a batch): its prompt and half of its response."""
    keys = run.workload
    return _context(keys.prompt_len, _response(keys.max_new_tokens, mean_response_tokens))


def concurrent_sequences(engine: EngineSection, workload: Workload) -> int:
    """Sequences an inference engine decodes at once at most: its rollouts in flight
    (``EngineSection.rollouts_cap``), each a prompt's group of ``gconfig.n_samples``
    responses generated together (``areal/infra/remote_inf_engine.py:70-108``)."""
    return engine.rollouts_cap * max(1, workload.n_samples)


def _response(max_new_tokens: int, mean_response_tokens: int | None) -> int:
    """The mean response: as said (at most ``gconfig.max_new_tokens``: no response is
    longer), else half of ``gconfig.max_new_tokens``."""
    if mean_response_tokens is not None:
        return min(mean_response_tokens, max_new_tokens) if max_new_tokens else mean_response_tokens
    return max(1, max_new_tokens // 2)


def _context(prompt_tokens: int, response: int) -> int:
    """A sequence's mean context while it is decoded: its prompt and half its response."""
    return prompt_tokens + response // 2 or 1
