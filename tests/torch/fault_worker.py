"""One rank of fault_test.py: trains ddp_train.py's MLP over the weft
backend until a collective fails, then reports the failure and exits the way
a training script does (the interpreter's normal exit).

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (as torchrun sets
them) and FAULT_TIMEOUT_S, the process group's timeout. Prints "step N"
after every step and, when the failure comes,
"FAILED <time.time()> <exception type>: <message on one line>".
"""

import os
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ddp_train  # noqa: E402


def main():
    import weft_torch  # noqa: F401
    dist.init_process_group("weft", timeout=timedelta(seconds=float(os.environ["FAULT_TIMEOUT_S"])))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(ddp_train.mlp(), bucket_cap_mb=0.004)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    try:
        while True:
            x, y = ddp_train.batch(step, rank)
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            print(f"step {step}", flush=True)
            step += 1
    except Exception as e:  # noqa: B902: what a training loop would see
        at = time.time()
        message = " ".join(str(e).split())
        print(f"FAILED {at:.6f} {type(e).__name__}: {message}", flush=True)
        return 3


if __name__ == "__main__":
    sys.exit(main())
