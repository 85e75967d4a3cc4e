"""Reference application: compose conf/config.yaml, validate, print and save the plan.

python train.py
python train.py rollout.backend=sglang:d4t2 cluster.n_nodes=3
python train.py +experiment=moe_megatron
python train.py -m actor.backend=fsdp:d8,fsdp:d4t2

An invalid config prints one message and exits 2, in a single run and in a multirun
(``areal_conf.run_validated``); other errors Hydra reports (bad override syntax, an
unknown key) exit 1. A Ctrl-C or SIGTERM meanwhile prints one line and exits 130 or 143.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from areal_conf import run_validated, validate
from areal_conf.files import write_atomic
from areal_conf.hydra.compat import VERSION_BASE
from areal_conf.hydra.task import app_config_path, unvalidated_sweep_warning
from areal_conf.plan.report import plan_table, render_gpu_map

PLAN_FILE = "allocation_plan.json"
log = logging.getLogger(__name__)


# areal_schema and the areal. resolvers come from the installed plugin, nothing to import.
# VERSION_BASE: Hydra's current defaults on 1.3 and 1.4 alike (the job stays in the
# directory it was started from), without a warning on either. With --config-dir the
# user's directory is the only one searched, so conf/config.yaml never shadows a user's
# config.yaml.
@hydra.main(config_path=app_config_path("conf"), config_name="config", **VERSION_BASE)
def main(cfg: DictConfig) -> None:
    warning = unvalidated_sweep_warning()  # a multirun through a launcher that does not validate
    if warning:
        log.warning(warning)
    plan = validate(cfg)  # an AllocationError becomes run_validated's one message
    print(plan_table(plan))
    print()
    print(render_gpu_map(plan))
    out = Path(HydraConfig.get().runtime.output_dir) / PLAN_FILE
    write_atomic(out, json.dumps(plan.to_dict(), indent=2) + "\n")  # a kill leaves no half
    print(f"plan written to {out}")


if __name__ == "__main__":
    run_validated(main)
