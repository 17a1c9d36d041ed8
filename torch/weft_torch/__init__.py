"""weft's collective library as the torch.distributed backend "weft".

Importing this package registers the backend::

    import torch.distributed as dist
    import weft_torch  # noqa: F401  (registers "weft")

    dist.init_process_group("weft")      # under torchrun: RANK, WORLD_SIZE, MASTER_ADDR, ...
    dist.all_reduce(tensor)
    model = torch.nn.parallel.DistributedDataParallel(model)

Ranks on one host share memory, the others talk TCP; WEFT_PLAN applies a
route plan from ``weft route``. docs/torch.md has the launch, the
environment variables, the guarantees and the limits.
"""

import torch.distributed as _dist

from ._C import ProcessGroupWeft

__all__ = ["ProcessGroupWeft", "BACKEND"]

BACKEND = "weft"


def _create_process_group(options, pg_options):
    """The creator torch.distributed calls for every group of this backend
    (the default one and each new_group), with the group's prefixed store."""
    if pg_options is not None:
        raise RuntimeError("weft: init_process_group/new_group take no pg_options for the weft backend")
    timeout_ms = int(options.timeout.total_seconds() * 1000)
    return ProcessGroupWeft(
        options.store,
        options.group_rank,
        options.group_size,
        timeout_ms,
        list(options.global_ranks_in_group),
        options.group_id,
    )


# extended_api: the creator also learns the group's name and its global
# ranks, which the group's error messages name.
if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
