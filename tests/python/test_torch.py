"""The torch.distributed backend "orbite" under orbite-run -n 2 (SPMD: every rank runs these tests
in the same order). Every collective and dtype is checked against a reference computed locally;
DDP on orbite must end with the same parameters as DDP on gloo from the same seed."""

import datetime

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

import orbite  # noqa: E402
import orbite.torch as otorch  # noqa: E402

WAIT = datetime.timedelta(seconds=60)
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int32, torch.int64]
OPS = {
    "sum": (dist.ReduceOp.SUM, lambda xs: sum(x.double() for x in xs)),
    "product": (dist.ReduceOp.PRODUCT, lambda xs: xs[0].double() * xs[1].double()),
    "min": (dist.ReduceOp.MIN, lambda xs: torch.minimum(xs[0].double(), xs[1].double())),
    "max": (dist.ReduceOp.MAX, lambda xs: torch.maximum(xs[0].double(), xs[1].double())),
    "avg": (dist.ReduceOp.AVG, lambda xs: sum(x.double() for x in xs) / len(xs)),
}


@pytest.fixture(scope="session", autouse=True)
def world():
    otorch.init_process_group(timeout=datetime.timedelta(seconds=120))
    assert dist.get_world_size() == 2, "these tests run on 2 ranks"
    yield
    dist.destroy_process_group()


def rank():
    return dist.get_rank()


def per_rank(n, dtype, r):
    return ((torch.arange(n) % 5) + r + 1).to(dtype)


def like(reference, dtype):
    if dtype.is_floating_point:
        return reference.to(dtype)
    return torch.trunc(reference).to(dtype)  # OrbiTE's integer avg truncates toward zero


def test_the_default_group_is_orbite():
    assert dist.get_backend() == "orbite"
    assert isinstance(dist.distributed_c10d._get_default_group(), otorch.ProcessGroupOrbite)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(OPS))
def test_all_reduce_matches_a_local_reference(dtype, op):
    reduce_op, reference = OPS[op]
    t = per_rank(1000, dtype, rank())
    dist.all_reduce(t, op=reduce_op)
    want = like(reference([per_rank(1000, dtype, r) for r in range(2)]), dtype)
    assert torch.equal(t, want), (t[:8], want[:8])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_other_collective_matches_a_local_reference(dtype):
    me, n = rank(), 12
    mine = per_rank(n, dtype, me)
    everyone = [per_rank(n, dtype, r) for r in range(2)]
    # broadcast and reduce
    t = mine.clone()
    dist.broadcast(t, src=1)
    assert torch.equal(t, everyone[1])
    t = mine.clone()
    dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
    if me == 0:
        assert torch.equal(t, torch.maximum(*everyone))
    # all_gather: a list, and one flat tensor
    out = [torch.zeros(n, dtype=dtype) for _ in range(2)]
    dist.all_gather(out, mine)
    assert all(torch.equal(o, e) for o, e in zip(out, everyone))
    flat = torch.zeros(2 * n, dtype=dtype)
    dist.all_gather_into_tensor(flat, mine)
    assert torch.equal(flat, torch.cat(everyone))
    # reduce_scatter: a list, and one flat tensor
    blocks = [per_rank(n, dtype, me + 10 * j) for j in range(2)]
    got = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter(got, blocks, op=dist.ReduceOp.SUM)
    want = like(sum(per_rank(n, dtype, r + 10 * me).double() for r in range(2)), dtype)
    assert torch.equal(got, want)
    got = torch.zeros(n, dtype=dtype)
    dist.reduce_scatter_tensor(got, torch.cat(blocks))
    assert torch.equal(got, want)
    # all_to_all: equal splits, split sizes, and lists
    send = torch.cat([per_rank(n, dtype, 10 * me + j) for j in range(2)])
    recv = torch.zeros(2 * n, dtype=dtype)
    dist.all_to_all_single(recv, send)
    assert torch.equal(recv, torch.cat([per_rank(n, dtype, 10 * r + me) for r in range(2)]))
    sent_splits = {0: [1, 2], 1: [2, 1]}  # rows rank r sends to ranks 0 and 1
    recv_splits = [sent_splits[r][me] for r in range(2)]
    rows = torch.stack([per_rank(3, dtype, 100 * me + i) for i in range(3)])
    back = torch.zeros(3, 3, dtype=dtype)
    dist.all_to_all_single(back, rows, output_split_sizes=recv_splits,
                           input_split_sizes=sent_splits[me])
    theirs = {r: torch.stack([per_rank(3, dtype, 100 * r + i) for i in range(3)]) for r in range(2)}
    expected = []
    for r in range(2):
        start = sum(sent_splits[r][:me])
        expected.append(theirs[r][start:start + sent_splits[r][me]])
    assert torch.equal(back, torch.cat(expected))
    outs = [torch.zeros(n + j, dtype=dtype) for j in range(2)]
    ins = [per_rank(n + me, dtype, 7 * me + j) for j in range(2)]
    dist.all_to_all(outs, ins)
    assert all(torch.equal(outs[r], per_rank(n + r, dtype, 7 * r + me)) for r in range(2))
    # gather and scatter
    gathered = [torch.zeros(n, dtype=dtype) for _ in range(2)] if me == 1 else None
    dist.gather(mine, gathered, dst=1)
    if me == 1:
        assert all(torch.equal(g, e) for g, e in zip(gathered, everyone))
    part = torch.zeros(n, dtype=dtype)
    dist.scatter(part, [per_rank(n, dtype, 50 + j) for j in range(2)] if me == 0 else None, src=0)
    assert torch.equal(part, per_rank(n, dtype, 50 + me))
    dist.barrier()


