"""The transformers provider on a tiny randomly initialised Llama built here (no download, CPU)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from workbench.llm import LLMError, get_provider  # noqa: E402
from workbench.llm.parse import extract_code  # noqa: E402

WORDS = (
    "System User Assistant : write a triton kernel for relu class ModelNew def forward return x y import "
    "torch ( ) self . , = tl program_id"
).split()
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>"]
TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MSGS = [
    {"role": "system", "content": "write a triton kernel"},
    {"role": "user", "content": "write a triton kernel for relu : class ModelNew"},
]
CONTEXT = 64


def _build(path, *, chat_template: bool) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=SPECIAL[4:],
    )
    if chat_template:
        fast.chat_template = TEMPLATE
    cfg = LlamaConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=CONTEXT,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    chat = tmp_path_factory.mktemp("tiny_chat")
    plain = tmp_path_factory.mktemp("tiny_plain")
    _build(chat, chat_template=True)
    _build(plain, chat_template=False)
    return chat, plain


def _reference_greedy(path, ids: list[int], n: int) -> str:
    """What the same weights produce through plain transformers calls, for comparison."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
        )
    return tok.decode(out[0, len(ids) :], skip_special_tokens=True)


def test_chat_template_path(model_dirs):
    from transformers import AutoTokenizer

    path = model_dirs[0]
    p = get_provider("transformers", model_dir=str(path))
    assert p.uses_chat_template
    tok = AutoTokenizer.from_pretrained(path)
    prompt = tok.apply_chat_template(MSGS, add_generation_prompt=True, tokenize=False)
    assert prompt.startswith("<|system|> write a triton kernel <|user|>") and prompt.endswith("<|assistant|>")
    expected_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    reply = p.generate(MSGS, max_tokens=6, temperature=0)
    assert reply.prompt_tokens == len(expected_ids) == len(p.encode(MSGS))
    assert 1 <= reply.completion_tokens <= 6 and reply.latency_s > 0 and reply.model == path.name
    assert reply.text == _reference_greedy(path, expected_ids, 6)
    again = p.generate(MSGS, max_tokens=6, temperature=0)
    assert again.text == reply.text  # greedy is deterministic
    found = extract_code(reply.text)  # nonsense words: the parser reports, never raises
    assert found.code is None or isinstance(found.code, str)
    assert found.diagnosis


def test_plain_prompt_path_without_template(model_dirs):
    path = model_dirs[1]
    p = get_provider("transformers", model_dir=str(path))
    assert not p.uses_chat_template
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    transcript = (
        "System: write a triton kernel\n\nUser: write a triton kernel for relu : class ModelNew\n\nAssistant:"
    )
    ids = tok(transcript)["input_ids"]
    reply = p.generate(MSGS, max_tokens=5, temperature=0)
    assert reply.prompt_tokens == len(ids)
    assert reply.text == _reference_greedy(path, ids, 5)


def test_sampling_is_seeded(model_dirs):
    p = get_provider("transformers", model_dir=str(model_dirs[0]), seed=7)
    a = p.generate(MSGS, max_tokens=8, temperature=1.0)
    b = p.generate(MSGS, max_tokens=8, temperature=1.0)
    assert a.text == b.text and a.completion_tokens == b.completion_tokens


def test_context_limits(model_dirs):
    p = get_provider("transformers", model_dir=str(model_dirs[0]))
    n_prompt = len(p.encode(MSGS))
    # max_tokens beyond the context is clipped to what fits
    reply = p.generate(MSGS, max_tokens=10_000, temperature=0)
    assert reply.completion_tokens <= CONTEXT - n_prompt
    long = [{"role": "user", "content": "relu " * (CONTEXT + 5)}]
    with pytest.raises(LLMError) as ei:
        p.generate(long, max_tokens=4)
    assert ei.value.kind == "bad_response" and "context" in str(ei.value)


def test_bad_model_directories(tmp_path, monkeypatch):
    monkeypatch.delenv("WORKBENCH_LLM_MODEL_DIR", raising=False)
    with pytest.raises(LLMError) as ei:
        get_provider("transformers", model_dir=str(tmp_path / "absent"))
    assert ei.value.kind == "config" and "config.json" in str(ei.value)
    with pytest.raises(LLMError) as ei:
        get_provider("transformers")
    assert ei.value.kind == "config" and "model directory" in str(ei.value)
    (tmp_path / "config.json").write_text('{"model_type": "no-such-architecture"}')
    with pytest.raises(LLMError) as ei:
        get_provider("transformers", model_dir=str(tmp_path))
    assert ei.value.kind == "config" and "cannot load" in str(ei.value)


def test_dtype_is_applied(model_dirs):
    p = get_provider("transformers", model_dir=str(model_dirs[0]), dtype="bfloat16")
    assert next(p.model.parameters()).dtype == torch.bfloat16
    assert p.generate(MSGS, max_tokens=3, temperature=0).completion_tokens >= 1
    with pytest.raises(LLMError) as ei:
        get_provider("transformers", model_dir=str(model_dirs[0]), dtype="float77")
    assert ei.value.kind == "config"
