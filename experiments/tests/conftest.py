"""The lab's tests: the toy tokenizer and the tiny model (:mod:`experiments.tests.lab_setup`),
and a study whose run is replaced by a recorder."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    pytest.importorskip("transformers")
    from astarpo.llm import make_char_tokenizer

    return make_char_tokenizer()


@pytest.fixture
def tiny_model(tokenizer):
    from experiments.tests.lab_setup import make_tiny_model

    return make_tiny_model(tokenizer)


@pytest.fixture
def captured_run(monkeypatch):
    """``install(package, stem, text)``: replace the study ``package``'s ``run.run`` with one
    that records the config it is given (in the returned dict, key ``"cfg"``) and writes
    ``OUT/stem.md`` holding ``text``, so a test reads what the command line made of its flags."""
    import importlib
    from pathlib import Path

    def install(package: str, stem: str, text: str) -> dict:
        run_mod = importlib.import_module(f"{package}.run")
        seen: dict = {}

        def fake_run(cfg, out_dir, overwrite=False, progress=True, resume=False):
            seen["cfg"] = cfg
            (Path(out_dir) / f"{stem}.md").write_text(f"{text}\n")
            return {}

        monkeypatch.setattr(run_mod, "run", fake_run)
        return seen

    return install
