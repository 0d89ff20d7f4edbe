"""DistributedDataParallel ResNet-50 training as a careful user would tune it.

  ddp_variants.py [--gpus 2,4] [--batch 256] [--size 224] [--steps 10]
                  [--channels-last] [--loss mse|cross-entropy]

shared/bench/torch_baselines.py's `ddp` is the issue's baseline (NCHW, MSE on
one-hot labels, SGD lr 0.001). This script runs the same step with the
memory format a user would switch on for convolutions on tensor cores
(`--channels-last`: the model and the batch in torch.channels_last), so
that partc's channels-last plans are also compared with PyTorch's. One JSON
line per world size: ms per step over `--steps` after 3 warm-up steps, TF32
and cuDNN's benchmark mode on, one process per GPU over NCCL.
"""
import argparse, json, os, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torchvision


def worker(rank, world, args, queue):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    net = torchvision.models.resnet50(num_classes=1000).cuda(rank).to(
        memory_format=fmt)
    model = nn.parallel.DistributedDataParallel(net, device_ids=[rank])
    per = args.batch // world
    x = torch.randn(per, 3, args.size, args.size, device=rank).to(
        memory_format=fmt)
    if args.loss == "mse":
        labels = torch.zeros(per, 1000, device=rank)
        labels[:, 0] = 1
        loss_fn = nn.MSELoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.001)
    else:
        labels = torch.randint(0, 1000, (per,), device=rank)
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), labels).backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    if rank == 0:
        queue.put((time.perf_counter() - start) / args.steps)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="2,4")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--loss", default="mse")
    args = ap.parse_args()
    for world in (int(w) for w in args.gpus.split(",")):
        if world > torch.cuda.device_count():
            continue
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        os.environ["MASTER_PORT"] = str(29600 + world)
        mp.spawn(worker, args=(world, args, queue), nprocs=world, join=True)
        seconds = queue.get()
        print(json.dumps({
            "peer": "ddp" + ("-channels-last" if args.channels_last else ""),
            "gpus": world, "batch": args.batch, "size": args.size,
            "loss": args.loss, "ms_per_step": round(seconds * 1e3, 2),
            "img_s": round(args.batch / seconds, 1)}), flush=True)


if __name__ == "__main__":
    main()
