"""Sphinx configuration for the astarpo docs (built with -W: warnings are errors)."""

project = "astarpo"
author = "astarpo developers"
copyright = "2026, astarpo developers"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax copied into the built site (_static/mathjax): formulas render with no network.
    "sphinx-mathjax-offline",
    "sphinx.ext.viewcode",
]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "astarpo"
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
# TRL is not installed where the docs build (.venv): astarpo.integrations.trl subclasses its
# GRPOConfig/GRPOTrainer, documented against a mock (verl is imported only inside functions).
autodoc_mock_imports = ["trl"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = False
suppress_warnings = ["myst.header"]
