"""Loading a causal LM and its tokenizer by name: the one model loader of the package and the
one place that calls ``from_pretrained`` (the trainer, Stage 1, the command line, the toy SFT
cache and the benchmark all load here).

The name :data:`TOY` (``"toy"``) is the embedded tiny model, built in code:
``make_toy_model(make_char_tokenizer(), seed=0)`` with ``config._name_or_path = "toy"`` (the
name a V* table records), from Python (``AStarPOTrainer(model="toy", ...)``,
``estimate_values(model="toy", ...)``) as from the command line (``--model toy``); the hub is
never asked about it (a folder named ``toy`` is reached as ``./toy``). A local directory is read
with ``local_files_only=True`` (nothing is downloaded). Any other string that names no existing
directory is taken as a Hugging Face hub id (``"Qwen/Qwen2.5-1.5B"``) and downloaded by
``transformers`` as usual: the hub is contacted only when the user names a remote model. A
string that looks like a path (starts with ``/``, ``.`` or ``~``) but does not exist is an error,
so a typo never turns into a download.

A GGUF checkpoint (:mod:`astarpo.llm.models.gguf`: a ``.gguf`` file, a directory holding one,
or a packaged name such as ``"smollm2"``) loads through ``transformers``' GGUF support, which
needs the ``gguf`` package: its weights dequantized (float32, or bfloat16 on a GPU that has it,
unless a dtype is named), its tokenizer and chat template read from the file. The model returned
is a plain causal LM (``save_pretrained`` works on it: :func:`astarpo.llm.models.convert.
convert_gguf` writes it as a model folder) whose ``config._name_or_path`` is the file's absolute
path, the name a V* table records.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from pathlib import Path
from typing import Any

from astarpo.llm.models.gguf import gguf_dtype, gguf_file, require_gguf

logger = logging.getLogger(__name__)

__all__ = [
    "TOKENIZER_FILES",
    "TOY",
    "is_model_name",
    "is_toy",
    "load_causal_lm",
    "load_gguf_model",
    "load_gguf_tokenizer",
    "load_pretrained_model",
    "load_tokenizer",
    "named_tokenizer",
    "resolve_model",
]

TOY = "toy"
"""The name of the embedded toy model (:mod:`astarpo.llm.models.toy`, seed 0, float32)."""


def is_model_name(spec: Any) -> bool:
    """Whether ``spec`` names a model to load (``"toy"``, a path or a hub id) rather than being a
    model."""
    return isinstance(spec, (str, os.PathLike))


def is_toy(spec: Any) -> bool:
    """Whether ``spec`` is the name :data:`TOY` (the string itself; a path is a directory)."""
    return isinstance(spec, str) and spec == TOY


def _toy_model(dtype: Any = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of :data:`TOY`, built in code (no file, no download)."""
    from astarpo.llm.models.toy import make_char_tokenizer, make_toy_model

    tokenizer = make_char_tokenizer()
    model = make_toy_model(tokenizer, seed=0)
    model.config._name_or_path = TOY  # the name a V* table made with it records
    if dtype is not None:
        model = model.to(dtype)
    return (model.to(device) if device else model), tokenizer


def _resolve(spec: str | os.PathLike[str]) -> tuple[str, bool]:
    """``(name, local)``; raises for a missing path-like spec or a directory without a model."""
    text = os.fspath(spec)
    path = Path(text).expanduser()
    if path.is_dir():
        return str(path), True
    if isinstance(spec, os.PathLike) or text.startswith(("/", ".", "~")) or text.count("/") > 1:
        raise FileNotFoundError(
            f"model {text!r}: no such directory. Give a directory saved with save_pretrained "
            "or a hub id such as 'Qwen/Qwen2.5-1.5B' (downloaded only when named)."
        )
    return text, False


# Files of which a saved tokenizer has at least one (fast, sentencepiece, BPE or WordPiece).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
)


