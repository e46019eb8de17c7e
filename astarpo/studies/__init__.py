"""The LLM studies (``astarpo study NAME``): ``harness`` (what they share), one subpackage per
study (``efficiency``, ``zero_pass``) and ``registry``. Above :mod:`astarpo.llm`, which never
imports it; a study imports only the harness and itself."""
