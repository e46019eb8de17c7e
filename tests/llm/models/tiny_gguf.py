"""A tiny Llama checkpoint written as a GGUF file with the ``gguf`` package, in code: a
byte-level BPE tokenizer (256 byte tokens, one merge ``he``, two chat markers), a chat template,
and float32 tensors under llama.cpp's names (no download, a few kB)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
HIDDEN, HEADS, KV_HEADS, FFN, LAYERS, CONTEXT = 16, 2, 1, 32, 1, 64


def byte_tokens() -> list[str]:
    """GPT-2's byte-level alphabet: the character standing for each of the 256 bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def to_llama_cpp(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's row order of a query/key projection (rotary halves interleaved per head)."""
    halves = w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
    return halves.swapaxes(1, 2).reshape(w.shape)


def write_tiny_gguf(path: str | os.PathLike[str], seed: int = 0) -> dict[str, np.ndarray]:
    """Write the tiny checkpoint to ``path``; returns its weights under Hugging Face's names
    (the layout ``LlamaForCausalLM`` holds after loading)."""
    import gguf

    tokens = [*byte_tokens(), "he", "<|im_start|>", "<|im_end|>"]
    vocab, head_dim = len(tokens), HIDDEN // HEADS
    rng = np.random.default_rng(seed)

    def rand(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    hf = {"model.embed_tokens.weight": rand(vocab, HIDDEN), "model.norm.weight": 1 + rand(HIDDEN)}
    writer = gguf.GGUFWriter(os.fspath(path), "llama")
    writer.add_name("tiny test llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.NORMAL] * 257 + [gguf.TokenType.CONTROL] * 2)
    writer.add_token_merges(["h e"])
    writer.add_bos_token_id(vocab - 2)
    writer.add_eos_token_id(vocab - 1)
    writer.add_pad_token_id(vocab - 1)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    writer.add_tensor("token_embd.weight", hf["model.embed_tokens.weight"])
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        layer = {
            "attn_norm": (p + "input_layernorm.weight", 1 + rand(HIDDEN)),
            "attn_q": (p + "self_attn.q_proj.weight", rand(HEADS * head_dim, HIDDEN)),
            "attn_k": (p + "self_attn.k_proj.weight", rand(KV_HEADS * head_dim, HIDDEN)),
            "attn_v": (p + "self_attn.v_proj.weight", rand(KV_HEADS * head_dim, HIDDEN)),
            "attn_output": (p + "self_attn.o_proj.weight", rand(HIDDEN, HEADS * head_dim)),
            "ffn_norm": (p + "post_attention_layernorm.weight", 1 + rand(HIDDEN)),
            "ffn_gate": (p + "mlp.gate_proj.weight", rand(FFN, HIDDEN)),
            "ffn_up": (p + "mlp.up_proj.weight", rand(FFN, HIDDEN)),
            "ffn_down": (p + "mlp.down_proj.weight", rand(HIDDEN, FFN)),
        }
        for short, (name, w) in layer.items():
            hf[name] = w
            heads = {"attn_q": HEADS, "attn_k": KV_HEADS}.get(short)
            writer.add_tensor(f"blk.{i}.{short}.weight", to_llama_cpp(w, heads) if heads else w)
    writer.add_tensor("output_norm.weight", hf["model.norm.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert Path(path).is_file()
    return hf