def _plain_backend(folder: Path) -> bool:
    """Whether ``folder`` holds a tokenizer saved as a plain ``tokenizers`` backend (its
    ``tokenizer_config.json`` names ``TokenizersBackend`` or ``PreTrainedTokenizerFast``, and a
    ``tokenizer.json`` is there), such as the toy models' character tokenizer."""
    config = folder / "tokenizer_config.json"
    if not (config.is_file() and (folder / "tokenizer.json").is_file()):
        return False
    cls = json.loads(config.read_text()).get("tokenizer_class")
    return cls in ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(spec: str | os.PathLike[str]) -> Any:
    """The tokenizer saved in the directory ``spec`` (local only), of the hub id ``spec`` or of
    the GGUF checkpoint ``spec`` (:func:`load_gguf_tokenizer`); the character tokenizer for
    :data:`TOY`.

    A tokenizer saved as a plain ``tokenizers`` backend (the toy models' character tokenizer
    after ``save_pretrained``) is read as written: ``AutoTokenizer`` would build the class of
    the model's type instead (``Qwen2Tokenizer`` for the toy Qwen2 models, whose
    pre-tokenizer drops the spaces of a worked solution).

    Raises:
        FileNotFoundError: a local directory holds none of :data:`TOKENIZER_FILES` (without
            them ``transformers`` builds an empty tokenizer that turns every prompt into no
            tokens).
        OSError: a local tokenizer's files cannot be read (corrupt or truncated JSON, ...),
            naming the directory, its tokenizer files and the fix.
    """
    from transformers import AutoTokenizer  # the llm extra

    if is_toy(spec):
        from astarpo.llm.models.toy import make_char_tokenizer

        return make_char_tokenizer()
    gguf = gguf_file(spec)
    if gguf is not None:
        return load_gguf_tokenizer(gguf)
    name, local = _resolve(spec)
    if local and not any((Path(name) / f).is_file() for f in TOKENIZER_FILES):
        raise FileNotFoundError(
            f"model directory {name!r} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
            "save it there with tokenizer.save_pretrained(DIR) (the tokenizer of the model it "
            "came from); in Python, passing processing_class=tokenizer also works."
        )
    if not local:
        return AutoTokenizer.from_pretrained(name, local_files_only=False)
    try:
        if _plain_backend(Path(name)):  # AutoTokenizer would apply the model type's own class
            from transformers import PreTrainedTokenizerFast

            return PreTrainedTokenizerFast.from_pretrained(name, local_files_only=True)
        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except Exception as e:  # json, tokenizers or sentencepiece errors that name no file
        files = [f for f in TOKENIZER_FILES if (Path(name) / f).is_file()]
        raise OSError(
            f"the tokenizer in {name!r} cannot be read ({type(e).__name__}: {e}); one of its "
            f"files ({', '.join(files)}) is corrupt or truncated. Copy the directory again, or "
            "save the tokenizer anew there with tokenizer.save_pretrained(DIR)."
        ) from e


