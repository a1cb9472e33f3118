"""Staged hints per step: three English msgids each, from a nudge to the shape-by-shape recipe.

Level 1 is a nudge, level 2 the key idea with the book section, level 3 the shape-by-shape
recipe (it may show the key lines). The Chinese lives in the message catalogue
(grader/locale/zh/LC_MESSAGES/attn_kata.po); show a hint with `grader.i18n._(HINTS[step][i])`.
The texts are printed through rich, so they avoid square brackets that start with a letter
(rich would read `x[i]` as markup).
"""

from grader.i18n import N_

HINTS: dict[str, list[str]] = {
    "dot_scores": [
        N_(
            "How similar is each input token to the query? One number per token: the dot product."
        ),
        N_(
            "§3.3.1 step 1: the attention score ω_i is the dot product of input token x_i with the query "
            "(torch.dot). A for loop over the rows of inputs is fine, or do all rows in one matrix-vector "
            "product."
        ),
        N_(
            "inputs (num_tokens, d_in), query (d_in,). Loop: attn_scores = torch.zeros(inputs.shape[0]); for i, "
            "x_i in enumerate(inputs): set entry i of attn_scores to torch.dot(x_i, query) -> (num_tokens,). "
            "Vectorised: inputs @ query, (num_tokens, d_in) @ (d_in,) -> (num_tokens,)."
        ),
    ],
    "softmax": [
        N_(
            "Turn the scores into weights that are positive and add up to 1; the three functions are three "
            "attempts at that, from plain division to a safe softmax."
        ),
        N_(
            "§3.3.1 step 2: normalize_by_sum divides ω by its sum; softmax_naive computes exp(ω) / Σ exp(ω) on "
            "a 1-D tensor, exactly as the book (it overflows for large scores); attention_weights is the "
            "numerically stable softmax over the last dimension (subtract the max first, or use "
            "torch.softmax(..., dim=-1))."
        ),
        N_(
            "scores (num_tokens,) -> (num_tokens,) for the first two: scores / scores.sum(); torch.exp(scores) "
            "/ torch.exp(scores).sum(dim=0). attention_weights: (..., num_tokens) -> (..., num_tokens), "
            "torch.softmax(scores, dim=-1), each slice along the last dim sums to 1."
        ),
    ],
    "context_vector": [
        N_(
            "The context vector is a weighted average of the input tokens; the attention weights are the "
            "weights."
        ),
        N_(
            "§3.3.1 step 3: z = Σ_i α_i · x_i. Start from a zero vector of length d_in and add each input row "
            "scaled by its attention weight (or do it as one vector-matrix product)."
        ),
        N_(
            "attn_weights (num_tokens,), inputs (num_tokens, d_in). Loop: context_vec = "
            "torch.zeros(inputs.shape[1]); for i, x_i in enumerate(inputs): context_vec += alpha_i * x_i -> "
            "(d_in,). Vectorised: attn_weights @ inputs, (num_tokens,) @ (num_tokens, d_in) -> (d_in,)."
        ),
    ],
    "all_tokens": [
        N_(
            "Every token is a query now: steps 1-3 for all tokens at once become three matrix operations, no "
            "loops."
        ),
        N_(
            "§3.3.2: all pairwise dot products are one matrix product of inputs with its transpose; softmax "
            "each row (dim=-1, so every row of attention weights sums to 1); then the attention weights times "
            "the inputs give every context vector."
        ),
        N_(
            "attn_scores = inputs @ inputs.T: (num_tokens, d_in) @ (d_in, num_tokens) -> (num_tokens, "
            "num_tokens). attn_weights = torch.softmax(attn_scores, dim=-1): (num_tokens, num_tokens). "
            "all_context_vecs = attn_weights @ inputs: (num_tokens, num_tokens) @ (num_tokens, d_in) -> "
            "(num_tokens, d_in)."
        ),
    ],
    "self_attention_v1": [
        N_(
            "Three trainable matrices project each input into a query, a key and a value; then do steps 1-3 "
            "with queries against keys, and weight the values."
        ),
        N_(
            "§3.4.1: W_query, W_key, W_value are nn.Parameter(torch.rand(d_in, d_out)) (create them in that "
            "order to reproduce the book's torch.manual_seed(123) output). Attention scores are queries times "
            "keys transposed, scaled by √d_k (d_k = keys.shape[-1]) before the softmax: scaled dot-product "
            "attention."
        ),
        N_(
            "x (num_tokens, d_in). keys = x @ self.W_key, queries = x @ self.W_query, values = x @ "
            "self.W_value: each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, "
            "num_tokens). attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1). context_vec "
            "= attn_weights @ values -> (num_tokens, d_out)."
        ),
    ],
    "self_attention_v2": [
        N_(
            "Same computation as SelfAttention_v1, but let nn.Linear hold the projection weights."
        ),
        N_(
            "§3.4.2: W_query, W_key, W_value are nn.Linear(d_in, d_out, bias=qkv_bias); call them on x instead "
            "of writing x @ W. nn.Linear has a better weight initialisation; the rest of forward is unchanged."
        ),
        N_(
            "x (num_tokens, d_in). keys = self.W_key(x), queries = self.W_query(x), values = self.W_value(x): "
            "each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, num_tokens); attn_weights "
            "= torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1); attn_weights @ values -> (num_tokens, "
            "d_out)."
        ),
    ],
    "causal_mask": [
        N_(
            "A token may only attend to itself and earlier tokens; hide everything to the right of the "
            "diagonal."
        ),
        N_(
            "§3.5.1: the causal attention mask is the upper triangle above the main diagonal (torch.triu with "
            "diagonal=1). Fill those attention scores with -inf before the softmax so their attention weights "
            "become exactly 0 and each row still sums to 1; scale by √d_k as before."
        ),
        N_(
            "causal_mask: torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool() -> (num_tokens, "
            "num_tokens), True = masked. masked_attention_weights: attn_scores (..., num_tokens, num_tokens), "
            "num_tokens = attn_scores.shape[-1]; masked = attn_scores.masked_fill(causal_mask(num_tokens), "
            "-torch.inf) (the mask broadcasts over leading batch dims); torch.softmax(masked / d_k**0.5, "
            "dim=-1) -> same shape."
        ),
    ],
    "dropout": [
        N_(
            "Randomly drop some attention weights during training, and make up for the loss in the ones you "
            "keep."
        ),
        N_(
            "§3.5.2: inverted dropout, what nn.Dropout does: each weight is zeroed with probability p and the "
            "survivors are scaled by 1/(1-p), so the expected value is unchanged. When not training (or p == 0) "
            "return the weights untouched; p == 1 gives all zeros."
        ),
        N_(
            "attn_weights (..., num_tokens, num_tokens) -> same shape. if not training or p == 0: return "
            "attn_weights. keep = torch.rand_like(attn_weights) >= p (a bool mask, True with probability 1-p); "
            "return attn_weights * keep / (1 - p). Handle p == 1 separately (torch.zeros_like) to avoid 0/0."
        ),
    ],
    "causal_attention": [
        N_(
            "Put SelfAttention_v2, the causal attention mask and dropout together in one class that takes a "
            "batch."
        ),
        N_(
            "§3.5.3: three nn.Linear(d_in, d_out, bias=qkv_bias), an nn.Dropout(dropout), and the mask "
            "torch.triu(torch.ones(context_length, context_length), diagonal=1) saved with register_buffer. In "
            "forward the input is batched, so transpose the last two dims of keys (not .T), and cut the mask to "
            "the actual num_tokens."
        ),
        N_(
            "x (b, num_tokens, d_in); b, num_tokens, d_in = x.shape. keys/queries/values = self.W_key(x) etc.: "
            "(b, num_tokens, d_out). attn_scores = queries @ keys.transpose(1, 2): (b, num_tokens, d_out) @ (b, "
            "d_out, num_tokens) -> (b, num_tokens, num_tokens). "
            "attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); attn_weights = "
            "self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)); context_vec = attn_weights "
            "@ values -> (b, num_tokens, d_out)."
        ),
    ],
    "multihead_wrapper": [
        N_(
            "Several independent causal attention heads side by side; glue their outputs together."
        ),
        N_(
            "§3.6.1: keep num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) modules in "
            "an nn.ModuleList called heads (a plain list would hide their parameters), run each on x, and "
            "concatenate along the last dimension."
        ),
        N_(
            "self.heads = nn.ModuleList(CausalAttention(...) for _ in range(num_heads)). x (b, num_tokens, "
            "d_in); each head(x) -> (b, num_tokens, d_out); torch.cat(list of head(x), dim=-1) -> (b, "
            "num_tokens, num_heads * d_out)."
        ),
    ],
    "multihead_attention": [
        N_(
            "Instead of num_heads separate modules, project once to d_out and split that into heads."
        ),
        N_(
            "§3.6.2: head_dim = d_out // num_heads (assert d_out % num_heads == 0). One nn.Linear each for "
            "query, key and value of size d_out, then view the last dim as (num_heads, head_dim) and move the "
            "head dim in front of num_tokens, so one batched matmul computes every head's attention scores. "
            "Apply the causal attention mask, softmax with √head_dim scaling, dropout, merge the heads back and "
            "finish with out_proj = nn.Linear(d_out, d_out)."
        ),
        N_(
            "x (b, num_tokens, d_in) -> W_key(x) (b, num_tokens, d_out) -> .view(b, num_tokens, num_heads, "
            "head_dim) -> .transpose(1, 2) (b, num_heads, num_tokens, head_dim), same for queries and values. "
            "attn_scores = queries @ keys.transpose(2, 3) -> (b, num_heads, num_tokens, num_tokens); "
            "masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); softmax(attn_scores / "
            "keys.shape[-1]**0.5, dim=-1), dropout; (attn_weights @ values) (b, num_heads, num_tokens, "
            "head_dim) -> .transpose(1, 2) (b, num_tokens, num_heads, head_dim) -> .contiguous().view(b, "
            "num_tokens, d_out) -> self.out_proj(...) (b, num_tokens, d_out)."
        ),
    ],
    "weight_transfer": [
        N_(
            "Both classes compute the same thing; only the way the weight matrices are stored differs."
        ),
        N_(
            "Exercise 3.1 (§3.4.2): nn.Linear stores weight as (d_out, d_in) and computes x @ weight.T, while "
            "SelfAttention_v1 computes x @ W with W of shape (d_in, d_out). So each of sa_v1's W_query, W_key, "
            "W_value must become the transpose of the matching nn.Linear weight of sa_v2."
        ),
        N_(
            "sa_v2.W_query.weight (d_out, d_in) -> .T (d_in, d_out). sa_v1.W_query = "
            "nn.Parameter(sa_v2.W_query.weight.T.detach().clone()); the same for W_key and W_value; return "
            "sa_v1. Then sa_v1(x) and sa_v2(x) agree: (num_tokens, d_in) -> (num_tokens, d_out)."
        ),
    ],
    "two_dim_output": [
        N_(
            "Keep num_heads=2 and ask yourself which argument sets the width of each head's output."
        ),
        N_(
            "Exercise 3.2 (§3.6.1): the wrapper concatenates num_heads outputs of d_out dimensions each, so its "
            "context vectors have num_heads * d_out dimensions. Two heads and two dimensions: what must d_out be?"
        ),
        N_(
            "return MultiHeadAttentionWrapper(d_in, 1, context_length, dropout, num_heads=2): each head gives "
            "(batch, num_tokens, 1), concatenated -> (batch, num_tokens, 2). Pass d_in, context_length and "
            "dropout on as they are."
        ),
    ],
    "gpt2_size": [
        N_(
            "Nothing new to write: build the MultiHeadAttention of step 11 with GPT-2 small's numbers."
        ),
        N_(
            "Exercise 3.3 (§3.6.2): the smallest GPT-2 has 12 attention heads, input and output embeddings of "
            "768 dimensions and a context length of 1024 tokens; keep qkv_bias=False and pass dropout on."
        ),
        N_(
            "return MultiHeadAttention(768, 768, 1024, dropout, num_heads=12): head_dim = 768 // 12 = 64; "
            "W_query, W_key, W_value and out_proj are 768 x 768 (out_proj with a bias): 2,360,064 parameters."
        ),
    ],
}