def test_send_and_recv_match_by_tag():
    peer = 1 - rank()
    a, b = torch.full((1000,), 1.0 + rank()), torch.full((5,), 10 + rank(), dtype=torch.int64)
    if rank() == 0:
        dist.send(a, peer, tag=3)
        dist.send(b, peer, tag=4)
    else:
        got_b, got_a = torch.zeros(5, dtype=torch.int64), torch.zeros(1000)
        r = dist.irecv(got_b, peer, tag=4)  # posted first, matched by tag
        dist.recv(got_a, peer, tag=3)
        r.wait()
        assert torch.equal(got_a, torch.full((1000,), 1.0)) and got_b.tolist() == [10] * 5
    short = torch.zeros(3)
    if rank() == 0:
        dist.send(torch.ones(5), peer, tag=9)
    else:
        with pytest.raises(RuntimeError, match="orbite"):
            dist.recv(short, peer, tag=9)
    dist.barrier()


def test_recv_from_any_source_reports_the_sender_as_gloo_does():
    # dist.recv and dist.irecv without src: the backend's recv_anysource, the sender from the Work.
    gloo = dist.new_group(backend="gloo")
    for group in (None, gloo):
        if rank() == 1:
            dist.send(torch.full((6,), 7.0), 0, group=group, tag=12)
            dist.send(torch.full((6,), 8.0), 0, group=group, tag=13)
        else:
            got = torch.zeros(6)
            assert dist.recv(got, group=group, tag=12) == 1
            assert got.tolist() == [7.0] * 6
            work = dist.irecv(got, group=group, tag=13)
            work.wait()
            assert work._source_rank() == 1
            assert got.tolist() == [8.0] * 6
    dist.barrier()


