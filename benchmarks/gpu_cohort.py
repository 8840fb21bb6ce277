"""The cohort trainer on a GPU against the CPU (ldpfed.training.cohort; `simulate --device cuda`).

For logreg, mlp and cnn on random data shaped like digits (1x8x8) and MNIST (1x28x28), trains C
clients for E steps from one start on the CPU and on CUDA and reports:
- the largest difference between the two devices' trained parameters, relative to the largest
  parameter change (float32 kernels differ between devices; the claim is agreement to a tolerance,
  not bit equality);
- whether a client's result on CUDA is the same alone and in chunks of 2 and 4 clients (a trainer
  of chunk width 4 pads the short chunks): the property that makes a run independent of --nodes;
- clients per second on each device, and their ratio, measured in the same run.

    python benchmarks/gpu_cohort.py [--clients 256] [--steps 20] [--json]

Without a CUDA device it reports the CPU figures and says so.
"""

from __future__ import annotations

import json
import time

import torch

from ldpfed.training.cohort import CohortTrainer, batch_plan
from ldpfed.training.models import build_model
from scripts.arguments import script_parser

SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28)}


def _data(clients: int, examples: int, shape, seed: int):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(clients, examples, *shape, generator=generator)
    y = torch.randint(0, 10, (clients, examples), generator=generator)
    return x, y


def _train(model_name: str, shape, device: torch.device, x, y, rows, index, weight, lr: float, chunk: int):
    network = build_model(model_name, shape, 10, seed=0)
    start = [p.detach().clone() for p in network.parameters()]
    trainer = CohortTrainer(network, device, chunk)
    xd, yd = x.to(device), y.to(device)
    trained, _ = trainer.train(start, xd, yd, rows, index, weight, lr)  # warm-up (kernels, caches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    trained, _ = trainer.train(start, xd, yd, rows, index, weight, lr)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    return start, [p.detach().cpu() for p in trained], seconds, trainer, xd, yd


def chunk_invariant(trainer, start, x, y, index, weight, lr: float) -> bool:
    """Client 1 alone, in [0, 1] and in [0, 1, 2, 3]: the same parameters, bit for bit."""
    results = []
    for chunk in ([1], [0, 1], [0, 1, 2, 3]):
        rows = torch.tensor(chunk)
        trained, _ = trainer.train(start, x, y, rows, index[rows], weight[rows], lr)
        results.append([p[chunk.index(1)].detach().cpu() for p in trained])
    return all(torch.equal(a, b) for other in results[1:] for a, b in zip(results[0], other))


def main() -> None:
    args = script_parser(__doc__, clients=256, examples=64, steps=20, batch_size=32, lr=0.1, json=False).parse_args()
    cuda = torch.cuda.is_available()
    rows_out = []
    for data_name, shape in SHAPES.items():
        x, y = _data(args.clients, args.examples, shape, seed=1)
        index, weight = batch_plan(
            [args.examples] * args.clients, list(range(args.clients)), args.steps, args.batch_size, args.batch_size
        )
        rows = torch.arange(args.clients)
        for model_name in ("logreg", "mlp", "cnn"):
            start, cpu, cpu_seconds, *_ = _train(
                model_name, shape, torch.device("cpu"), x, y, rows, index, weight, args.lr, args.clients
            )
            row = {
                "data": data_name,
                "model": model_name,
                "clients": args.clients,
                "steps": args.steps,
                "cpu_clients_per_s": args.clients / cpu_seconds,
            }
            if cuda:
                _, gpu, gpu_seconds, _, xd, yd = _train(
                    model_name, shape, torch.device("cuda"), x, y, rows, index, weight, args.lr, args.clients
                )
                small = CohortTrainer(build_model(model_name, shape, 10, seed=0), torch.device("cuda"), 4)
                change = max(float((c - s).abs().max()) for c, s in zip(cpu, start))
                difference = max(float((c - g).abs().max()) for c, g in zip(cpu, gpu))
                row.update(
                    {
                        "gpu_clients_per_s": args.clients / gpu_seconds,
                        "gpu_over_cpu_speed": cpu_seconds / gpu_seconds,
                        "max_param_change": change,
                        "max_cpu_gpu_difference": difference,
                        "relative_difference": difference / change,
                        "gpu_chunk_invariant": chunk_invariant(small, start, xd, yd, index, weight, args.lr),
                    }
                )
            rows_out.append(row)
    report = {"cuda": cuda, "device": torch.cuda.get_device_name(0) if cuda else "none", "rows": rows_out}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"CUDA device: {report['device']}")
    for row in rows_out:
        print(", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))


if __name__ == "__main__":
    main()
