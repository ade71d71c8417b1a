"""The `transformers` provider: a local causal LM loaded from a directory (no network).

The prompt uses the tokenizer's chat template when it has one; otherwise a plain
"System:/User:/Assistant:" transcript, which base models continue well enough for the parser to
cope. Generation runs under a lock: one model instance, one forward at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from workbench.llm.provider import LLMError, LLMProvider, LLMReply, validate_messages
from workbench.llm.provider_config import LLMConfig

log = logging.getLogger(__name__)


def plain_prompt(messages: list[dict]) -> str:
    """The transcript used when the tokenizer has no chat template."""
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:"


class TransformersProvider(LLMProvider):
    """`AutoModelForCausalLM` + `AutoTokenizer` from `config.model_dir`."""

    name = "transformers"

    def __init__(self, config: LLMConfig) -> None:
        if not config.model_dir:
            raise LLMError(
                "config",
                "the transformers provider needs a model directory (llm.model_dir or "
                "WORKBENCH_LLM_MODEL_DIR)",
            )
        path = Path(config.model_dir).expanduser()
        if not (path / "config.json").is_file():
            raise LLMError("config", f"{path} is not a model directory (no config.json)")
        try:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise LLMError(
                "config", f"the transformers provider needs torch and transformers: {exc}"
            ) from None
        self.config = config
        self.model_dir = path
        device = config.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        dtype = getattr(torch, config.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise LLMError("config", f"llm.dtype {config.dtype!r} is not a torch dtype name")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            # transformers renamed torch_dtype to dtype in 4.56; older versions would ignore `dtype`
            major_minor = tuple(int(x) for x in transformers.__version__.split(".")[:2])
            dtype_kw = "dtype" if major_minor >= (4, 56) else "torch_dtype"
            self.model = AutoModelForCausalLM.from_pretrained(
                str(path), local_files_only=True, **{dtype_kw: dtype}
            )
        except (OSError, ValueError, KeyError) as exc:
            raise LLMError("config", f"cannot load a causal LM from {path}: {exc}") from None
        self.model.to(device).eval()
        self._torch = torch
        self._lock = threading.Lock()
        self._generator_seed = config.seed
        self.model_name = path.name
        self.uses_chat_template = bool(getattr(self.tokenizer, "chat_template", None))
        limit = getattr(self.model.config, "max_position_embeddings", None)
        self.context_length: int | None = int(limit) if limit else None
        log.info("loaded %s on %s (chat template: %s)", path, device, self.uses_chat_template)

    def describe(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "model_dir": str(self.model_dir),
            "device": self.device,
            "chat_template": self.uses_chat_template,
        }

    def encode(self, messages: list[dict]) -> list[int]:
        """Prompt token ids for `messages` (chat template if present, else `plain_prompt`)."""
        if self.uses_chat_template:
            ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
                ids = ids["input_ids"]
            return list(ids)
        return list(self.tokenizer(plain_prompt(messages))["input_ids"])

    def generate(self, messages: list[dict], *, max_tokens: int = 2048, temperature: float = 0.7) -> LLMReply:
        validate_messages(messages)
        if max_tokens < 1:
            raise LLMError("config", f"max_tokens must be >= 1, got {max_tokens}")
        torch = self._torch
        try:
            ids = self.encode(messages)
        except Exception as exc:  # noqa: BLE001 - template errors come in many types; keep the reason
            raise LLMError(
                "bad_response",
                f"cannot build the prompt with {self.model_dir.name}'s tokenizer: "
                f"{type(exc).__name__}: {exc}",
            ) from None
        n_prompt = len(ids)
        if self.context_length is not None:
            if n_prompt >= self.context_length:
                raise LLMError(
                    "bad_response",
                    f"prompt of {n_prompt} tokens does not fit the model's context of "
                    f"{self.context_length} tokens",
                )
            max_tokens = min(max_tokens, self.context_length - n_prompt)
        input_ids = torch.tensor([ids], dtype=torch.long, device=self.device)
        do_sample = temperature > 0
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_tokens), "do_sample": do_sample}
        if do_sample:
            kwargs.update(temperature=float(temperature), top_k=0, top_p=1.0)
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id
        if pad_id is not None:
            kwargs["pad_token_id"] = pad_id
        t0 = time.perf_counter()
        with self._lock:
            if self._generator_seed is not None:
                torch.manual_seed(self._generator_seed)
            try:
                with torch.no_grad():
                    out = self.model.generate(
                        input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **kwargs
                    )
            except (RuntimeError, ValueError, IndexError) as exc:
                raise LLMError(
                    "bad_response", f"local generation failed: {type(exc).__name__}: {exc}"
                ) from None
        latency = time.perf_counter() - t0
        new_ids = out[0, n_prompt:].tolist()
        eos = self.tokenizer.eos_token_id
        finish = (
            "stop"
            if (eos is not None and new_ids and new_ids[-1] == eos)
            else ("length" if len(new_ids) >= max_tokens else "stop")
        )
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        return LLMReply(
            text=text,
            prompt_tokens=n_prompt,
            completion_tokens=len(new_ids),
            model=self.model_name,
            latency_s=latency,
            finish_reason=finish,
        )

    def close(self) -> None:
        # drop the weights so a long-lived search process can release the memory
        self.model = None  # type: ignore[assignment]
