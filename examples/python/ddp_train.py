"""A few training steps of a small model with DistributedDataParallel on the "orbite" backend.

    build/bin/orbite-run -n 2 -- env PYTHONPATH=build/python /usr/bin/python3 \\
        examples/python/ddp_train.py

Under torchrun, torch.distributed.init_process_group("orbite") works as well (after
`import orbite.torch`); orbite.torch.init_process_group() also works under orbite-run and
mpirun, where rank 0 hands out a torch store's address through OrbiTE's bootstrap.
"""

import datetime

import torch
import torch.distributed as dist

import orbite.torch

orbite.torch.init_process_group(timeout=datetime.timedelta(seconds=120))
rank, size = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
ddp = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
truth = torch.randn(32, 1)
data = torch.Generator().manual_seed(1 + rank)  # each rank trains on its own batches

for step in range(20):
    x = torch.randn(64, 32, generator=data)
    loss = torch.nn.functional.mse_loss(ddp(x), x @ truth)
    optimizer.zero_grad()
    loss.backward()  # gradients are averaged over the ranks by orbite's allreduce
    optimizer.step()
    if step % 5 == 4 and rank == 0:
        print(f"step {step + 1}: loss {loss.item():.4f}")

# Every rank must hold the same parameters.
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
everyone = [torch.zeros_like(flat) for _ in range(size)]
dist.all_gather(everyone, flat)
same = all(torch.equal(everyone[0], e) for e in everyone)
print(f"rank {rank}/{size}: parameters {'equal' if same else 'DIFFERENT'} on every rank after 20 "
      f"steps (backend {dist.get_backend()})")
dist.destroy_process_group()
if not same:
    raise SystemExit(1)
