"""A GPT-2 in miniature for the training tests (check_torch.py,
check_parallel.py): token and position embeddings, layer norm, causal
masked attention, a Gelu MLP and, where asked, dropout on the attention
weights and the residual branches."""
import torch


class Block(torch.nn.Module):
    """A GPT-2 block: causal attention and a Gelu MLP."""

    def __init__(self, width, heads, length, dropout=0.0, sliced=False):
        super().__init__()
        self.heads = heads
        self.sliced = sliced
        self.register_buffer("future", torch.triu(
            torch.ones(length, length, dtype=torch.bool), 1))
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc1 = torch.nn.Linear(width, 4 * width)
        self.fc2 = torch.nn.Linear(4 * width, width)
        # No Dropout node in the export unless asked for.
        self.drop = (torch.nn.Dropout(dropout) if dropout
                     else torch.nn.Identity())

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (h.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for h in self.qkv(self.ln1(x)).split(d, dim=-1))
        scores = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        # Sliced for a sequence shorter than `length` (exports with a
        # dynamic sequence axis); a whole-length model keeps it whole.
        future = self.future[:t, :t] if self.sliced else self.future
        attn = self.drop(scores.masked_fill(future,
                                            float("-inf")).softmax(-1))
        x = x + self.drop(self.proj((attn @ v).transpose(1, 2)
                                    .reshape(b, t, d)))
        return x + self.drop(self.fc2(torch.nn.functional.gelu(
            self.fc1(self.ln2(x)))))


class TinyGpt(torch.nn.Module):
    def __init__(self, vocab=50, width=32, heads=4, length=8, layers=2,
                 dropout=0.0, tied=False, sliced=False):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Parameter(torch.randn(length, width) * 0.1)
        self.blocks = torch.nn.ModuleList(
            Block(width, heads, length, dropout, sliced)
            for _ in range(layers))
        self.sliced = sliced
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab, bias=not tied)
        if tied:  # GPT-2's output projection is its token embedding
            self.head.weight = self.tok.weight

    def forward(self, tokens):
        x = self.tok(tokens) + (self.pos[:tokens.shape[1]] if self.sliced
                                else self.pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))