def test_async_work_and_its_future():
    t = torch.full((4096,), float(rank() + 1))
    work = dist.all_reduce(t, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert work.wait(timeout=WAIT)
    assert work.is_completed() and work.is_success()
    assert torch.equal(doubled.wait(), torch.full((4096,), 6.0))
    assert torch.equal(work.result()[0], torch.full((4096,), 3.0))
    # Futures complete without anyone waiting on the Work (DDP relies on it).
    fut = dist.all_reduce(torch.ones(10), async_op=True).get_future()
    assert fut.wait()[0].tolist() == [2.0] * 10


def test_subgroups_and_a_gloo_group_side_by_side():
    both = dist.new_group([0, 1])
    solo = dist.new_group([1])
    gloo = dist.new_group(backend="gloo")
    assert dist.get_backend(both) == "orbite" and dist.get_backend(gloo) == "gloo"
    t = torch.full((10,), float(rank()))
    dist.all_reduce(t, group=both)
    assert t.tolist() == [1.0] * 10
    if rank() == 1:
        s = torch.full((3,), 5.0)
        dist.all_reduce(s, group=solo)
        assert s.tolist() == [5.0] * 3
    g = torch.full((10,), float(rank()))
    dist.all_reduce(g, group=gloo)
    assert torch.equal(g, t)


def test_unsupported_input_raises_a_clear_error():
    with pytest.raises(RuntimeError, match="dtype .* is not supported"):
        dist.all_reduce(torch.zeros(4, dtype=torch.int16))
    with pytest.raises(RuntimeError, match="reduce op .* not supported"):
        dist.all_reduce(torch.zeros(4, dtype=torch.int32), op=dist.ReduceOp.BAND)
    with pytest.raises(RuntimeError, match="contiguous"):
        dist.all_reduce(torch.zeros(4, 4).t())
    dist.barrier()  # no rank started anything above: the group is still in step


def test_same_host_bytes_go_over_shared_memory():
    # Same-host collectives go through the communicator's shared segment up to the rule's limit
    # (16 MiB on 2 ranks, 4 MiB on more: no transport moves their bytes), and above it over the
    # shm transport; tcp carries nothing.
    before = otorch.transport_bytes()
    small = torch.ones(1 << 10)
    dist.all_reduce(small)
    through_segment = otorch.transport_bytes()
    assert through_segment == before, (before, through_segment)
    assert torch.equal(small, torch.full((1 << 10,), float(dist.get_world_size())))
    large = torch.ones(1 << 23)  # 32 MiB
    dist.all_reduce(large)
    after = otorch.transport_bytes()
    assert after["shm"] - through_segment["shm"] >= (1 << 23) * 4, (through_segment, after)
    assert after["tcp"] == before["tcp"]
    assert torch.equal(large[:4], torch.full((4,), float(dist.get_world_size())))


def test_bfloat16_tensors_through_orbite_core_by_dlpack():
    comm = orbite.Communicator()
    t = torch.full((100,), 1.5 + rank(), dtype=torch.bfloat16)
    out = torch.zeros(100, dtype=torch.bfloat16)
    comm.all_reduce(t, out).wait(60)
    assert torch.equal(out, torch.full((100,), 4.0, dtype=torch.bfloat16))


def train(group, steps=5):
    """A few steps of a small model under DDP on `group`, from the same seed on every backend."""
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(99 + rank())  # each rank its own batches
    for _ in range(steps):
        x = torch.randn(8, 16, generator=data)
        y = torch.randn(8, 4, generator=data)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def test_ddp_on_orbite_ends_where_ddp_on_gloo_does():
    gloo = dist.new_group(backend="gloo")
    on_orbite = train(dist.group.WORLD)
    on_gloo = train(gloo)
    for a, b in zip(on_orbite, on_gloo):
        assert torch.equal(a, b), (a - b).abs().max()
    # The parameters moved, and every rank holds the same ones.
    torch.manual_seed(1234)
    start = torch.nn.Linear(16, 32).weight
    assert not torch.equal(on_orbite[0], start)
    theirs = [torch.zeros_like(on_orbite[0]) for _ in range(2)]
    dist.all_gather(theirs, on_orbite[0])
    assert torch.equal(theirs[0], theirs[1])
