"""Reference application: compose conf/config.yaml, validate, print and save the plan.

python train.py
python train.py rollout.backend=sglang:d4t2 cluster.n_nodes=3
python train.py +experiment=moe_megatron
python train.py -m actor.backend=fsdp:d8,fsdp:d4t2
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from areal_conf import AllocationError
from areal_conf.gpu_map import render_gpu_map
from areal_conf.hydra_compat import VERSION_BASE
from areal_conf.validate import validate

PLAN_FILE = "allocation_plan.json"


# areal_schema and the areal. resolvers come from the installed plugin, nothing to import.
# VERSION_BASE: Hydra's current defaults on 1.3 and 1.4 alike (the job stays in the
# directory it was started from), without a warning on either.
@hydra.main(config_path="conf", config_name="config", **VERSION_BASE)
def main(cfg: DictConfig) -> None:
    try:
        plan = validate(cfg)
    except AllocationError as err:
        # One message, no traceback: Hydra would print one for an escaping exception.
        print(f"error: invalid allocation\n{err}", file=sys.stderr)
        sys.exit(2)
    print(plan.table())
    print()
    print(render_gpu_map(plan))
    out = Path(HydraConfig.get().runtime.output_dir) / PLAN_FILE
    out.write_text(json.dumps(plan.to_dict(), indent=2) + "\n")
    print(f"plan written to {out}")


if __name__ == "__main__":
    main()
