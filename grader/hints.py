"""Staged hints per step: (English, 中文), from a nudge to the shape-by-shape recipe.

Level 1 is a nudge, level 2 the key idea with the book section, level 3 the shape-by-shape
recipe (it may show the key lines). The texts are printed through rich, so they avoid
square brackets that start with a letter (rich would read `x[i]` as markup).
"""

HINTS: dict[str, list[tuple[str, str]]] = {
    "dot_scores": [
        (
            "How similar is each input token to the query? One number per token: the dot product.",
            "每个输入 token 与查询向量有多相关？每个 token 对应一个数：点积。",
        ),
        (
            "§3.3.1 step 1: the attention score ω_i is the dot product of input token x_i with the query "
            "(torch.dot). A for loop over the rows of inputs is fine, or do all rows in one matrix-vector product.",
            "§3.3.1 步骤1：注意力得分 ω_i 就是输入 token x_i 与查询向量的点积（torch.dot）。"
            "可以用 for 循环遍历 inputs 的每一行，也可以一次矩阵-向量乘法算完。",
        ),
        (
            "inputs (num_tokens, d_in), query (d_in,). Loop: attn_scores = torch.zeros(inputs.shape[0]); "
            "for i, x_i in enumerate(inputs): set entry i of attn_scores to torch.dot(x_i, query) -> (num_tokens,). "
            "Vectorised: inputs @ query, (num_tokens, d_in) @ (d_in,) -> (num_tokens,).",
            "inputs (num_tokens, d_in)，query (d_in,)。循环写法：attn_scores = torch.zeros(inputs.shape[0])；"
            "对 enumerate(inputs) 中的每个 x_i，第 i 个注意力得分 = torch.dot(x_i, query) -> (num_tokens,)。"
            "向量化写法：inputs @ query，(num_tokens, d_in) @ (d_in,) -> (num_tokens,)。",
        ),
    ],
    "softmax": [
        (
            "Turn the scores into weights that are positive and add up to 1; the three functions are "
            "three attempts at that, from plain division to a safe softmax.",
            "把注意力得分变成非负且和为 1 的注意力权重；三个函数是三种做法：从直接除以总和到数值稳定的 softmax。",
        ),
        (
            "§3.3.1 step 2: normalize_by_sum divides ω by its sum; softmax_naive computes exp(ω) / Σ exp(ω) on a "
            "1-D tensor, exactly as the book (it overflows for large scores); attention_weights is the numerically "
            "stable softmax over the last dimension (subtract the max first, or use torch.softmax(..., dim=-1)).",
            "§3.3.1 步骤2：normalize_by_sum 把 ω 除以它的总和；softmax_naive 按书中写法在一维张量上计算 "
            "exp(ω) / Σ exp(ω)（得分很大时会溢出）；attention_weights 是在最后一维上数值稳定的 softmax"
            "（先减去最大值，或直接用 torch.softmax(..., dim=-1)）。",
        ),
        (
            "scores (num_tokens,) -> (num_tokens,) for the first two: scores / scores.sum(); "
            "torch.exp(scores) / torch.exp(scores).sum(dim=0). attention_weights: (..., num_tokens) -> "
            "(..., num_tokens), torch.softmax(scores, dim=-1), each slice along the last dim sums to 1.",
            "前两个函数 scores (num_tokens,) -> (num_tokens,)：scores / scores.sum()；"
            "torch.exp(scores) / torch.exp(scores).sum(dim=0)。attention_weights：(..., num_tokens) -> "
            "(..., num_tokens)，torch.softmax(scores, dim=-1)，沿最后一维每一组注意力权重之和为 1。",
        ),
    ],
    "context_vector": [
        (
            "The context vector is a weighted average of the input tokens; the attention weights are the weights.",
            "上下文向量是输入 token 的加权和，权重就是注意力权重。",
        ),
        (
            "§3.3.1 step 3: z = Σ_i α_i · x_i. Start from a zero vector of length d_in and add each input row "
            "scaled by its attention weight (or do it as one vector-matrix product).",
            "§3.3.1 步骤3：z = Σ_i α_i · x_i。从长度为 d_in 的零向量开始，把每个输入行乘以对应的注意力权重后累加"
            "（也可以用一次向量-矩阵乘法）。",
        ),
        (
            "attn_weights (num_tokens,), inputs (num_tokens, d_in). Loop: context_vec = torch.zeros(inputs.shape[1]); "
            "for i, x_i in enumerate(inputs): context_vec += alpha_i * x_i -> (d_in,). "
            "Vectorised: attn_weights @ inputs, (num_tokens,) @ (num_tokens, d_in) -> (d_in,).",
            "attn_weights (num_tokens,)，inputs (num_tokens, d_in)。"
            "循环写法：context_vec = torch.zeros(inputs.shape[1])；"
            "对 enumerate(inputs) 中的每个 x_i：context_vec += α_i * x_i -> (d_in,)。"
            "向量化写法：attn_weights @ inputs，(num_tokens,) @ (num_tokens, d_in) -> (d_in,)。",
        ),
    ],
    "all_tokens": [
        (
            "Every token is a query now: steps 1-3 for all tokens at once become three matrix operations, no loops.",
            "现在每个 token 都是查询：对所有 token 同时做步骤1-3，就是三个矩阵运算，不用循环。",
        ),
        (
            "§3.3.2: all pairwise dot products are one matrix product of inputs with its transpose; softmax each "
            "row (dim=-1, so every row of attention weights sums to 1); then the attention weights times the inputs "
            "give every context vector.",
            "§3.3.2：所有 token 两两之间的点积就是 inputs 与其转置的一次矩阵乘法；对每一行做 softmax"
            "（dim=-1，使每行注意力权重之和为 1）；再用注意力权重乘以 inputs 得到全部上下文向量。",
        ),
        (
            "attn_scores = inputs @ inputs.T: (num_tokens, d_in) @ (d_in, num_tokens) -> (num_tokens, num_tokens). "
            "attn_weights = torch.softmax(attn_scores, dim=-1): (num_tokens, num_tokens). "
            "all_context_vecs = attn_weights @ inputs: (num_tokens, num_tokens) @ (num_tokens, d_in) "
            "-> (num_tokens, d_in).",
            "注意力得分 attn_scores = inputs @ inputs.T：(num_tokens, d_in) @ (d_in, num_tokens) "
            "-> (num_tokens, num_tokens)。"
            "注意力权重 attn_weights = torch.softmax(attn_scores, dim=-1)：(num_tokens, num_tokens)。"
            "上下文向量 all_context_vecs = attn_weights @ inputs：(num_tokens, num_tokens) @ (num_tokens, d_in) "
            "-> (num_tokens, d_in)。",
        ),
    ],
    "self_attention_v1": [
        (
            "Three trainable matrices project each input into a query, a key and a value; then do steps 1-3 "
            "with queries against keys, and weight the values.",
            "三个可训练权重矩阵把每个输入投影成查询（query）、键（key）和值（value）；然后用查询和键做步骤1-3，对值加权求和。",
        ),
        (
            "§3.4.1: W_query, W_key, W_value are nn.Parameter(torch.rand(d_in, d_out)) (create them in that order "
            "to reproduce the book's torch.manual_seed(123) output). Attention scores are queries times keys "
            "transposed, scaled by √d_k (d_k = keys.shape[-1]) before the softmax: scaled dot-product attention.",
            "§3.4.1：W_query、W_key、W_value 都是 nn.Parameter(torch.rand(d_in, d_out))（按此顺序创建才能复现书中 "
            "torch.manual_seed(123) 的输出）。注意力得分是 queries 乘以 keys 的转置，softmax 前除以 √d_k"
            "（d_k = keys.shape[-1]）：缩放点积注意力。",
        ),
        (
            "x (num_tokens, d_in). keys = x @ self.W_key, queries = x @ self.W_query, values = x @ self.W_value: "
            "each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, num_tokens). "
            "attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1). "
            "context_vec = attn_weights @ values -> (num_tokens, d_out).",
            "x (num_tokens, d_in)。keys = x @ self.W_key，queries = x @ self.W_query，values = x @ self.W_value："
            "均为 (num_tokens, d_out)。注意力得分 attn_scores = queries @ keys.T -> (num_tokens, num_tokens)。"
            "注意力权重 attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)。"
            "上下文向量 context_vec = attn_weights @ values -> (num_tokens, d_out)。",
        ),
    ],
    "self_attention_v2": [
        (
            "Same computation as SelfAttention_v1, but let nn.Linear hold the projection weights.",
            "计算与 SelfAttention_v1 相同，只是用 nn.Linear 来保存投影权重。",
        ),
        (
            "§3.4.2: W_query, W_key, W_value are nn.Linear(d_in, d_out, bias=qkv_bias); call them on x instead "
            "of writing x @ W. nn.Linear has a better weight initialisation; the rest of forward is unchanged.",
            "§3.4.2：W_query、W_key、W_value 是 nn.Linear(d_in, d_out, bias=qkv_bias)；直接对 x 调用它们，"
            "代替手写 x @ W。nn.Linear 的权重初始化更好；forward 其余部分不变。",
        ),
        (
            "x (num_tokens, d_in). keys = self.W_key(x), queries = self.W_query(x), values = self.W_value(x): "
            "each (num_tokens, d_out). attn_scores = queries @ keys.T -> (num_tokens, num_tokens); "
            "attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1); "
            "attn_weights @ values -> (num_tokens, d_out).",
            "x (num_tokens, d_in)。keys = self.W_key(x)，queries = self.W_query(x)，values = self.W_value(x)："
            "均为 (num_tokens, d_out)。注意力得分 attn_scores = queries @ keys.T -> (num_tokens, num_tokens)；"
            "注意力权重 attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)；"
            "上下文向量 attn_weights @ values -> (num_tokens, d_out)。",
        ),
    ],
    "causal_mask": [
        (
            "A token may only attend to itself and earlier tokens; hide everything to the right of the diagonal.",
            "每个 token 只能关注自己和之前的 token；把对角线右上方的未来位置都遮住。",
        ),
        (
            "§3.5.1: the causal attention mask is the upper triangle above the main diagonal (torch.triu with "
            "diagonal=1). Fill those attention scores with -inf before the softmax so their attention weights "
            "become exactly 0 and each row still sums to 1; scale by √d_k as before.",
            "§3.5.1：因果注意力掩码是主对角线以上的上三角（torch.triu，diagonal=1）。softmax 之前把这些位置的"
            "注意力得分填成 -inf，这样它们的注意力权重恰好为 0，且每行仍然和为 1；与之前一样除以 √d_k 缩放。",
        ),
        (
            "causal_mask: torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool() "
            "-> (num_tokens, num_tokens), "
            "True = masked. masked_attention_weights: attn_scores (..., num_tokens, num_tokens), "
            "num_tokens = attn_scores.shape[-1]; masked = attn_scores.masked_fill(causal_mask(num_tokens), -torch.inf) "
            "(the mask broadcasts over leading batch dims); torch.softmax(masked / d_k**0.5, dim=-1) -> same shape.",
            "causal_mask：torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool() "
            "-> (num_tokens, num_tokens)，"
            "True 表示被掩码。masked_attention_weights：注意力得分 attn_scores (..., num_tokens, num_tokens)，"
            "num_tokens = attn_scores.shape[-1]；masked = attn_scores.masked_fill(causal_mask(num_tokens), -torch.inf)"
            "（掩码会在前面的批量维度上广播）；torch.softmax(masked / d_k**0.5, dim=-1) -> 形状不变。",
        ),
    ],
    "dropout": [
        (
            "Randomly drop some attention weights during training, and make up for the loss in the ones you keep.",
            "训练时随机丢弃一部分注意力权重，并放大保留下来的权重作为补偿。",
        ),
        (
            "§3.5.2: inverted dropout, what nn.Dropout does: each weight is zeroed with probability p and the "
            "survivors are scaled by 1/(1-p), so the expected value is unchanged. When not training (or p == 0) "
            "return the weights untouched; p == 1 gives all zeros.",
            "§3.5.2：反向（inverted）dropout，也就是 nn.Dropout 的做法：每个注意力权重以概率 p 置零，保留下来的乘以 "
            "1/(1-p)，使期望不变。非训练模式（或 p == 0）时原样返回；p == 1 时全部为 0。",
        ),
        (
            "attn_weights (..., num_tokens, num_tokens) -> same shape. if not training or p == 0: return attn_weights. "
            "keep = torch.rand_like(attn_weights) >= p (a bool mask, True with probability 1-p); "
            "return attn_weights * keep / (1 - p). Handle p == 1 separately (torch.zeros_like) to avoid 0/0.",
            "attn_weights (..., num_tokens, num_tokens) -> 形状不变。若不在训练或 p == 0：直接返回 attn_weights。"
            "keep = torch.rand_like(attn_weights) >= p（布尔掩码，以概率 1-p 为 True）；"
            "返回 attn_weights * keep / (1 - p)。p == 1 单独处理（torch.zeros_like），避免 0/0。",
        ),
    ],
    "causal_attention": [
        (
            "Put SelfAttention_v2, the causal attention mask and dropout together in one class that takes a batch.",
            "把 SelfAttention_v2、因果注意力掩码和 dropout 组合成一个支持批量输入的类。",
        ),
        (
            "§3.5.3: three nn.Linear(d_in, d_out, bias=qkv_bias), an nn.Dropout(dropout), and the mask "
            "torch.triu(torch.ones(context_length, context_length), diagonal=1) saved with register_buffer. "
            "In forward the input is batched, so transpose the last two dims of keys (not .T), and cut the "
            "mask to the actual num_tokens.",
            "§3.5.3：三个 nn.Linear(d_in, d_out, bias=qkv_bias)、一个 nn.Dropout(dropout)，以及用 register_buffer "
            "保存的掩码 torch.triu(torch.ones(context_length, context_length), diagonal=1)。forward 中输入带批量维度，"
            "所以要转置 keys 的最后两维（不是 .T），并把掩码截取到实际的 num_tokens。",
        ),
        (
            "x (b, num_tokens, d_in); b, num_tokens, d_in = x.shape. keys/queries/values = self.W_key(x) etc.: "
            "(b, num_tokens, d_out). attn_scores = queries @ keys.transpose(1, 2): (b, num_tokens, d_out) @ "
            "(b, d_out, num_tokens) -> (b, num_tokens, num_tokens). "
            "attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); "
            "attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)); "
            "context_vec = attn_weights @ values -> (b, num_tokens, d_out).",
            "x (b, num_tokens, d_in)；b, num_tokens, d_in = x.shape。keys/queries/values = self.W_key(x) 等："
            "(b, num_tokens, d_out)。注意力得分 attn_scores = queries @ keys.transpose(1, 2)：(b, num_tokens, d_out) @ "
            "(b, d_out, num_tokens) -> (b, num_tokens, num_tokens)。"
            "attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)；"
            "注意力权重 attn_weights = self.dropout(torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1))；"
            "上下文向量 context_vec = attn_weights @ values -> (b, num_tokens, d_out)。",
        ),
    ],
    "multihead_wrapper": [
        (
            "Several independent causal attention heads side by side; glue their outputs together.",
            "多个独立的因果注意力头并排运行，再把它们的输出拼接起来。",
        ),
        (
            "§3.6.1: keep num_heads CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) modules in an "
            "nn.ModuleList called heads (a plain list would hide their parameters), run each on x, and concatenate "
            "along the last dimension.",
            "§3.6.1：把 num_heads 个 CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) 放进名为 heads "
            "的 nn.ModuleList（普通 list 不会注册参数），对 x 分别运行每个头，再沿最后一维拼接。",
        ),
        (
            "self.heads = nn.ModuleList(CausalAttention(...) for _ in range(num_heads)). x (b, num_tokens, d_in); "
            "each head(x) -> (b, num_tokens, d_out); torch.cat(list of head(x), dim=-1) -> "
            "(b, num_tokens, num_heads * d_out).",
            "self.heads = nn.ModuleList(CausalAttention(...) for _ in range(num_heads))。x (b, num_tokens, d_in)；"
            "每个 head(x) -> (b, num_tokens, d_out)；torch.cat(各个 head(x) 组成的列表, dim=-1) -> "
            "(b, num_tokens, num_heads * d_out)。",
        ),
    ],
    "multihead_attention": [
        (
            "Instead of num_heads separate modules, project once to d_out and split that into heads.",
            "不再用 num_heads 个独立模块，而是一次投影到 d_out，再把它拆分成多个头。",
        ),
        (
            "§3.6.2: head_dim = d_out // num_heads (assert d_out % num_heads == 0). One nn.Linear each for "
            "query, key and value of size d_out, then view the last dim as (num_heads, head_dim) and move the head "
            "dim in front of num_tokens, so one batched matmul computes every head's attention scores. Apply the "
            "causal attention mask, softmax with √head_dim scaling, dropout, merge the heads back and finish with "
            "out_proj = nn.Linear(d_out, d_out).",
            "§3.6.2：head_dim = d_out // num_heads（断言 d_out % num_heads == 0）。查询、键、值各用一个输出为 d_out 的 "
            "nn.Linear，再把最后一维 view 成 (num_heads, head_dim)，并把头维度移到 num_tokens 之前，"
            "这样一次批量矩阵乘法就算出所有头的注意力得分。应用因果注意力掩码、按 √head_dim 缩放后 softmax、dropout，"
            "再把各头合并回来，最后经过 out_proj = nn.Linear(d_out, d_out)。",
        ),
        (
            "x (b, num_tokens, d_in) -> W_key(x) (b, num_tokens, d_out) -> .view(b, num_tokens, num_heads, head_dim) "
            "-> .transpose(1, 2) (b, num_heads, num_tokens, head_dim), same for queries and values. "
            "attn_scores = queries @ keys.transpose(2, 3) -> (b, num_heads, num_tokens, num_tokens); "
            "masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf); "
            "softmax(attn_scores / keys.shape[-1]**0.5, dim=-1), dropout; (attn_weights @ values) "
            "(b, num_heads, num_tokens, head_dim) -> .transpose(1, 2) (b, num_tokens, num_heads, head_dim) "
            "-> .contiguous().view(b, num_tokens, d_out) -> self.out_proj(...) (b, num_tokens, d_out).",
            "x (b, num_tokens, d_in) -> W_key(x) (b, num_tokens, d_out) -> .view(b, num_tokens, num_heads, head_dim) "
            "-> .transpose(1, 2) (b, num_heads, num_tokens, head_dim)，queries 和 values 同理。"
            "注意力得分 attn_scores = queries @ keys.transpose(2, 3) -> (b, num_heads, num_tokens, num_tokens)；"
            "masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)；"
            "softmax(attn_scores / keys.shape[-1]**0.5, dim=-1) 得到注意力权重，再 dropout；(attn_weights @ values) "
            "(b, num_heads, num_tokens, head_dim) -> .transpose(1, 2) (b, num_tokens, num_heads, head_dim) "
            "-> .contiguous().view(b, num_tokens, d_out) -> self.out_proj(...) (b, num_tokens, d_out)。",
        ),
    ],
    "weight_transfer": [
        (
            "Both classes compute the same thing; only the way the weight matrices are stored differs.",
            "两个类的计算完全相同，区别只在权重矩阵的存储方式。",
        ),
        (
            "Exercise 3.1 (§3.4.2): nn.Linear stores weight as (d_out, d_in) and computes x @ weight.T, while "
            "SelfAttention_v1 computes x @ W with W of shape (d_in, d_out). So each of sa_v1's W_query, W_key, "
            "W_value must become the transpose of the matching nn.Linear weight of sa_v2.",
            "练习 3.1（§3.4.2）：nn.Linear 的 weight 形状为 (d_out, d_in)，计算 x @ weight.T；而 SelfAttention_v1 "
            "计算 x @ W，W 的形状为 (d_in, d_out)。所以 sa_v1 的 W_query、W_key、W_value 都应是 sa_v2 中对应 "
            "nn.Linear 权重的转置。",
        ),
        (
            "sa_v2.W_query.weight (d_out, d_in) -> .T (d_in, d_out). "
            "sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T.detach().clone()); the same for W_key and "
            "W_value; return sa_v1. Then sa_v1(x) and sa_v2(x) agree: (num_tokens, d_in) -> (num_tokens, d_out).",
            "sa_v2.W_query.weight (d_out, d_in) -> .T (d_in, d_out)。"
            "sa_v1.W_query = nn.Parameter(sa_v2.W_query.weight.T.detach().clone())；W_key、W_value 同理；返回 sa_v1。"
            "之后 sa_v1(x) 与 sa_v2(x) 的上下文向量一致：(num_tokens, d_in) -> (num_tokens, d_out)。",
        ),
    ],
}