def load_causal_lm(
    spec: str | os.PathLike[str], dtype: Any = None, device: str | None = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of the directory ``spec`` (local only), of the hub id ``spec``, of
    a GGUF checkpoint (:func:`load_gguf_model`) or of :data:`TOY`; the tokenizer is ``None`` for
    a local directory without one (:data:`TOKENIZER_FILES`), so a caller given its own
    tokenizer still works, and one that needs it gets the error of :func:`load_tokenizer`.

    Args:
        spec: A directory written by ``save_pretrained``, a hub id, a GGUF checkpoint (a
            ``.gguf`` file, a directory holding one, or a packaged name such as
            ``"smollm2"``) or ``"toy"``.
        dtype: A ``torch.dtype`` of the weights (default: as saved / float32; a GGUF
            checkpoint: see :func:`load_gguf_model`).
        device: Move the model there (default: leave it on the CPU).

    Raises:
        FileNotFoundError: if a local directory lacks ``config.json``, a path-like ``spec``
            does not exist, or a packaged GGUF name is not installed (naming the install).
        ImportError: a GGUF checkpoint without the ``gguf`` package (naming the install).
    """
    if is_toy(spec):
        return _toy_model(dtype, device)
    gguf = gguf_file(spec)
    if gguf is not None:
        tokenizer = load_gguf_tokenizer(gguf)  # before the weights: the faster failure
        return load_gguf_model(gguf, dtype, device), tokenizer
    name, local = _resolve(spec)
    model = load_pretrained_model(spec, dtype)
    has_tokenizer = not local or any((Path(name) / f).is_file() for f in TOKENIZER_FILES)
    tokenizer = load_tokenizer(name if local else spec) if has_tokenizer else None
    return (model.to(device) if device else model), tokenizer


def load_pretrained_model(
    spec: str | os.PathLike[str], dtype: Any = None, device: str | None = None
) -> Any:
    """The causal LM of the directory ``spec`` (local only), of the hub id ``spec``, of a GGUF
    checkpoint or of :data:`TOY`, without its tokenizer (see :func:`load_causal_lm`).

    Args:
        spec: A directory written by ``save_pretrained``, a hub id, a GGUF checkpoint or
            ``"toy"``.
        dtype: A ``torch.dtype`` of the weights (default: as saved / float32; a GGUF
            checkpoint: see :func:`load_gguf_model`).
        device: Move the model there (default: leave it on the CPU).

    Raises:
        FileNotFoundError: if a local directory lacks ``config.json``, a path-like ``spec``
            does not exist, or a packaged GGUF name is not installed.
        ImportError: a GGUF checkpoint without the ``gguf`` package.
        OSError: a local weights file is corrupt or truncated (naming the directory, its
            weights files and the fix).
    """
    from safetensors import SafetensorError  # a dependency of transformers
    from transformers import AutoModelForCausalLM  # the llm extra

    if is_toy(spec):
        return _toy_model(dtype, device)[0]
    gguf = gguf_file(spec)
    if gguf is not None:
        return load_gguf_model(gguf, dtype, device)
    name, local = _resolve(spec)
    if local and not (Path(name) / "config.json").is_file():
        raise FileNotFoundError(
            f"model {name!r} is not a model directory (no config.json); save one with "
            "model.save_pretrained(DIR) and tokenizer.save_pretrained(DIR)."
        )
    kwargs: dict[str, Any] = {"local_files_only": local}
    if dtype is not None:
        kwargs["dtype"] = dtype
    try:
        model: Any = AutoModelForCausalLM.from_pretrained(name, **kwargs)
    except SafetensorError as e:  # a truncated copy: "incomplete metadata", "header too small"
        files = sorted(p.name for p in Path(name).glob("*.safetensors")) or ["*.safetensors"]
        raise OSError(
            f"model {name!r}: a weights file ({', '.join(files)}) is corrupt or truncated ({e}); "
            "copy the directory again (an interrupted copy or download?), or save the model "
            "anew with model.save_pretrained(DIR)."
        ) from e
    return model.to(device) if device else model


def resolve_model(model: Any, role: str = "model") -> tuple[Any, Any]:
    """``(model, tokenizer or None)``: a name (``"toy"``, a directory, a hub id) is loaded with
    :func:`load_causal_lm`; a model object is returned as is (tokenizer ``None``).

    Args:
        model: A name, a model object, or ``None`` (returns ``(None, None)``).
        role: Its argument's name in the error (``"model"``, ``"ref_model"``).

    Raises:
        TypeError: if ``model`` is neither a name nor a ``torch.nn.Module``-like object.
    """
    if model is None:
        return None, None
    if is_model_name(model):
        return load_causal_lm(model)
    if not hasattr(model, "parameters"):
        raise TypeError(
            f"{role} must be a model object, a local directory, a hub id or 'toy'; got "
            f"{type(model).__name__}. (astarpo's trainers take (model, ref_model, reward_funcs) "
            "positionally; pass rewards as reward_funcs=...)"
        )
    return model, None


def named_tokenizer(model: Any) -> Any:
    """The tokenizer a model object names in ``config._name_or_path`` when that can be loaded
    without a download: :data:`TOY`'s, a local directory's or a GGUF file's; else ``None``."""
    name = getattr(getattr(model, "config", None), "_name_or_path", "")
    if name and (is_toy(name) or Path(name).is_dir() or Path(name).suffix.lower() == ".gguf"):
        return load_tokenizer(name)
    return None


def load_gguf_tokenizer(path: str | os.PathLike[str]) -> Any:
    """The tokenizer stored in the GGUF file ``path``, with its chat template (what
    ``transformers`` builds from the file's ``tokenizer.ggml.*`` fields).

    Raises:
        ImportError: the ``gguf`` package is missing (naming the install).
    """
    from transformers import AutoTokenizer  # the llm extra

    require_gguf()
    file = Path(path)
    return AutoTokenizer.from_pretrained(
        str(file.parent), gguf_file=file.name, local_files_only=True
    )


def load_gguf_model(
    path: str | os.PathLike[str], dtype: Any = None, device: str | None = None
) -> Any:
    """The causal LM of the GGUF file ``path``, dequantized, as a plain model.

    ``transformers`` dequantizes the file's tensors into a model that keeps a GGUF
    ``quantization_config`` (and refuses ``save_pretrained``); its weights are moved into a
    model built from the same config without it, which saves, trains and wraps (LoRA, vLLM) as
    any other. ``config._name_or_path`` is the file's absolute path.

    Args:
        path: A ``.gguf`` file (:func:`~astarpo.llm.models.gguf.gguf_file` resolves the other
            spellings).
        dtype: A ``torch.dtype`` of the weights; default
            :func:`~astarpo.llm.models.gguf.gguf_dtype` (float32 on the CPU, bfloat16 on a GPU
            that supports it).
        device: Move the model there (default: leave it on the CPU).

    Raises:
        ImportError: the ``gguf`` package is missing (naming the install).
    """
    from transformers import AutoModelForCausalLM  # the llm extra

    require_gguf()
    file = Path(path).resolve()
    dtype = gguf_dtype(dtype, device)
    loaded: Any = AutoModelForCausalLM.from_pretrained(
        str(file.parent), gguf_file=file.name, dtype=dtype, local_files_only=True
    )
    model = _plain_copy(loaded, dtype)
    model.config._name_or_path = str(file)
    return model.to(device) if device else model


def _plain_copy(loaded: Any, dtype: Any) -> Any:
    """A model of ``loaded``'s class and config, without its quantization config, holding
    ``loaded``'s tensors (built on the meta device: nothing is initialized or copied)."""
    import torch
    from transformers import AutoModelForCausalLM  # the llm extra

    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        model: Any = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.load_state_dict(loaded.state_dict(), assign=True)
    for name, buffer in loaded.named_buffers():  # the non-persistent ones too (rotary inv_freq)
        owner, _, leaf = name.rpartition(".")
        model.get_submodule(owner)._buffers[leaf] = buffer
    model.tie_weights()
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:  # a tensor the loaded model did not have: not a plain copy
        raise RuntimeError(f"the GGUF model could not be copied ({', '.join(left[:5])} missing).")
    model.generation_config = loaded.generation_config
    model.eval()
    return model
