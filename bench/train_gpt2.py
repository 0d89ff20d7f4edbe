"""PyTorch's side of the GPT-2 training benchmark (docs/benchmarks.md).

  train_gpt2.py OUT_DIR [--layers 12] [--batch 16] [--length 256]
                [--dropout 0.1] [--steps 3] [--timed 10] [--no-compile]
                [--opset 17] [--export-only]

Builds Hugging Face's GPT2LMHeadModel with GPT-2 small's shape (768 wide,
12 heads, vocabulary 50257; random weights, seed 0; eager attention), and
exports it for training (dropout kept as nodes) to OUT_DIR/model.onnx with
one batch of tokens (x.npy) and their next tokens (labels.npy): the
language-model loss is the cross-entropy over every position, what
`partc compile --train --loss cross-entropy --optimizer adamw --lr 1e-4`
compiles. Then trains it with torch.optim.AdamW (lr 1e-4, PyTorch's other
defaults):
  * reference: `--steps` steps in strict fp32 (no TF32), printing "ref
    step K loss V". With --dropout 0 partc-run --steps must reproduce them;
    with dropout the two draw different masks and only agree roughly;
  * timing: ms per step of eager and torch.compile (TF32 allowed, inputs
    on the GPU, synchronised at the end), and the peak memory, one JSON
    line each.
"""
import argparse, json, os, time, warnings

import numpy as np
import onnx
import torch
from onnx import numpy_helper
from transformers import GPT2Config, GPT2LMHeadModel

warnings.filterwarnings("ignore")
ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=12)
ap.add_argument("--width", type=int, default=768)
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--length", type=int, default=256)
ap.add_argument("--dropout", type=float, default=0.1)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--timed", type=int, default=10)
ap.add_argument("--no-compile", action="store_true")
ap.add_argument("--opset", type=int, default=17,
                help="ONNX opset of the export (below 17 layer norm is "
                     "written out op by op)")
ap.add_argument("--export-only", action="store_true",
                help="write the model and the batch, time nothing")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)

config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=args.heads,
                    n_positions=max(1024, args.length),
                    resid_pdrop=args.dropout, embd_pdrop=args.dropout,
                    attn_pdrop=args.dropout, use_cache=False)
config._attn_implementation = "eager"
# Recent transformers look for packed sequences in the position ids with
# torch.diff, which the TorchScript exporter cannot export; the batch here
# is never packed.
try:
    import transformers.masking_utils as masking_utils
    if hasattr(masking_utils, "find_packed_sequence_indices"):
        masking_utils.find_packed_sequence_indices = lambda position_ids: None
except ImportError:
    pass


class Logits(torch.nn.Module):
    """The model's logits only (no cache, no loss)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens):
        return self.lm(input_ids=tokens, use_cache=False).logits


torch.manual_seed(0)
net = Logits(GPT2LMHeadModel(config)).train()
tokens = torch.randint(0, config.vocab_size, (args.batch, args.length + 1))
x, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
path = os.path.join(args.out, "model.onnx")
t0 = time.perf_counter()
torch.onnx.export(net, (x,), path, dynamo=False, opset_version=args.opset,
                  input_names=["input"], output_names=["logits"],
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False)
print(f"exported in {time.perf_counter() - t0:.1f} s", flush=True)
np.save(os.path.join(args.out, "x.npy"), x.numpy().astype(np.int64))
np.save(os.path.join(args.out, "labels.npy"), labels.numpy().astype(np.int64))
if args.export_only:
    raise SystemExit(0)
# The weights partc starts from: the file's (names as exported).
exported = {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}
state = net.state_dict()
missing = [k for k, v in state.items()
           if v.is_floating_point() and k not in exported
           and "lm.lm_head" not in k]
if missing:
    print(f"note: {len(missing)} parameters not under their own name in the "
          f"file (first {missing[:3]}); both sides start from seed 0's")


def trainer(compiled):
    torch.manual_seed(0)
    model = Logits(GPT2LMHeadModel(config)).cuda().train()
    model.load_state_dict(state)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        logits = model(xb)
        loss = loss_fn(logits.view(-1, logits.shape[-1]), yb.view(-1))
        loss.backward()
        opt.step()
        return loss
    return torch.compile(step) if compiled else step


xc, yc = x.cuda(), labels.cuda()
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
step = trainer(False)
for k in range(args.steps):
    print(f"ref step {k} loss {step(xc, yc).item():.7g}", flush=True)
del step

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
for name, compiled in (("eager", False), ("compile", True)):
    if compiled and args.no_compile:
        continue
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    step = trainer(compiled)
    for _ in range(3):
        step(xc, yc)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.timed):
        step(xc, yc)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.timed
    print(json.dumps({"peer": "torch-" + name, "model": "gpt2",
                      "layers": args.layers, "batch": args.batch,
                      "length": args.length, "dropout": args.dropout,
                      "ms_per_step": round(ms, 2),
                      "tokens_per_s": round(args.batch * args.length * 1e3
                                            / ms),
                      "peak_gib": round(torch.cuda.max_memory_allocated()
                                        / 2**30, 2)}), flush=True)
    del step
